//! The MMTk workloads through the `rtvm` program, as an operator runs them: the same answers
//! on every plan as with no collection at all, `-Xlog:gc` lines in HotSpot's shape numbered
//! from 0, refused and unknown plans, and the out-of-memory ending. `cargo test --workspace`
//! runs them with MMTk's sanity collections on (the binding's own dev-dependency turns its
//! `sanity` feature on for the whole build); `cargo test -p rtvm-launcher` and `cargo bench`
//! without (the bench measures the collector as an operator gets it).

use std::process::{Command, Output};

use regex::Regex;

fn rtvm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtvm"))
        .args(args)
        .env_remove("RTVM_OPTIONS")
        .output()
        .expect("run rtvm")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The program's own lines (the log lines, `[...]`-decorated, left out).
fn answer(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| !l.starts_with('['))
        .map(str::to_owned)
        .collect()
}

/// Checks the `-Xlog:gc` lines: `Using MMTk <plan>` first, then collections numbered from 0
/// in HotSpot's shape; returns how many, and how many were `Pause Young`.
fn collections(out: &str, plan: &str) -> (usize, usize) {
    let line = Regex::new(
        r"^\[[0-9.]+s\]\[info\]\[gc\] GC\((\d+)\) Pause (Full|Young) \((Allocation Failure|Diagnostic Command)\) (\d+)M->(\d+)M\((\d+)M\) [0-9]+\.[0-9]{3}ms$",
    )
    .unwrap();
    let logs: Vec<&str> = out.lines().filter(|l| l.starts_with('[')).collect();
    assert!(
        logs.first()
            .is_some_and(|l| l.ends_with(&format!("[info][gc] Using MMTk {plan}"))),
        "{out}"
    );
    let (mut n, mut young) = (0, 0);
    for l in logs.iter().filter(|l| l.contains("Pause")) {
        let c = line
            .captures(l)
            .unwrap_or_else(|| panic!("not HotSpot's shape: {l}"));
        assert_eq!(c[1].parse::<usize>().unwrap(), n, "numbered in order: {l}");
        let (before, after, total): (u64, u64, u64) = (
            c[4].parse().unwrap(),
            c[5].parse().unwrap(),
            c[6].parse().unwrap(),
        );
        assert!(after <= total && before <= total, "{l}");
        young += usize::from(&c[2] == "Young");
        n += 1;
    }
    (n, young)
}

fn binary_trees_expected(n: u32) -> Vec<String> {
    let max = n.max(6);
    let mut want = vec![format!(
        "stretch tree of depth {}\t check: {}",
        max + 1,
        (1u64 << (max + 2)) - 1
    )];
    for d in (4..=max).step_by(2) {
        let iterations = 1u64 << (max - d + 4);
        want.push(format!(
            "{iterations}\t trees of depth {d}\t check: {}",
            iterations * ((1u64 << (d + 1)) - 1)
        ));
    }
    want.push(format!(
        "long lived tree of depth {max}\t check: {}",
        (1u64 << (max + 1)) - 1
    ));
    want
}

#[test]
fn the_rtvm_program_reports_whether_mmtk_runs_sanity_collections() {
    let run = rtvm(&["-Xlog:gc+heap", "BinaryTrees", "4"]);
    let out = text(&run.stdout);
    assert!(run.status.success(), "{out}");
    assert!(out.contains("[info][gc,heap] Heap: MMTk Immix ("), "{out}");
    // The program and this test are one build: the same features.
    assert_eq!(
        out.contains("sanity checks on"),
        rtvm_mmtk::SANITY_CHECKS,
        "the heap line tells whether this build runs MMTk's sanity collections: {out}"
    );
    println!(
        "this build runs MMTk's sanity collections: {} (on under `cargo test --workspace`)",
        rtvm_mmtk::SANITY_CHECKS
    );
}

#[test]
fn binary_trees_answers_equal_no_collection_on_every_plan() {
    let want = binary_trees_expected(14);
    let reference = rtvm(&[
        "-Xmx1g",
        "-XX:MMTkPlan=NoGC",
        "-Xlog:gc",
        "BinaryTrees",
        "14",
        "2",
    ]);
    let out = text(&reference.stdout);
    assert!(
        reference.status.success(),
        "{out}{}",
        text(&reference.stderr)
    );
    assert_eq!(answer(&out), want);
    assert_eq!(collections(&out, "NoGC"), (0, 0));
    for plan in ["Immix", "StickyImmix", "MarkSweep"] {
        let run = rtvm(&[
            "-Xmx16m",
            &format!("-XX:MMTkPlan={plan}"),
            "-Xlog:gc",
            "BinaryTrees",
            "16",
            "2",
        ]);
        let out = text(&run.stdout);
        assert!(run.status.success(), "{plan}: {out}{}", text(&run.stderr));
        assert_eq!(answer(&out), binary_trees_expected(16), "{plan}");
        let (n, young) = collections(&out, plan);
        assert!(n >= 10, "{plan}: only {n} collections in a 16M heap");
        if plan == "StickyImmix" {
            assert!(young > 0, "StickyImmix collected no nursery: {out}");
        } else {
            assert_eq!(young, 0, "{plan}");
        }
        println!("{plan}: {n} collections ({young} young), answer as with NoGC");
    }
}

/// GCBench's lines with the times left out.
fn gcbench_answer(out: &str) -> Vec<String> {
    let ms = Regex::new(r"[0-9]+ (msec|ms\.)$").unwrap();
    answer(out)
        .iter()
        .map(|l| ms.replace(l, "<t> $1").into_owned())
        .collect()
}

#[test]
fn gcbench_answers_equal_no_collection_on_every_plan() {
    let reference = rtvm(&["-Xmx2g", "-XX:MMTkPlan=NoGC", "GCBench", "2"]);
    let out = text(&reference.stdout);
    assert!(
        reference.status.success(),
        "{out}{}",
        text(&reference.stderr)
    );
    let want = gcbench_answer(&out);
    assert_eq!(want[0], "Garbage Collector Test");
    assert_eq!(want[4], "Creating 33824 trees of depth 4");
    assert_eq!(want[5], "\tTop down construction took <t> msec");
    assert_eq!(want.last().unwrap(), "Completed in <t> ms.");
    assert_eq!(want.len(), 4 + 7 * 3 + 1, "{out}");
    for plan in ["Immix", "StickyImmix", "MarkSweep"] {
        let run = rtvm(&[
            "-Xmx48m",
            &format!("-XX:MMTkPlan={plan}"),
            "-Xlog:gc",
            "GCBench",
            "2",
        ]);
        let out = text(&run.stdout);
        assert!(run.status.success(), "{plan}: {out}{}", text(&run.stderr));
        assert_eq!(gcbench_answer(&out), want, "{plan}");
        let (n, _) = collections(&out, plan);
        assert!(n >= 10, "{plan}: only {n} collections");
        println!("{plan}: {n} collections, answer as with NoGC");
    }
}

fn refused(args: &[&str], message: &str) {
    let run = rtvm(args);
    let err = text(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains(message), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

#[test]
fn bad_plans_and_gc_options_are_refused_with_their_reason() {
    for plan in [
        "SemiSpace",
        "GenCopy",
        "GenImmix",
        "MarkCompact",
        "Compressor",
    ] {
        refused(
            &[&format!("-XX:MMTkPlan={plan}"), "BinaryTrees", "4"],
            &format!(
                "Improperly specified VM option 'MMTkPlan={plan}': the MMTk plan {plan} cannot take the conservative (pinning) roots"
            ),
        );
    }
    refused(
        &["-XX:MMTkPlan=immix", "GCBench"],
        "Improperly specified VM option 'MMTkPlan=immix': unknown plan; accepted plans are Immix, StickyImmix, MarkSweep, NoGC",
    );
    // Refused while the heap initializes: java's two lines on stdout, as java prints
    // `-XX:+UseG1GC -XX:ParallelGCThreads=0` and `-Xmx1` (TestMMTkBadInput compares).
    for (args, message) in [
        (
            &["-XX:ParallelGCThreads=0", "BinaryTrees", "4"][..],
            "The MMTk heap can not be combined with -XX:ParallelGCThreads=0 (it needs at least one GC worker thread)",
        ),
        (
            &["-Xmx4m", "BinaryTrees", "4"][..],
            "Too small maximum heap for MMTk: MaxHeapSize=4194304 (4M); the MMTk heap needs at least 8M",
        ),
    ] {
        let run = rtvm(args);
        let out = text(&run.stdout);
        assert_eq!(run.status.code(), Some(1), "{args:?}: {out}");
        assert_eq!(
            out,
            format!("Error occurred during initialization of VM\n{message}\n"),
            "{args:?}"
        );
        assert!(!text(&run.stderr).contains("panicked"), "{args:?}");
    }
    // HotSpot's own check, before MMTk: on stdout as java prints it.
    let run = rtvm(&["-Xms128m", "-Xmx64m", "BinaryTrees", "4"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(text(&run.stdout)
        .contains("Initial heap size set to a larger value than the maximum heap size"));
}

#[test]
fn an_exhausted_heap_ends_with_javas_out_of_memory_error() {
    for plan in ["Immix", "StickyImmix", "MarkSweep", "NoGC"] {
        let run = rtvm(&[
            "-Xmx8m",
            &format!("-XX:MMTkPlan={plan}"),
            "BinaryTrees",
            "18",
        ]);
        let err = text(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{plan}: {err}");
        assert_eq!(
            err, "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n",
            "{plan}"
        );
    }
}
