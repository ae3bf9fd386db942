/*
 * @test
 * @bug 8146879
 * @summary -Xlog: selections, outputs, decorators, help, and HotSpot's error messages
 * @requires vm.flagless
 * @run driver TestXlogOptions
 */

use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    for (opt, detail) in [
        ("-Xlog:foo", "Invalid tag 'foo' in log selection."),
        ("-Xlog:gc=bar", "Invalid level 'bar' in log selection."),
        ("-Xlog:gc::bogus", "Invalid decorator 'bogus'."),
    ] {
        ProcessTools::execute_limited_test_vm(&[opt, "-version"])?
            .stdout_should_contain(&format!("][error][logging] {detail}"))?
            .stderr_should_contain(&format!("Invalid -Xlog option '{opt}', see error log for details."))?
            .should_have_exit_value(1)?;
    }
    ProcessTools::execute_limited_test_vm(&["-Xlog:gc+pagesize", "-version"])?
        .should_have_exit_value(0)?
        .stdout_should_contain("][warning][logging] No tag set matches selection: gc+pagesize. Did you mean any of the following?")?;
    ProcessTools::execute_limited_test_vm(&["-Xlog:help"])?
        .should_have_exit_value(0)?
        .stdout_should_contain("-Xlog Usage: -Xlog[:[selections][:[output][:[decorators][:output-options]]]]")?;

    // Exact tag sets: os+thread lines are not selected by 'os', and are by 'os*'.
    let exact = ProcessTools::execute_limited_test_vm(&["-Xlog:os", "IdleThreads", "2"])?;
    exact.should_have_exit_value(0)?.should_not_contain("[os,thread]")?;
    let wild = ProcessTools::execute_limited_test_vm(&["-Xlog:os*", "IdleThreads", "2"])?;
    wild.should_have_exit_value(0)?.should_match("\\[info *\\]\\[os,thread *\\] Thread \"Idle#1\" started")?;

    // Decorators print in HotSpot's fixed order, whatever order they are given in.
    ProcessTools::execute_limited_test_vm(&["-Xlog:pagesize::tags,level,uptimemillis", "-version"])?
        .should_match("^\\[[0-9]+ms\\]\\[info\\]\\[pagesize\\] Transparent hugepage \\(THP\\) support:$")?;
    ProcessTools::execute_limited_test_vm(&["-Xlog:pagesize::none", "-version"])?
        .should_match("^  THP mode: (always|madvise|never|unknown)$")?;
    // Levels pad to the widest seen so far.
    ProcessTools::execute_limited_test_vm(&["-Xlog:gc+heap=debug,pagesize", "-Xms8m", "-Xmx8m", "-XX:+AlwaysPreTouch", "-version"])?
        .should_match("^\\[[0-9.]+s\\]\\[debug\\]\\[gc,heap *\\] Running PreTouch task")?
        .should_match("^\\[[0-9.]+s\\]\\[info \\]\\[gc,heap *\\] Pretouched 8388608B in")?;
    // -Xlog:disable silences even warnings; outputs can be files.
    ProcessTools::execute_limited_test_vm(&["-Xlog:disable", "-Xlog:gc+pagesize", "-version"])?
        .should_not_contain("No tag set matches")?;
    ProcessTools::execute_limited_test_vm(&["-Xlog:pagesize:file=pagesize.log", "-version"])?.should_have_exit_value(0)?;
    let log = std::fs::read_to_string("pagesize.log").map_err(|e| TestFailure(format!("pagesize.log: {e}")))?;
    check(log.contains("][info][pagesize] JVM will attempt to prevent THPs in thread stacks."), || log.clone())?;
    // -Xlog:disable then a selection on stderr: only that tag set, only there.
    ProcessTools::execute_limited_test_vm(&["-Xlog:disable", "-Xlog:gc+heap:stderr", "-Xms8m", "-Xmx8m", "-XX:+AlwaysPreTouch", "-version"])?
        .stderr_should_contain("][info][gc,heap] Pretouched 8388608B")?
        .should_not_contain("[pagesize]")?;
    Ok(())
}
