//! The jtreg test-description parser. No panic; errors name a line inside the file.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lines = text.lines().count().max(1) + 1;
    let keys = ["stress".to_string()];
    for parsed in rtvm_jtreg::header::parse_descriptions(std::path::Path::new("f/Fuzz.rs"), &text, &keys) {
        match parsed {
            Ok(d) => assert!(!d.actions.is_empty()),
            Err(e) => {
                assert!(!e.message.is_empty());
                assert!(e.line >= 1 && e.line <= lines, "line {} of {lines}", e.line);
            }
        }
    }
});
