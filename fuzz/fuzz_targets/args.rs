//! The VM argument parser: NUL-separated options (and an environment string after a 0xFF
//! byte). No panic; a rejection always has a message.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rtvm_flags::{parse, EnvOptions, ParseOptions};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (args_part, env) = match text.split_once('\u{FFFD}') {
        Some((a, e)) => (a.to_string(), Some(e.to_string())),
        None => (text.to_string(), None),
    };
    // Options files would read the fuzzer's host files: keep the parser on its inputs.
    let args: Vec<String> = args_part
        .split('\0')
        .filter(|a| !a.starts_with("-XX:VMOptionsFile=") && !a.starts_with("-XX:Flags="))
        .map(str::to_owned)
        .collect();
    let env_ok = env.as_deref().filter(|e| !e.contains("-XX:VMOptionsFile") && !e.contains("-XX:Flags="));
    let options = ParseOptions {
        ignore_unrecognized: data.first().is_some_and(|b| b & 1 == 1),
        env: env_ok.map(|value| EnvOptions { name: "RTVM_OPTIONS", value }),
        ..ParseOptions::default()
    };
    if let Err(e) = parse(&args, &options, &mut |_, _| {}) {
        assert!(!e.message.is_empty());
    }
});
