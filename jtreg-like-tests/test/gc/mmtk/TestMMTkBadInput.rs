/*
 * @test
 * @summary Bad input to a collecting rtvm, side by side with java 17 where java has the
 *          same behaviour: a heap too small for the workload (-Xmx8m BinaryTrees 18, java
 *          running the same program) ends within a bounded time with java's
 *          `Exception in thread "main" java.lang.OutOfMemoryError: Java heap space` on
 *          stderr and java's exit status, no panic; -Xms above -Xmx is java's message, stream
 *          and status; -XX:ParallelGCThreads=0 is refused at start-up as java with G1 (its
 *          default collector) refuses it: `Error occurred during initialization of VM` and
 *          `... can not be combined with -XX:ParallelGCThreads=0` on stdout, status 1; -Xmx4m
 *          (below MMTk's least heap) as java's -Xmx1: `Too small maximum heap` there too; an
 *          unknown -XX:MMTkPlan lists the accepted names, and plans that cannot take
 *          conservative roots (SemiSpace, GenCopy, GenImmix, MarkCompact) are refused at
 *          start-up naming the plan and why, as bad options are (stderr, status 1), before any
 *          output of the main
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestMMTkBadInput
 */

use std::time::{Duration, Instant};

use rtvm_jtreg::gclog::java_binary_trees;
use rtvm_jtreg::testlib::*;

fn rtvm(args: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    ProcessTools::execute_within(ProcessTools::create_limited_test_vm(args), Duration::from_secs(60))
}

fn java(args: &[&str]) -> Result<Option<OutputAnalyzer>, TestFailure> {
    JavaTools::execute(args)
}

/// No Rust panic, no backtrace.
fn no_panic(out: &OutputAnalyzer) -> Result<(), TestFailure> {
    for s in ["panicked", "RUST_BACKTRACE", "stack backtrace", "thread '"] {
        out.should_not_contain(s)?;
    }
    Ok(())
}

const OOM: &str = "java.lang.OutOfMemoryError: Java heap space";

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    // A heap too small: the stretch tree of depth 19 (1M nodes of 24 bytes) does not fit.
    let t = Instant::now();
    let ours = rtvm(&["-Xmx8m", "BinaryTrees", "18"])?;
    let took = t.elapsed();
    no_panic(&ours)?;
    let first = ours.stderr.lines().next().unwrap_or_default().to_owned();
    check(first == format!("Exception in thread \"main\" {OOM}") && ours.stdout.is_empty() && ours.exit == 1, || format!("out of memory: {ours:?}"))?;
    match java_binary_trees(&["-Xmx8m"], &["18"])? {
        Some(j) => {
            let theirs = j.stderr.lines().next().unwrap_or_default();
            check(theirs == first && j.exit == ours.exit && j.stdout == ours.stdout, || format!("out of memory: rtvm {ours:?}\njava {j:?}"))?;
        }
        None => println!("java is not installed: out of memory checked against HotSpot's documented words only"),
    }
    println!("-Xmx8m BinaryTrees 18: {first:?}, exit {} in {took:?}, as java", ours.exit);

    // -Xms above -Xmx: java's message, stream and status (the VM is never created).
    let ours = rtvm(&["-Xms128m", "-Xmx64m", "BinaryTrees", "4"])?;
    check(ours.stdout == "Error occurred during initialization of VM\nInitial heap size set to a larger value than the maximum heap size\n" && ours.stderr.is_empty() && ours.exit == 1, || format!("-Xms above -Xmx: {ours:?}"))?;
    if let Some(j) = java(&["-Xms128m", "-Xmx64m", "-version"])? {
        check(normalized(&j) == normalized(&ours), || format!("-Xms above -Xmx: rtvm {ours:?}\njava {j:?}"))?;
    }
    println!("-Xms128m -Xmx64m: java's text, stream and status");

    // ParallelGCThreads=0: java 17 refuses it with G1 (and Parallel, ZGC, Shenandoah); Serial
    // has no workers to lack. The MMTk heap, like G1, needs one: refused as G1 refuses it.
    let ours = rtvm(&["-XX:ParallelGCThreads=0", "BinaryTrees", "4"])?;
    no_panic(&ours)?;
    let lines: Vec<&str> = ours.stdout.lines().collect();
    check(lines.len() == 2 && lines[0] == "Error occurred during initialization of VM" && lines[1].contains("can not be combined with -XX:ParallelGCThreads=0") && lines[1].contains("MMTk") && ours.stderr.is_empty() && ours.exit == 1, || format!("ParallelGCThreads=0: {ours:?}"))?;
    if let Some(j) = java(&["-XX:+UseG1GC", "-XX:ParallelGCThreads=0", "-version"])? {
        let theirs: Vec<&str> = j.stdout.lines().collect();
        check(theirs.len() == 2 && theirs[0] == lines[0] && theirs[1].contains("can not be combined with -XX:ParallelGCThreads=0") && j.stderr.is_empty() && j.exit == ours.exit, || format!("ParallelGCThreads=0: rtvm {ours:?}\njava {j:?}"))?;
    }
    println!("-XX:ParallelGCThreads=0: {:?}, as java with G1", lines[1]);

    // A heap below MMTk's least: as java's `-Xmx1` (a too small heap), an initialization error.
    let ours = rtvm(&["-Xmx4m", "BinaryTrees", "4"])?;
    no_panic(&ours)?;
    let lines: Vec<&str> = ours.stdout.lines().collect();
    check(lines.len() == 2 && lines[0] == "Error occurred during initialization of VM" && lines[1].starts_with("Too small maximum heap") && ours.stderr.is_empty() && ours.exit == 1, || format!("-Xmx4m: {ours:?}"))?;
    if let Some(j) = java(&["-Xmx1", "-version"])? {
        check(j.stdout.lines().next() == Some(lines[0]) && j.stdout.lines().nth(1).is_some_and(|l| l.starts_with("Too small maximum heap")) && j.stderr.is_empty() && j.exit == ours.exit, || format!("too small a heap: rtvm {ours:?}\njava {j:?}"))?;
    }
    println!("-Xmx4m: {:?}, as java's -Xmx1", lines[1]);

    // Plans: an unknown one lists the accepted names; the refused ones say why. As a bad
    // option: stderr, the launcher's lines, status 1, nothing of the main's.
    let accepted = "Immix, StickyImmix, MarkSweep, NoGC";
    let ours = rtvm(&["-XX:MMTkPlan=Foo", "BinaryTrees", "4"])?;
    no_panic(&ours)?;
    check(ours.stderr.starts_with("Improperly specified VM option 'MMTkPlan=Foo'") && ours.stderr.lines().next().is_some_and(|l| l.ends_with(accepted)) && ours.stdout.is_empty() && ours.exit == 1, || format!("MMTkPlan=Foo: {ours:?}"))?;
    if let Some(j) = java(&["-XX:ConcGCThreads=abc", "-version"])? {
        // java's bad option: the message, then the launcher's two lines, on stderr, status 1.
        let tail = |o: &OutputAnalyzer| -> Vec<String> { o.stderr.lines().skip(1).map(|l| l.replace("Java Virtual Machine", "virtual machine")).collect() };
        check(tail(&ours) == tail(&j) && j.exit == ours.exit && j.stdout.is_empty(), || format!("a bad option: rtvm {ours:?}\njava {j:?}"))?;
    }
    for (plan, why) in [("SemiSpace", "copies"), ("GenCopy", "copies"), ("GenImmix", "copies"), ("MarkCompact", "slides")] {
        let ours = rtvm(&[&format!("-XX:MMTkPlan={plan}"), "BinaryTrees", "4"])?;
        no_panic(&ours)?;
        let first = ours.stderr.lines().next().unwrap_or_default();
        check(first.starts_with(&format!("Improperly specified VM option 'MMTkPlan={plan}'")) && first.contains("conservative") && first.contains(why) && first.contains(accepted) && ours.stdout.is_empty() && ours.exit == 1, || format!("MMTkPlan={plan}: {ours:?}"))?;
    }
    println!("-XX:MMTkPlan=Foo lists {accepted}; SemiSpace, GenCopy, GenImmix, MarkCompact refused at start-up with the reason");
    Ok(())
}
