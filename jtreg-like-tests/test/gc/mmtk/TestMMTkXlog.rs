/*
 * @test
 * @summary -Xlog on a collecting rtvm, side by side with java 17 running the same program
 *          (the Benchmarks Game's binary-trees in Java, compiled by the test): the README's
 *          demo `-Xmx64m -Xlog:gc BinaryTrees 16 2` prints java's answer lines and nothing
 *          but -Xlog:gc lines besides, `Using MMTk Immix` where java prints `Using Serial`,
 *          and one line per collection that the parser java's own -Xlog:gc lines pass reads
 *          (GC(n) from 0 without a gap, before->after(capacity), pause ms); with
 *          -Xlog:gc+heap+exit (java's block shape: `Heap`, then GC.heap_info's line) the
 *          count of lines equals the collections the VM counted,
 *          -Xlog:safepoint has one stop per collection (op MMTkCollectForAllocation, the
 *          time to reach it) in java's shape, and -Xlog:gc+heap=debug one detail line per
 *          collection; under -XX:MMTkPlan=StickyImmix, nursery collections are `Pause Young`
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestMMTkXlog
 */

use rtvm_jtreg::gclog::*;
use rtvm_jtreg::testlib::*;

const DEMO: &[&str] = &["-Xmx64m", "-Xlog:gc", "BinaryTrees", "16", "2"];

fn run(args: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    let out = ProcessTools::execute_within(
        ProcessTools::create_limited_test_vm(args),
        std::time::Duration::from_secs(120),
    )?;
    out.should_have_exit_value(0)?;
    check(out.stderr.is_empty(), || format!("{args:?} wrote on stderr:\n{}", out.stderr))?;
    Ok(out)
}

/// The `-Xlog:gc+heap+exit` block's collection count (`collections N, ...`).
fn counted(text: &str) -> Result<u64, TestFailure> {
    let exit: Vec<&str> = text.lines().filter(|l| l.contains("][gc,heap,exit")).collect();
    let after = |l: &str| l.split_once("] ").map(|(_, t)| t.to_owned()).unwrap_or_default();
    check(exit.first().map(|l| after(l)) == Some("Heap".into()), || format!("-Xlog:gc+heap+exit does not start with Heap: {exit:?}"))?;
    let heap = exit.get(1).map(|l| after(l)).unwrap_or_default();
    check(parse_heap_line(&heap).is_some_and(|h| h.0 == "MMTk Immix"), || format!("the exit block's heap line: {heap:?}"))?;
    let n = exit
        .iter()
        .find_map(|l| l.split("collections ").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .ok_or_else(|| TestFailure(format!("no `collections N` in the exit block: {exit:?}")))?;
    Ok(n)
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    // The demo: java's answer lines, and only -Xlog:gc lines besides.
    let demo = run(DEMO)?;
    let answer = program_lines(&demo.stdout);
    check(answer.len() == 9 && answer[0] == "stretch tree of depth 17\t check: 262143" && answer[8] == "long lived tree of depth 16\t check: 131071", || format!("the answer: {answer:?}"))?;
    check(using_line(&demo.stdout).as_deref() == Some("MMTk Immix"), || format!("no `Using MMTk Immix` line:\n{}", demo.stdout))?;
    let pauses = gc_pauses(&demo.stdout, true)?;
    let xlog_lines = demo.stdout.lines().count() - answer.len();
    check(xlog_lines == pauses.len() + 1, || format!("-Xlog:gc printed {xlog_lines} lines: `Using` and {} collections expected:\n{}", pauses.len(), demo.stdout))?;
    check(!pauses.is_empty(), || "BinaryTrees 16 in a 64 MB heap ran no collection".into())?;
    for p in &pauses {
        check(p.kind == "Full" && p.causes == ["Allocation Failure"] && p.capacity == 64, || format!("Immix, allocation-triggered, 64 MB heap: {p:?}"))?;
    }
    println!("demo: {} collections, java's answer shape, `Using MMTk Immix`", pauses.len());

    match java_binary_trees(&["-Xmx64m", "-XX:+UseSerialGC", "-Xlog:gc,safepoint"], &["16"])? {
        Some(java) => {
            java.should_have_exit_value(0)?;
            let theirs = program_lines(&java.stdout);
            check(theirs == answer, || format!("the answer differs from java's:\nrtvm {answer:?}\njava {theirs:?}"))?;
            check(using_line(&java.stdout).as_deref() == Some("Serial"), || format!("java's Using line:\n{}", java.stdout))?;
            let theirs = gc_pauses(&java.stdout, true)?;
            check(!theirs.is_empty(), || format!("java ran no collection, or the parser read none of its lines:\n{}", java.stdout))?;
            let stops = safepoints(&java.stdout)?;
            check(stops.len() >= theirs.len(), || format!("java: {} safepoint lines for {} collections", stops.len(), theirs.len()))?;
            println!("java: the same answer; its {} -Xlog:gc and {} -Xlog:safepoint lines pass the same parsers", theirs.len(), stops.len());
        }
        None => println!("java is not installed: the answer and the line shapes checked against the Benchmarks Game's and HotSpot's documented ones only"),
    }

    // The details: the count the VM keeps, the stops, gc+heap.
    // (A smaller run, which still collects several times.)
    let detail = run(&["-Xmx16m", "-Xlog:gc,safepoint,gc+heap=debug,gc+heap+exit", "BinaryTrees", "14", "2"])?;
    check(program_lines(&detail.stdout).last() == Some(&"long lived tree of depth 14\t check: 32767"), || format!("the answer with more -Xlog:\n{}", detail.stdout))?;
    let pauses = gc_pauses(&detail.stdout, true)?;
    let n = counted(&detail.stdout)?;
    check(n >= 2, || format!("BinaryTrees 14 in a 16 MB heap ran {n} collections:\n{}", detail.stdout))?;
    check(pauses.len() as u64 == n, || format!("{} -Xlog:gc lines, the VM counted {n} collections:\n{}", pauses.len(), detail.stdout))?;
    let stops = safepoints(&detail.stdout)?;
    let gc_stops: Vec<&(String, u64)> = stops.iter().filter(|(op, _)| op.starts_with("MMTk")).collect();
    check(gc_stops.len() as u64 == n && gc_stops.iter().all(|(op, _)| op == "MMTkCollectForAllocation"), || format!("{n} collections, stops {stops:?}"))?;
    let heap_details = detail.stdout.lines().filter(|l| l.contains("][gc,heap") && l.contains("] GC(")).count() as u64;
    check(heap_details == n, || format!("{heap_details} gc+heap detail lines for {n} collections:\n{}", detail.stdout))?;
    check(detail.stdout.contains("][gc,heap") && detail.stdout.contains("] Heap: MMTk Immix"), || format!("no gc+heap start-up line:\n{}", detail.stdout))?;
    if let Some(java) = JavaTools::execute(&["-Xmx64m", "-Xlog:gc+heap+exit", "-version"])? {
        // java's (G1's) exit block: `Heap`, then a heap line the same parser reads.
        let exit: Vec<&str> = java.stdout.lines().filter(|l| l.contains("][gc,heap,exit")).collect();
        let text = |i: usize| exit.get(i).and_then(|l| l.split_once("] ")).map_or("", |(_, t)| t);
        check(text(0) == "Heap" && parse_heap_line(text(1)).is_some(), || format!("java's -Xlog:gc+heap+exit block does not pass the same checks: {exit:?}"))?;
    }
    let reach: Vec<u64> = gc_stops.iter().map(|(_, ns)| *ns).collect();
    println!("with gc+heap+exit: {n} collections counted = {} -Xlog:gc lines = {} stops (reached in {reach:?} ns) = {heap_details} gc+heap lines", pauses.len(), gc_stops.len());

    // StickyImmix: nursery collections are `Pause Young`, as java's young pauses.
    let sticky = run(&["-XX:MMTkPlan=StickyImmix", "-Xmx16m", "-Xlog:gc,gc+heap+exit", "BinaryTrees", "14", "2"])?;
    check(using_line(&sticky.stdout).as_deref() == Some("MMTk StickyImmix"), || format!("no `Using MMTk StickyImmix`:\n{}", sticky.stdout))?;
    let pauses = gc_pauses(&sticky.stdout, true)?;
    let exit = sticky.stdout.lines().find(|l| l.contains("][gc,heap,exit") && l.contains(" collections ")).unwrap_or_default();
    check(exit.contains(&format!(" collections {}, ", pauses.len())), || format!("{} -Xlog:gc lines, exit block {exit:?}", pauses.len()))?;
    let young = pauses.iter().filter(|p| p.kind == "Young").count();
    check(young > 0 && pauses.iter().all(|p| p.kind == "Young" || p.kind == "Full"), || format!("StickyImmix's pauses: {pauses:?}"))?;
    println!("StickyImmix: {} collections, {young} of them Pause Young", pauses.len());
    Ok(())
}
