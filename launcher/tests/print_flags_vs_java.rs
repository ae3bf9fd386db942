//! `rtvm -XX:+PrintFlagsFinal -version` and `java -XX:+PrintFlagsFinal -version` agree, for
//! the flags both have, in type column, value formatting and brace layout; and
//! `-XX:+PrintFlagsRanges` (alone, and with `-XX:+PrintFlagsFinal`) prints the same range for
//! every flag both have. Every flag of rtvm's table that java lacks is named in the README's
//! complete list of deliberate differences.

use std::collections::BTreeMap;
use std::process::Command;

use rtvm_testkit::{require_tool, Outcome};

rtvm_testkit::tests!(
    print_flags_final_agrees_with_java,
    print_flags_ranges_agree_with_java,
    readme_names_every_flag_java_lacks
);

#[derive(Debug)]
struct Line {
    ty: String,
    value: String,
    kind: String,
    equals_col: usize,
    kind_end_col: usize,
    origin_col: usize,
    origin: String,
}

fn parse(stdout: &str) -> BTreeMap<String, Line> {
    let mut out = BTreeMap::new();
    for l in stdout
        .lines()
        .filter(|l| l.contains(" = ") && l.ends_with('}'))
    {
        let ty = l[..9].trim().to_owned();
        let name = l[10..].split_whitespace().next().unwrap().to_owned();
        let equals_col = l.find(" = ").unwrap() + 1;
        let origin_col = l.rfind(" {").unwrap() + 1;
        let kind_start = l[..origin_col - 1].rfind('{').unwrap();
        let kind_end_col = origin_col - 1;
        let value = l[equals_col + 2..kind_start].trim().to_owned();
        out.insert(
            name,
            Line {
                ty,
                value,
                kind: l[kind_start..kind_end_col].to_owned(),
                equals_col,
                kind_end_col,
                origin_col,
                origin: l[origin_col..].to_owned(),
            },
        );
    }
    out
}

fn flags_of(program: &str) -> Option<BTreeMap<String, Line>> {
    let out = Command::new(program)
        .args([
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+PrintFlagsFinal",
            "-version",
        ])
        .env_remove("RTVM_OPTIONS")
        .env_remove("JAVA_TOOL_OPTIONS")
        .env_remove("_JAVA_OPTIONS")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| parse(&String::from_utf8_lossy(&out.stdout)))
}

fn value_class(ty: &str, v: &str) -> &'static str {
    match ty {
        "bool" if v == "true" || v == "false" => "bool",
        "double" if v.contains('.') && v.split('.').nth(1).map(str::len) == Some(6) => "double %f",
        "ccstr" | "ccstrlist" => "string",
        _ if v
            .trim_start_matches('-')
            .chars()
            .all(|c| c.is_ascii_digit())
            && !v.is_empty() =>
        {
            "decimal"
        }
        _ => "other",
    }
}

fn java_runs() -> bool {
    Command::new("java")
        .arg("-version")
        .env_remove("JAVA_TOOL_OPTIONS")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn print_flags_final_agrees_with_java() -> Outcome {
    require_tool("java", java_runs())?;
    let java = flags_of("java").expect("java -XX:+PrintFlagsFinal -version");
    let rtvm = flags_of(env!("CARGO_BIN_EXE_rtvm")).expect("rtvm -XX:+PrintFlagsFinal -version");
    let common: Vec<&String> = rtvm.keys().filter(|k| java.contains_key(*k)).collect();
    println!(
        "comparing {} flags rtvm and java both have: {common:?}",
        common.len()
    );
    assert!(
        common.len() >= 18,
        "expected most of rtvm's product flags to exist in java 17"
    );
    for name in common {
        let (r, j) = (&rtvm[name], &java[name]);
        assert_eq!(r.ty, j.ty, "{name}: type column");
        assert_eq!(
            value_class(&r.ty, &r.value),
            value_class(&j.ty, &j.value),
            "{name}: value formatting {r:?} vs {j:?}"
        );
        assert_eq!(r.kind, j.kind, "{name}: kind braces");
        assert_eq!(r.equals_col, j.equals_col, "{name}: ' = ' column");
        if r.value.len() <= 30 && j.value.len() <= 30 {
            assert_eq!(
                r.kind_end_col, j.kind_end_col,
                "{name}: kind brace end column"
            );
            assert_eq!(r.origin_col, j.origin_col, "{name}: origin brace column");
        }
        assert!(
            r.origin.starts_with('{') && r.origin.ends_with('}'),
            "{name}: {}",
            r.origin
        );
        let known_origins = [
            "{default}",
            "{command line}",
            "{ergonomic}",
            "{command line, ergonomic}",
            "{environment}",
            "{config file}",
        ];
        assert!(
            known_origins.contains(&r.origin.as_str()),
            "{name}: {}",
            r.origin
        );
    }
    // Same values and origins where both VMs take the same decision (the heap sizes from
    // this machine's or container's memory, the processors, the RAM percentages).
    for name in [
        "AlwaysPreTouch",
        "PreTouchParallelChunkSize",
        "ThreadStackSize",
        "MaxHeapSize",
        "InitialHeapSize",
        "MinHeapSize",
        "ParallelGCThreads",
        "MaxRAM",
        "MaxRAMPercentage",
        "MinRAMPercentage",
        "InitialRAMPercentage",
        "UseContainerSupport",
        "UseLargePages",
    ] {
        assert_eq!(
            (&rtvm[name].value, &rtvm[name].origin),
            (&java[name].value, &java[name].origin),
            "{name}: value and origin"
        );
    }
    Ok(())
}

/// The `[ min ... max ]` column of each flag `-XX:+PrintFlagsRanges` lists, whitespace
/// collapsed (a flag without a range prints `[ ... ]`).
fn ranges_of(program: &str, with_final: bool) -> Option<BTreeMap<String, String>> {
    let mut c = Command::new(program);
    c.args([
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+UnlockExperimentalVMOptions",
    ]);
    if with_final {
        c.arg("-XX:+PrintFlagsFinal");
    }
    let out = c
        .args(["-XX:+PrintFlagsRanges", "-version"])
        .env_remove("RTVM_OPTIONS")
        .env_remove("JAVA_TOOL_OPTIONS")
        .env_remove("_JAVA_OPTIONS")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut ranges = BTreeMap::new();
    for l in text
        .lines()
        .filter(|l| l.contains(" [ ") && l.contains(" ]"))
    {
        let name = l.get(10..)?.split_whitespace().next()?.to_owned();
        let range = &l[l.find('[')?..=l.find(']')?];
        ranges.insert(name, range.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    out.status.success().then_some(ranges)
}

fn print_flags_ranges_agree_with_java() -> Outcome {
    require_tool("java", java_runs())?;
    for with_final in [false, true] {
        let java = ranges_of("java", with_final).expect("java -XX:+PrintFlagsRanges -version");
        let rtvm = ranges_of(env!("CARGO_BIN_EXE_rtvm"), with_final)
            .expect("rtvm -XX:+PrintFlagsRanges -version");
        let common: Vec<&String> = rtvm.keys().filter(|k| java.contains_key(*k)).collect();
        assert!(common.len() >= 20, "too few flags in common: {common:?}");
        for name in &common {
            assert_eq!(
                rtvm[*name], java[*name],
                "{name}: range (with PrintFlagsFinal: {with_final})"
            );
        }
        println!(
            "-XX:+PrintFlagsRanges{}: {} flags, ranges as java's",
            if with_final {
                " -XX:+PrintFlagsFinal"
            } else {
                ""
            },
            common.len()
        );
    }
    Ok(())
}

/// The names java 17 knows (diagnostic and experimental flags unlocked).
fn java_flag_names() -> Option<std::collections::BTreeSet<String>> {
    let out = Command::new("java")
        .args([
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+PrintFlagsFinal",
            "-version",
        ])
        .env_remove("JAVA_TOOL_OPTIONS")
        .env_remove("_JAVA_OPTIONS")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let names = text
        .lines()
        .filter(|l| l.ends_with('}'))
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect();
    out.status.success().then_some(names)
}

fn readme_names_every_flag_java_lacks() -> Outcome {
    require_tool("java", java_runs())?;
    let java = java_flag_names().expect("java -XX:+PrintFlagsFinal -version");
    assert!(java.len() > 500, "java listed only {} flags", java.len());
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let start = readme
        .find("differs from HotSpot 17 (the complete list):")
        .expect("README.md has the complete list of deliberate differences");
    let list = &readme[start..];
    let list = &list[..list.find("\n## ").unwrap_or(list.len())];
    // Every flag of the table, as the program lists them with both unlock options.
    let rtvm = flags_of(env!("CARGO_BIN_EXE_rtvm")).expect("rtvm -XX:+PrintFlagsFinal -version");
    let own: Vec<&str> = rtvm
        .keys()
        .map(String::as_str)
        .filter(|n| !java.contains(*n))
        .collect();
    assert!(!own.is_empty(), "rtvm has flags java lacks");
    for name in &own {
        assert!(
            list.contains(&format!("`{name}`")),
            "{name} is rtvm's own (java 17 does not know it) but README.md's complete list of \
             deliberate differences does not name it"
        );
    }
    println!("README.md's list of differences names every rtvm-only flag: {own:?}");
    Ok(())
}
