/*
 * @test id=detail
 * @summary -XX:+PrintNMTStatistics with NativeMemoryTracking=detail prints, at exit, the
 *          summary and HotSpot's "Virtual memory map:" and "Details:" sections, as java does
 * @run driver PrintNMTStatistics detail
 */

/*
 * @test id=off
 * @summary -XX:+PrintNMTStatistics without tracking warns that it is disabled (java's words,
 *          with rtvm's name for the VM) and the VM runs
 * @run driver PrintNMTStatistics off
 */

use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("detail") => {
            let opts = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintNMTStatistics", "-XX:NativeMemoryTracking=detail", "-version"];
            let out = ProcessTools::execute_limited_test_vm(&opts)?;
            let sections = ["Native Memory Tracking:", "Virtual memory map:", "Details:", "Java Heap (reserved="];
            for s in sections {
                check(out.stdout.matches(s).count() == 1, || format!("'{s}' not exactly once in the report:\n{}", out.stdout))?;
            }
            out.should_have_exit_value(0)?;
            out.should_match(r"^\[0x[0-9a-f]{16} - 0x[0-9a-f]{16}\] reserved \d+ for Java Heap")?;
            out.should_match(r"^\[0x[0-9a-f]{16} - 0x[0-9a-f]{16}\] reserved \d+ for Thread Stack")?;
            if let Some(java) = JavaTools::execute(&opts)? {
                for s in sections {
                    java.stdout_should_contain(s)?;
                }
                java.should_have_exit_value(0)?;
            }
            Ok(())
        }
        Some("off") => {
            let opts = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintNMTStatistics", "-version"];
            let out = ProcessTools::execute_limited_test_vm(&opts)?;
            out.should_have_exit_value(0)?
                .stderr_should_contain("warning: PrintNMTStatistics is disabled, because native memory tracking is not enabled")?
                .should_not_contain("Native Memory Tracking:")?;
            if let Some(java) = JavaTools::execute(&opts)? {
                java.should_have_exit_value(0)?
                    .stderr_should_contain("warning: PrintNMTStatistics is disabled, because native memory tracking is not enabled")?;
            }
            Ok(())
        }
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
