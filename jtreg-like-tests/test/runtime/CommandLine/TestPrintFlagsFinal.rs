/*
 * @test
 * @bug 7022456
 * @summary -XX:+PrintFlagsFinal, -XX:+PrintFlagsInitial, -XX:+PrintFlagsRanges and
 *          -XX:+PrintCommandLineFlags print in HotSpot's layout, sorted, locked flags hidden;
 *          PrintCommandLineFlags' heap sizes are java's (before alignment, before the checks)
 * @requires vm.flagless
 * @run driver TestPrintFlagsFinal
 */

use rtvm_jtreg::testlib::*;

fn names(stdout: &str) -> Vec<String> {
    stdout.lines().skip(1).filter_map(|l| l.get(10..)?.split_whitespace().next().map(str::to_owned)).collect()
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    let out = ProcessTools::execute_limited_test_vm(&["-Xmx64m", "-XX:+PrintFlagsFinal", "-version"])?;
    out.should_have_exit_value(0)?.stdout_should_contain("[Global flags]\n")?;
    let listed = names(&out.stdout);
    let mut sorted = listed.clone();
    sorted.sort();
    check(listed == sorted, || format!("not sorted: {listed:?}"))?;
    check(!listed.iter().any(|n| n == "DisableTHPStackMitigation"), || "a locked flag is listed".into())?;
    let mut shifted = 0;
    for line in out.stdout.lines().skip(1) {
        check(line.find(" = ") == Some(50), || format!("' = ' not at column 50: {line}"))?;
        let kind_end = line.rfind("} {").map(|i| i + 1).ok_or_else(|| TestFailure(format!("no kind braces: {line}")))?;
        let kind_start = line[..kind_end].rfind('{').ok_or_else(|| TestFailure(format!("no kind: {line}")))?;
        let value = line[53..kind_start].trim_end();
        if value.len() <= 40 {
            // The kind column is right-aligned to end at column 104.
            check(kind_end == 104, || format!("kind braces end at column {kind_end}, not 104: {line}"))?;
        } else {
            // A value wider than its column pushes the kind right, one space after it.
            check(kind_start == 53 + value.len() + 1, || format!("kind not one space after a long value: {line}"))?;
            shifted += 1;
        }
    }
    println!("kind column checked on every line ({shifted} pushed right by a long value)");
    out.stdout_should_contain("   size_t MaxHeapSize                              = 67108864                                  {product} {command line}")?
        .stdout_should_contain("   size_t PreTouchParallelChunkSize                = 4194304                                {pd product} {default}")?
        .should_match("size_t InitialHeapSize += [0-9]+ +\\{product\\} \\{ergonomic\\}")?;

    let unlocked = ProcessTools::execute_limited_test_vm(&[
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+UnlockExperimentalVMOptions",
        "-XX:+PrintFlagsFinal",
        "-version",
    ])?;
    unlocked
        .should_match("bool DisableTHPStackMitigation += false +\\{diagnostic\\} \\{default\\}")?
        .should_match("bool BackgroundPreTouch += false +\\{experimental\\} \\{default\\}")?
        .should_match("bool UnlockDiagnosticVMOptions += true +\\{diagnostic\\} \\{command line\\}")?;
    check(names(&unlocked.stdout).len() > listed.len(), || "unlocking shows no more flags".into())?;

    // The table's defaults, as HotSpot 17 prints them (MaxHeapSize and NewSize scaled for a
    // 64-bit word: 96M and 1M × 1.3); the same lines as java's where it runs.
    let initial = ProcessTools::execute_limited_test_vm(&["-XX:+PrintFlagsInitial"])?;
    let expected = [
        "size_t MaxHeapSize += 130862280 +\\{product\\} \\{default\\}",
        "size_t NewSize += 1363144 +\\{product\\} \\{default\\}",
        "size_t InitialHeapSize += 0 +\\{product\\} \\{default\\}",
        "uint ParallelGCThreads += 0 +\\{product\\} \\{default\\}",
    ];
    initial.should_have_exit_value(0)?;
    let java_initial = JavaTools::execute(&["-XX:+PrintFlagsInitial"])?;
    for e in expected {
        initial.should_match(e)?;
        if let Some(j) = &java_initial {
            j.should_match(e)?;
        }
    }
    // Unlocked diagnostic flags are not listed by PrintFlagsInitial (java: neither).
    ProcessTools::execute_limited_test_vm(&["-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintFlagsInitial"])?
        .should_not_contain("{diagnostic}")?;

    let ranges = ProcessTools::execute_limited_test_vm(&["-XX:+PrintFlagsRanges", "-version"])?;
    ranges
        .stdout_should_contain("[Global flags ranges]\n")?
        .stdout_should_contain("   size_t PreTouchParallelChunkSize                          [ 4096                      ...       9223372036854775807 ]                         {pd product} {default}")?
        .stdout_should_contain("      int ActiveProcessorCount                               [                           ...                           ]                            {product} {default}")?
        .should_not_contain(" bool ")?;

    ProcessTools::execute_limited_test_vm(&["-XX:+AlwaysPreTouch", "-Xmx64m", "-XX:+PrintCommandLineFlags", "-version"])?
        .should_match("^-XX:\\+AlwaysPreTouch -XX:InitialHeapSize=[0-9]+ -XX:MaxHeapSize=67108864 -XX:MinHeapSize=[0-9]+ -XX:\\+PrintCommandLineFlags $")?;

    // PrintCommandLineFlags shows the heap sizes as java does: set from memory, before the
    // collector aligns them, and before a failing check (which follows the printed line).
    let heap_flags = |out: &OutputAnalyzer| -> Vec<String> {
        out.stdout.split_whitespace().filter(|t| ["-XX:InitialHeapSize=", "-XX:MaxHeapSize=", "-XX:MinHeapSize="].iter().any(|p| t.starts_with(p))).map(str::to_owned).collect()
    };
    for case in [&[][..], &["-Xmx3m", "-Xms1m"], &["-Xmx1m"], &["-XX:MaxRAMPercentage=10"], &["-Xss1k"], &["-XX:InitialHeapSize=100m"]] {
        let mut args = case.to_vec();
        args.extend(["-XX:+PrintCommandLineFlags", "-version"]);
        let ours = ProcessTools::execute_limited_test_vm(&args)?;
        check(heap_flags(&ours).len() == 3, || format!("{case:?}: no heap sizes in {}", ours.stdout))?;
        if let Some(java) = JavaTools::execute(&args)? {
            check(heap_flags(&ours) == heap_flags(&java) && ours.exit == java.exit, || format!("{case:?}: rtvm {:?} (exit {}), java {:?} (exit {})", heap_flags(&ours), ours.exit, heap_flags(&java), java.exit))?;
        }
    }
    Ok(())
}
