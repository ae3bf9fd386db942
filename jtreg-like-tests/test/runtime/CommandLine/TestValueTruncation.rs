/*
 * @test
 * @summary HotSpot 17 reads a number for an int, uint or intx flag as a 64-bit magnitude, casts
 *          it to the flag's width and then applies the sign: values beyond the width wrap
 *          instead of being refused (later JDKs refuse them). PrintFlagsFinal shows the value
 *          java 17 shows; an intx that wraps negative meets the range check with the wrapped
 *          value in the message. Compared with java where it is installed.
 * @requires vm.flagless
 * @run driver TestValueTruncation
 */

use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    // (option, the PrintFlagsFinal line's value)
    for (option, shown) in [
        ("-XX:ActiveProcessorCount=4294967297", "int ActiveProcessorCount += 1 "),
        ("-XX:ActiveProcessorCount=2147483648", "int ActiveProcessorCount += -2147483648 "),
        ("-XX:ActiveProcessorCount=-4294967294", "int ActiveProcessorCount += 2 "),
        ("-XX:ParallelGCThreads=4294967298", "uint ParallelGCThreads += 2 "),
        ("-XX:StackShadowPages=18446744073709551595", ""),
    ] {
        let mut ours = ProcessTools::create_limited_test_vm(&[option, "-XX:+PrintFlagsFinal", "-version"]);
        ours.env_remove("RTVM_OPTIONS");
        let out = ProcessTools::execute(ours)?;
        if shown.is_empty() {
            // 2^64 - 21 as an intx is -21: outside [10 ... 50].
            out.should_have_exit_value(1)?.stderr_should_contain("intx StackShadowPages=-21 is outside the allowed range [ 10 ... 50 ]")?;
        } else {
            out.should_have_exit_value(0)?.stdout_should_contain(shown.split_whitespace().next().unwrap_or(""))?;
            out.should_match(&shown.replace('+', "\\+").replace("\\+=", " +="))?;
        }
        if let Some(java) = JavaTools::execute(&[option, "-XX:+PrintFlagsFinal", "-version"])? {
            if shown.is_empty() {
                java.stderr_should_contain("intx StackShadowPages=-21 is outside the allowed range [ 10 ... 50 ]")?;
            } else {
                java.should_match(&shown.replace('+', "\\+").replace("\\+=", " +="))?;
            }
        }
    }
    // Beyond 64 bits nothing wraps: improperly specified, in both.
    same_as_java(&SideBySide { args: &["-XX:ParallelGCThreads=18446744073709551616", "-version"], env: None, expect: &["Improperly specified VM option 'ParallelGCThreads=18446744073709551616'"] })?;
    Ok(())
}
