/*
 * @test
 * @bug 8006298 8204055
 * @summary Using an unrecognized VM option should print the name of the option
 *          (and, for HotSpot's name of the stack-mitigation flag, point at rtvm's)
 * @run driver UnrecognizedVMOption
 */

use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    for option in ["", "bogus_option", "+bogus_option", "bogus_option=1"] {
        let shown = option.trim_start_matches('+');
        ProcessTools::execute_limited_test_vm(&[&format!("-XX:{option}"), "-version"])?
            .should_contain(&format!("Unrecognized VM option '{shown}'"))?
            .should_contain("Error: Could not create the virtual machine.")?
            .should_have_exit_value(1)?;
    }
    ProcessTools::execute_limited_test_vm(&["-Xbogus", "-version"])?
        .stderr_should_contain("Unrecognized option: -Xbogus")?
        .should_have_exit_value(1)?;
    // HotSpot 17's name for the mitigation flag gets a suggestion, without a newline.
    ProcessTools::execute_limited_test_vm(&["-XX:-THPStackMitigation", "-version"])?
        .stderr_should_contain(
            "Unrecognized VM option 'THPStackMitigation'\nDid you mean '(+/-)DisableTHPStackMitigation'? Error: Could not create the virtual machine.",
        )?
        .should_have_exit_value(1)?;
    // A commented-out option is reported and ignored.
    ProcessTools::execute_limited_test_vm(&["-XX:#+bogus_option", "-version"])?
        .stderr_should_contain("Unrecognized VM option '#+bogus_option'")?
        .should_have_exit_value(0)?;
    Ok(())
}
