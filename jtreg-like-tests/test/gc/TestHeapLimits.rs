/*
 * @test id=reserve
 * @summary An -Xmx that cannot be reserved under a low RLIMIT_AS gives HotSpot's message
 *          and exit 1
 * @requires os.family == "linux"
 * @run driver TestHeapLimits reserve
 */

/*
 * @test id=commit
 * @summary An -Xms that cannot be committed under a low RLIMIT_DATA gives HotSpot's
 *          out-of-memory report: its INFO warning with the commit error on stderr, "There is
 *          insufficient memory ..." on stdout, exit 1
 * @requires os.family == "linux"
 * @run driver TestHeapLimits commit
 */

use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("reserve") => {
            ProcessTools::execute_with_rlimits("as=2g", &["-Xmx4g", "-version"])?
                .should_have_exit_value(1)?
                .stdout_should_contain("Error occurred during initialization of VM\nCould not reserve enough space for 4194304KB object heap\n")?
                .should_not_contain("panicked")?;
            Ok(())
        }
        Some("commit") => {
            let out = ProcessTools::execute_with_rlimits("data=256m", &["-Xms512m", "-Xmx1g", "-version"])?;
            out.should_have_exit_value(1)?
                .stdout_should_contain("#\n# There is insufficient memory for the rtvm Runtime Environment to continue.\n# Native memory allocation (mmap) failed to map 536870912 bytes. Error detail: committing reserved memory.\n")?;
            check(regex::Regex::new("^rtvm warning: INFO: os::commit_memory\\(0x[0-9a-f]+, 536870912, 0\\) failed; error='Not enough space' \\(errno=12\\)\n$").expect("a valid pattern").is_match(&out.stderr), || format!("HotSpot's INFO warning alone on stderr: {:?}", out.stderr))?;
            Ok(())
        }
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
