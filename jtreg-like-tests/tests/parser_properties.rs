//! Property tests: at least 10,000 generated inputs each for the `@requires` expression
//! parser/evaluator and the test-description parser; neither panics, and every rejection
//! says what is wrong (and, for headers, where).

use std::path::Path;

use proptest::prelude::*;
use rtvm_jtreg::expr::Expr;
use rtvm_jtreg::header::parse_descriptions;

fn atom() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "os.family",
            "os.arch",
            "os.processors",
            "os.maxMemory",
            "thp.mode",
            "vm.flagless",
            "vm.opt.AlwaysPreTouch",
            "nosuch.name",
            "true",
            "false",
            "null"
        ])
        .prop_map(str::to_owned),
        "[0-9]{1,20}[kKmMgG]?",
        "\"[a-z0-9_.*|()\\[\\]^$+?{},-]{0,10}\"",
    ]
}

fn expression() -> impl Strategy<Value = String> {
    let op = prop::sample::select(vec![
        "==", "!=", "~=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "&", "|",
    ]);
    atom().prop_recursive(6, 48, 4, move |inner| {
        prop_oneof![
            (inner.clone(), op.clone(), inner.clone()).prop_map(|(a, o, b)| format!("{a} {o} {b}")),
            inner.clone().prop_map(|a| format!("!{a}")),
            inner.clone().prop_map(|a| format!("({a})")),
            inner.prop_map(|a| format!("-{a}")),
        ]
    })
}

fn props(name: &str) -> Option<String> {
    Some(
        match name {
            "os.family" => "linux",
            "os.arch" => "amd64",
            "os.processors" => "2",
            "os.maxMemory" => "25283264512",
            "thp.mode" => "madvise",
            "vm.flagless" => "true",
            "vm.opt.AlwaysPreTouch" => "null",
            _ => return None,
        }
        .to_owned(),
    )
}

fn tag_line() -> impl Strategy<Value = String> {
    prop_oneof![
        expression().prop_map(|e| format!("@requires {e}")),
        (
            prop::sample::select(vec![
                "main",
                "main/othervm",
                "main/manual",
                "driver",
                "main/timeout=5",
                "main/fail",
                "shell",
                "main/othervm/bogus"
            ]),
            "[ A-Za-z0-9_=+:-]{0,30}"
        )
            .prop_map(|(a, rest)| format!("@run {a} {rest}")),
        "[0-9 a-z]{0,12}".prop_map(|b| format!("@bug {b}")),
        "\\PC{0,20}".prop_map(|s| format!("@summary {s}")),
        prop::sample::select(vec!["stress", "thp", "nope"]).prop_map(|k| format!("@key {k}")),
        "@[a-z]{1,8}( [a-z]{0,8})?",
        "\\PC{0,30}",
    ]
}

fn description() -> impl Strategy<Value = String> {
    (
        prop::option::of("id=[A-Za-z0-9_-]{0,6}"),
        prop::collection::vec(tag_line(), 0..6),
    )
        .prop_map(|(id, tags)| {
            let mut s = format!(
                "/*\n * @test{}\n",
                id.map(|i| format!(" {i}")).unwrap_or_default()
            );
            for t in tags {
                s.push_str(&format!(" * {t}\n"));
            }
            s.push_str(" */\n");
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn requires_expressions(src in prop_oneof![expression(), "\\PC{0,40}"]) {
        match Expr::parse(&src) {
            Ok(e) => {
                if let Err(err) = e.eval_bool(&props) {
                    prop_assert!(!err.0.is_empty());
                }
            }
            Err(err) => prop_assert!(!err.0.is_empty(), "an empty message for {src:?}"),
        }
    }

    #[test]
    fn test_descriptions(blocks in prop::collection::vec(prop_oneof![description(), "\\PC{0,60}"], 1..4)) {
        let text = blocks.join("\n");
        let lines = text.lines().count().max(1);
        for parsed in parse_descriptions(Path::new("dir/Fuzz.rs"), &text, &["stress".to_string(), "thp".to_string()]) {
            match parsed {
                Ok(d) => {
                    prop_assert!(!d.actions.is_empty(), "a description always has an action");
                    prop_assert!(d.line >= 1 && d.line <= lines);
                }
                Err(e) => {
                    prop_assert!(!e.message.is_empty());
                    prop_assert!(e.line >= 1 && e.line <= lines, "line {} outside 1..={lines}", e.line);
                    prop_assert!(e.to_string().starts_with("dir/Fuzz.rs:"));
                }
            }
        }
    }
}
