/*
 * @test
 * @bug 8027314
 * @summary Locked diagnostic and experimental flags need their unlock option first
 * @requires vm.flagless
 * @run driver VMOptionWarning
 */

use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    for (flag, kind, unlock) in [
        ("PrintNMTStatistics", "diagnostic", "UnlockDiagnosticVMOptions"),
        ("DisableTHPStackMitigation", "diagnostic", "UnlockDiagnosticVMOptions"),
        ("UseMadvPopulateWrite", "diagnostic", "UnlockDiagnosticVMOptions"),
        ("BackgroundPreTouch", "experimental", "UnlockExperimentalVMOptions"),
    ] {
        let expected = format!(
            "Error: VM option '{flag}' is {kind} and must be enabled via -XX:+{unlock}.\nError: The unlock option must precede '{flag}'."
        );
        ProcessTools::execute_limited_test_vm(&[&format!("-XX:+{flag}"), "-version"])?
            .stderr_should_contain(&expected)?
            .should_have_exit_value(1)?;
        // The unlock option after the flag is too late.
        ProcessTools::execute_limited_test_vm(&[&format!("-XX:+{flag}"), &format!("-XX:+{unlock}"), "-version"])?
            .stderr_should_contain(&expected)?
            .should_have_exit_value(1)?;
        // Before it, the flag is accepted (BackgroundPreTouch also needs AlwaysPreTouch).
        ProcessTools::execute_limited_test_vm(&[
            &format!("-XX:+{unlock}"),
            &format!("-XX:-{flag}"),
            "-XX:+PrintFlagsFinal",
            "-version",
        ])?
        .should_have_exit_value(0)?
        .should_match(&format!("bool {flag} += false +\\{{{kind}\\}} \\{{command line\\}}"))?;
    }
    // Even IgnoreUnrecognizedVMOptions does not unlock anything.
    ProcessTools::execute_limited_test_vm(&["-XX:+IgnoreUnrecognizedVMOptions", "-XX:+PrintNMTStatistics", "-version"])?
        .should_have_exit_value(1)?;
    Ok(())
}
