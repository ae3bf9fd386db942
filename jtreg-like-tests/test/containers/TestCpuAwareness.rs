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

use rtvm_jtreg::cgroup::CpuCgroup;
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

/// The os+container messages logged before gc+init's first line, and gc+init's CPUs line.
fn seen(out: &OutputAnalyzer) -> (Vec<String>, String) {
    let re = regex::Regex::new(r"^\[[^\]]*\]\[\w+ *\]\[([a-z,]+) *\] (.*)$").expect("a valid pattern");
    let (mut lines, mut cpus, mut in_init) = (Vec::new(), String::new(), false);
    for l in out.stdout.lines() {
        let Some(c) = re.captures(l) else { continue };
        match &c[1] {
            "os,container" if !in_init => lines.push(c[2].to_owned()),
            "gc,init" => {
                in_init = true;
                if c[2].starts_with("CPUs:") {
                    cpus = c[2].to_owned();
                }
            }
            _ => {}
        }
    }
    (lines, cpus)
}

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
        let run = |program: &str| -> Result<(Vec<String>, String), TestFailure> {
            let out = ProcessTools::execute(cgroup.command(program, &args))?;
            out.should_have_exit_value(0)?;
            Ok(seen(&out))
        };
        let (ours, ours_cpus) = run(&vm)?;
        let (java, java_cpus) = run("java")?;
        check(ours == java, || {
            let mut diff = String::new();
            for i in 0..ours.len().max(java.len()) {
                let (a, b) = (ours.get(i).map_or("", String::as_str), java.get(i).map_or("", String::as_str));
                diff.push_str(&format!("{} rtvm: {a}\n  java: {b}\n", if a == b { " " } else { "*" }));
            }
            format!("{name} ({:?} cgroup {}): os+container lines differ from java's:\n{diff}", cgroup.version(), cgroup.dir().display())
        })?;
        check(!ours_cpus.is_empty() && ours_cpus == java_cpus, || format!("{name}: gc+init: rtvm '{ours_cpus}', java '{java_cpus}'"))?;
        println!("{name} ({:?}): {} os+container lines, '{ours_cpus}' — as java", cgroup.version(), ours.len());
    }
    Ok(())
}
