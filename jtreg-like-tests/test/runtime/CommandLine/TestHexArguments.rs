/*
 * @test
 * @bug 8123945
 * @summary Numeric flags take hexadecimal values with a 0x or 0X prefix (and a k/m/g/t
 *          suffix), as java does; hex digits without the prefix, or an unknown suffix, are an
 *          improperly specified option. Compared with java where it is installed.
 * @requires vm.flagless
 * @run driver TestHexArguments
 */

use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    for (value, ok) in [
        ("0x100000", true),
        ("0X100000", true),
        ("0x1m", true),
        ("0x1M", true),
        ("1M", true),
        ("1024k", true),
        ("100000h", false),
        ("1D000000", false),
        ("0x", false),
        ("0xg", false),
        ("1q", false),
        ("16777216t", false),
    ] {
        let opt = format!("-XX:PreTouchParallelChunkSize={value}");
        let out = same_as_java(&SideBySide { args: &[&opt, "-version"], env: None, expect: &[] })?;
        if ok {
            out.should_have_exit_value(0)?;
        } else {
            out.should_have_exit_value(1)?.stderr_should_contain(&format!("Improperly specified VM option 'PreTouchParallelChunkSize={value}'"))?;
        }
    }
    // Hex in a signed flag, and -Xmx with hex.
    for args in [&["-XX:ThreadStackSize=0x400", "-version"][..], &["-Xmx0x4000000", "-version"], &["-XX:ActiveProcessorCount=0x2", "-version"]] {
        same_as_java(&SideBySide { args, env: None, expect: &[] })?.should_have_exit_value(0)?;
    }
    Ok(())
}
