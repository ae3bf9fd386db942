//! The -Xlog option parser: NUL-separated options. No panic; rejections explain themselves.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let opts: Vec<String> = text.split('\0').map(|s| format!("-Xlog{s}")).collect();
    if let Err(e) = rtvm::logging::parse_xlog(&opts) {
        assert!(!e.detail.is_empty());
        assert!(opts.contains(&e.option));
    }
});
