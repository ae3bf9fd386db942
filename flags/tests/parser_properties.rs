//! Property tests: at least 10,000 generated and mutated argument lists per case; the parser
//! never panics, every rejection carries a message naming what was wrong, and accepted
//! values respect the table's ranges.

use proptest::prelude::*;
use rtvm_flags::{parse, EnvOptions, ParseOptions, Value, FLAGS};

fn flag_names() -> Vec<&'static str> {
    FLAGS.iter().map(|f| f.name).collect()
}

/// A flag name, sometimes mutated (a character dropped, doubled or replaced).
fn name() -> impl Strategy<Value = String> {
    let names = flag_names();
    (
        prop::sample::select(names),
        0usize..4,
        any::<prop::sample::Index>(),
        "[A-Za-z0-9_#:=+-]",
    )
        .prop_map(|(n, mutation, at, c)| {
            let mut s = n.to_string();
            let i = at.index(s.len());
            match mutation {
                0 => {}
                1 => {
                    s.remove(i);
                }
                2 => s.insert_str(i, &c),
                _ => s.replace_range(i..=i, &c),
            }
            s
        })
}

/// A value: numbers with and without suffixes, hex, negatives, junk, huge.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        (
            any::<u32>(),
            prop::sample::select(vec![
                "", "k", "K", "m", "M", "g", "G", "t", "T", "kk", "q", ".5"
            ])
        )
            .prop_map(|(n, s)| format!("{n}{s}")),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u32>().prop_map(|n| format!("0x{n:x}")),
        prop::sample::select(vec![
            "", "true", "false", "off", "summary", "detail", "0x", "-", "1e3", "nan", " 1", "+1"
        ])
        .prop_map(str::to_owned),
        "\\PC{0,12}",
    ]
}

fn option() -> impl Strategy<Value = String> {
    prop_oneof![
        (name(), prop::sample::select(vec!["+", "-", "", "#"]))
            .prop_map(|(n, p)| format!("-XX:{p}{n}")),
        (name(), value()).prop_map(|(n, v)| format!("-XX:{n}={v}")),
        (name(), value()).prop_map(|(n, v)| format!("-XX:{n}:={v}")),
        (
            prop::sample::select(vec!["-Xms", "-Xmx", "-Xss", "-Xmn", "-X", "-", ""]),
            value()
        )
            .prop_map(|(p, v)| format!("{p}{v}")),
        "-Xlog(:[a-z+*=,:]{0,20})?",
        prop::sample::select(vec![
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+IgnoreUnrecognizedVMOptions",
            "-XX:+PrintVMOptions",
            "-XX:VMOptionsFile=/nonexistent/rtvm",
            "-XX:Flags=/nonexistent/rtvm",
        ])
        .prop_map(str::to_owned),
        "\\PC{0,24}",
    ]
}

fn check(args: &[String], env: Option<&str>, ignore: bool) -> Result<(), TestCaseError> {
    let options = ParseOptions {
        ignore_unrecognized: ignore,
        env: env.map(|value| EnvOptions {
            name: "RTVM_OPTIONS",
            value,
        }),
        ..ParseOptions::default()
    };
    let mut sink_text = String::new();
    match parse(args, &options, &mut |_, t| sink_text.push_str(t)) {
        Ok(parsed) => {
            for (info, value, _) in parsed.settings.iter() {
                prop_assert!(
                    info.check_range(value).is_ok(),
                    "{} = {value:?} is out of range",
                    info.name
                );
                if let Value::Str(s) = value {
                    prop_assert!(
                        info.name != "NativeMemoryTracking"
                            || ["off", "summary", "detail"].contains(&s.as_ref())
                    );
                }
            }
        }
        Err(e) => {
            prop_assert!(!e.message.trim().is_empty(), "empty message for {args:?}");
            prop_assert!(
                e.message.ends_with('\n') || e.message.ends_with("? ") || e.message.ends_with(']'),
                "message not terminated as HotSpot's are: {:?}",
                e.message
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_argument_lists(args in prop::collection::vec(option(), 0..8), ignore in any::<bool>()) {
        check(&args, None, ignore)?;
    }

    #[test]
    fn generated_environment_strings(env in "\\PC{0,60}", args in prop::collection::vec(option(), 0..3)) {
        check(&args, Some(&env), false)?;
    }

    #[test]
    fn arbitrary_strings(args in prop::collection::vec("\\PC{0,40}", 0..6)) {
        check(&args, None, false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Options files and environment strings: tokenizing never panics; a rejection is the
    /// unmatched-quote message naming the source; accepted tokens never contain a quote that
    /// was used for grouping.
    #[test]
    fn options_file_tokenizer(text in prop_oneof!["\\PC{0,80}", "[ \\t\\n\"'a-z=+:-]{0,80}"]) {
        match rtvm_flags::optfile::tokenize_options(&text, "options.txt") {
            Ok(tokens) => {
                for t in &tokens {
                    prop_assert!(!t.chars().any(char::is_whitespace) || text.contains('"') || text.contains('\''));
                }
            }
            Err(e) => prop_assert_eq!(e.message, "Unmatched quote in options.txt\n"),
        }
        let settings = rtvm_flags::optfile::tokenize_settings(&text);
        prop_assert!(settings.iter().all(|t| !t.contains('\n')));
    }
}
