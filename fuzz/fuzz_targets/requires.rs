//! The @requires expression language: parse and evaluate. No panic, no hang (the regex
//! matcher has a step budget); errors explain themselves.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rtvm_jtreg::expr::Expr;

fn props(name: &str) -> Option<String> {
    Some(
        match name {
            "os.family" => "linux",
            "os.arch" => "amd64",
            "os.maxMemory" => "25283264512",
            "thp.mode" => "madvise",
            "vm.flagless" => "true",
            _ => return None,
        }
        .to_owned(),
    )
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match Expr::parse(&text) {
        Ok(e) => {
            if let Err(err) = e.eval_bool(&props) {
                assert!(!err.0.is_empty());
            }
        }
        Err(err) => assert!(!err.0.is_empty()),
    }
});
