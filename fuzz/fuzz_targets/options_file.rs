//! The tokenizers of -XX:VMOptionsFile / RTVM_OPTIONS and of -XX:Flags settings files.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = rtvm_flags::optfile::tokenize_options(&text, "fuzz.txt") {
        assert_eq!(e.message, "Unmatched quote in fuzz.txt\n");
    }
    for token in rtvm_flags::optfile::tokenize_settings(&text) {
        assert!(!token.contains('\n'));
    }
});
