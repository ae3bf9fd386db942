/*
 * @test
 * @bug 8146115 8196595 8230305
 * @summary In a memory cgroup limited to 512 MB (created by the test where the machine allows
 *          it — root and a writable cgroup filesystem — and removed on every exit path), rtvm
 *          sizes the heap as java 17 does: MaxHeapSize, InitialHeapSize and MinHeapSize of
 *          -XX:+PrintFlagsFinal equal java's, run in the same cgroup, with no flags,
 *          -XX:MaxRAMPercentage=50, -XX:InitialRAMPercentage=10 and -XX:-UseContainerSupport,
 *          and the os+container lines rtvm logs are java's, in java's order. In a 256 MB cgroup
 *          -XX:+AlwaysPreTouch -XX:InitialRAMPercentage=50 starts with java's sizes, and the cgroup's
 *          peak charge shows the pretouched heap inside the limit
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestMemoryAwareness
 */

use rtvm_jtreg::testlib::*;

const MB: u64 = 1 << 20;

/// java 17's figures in a 512 MB cgroup (they depend on the limit only), for when java is not
/// installed: (Max, Initial, Min).
const RECORDED: [(&str, (u64, u64, u64)); 3] = [
    ("", (128 * MB, 8 * MB, 8 * MB)),
    ("-XX:MaxRAMPercentage=50", (256 * MB, 8 * MB, 8 * MB)),
    ("-XX:InitialRAMPercentage=10", (128 * MB, 52 * MB, 8 * MB)),
];

fn run_in(cgroup: &MemoryCgroup, program: &str, args: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    let out = ProcessTools::execute(cgroup.command(program, args))?;
    out.should_have_exit_value(0)?;
    Ok(out)
}

/// (MaxHeapSize, InitialHeapSize, MinHeapSize) from -XX:+PrintFlagsFinal.
fn heap_sizes(out: &OutputAnalyzer) -> Result<(u64, u64, u64), TestFailure> {
    let value = |name: &str| -> Result<u64, TestFailure> {
        let line = out
            .first_match(&format!(r"^ *size_t {name} += \d+"))?
            .ok_or_else(|| TestFailure(format!("{name} is not in -XX:+PrintFlagsFinal")))?;
        line.split('=').nth(1).and_then(|v| v.split_whitespace().next()?.parse().ok()).ok_or_else(|| TestFailure(format!("no value in '{line}'")))
    };
    Ok((value("MaxHeapSize")?, value("InitialHeapSize")?, value("MinHeapSize")?))
}

/// The text of each `os+container` line, without decorations.
fn container_lines(out: &OutputAnalyzer) -> Vec<String> {
    let re = regex::Regex::new(r"^\[[^\]]*\]\[\w+ *\]\[os,container *\] (.*)$").expect("a valid pattern");
    out.stdout.lines().filter_map(|l| re.captures(l).map(|c| c[1].to_owned())).collect()
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    let cgroup = match MemoryCgroup::create(512 * MB) {
        Ok(c) => c,
        Err(reason) => return skip(format!("no memory cgroup for the test: {reason}")),
    };
    println!("cgroup {} ({:?}), limit 512 MB", cgroup.dir().display(), cgroup.version());
    let vm = test_vm();
    for case in ["", "-XX:MaxRAMPercentage=50", "-XX:InitialRAMPercentage=10", "-XX:-UseContainerSupport"] {
        let mut args: Vec<&str> = case.split_whitespace().collect();
        args.extend(["-XX:+PrintFlagsFinal", "-version"]);
        let ours = heap_sizes(&run_in(&cgroup, &vm, &args)?)?;
        println!("'{case}': rtvm (Max, Initial, Min) = {ours:?}");
        if let Some((_, recorded)) = RECORDED.iter().find(|(c, _)| *c == case) {
            check(ours == *recorded, || format!("'{case}': rtvm {ours:?}, java 17 in a 512 MB cgroup {recorded:?}"))?;
        } else {
            // Without container support the host's memory counts: more than the limit allows.
            check(ours.0 > 512 * MB || rtvm_os_linux::system::physical_memory().unwrap_or(0) < 2048 * MB, || format!("'{case}': MaxHeapSize {} ignores the host's memory", ours.0))?;
        }
        if JavaTools::available() {
            let java = heap_sizes(&run_in(&cgroup, "java", &args)?)?;
            check(ours == java, || format!("'{case}': rtvm (Max, Initial, Min) = {ours:?}, java {java:?}"))?;
        } else {
            println!("java is not installed here: compared with java 17's recorded figures only");
        }
    }

    // What detection says: java's lines, in java's order (java repeats some later).
    let ours = container_lines(&run_in(&cgroup, &vm, &["-Xlog:os+container=trace", "-version"])?);
    check(ours.iter().any(|l| l == &format!("Memory Limit is: {}", 512 * MB)) || ours.iter().any(|l| l == &format!("Hierarchical Memory Limit is: {}", 512 * MB)), || format!("no 'Memory Limit is: {}' in {ours:#?}", 512 * MB))?;
    if JavaTools::available() {
        let java = container_lines(&run_in(&cgroup, "java", &["-Xlog:os+container=trace", "-version"])?);
        let mut rest = java.iter();
        for line in &ours {
            check(rest.any(|j| j == line), || format!("rtvm's '{line}' is not in java's lines (in order):\n{java:#?}"))?;
        }
    }
    drop(cgroup);

    // Pretouch inside a small container: the heap fits the limit and is charged to it.
    let small = match MemoryCgroup::create(256 * MB) {
        Ok(c) => c,
        Err(reason) => return skip(format!("no second memory cgroup: {reason}")),
    };
    let args = ["-XX:+AlwaysPreTouch", "-XX:InitialRAMPercentage=50", "-XX:+PrintFlagsFinal", "-version"];
    let (max, initial, min) = heap_sizes(&run_in(&small, &vm, &args)?)?;
    // 50% of 256 MB is not "small memory" next to the default MaxHeapSize: java takes that
    // default (aligned, 126 MB), and the initial heap is capped by it.
    let expected = match JavaTools::available() {
        true => heap_sizes(&run_in(&small, "java", &args)?)?,
        false => (126 * MB, 126 * MB, 8 * MB),
    };
    check((max, initial, min) == expected, || format!("256 MB cgroup, InitialRAMPercentage=50: rtvm (Max, Initial, Min) = {:?}, java {expected:?}", (max, initial, min)))?;
    match small.peak_usage() {
        Some(peak) => {
            println!("peak charge of the 256 MB cgroup: {} MB", peak / MB);
            check(peak >= initial && peak < 256 * MB, || format!("peak charge {peak}: the pretouched {initial}-byte heap should be charged, within the limit"))?;
        }
        None => println!("the kernel reports no peak charge for {}: not checked", small.dir().display()),
    }
    Ok(())
}
