/*
 * @test
 * @bug 8146115 8197867 8281181
 * @summary In real cpu cgroups (children of the machine's cpu controller, created by the test
 *          where root allows and removed on every exit path), rtvm counts the CPUs as java 17
 *          does: for quotas of half a CPU, one and a half, more than the machine has and none,
 *          a period other than the default, with -XX:ActiveProcessorCount and with
 *          -XX:-UseContainerSupport, the os+container lines up to gc+init and gc+init's
 *          `CPUs: N total, M available` line are java's, run in the same cgroup
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestCpuAwareness
 */

use rtvm_jtreg::cgroup::{CpuCgroup, Detection};
use rtvm_jtreg::testlib::*;

/// (name, quota, period, options)
const CASES: [(&str, Option<u64>, u64, &[&str]); 7] = [
    ("half a CPU", Some(50_000), 100_000, &[]),
    ("one and a half CPUs", Some(150_000), 100_000, &[]),
    ("more CPUs than the machine has", Some(800_000), 100_000, &[]),
    ("no quota", None, 100_000, &[]),
    ("a 50 ms period", Some(75_000), 50_000, &[]),
    ("-XX:ActiveProcessorCount=2 over half a CPU", Some(50_000), 100_000, &["-XX:ActiveProcessorCount=2"]),
    ("-XX:-UseContainerSupport", Some(50_000), 100_000, &["-XX:-UseContainerSupport"]),
];

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    if !JavaTools::available() {
        return require_tool("java", false);
    }
    let vm = test_vm();
    for (name, quota, period, options) in CASES {
        let cgroup = match CpuCgroup::create(quota, period) {
            Ok(c) => c,
            Err(reason) => return skip(reason),
        };
        let mut args = vec!["-Xlog:os+container=trace,gc+init"];
        args.extend_from_slice(options);
        args.push("-version");
        let run = |program: &str| -> Result<Detection, TestFailure> {
            let out = ProcessTools::execute(cgroup.command(program, &args))?;
            out.should_have_exit_value(0)?;
            Ok(Detection::from_stdout(&out.stdout))
        };
        let (ours, java) = (run(&vm)?, run("java")?);
        check(ours.lines == java.lines, || format!("{name} ({:?} cgroup {}): os+container lines differ from java's:\n{}", cgroup.version(), cgroup.dir().display(), ours.diff(&java)))?;
        check(!ours.cpus.is_empty() && ours.cpus == java.cpus, || format!("{name}: gc+init: rtvm '{}', java '{}'", ours.cpus, java.cpus))?;
        println!("{name} ({:?}): {} os+container lines, '{}' — as java", cgroup.version(), ours.lines.len(), ours.cpus);
    }
    Ok(())
}
