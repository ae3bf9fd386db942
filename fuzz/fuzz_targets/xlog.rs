//! The -Xlog option parser: NUL-separated options. No panic; rejections explain themselves.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // File outputs are opened while parsing: keep what the fuzzer names in a scratch dir.
    static DIR: std::sync::Once = std::sync::Once::new();
    DIR.call_once(|| {
        let dir = std::env::temp_dir().join("rtvm-fuzz-xlog");
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::env::set_current_dir(&dir);
    });
    let text = String::from_utf8_lossy(data);
    let opts: Vec<String> = text.split('\0').map(|s| format!("-Xlog{s}")).collect();
    if let Err(e) = rtvm::testing::parse_xlog(&opts) {
        let malformed = e.option != "-Xlog" && !e.option.starts_with("-Xlog:");
        assert!(malformed || !e.details.is_empty());
        assert!(opts.contains(&e.option));
    }
});
