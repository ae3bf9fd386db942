/*
 * @test
 * @bug 8005049
 * @summary RTVM_OPTIONS is announced on stderr, applied before the command line, recorded as
 *          {environment}; an unmatched quote is an error
 * @requires vm.flagless
 * @run driver TestEnvironmentOptions
 */

use rtvm_jtreg::testlib::*;

fn with_env(value: &str, args: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    let mut c = ProcessTools::create_limited_test_vm(args);
    c.env("RTVM_OPTIONS", value);
    ProcessTools::execute(c)
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    let out = with_env("-XX:+AlwaysPreTouch -Xmx32m", &["-XX:+PrintFlagsFinal", "-version"])?;
    out.should_have_exit_value(0)?
        .stderr_should_contain("Picked up RTVM_OPTIONS: -XX:+AlwaysPreTouch -Xmx32m\n")?
        .should_match("bool AlwaysPreTouch += true .*\\{environment\\}")?
        // -X sizes always record {command line}, as in HotSpot.
        .should_match("size_t MaxHeapSize += 33554432 .*\\{command line\\}")?;
    // The command line comes after the environment: it wins.
    with_env("-Xmx32m", &["-Xmx64m", "-XX:+PrintCommandLineFlags", "-version"])?.stdout_should_contain("-XX:MaxHeapSize=67108864 ")?;
    // A bad option in the environment stops the VM like one on the command line.
    with_env("-XX:+NoSuchFlag", &["-version"])?
        .stderr_should_contain("Picked up RTVM_OPTIONS: -XX:+NoSuchFlag")?
        .stderr_should_contain("Unrecognized VM option 'NoSuchFlag'")?
        .should_have_exit_value(1)?;
    with_env("\"-Xmx16m", &["-version"])?
        .stderr_should_contain("Unmatched quote in RTVM_OPTIONS")?
        .should_have_exit_value(1)?;
    // Quotes group an option with spaces.
    with_env("'-XX:NativeMemoryTracking=summary'", &["-XX:+PrintCommandLineFlags", "-version"])?
        .stdout_should_contain("-XX:NativeMemoryTracking=summary ")?
        .should_have_exit_value(0)?;
    // Set but empty, or blank: announced all the same, as java announces JAVA_TOOL_OPTIONS.
    for value in ["", "   "] {
        with_env(value, &["-version"])?
            .stderr_should_contain(&format!("Picked up RTVM_OPTIONS: {value}\n"))?
            .should_have_exit_value(0)?;
        let mut java = std::process::Command::new("java");
        java.arg("-version").env("JAVA_TOOL_OPTIONS", value);
        if JavaTools::available() {
            ProcessTools::execute(java)?.stderr_should_contain(&format!("Picked up JAVA_TOOL_OPTIONS: {value}\n"))?;
        }
    }
    // -version belongs to the launcher: in the variable it is an unrecognized option, as java says.
    with_env("-version", &["-Xmx64m", "-version"])?
        .stderr_should_contain("Unrecognized option: -version")?
        .should_have_exit_value(1)?;
    Ok(())
}
