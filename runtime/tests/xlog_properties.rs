//! Property test: at least 10,000 generated and mutated `-Xlog` option lists; the parser
//! never panics and every rejection names what was wrong.

use proptest::prelude::*;
use rtvm::testing::{parse_xlog, TAGS};

fn selection() -> impl Strategy<Value = String> {
    let tag = prop_oneof![
        prop::sample::select(TAGS.to_vec()).prop_map(str::to_owned),
        "[a-z]{1,8}",
        Just("all".to_string())
    ];
    (
        prop::collection::vec(tag, 1..4),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![
            "off", "trace", "debug", "info", "warning", "error", "bogus", "",
        ])),
    )
        .prop_map(|(tags, wild, level)| {
            let mut s = tags.join("+");
            if wild {
                s.push('*');
            }
            if let Some(l) = level {
                s.push('=');
                s.push_str(l);
            }
            s
        })
}

fn option() -> impl Strategy<Value = String> {
    let output = prop_oneof![
        Just(String::new()),
        Just("stdout".to_string()),
        Just("stderr".to_string()),
        "file=[a-z%]{0,6}".prop_map(|f| format!("/nonexistent-dir/{f}")),
    ];
    let decorators = prop_oneof![
        Just(String::new()),
        Just("none".to_string()),
        prop::collection::vec(
            prop::sample::select(vec![
                "uptime", "u", "tid", "pid", "level", "tags", "time", "utc", "hostname", "bogus"
            ]),
            1..4
        )
        .prop_map(|d| d.join(",")),
    ];
    let opts = prop_oneof![
        Just(String::new()),
        "filecount=[0-9a-z]{1,3}",
        "filesize=[0-9]{1,4}[kmg]?",
        "[a-z=,]{1,10}"
    ];
    prop_oneof![
        (
            prop::collection::vec(selection(), 1..4),
            output,
            decorators,
            opts
        )
            .prop_map(|(s, o, d, x)| {
                let mut parts = vec![s.join(","), o, d, x];
                while parts.last().is_some_and(|p| p.is_empty()) {
                    parts.pop();
                }
                format!("-Xlog:{}", parts.join(":"))
            }),
        Just("-Xlog".to_string()),
        Just("-Xlog:disable".to_string()),
        "-Xlog[:a-z+*=,]{0,30}",
        "\\PC{0,30}".prop_map(|s| format!("-Xlog:{s}")),
    ]
}

/// File outputs are opened while the options are parsed (their errors are reported in
/// order): generated names create files, so the test runs in a directory of its own (this
/// binary has no other test that depends on the working directory); `cargo clean` removes it.
fn in_scratch_dir() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("xlog-properties");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::env::set_current_dir(&dir).unwrap();
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn xlog_never_panics_and_explains(opts in prop::collection::vec(option(), 0..4)) {
        in_scratch_dir();
        match parse_xlog(&opts) {
            Ok(Some(config)) => {
                for set in rtvm::testing::TAG_SETS {
                    let _ = config.level_for(set);
                }
            }
            Ok(None) => {}
            Err(e) => {
                // Only a word that is not `-Xlog` or `-Xlog:...` fails without an error line.
                let malformed = e.option != "-Xlog" && !e.option.starts_with("-Xlog:");
                prop_assert!(malformed || !e.details.is_empty(), "{e:?}");
                prop_assert!(opts.contains(&e.option), "the error names an option that was given");
                prop_assert!(e.message().starts_with("Invalid -Xlog option '-Xlog"));
            }
        }
    }
}
