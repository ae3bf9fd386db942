/*
 * @test
 * @bug 8061999 8135195
 * @summary -XX:VMOptionsFile splices a file's options where it stands; -XX:Flags reads bare
 *          settings; errors are HotSpot's
 * @requires vm.flagless
 * @run driver TestVMOptionsFile
 */

use rtvm_jtreg::testlib::*;

fn write(name: &str, text: &str) -> Result<String, TestFailure> {
    std::fs::write(name, text).map_err(|e| TestFailure(format!("cannot write {name}: {e}")))?;
    Ok(std::fs::canonicalize(name).map_err(|e| TestFailure(e.to_string()))?.display().to_string())
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    let opts = write("options.txt", "-Xmx48m\n  \"-XX:+AlwaysPreTouch\" -XX:PreTouchParallelChunkSize=64k\n")?;
    let arg = format!("-XX:VMOptionsFile={opts}");
    let out = ProcessTools::execute_limited_test_vm(&[&arg, "-XX:+PrintFlagsFinal", "-version"])?;
    out.should_have_exit_value(0)?
        .should_match("size_t MaxHeapSize += 50331648 .*\\{command line\\}")?
        .should_match("bool AlwaysPreTouch += true .*\\{command line\\}")?
        .should_match("size_t PreTouchParallelChunkSize += 65536 ")?;
    // Options after the file override it; options before are overridden by it.
    ProcessTools::execute_limited_test_vm(&["-Xmx32m", &arg, "-XX:+PrintCommandLineFlags", "-version"])?
        .stdout_should_contain("-XX:MaxHeapSize=50331648 ")?;
    ProcessTools::execute_limited_test_vm(&[&arg, "-Xmx32m", "-XX:+PrintCommandLineFlags", "-version"])?
        .stdout_should_contain("-XX:MaxHeapSize=33554432 ")?;

    ProcessTools::execute_limited_test_vm(&["-XX:VMOptionsFile=does-not-exist.txt", "-version"])?
        .stderr_should_contain("Could not open options file 'does-not-exist.txt'")?
        .should_have_exit_value(1)?;
    let nested = write("nested.txt", &format!("{arg}\n"))?;
    let outer = format!("-XX:VMOptionsFile={nested}");
    ProcessTools::execute_limited_test_vm(&[&outer, "-version"])?
        .stderr_should_contain(&format!(
            "A VM options file may not refer to a VM options file. Specification of '-XX:VMOptionsFile=<file-name>' in the options file '{outer}' in options container 'cmd_line_args' is an error."
        ))?
        .should_have_exit_value(1)?;
    let unmatched = write("unmatched.txt", "-Xmx64m \"-XX:+AlwaysPreTouch\n")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:VMOptionsFile={unmatched}"), "-version"])?
        .stderr_should_contain(&format!("Unmatched quote in {unmatched}"))?
        .should_have_exit_value(1)?;
    let bad = write("bad-option.txt", "-XX:+NoSuchFlag\n")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:VMOptionsFile={bad}"), "-version"])?
        .stderr_should_contain("Unrecognized VM option 'NoSuchFlag'")?
        .should_have_exit_value(1)?;

    // -XX:Flags: bare settings, comments, origin {config file}; the command line wins.
    let flags = write("settings.txt", "# settings\n+AlwaysPreTouch\nMaxHeapSize=40m # trailing\n")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:Flags={flags}"), "-XX:+PrintFlagsFinal", "-version"])?
        .should_have_exit_value(0)?
        .should_match("bool AlwaysPreTouch += true .*\\{config file\\}")?
        .should_match("size_t MaxHeapSize += 41943040 .*\\{config file\\}")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:Flags={flags}"), "-Xmx24m", "-XX:+PrintCommandLineFlags", "-version"])?
        .stdout_should_contain("-XX:MaxHeapSize=25165824 ")?;
    ProcessTools::execute_limited_test_vm(&["-XX:Flags=does-not-exist.txt", "-version"])?
        .stderr_should_contain("Could not open settings file does-not-exist.txt")?
        .should_have_exit_value(1)?;
    let dashed = write("dashed.txt", "-XX:+AlwaysPreTouch\n")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:Flags={dashed}"), "-version"])?
        .stderr_should_contain("Unrecognized VM option 'XX:+AlwaysPreTouch'")?
        .should_have_exit_value(1)?;
    Ok(())
}
