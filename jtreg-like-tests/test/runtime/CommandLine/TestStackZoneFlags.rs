/*
 * @test
 * @summary HotSpot 17's stack zone flags — StackRedPages [1..3], StackYellowPages [2..7],
 *          StackReservedPages [0..11], StackShadowPages [10..50], intx, pages of 4K — at min,
 *          max, min-1 and max+1 behave as in java: the bounds start a VM, the values outside
 *          are refused with the same range message and exit 1; PrintFlagsFinal prints them as
 *          java does; the minimum -Xss grows with the zones, with java's message and figure
 * @requires vm.flagless
 * @run driver TestStackZoneFlags
 */

use rtvm_jtreg::testlib::*;

const ZONES: [(&str, i64, i64, i64); 4] = [
    // name, min, max, default
    ("StackRedPages", 1, 3, 1),
    ("StackYellowPages", 2, 7, 2),
    ("StackReservedPages", 0, 11, 1),
    ("StackShadowPages", 10, 50, 20),
];

/// The same arguments through the test VM and java: same exit status, same first lines.
fn compare(args: &[&str], status: i32, lines: &[String]) -> TestResult {
    let ours = ProcessTools::execute_limited_test_vm(args)?;
    ours.should_have_exit_value(status)?;
    for l in lines {
        ours.should_contain(l)?;
    }
    if let Some(theirs) = JavaTools::execute(args)? {
        theirs.should_have_exit_value(status)?;
        for l in lines {
            theirs.should_contain(l)?;
        }
    }
    Ok(())
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    for (name, min, max, _) in ZONES {
        for v in [min, max] {
            compare(&[&format!("-XX:{name}={v}"), "-version"], 0, &[])?;
        }
        for v in [min - 1, max + 1] {
            let range = format!("intx {name}={v} is outside the allowed range [ {min} ... {max} ]");
            let improper = format!("Improperly specified VM option '{name}={v}'");
            compare(&[&format!("-XX:{name}={v}"), "-version"], 1, &[range, improper])?;
        }
    }
    // PrintFlagsFinal: type, default, kind — as java prints them ({pd product} on x86_64).
    let out = ProcessTools::execute_limited_test_vm(&["-XX:+PrintFlagsFinal", "-version"])?;
    let java = JavaTools::execute(&["-XX:+PrintFlagsFinal", "-version"])?;
    for (name, _, _, default) in ZONES {
        let pattern = format!(" +intx {name} += {default} +\\{{pd product\\}} \\{{default\\}}");
        out.should_match(&pattern)?;
        if let Some(java) = &java {
            java.should_match(&pattern)?;
        }
    }
    // The minimum Java stack size follows the zones: guard + shadow zone + what the VM needs.
    for (args, at_least) in [
        (&["-XX:StackYellowPages=7", "-Xss100k"][..], 156),
        (&["-XX:StackShadowPages=50", "-Xss100k"][..], 256),
        (&["-Xss100k"][..], 136),
    ] {
        let mut all = args.to_vec();
        all.push("-version");
        let line = format!("The Java thread stack size specified is too small. Specify at least {at_least}k");
        compare(&all, 1, &[line])?;
    }
    println!("4 zone flags at min, max, min-1, max+1, their PrintFlagsFinal lines and 3 minimum stack sizes: as java");
    Ok(())
}
