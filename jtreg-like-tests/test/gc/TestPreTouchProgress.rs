/*
 * @test
 * @summary With -Xlog:gc+heap=debug a pretouch that runs longer than a second logs its
 *          progress, at most once a second; a shorter one logs none
 * @requires os.family == "linux" & os.maxMemory > 8G
 * @run driver TestPreTouchProgress
 */

use rtvm_jtreg::testlib::*;

fn seconds(line: &str) -> Option<f64> {
    line.strip_prefix('[')?.split("s]").next()?.parse().ok()
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    // One worker and the touching fallback make the pretouch of 2 GiB take about a second or
    // more here; the checks hold either way.
    let out = ProcessTools::execute_limited_test_vm(&[
        "-Xms2g",
        "-Xmx2g",
        "-XX:+AlwaysPreTouch",
        "-XX:ParallelGCThreads=1",
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:-UseMadvPopulateWrite",
        "-Xlog:gc+heap=debug",
        "-version",
    ])?;
    out.should_have_exit_value(0)?;
    let done = out.first_match("Pretouched 2147483648B in ")?.ok_or_else(|| TestFailure("no completion line".into()))?;
    let took: f64 = done
        .split("Pretouched 2147483648B in ")
        .nth(1)
        .and_then(|r| r.split('s').next()?.parse().ok())
        .ok_or_else(|| TestFailure(format!("cannot read the time in: {done}")))?;
    let stamps: Vec<f64> = out.stdout.lines().filter(|l| l.contains("] PreTouch progress: ")).filter_map(seconds).collect();
    println!("pretouch took {took:.3}s; {} progress lines at {stamps:?}", stamps.len());
    check(stamps.len() as f64 <= took.floor(), || format!("{} progress lines for {took:.3}s", stamps.len()))?;
    for w in stamps.windows(2) {
        check(w[1] - w[0] >= 0.95, || format!("progress lines {:.3}s apart", w[1] - w[0]))?;
    }
    if took >= 1.5 {
        check(!stamps.is_empty(), || format!("no progress logged in a {took:.3}s pretouch"))?;
    }
    if took < 1.0 {
        check(stamps.is_empty(), || "progress logged for a pretouch under a second".into())?;
    }
    out.should_match("\\[debug\\]\\[gc,heap *\\] PreTouch progress: [0-9]+B of 2147483648B \\([0-9]+%\\) after [0-9.]+s").or_else(|e| if stamps.is_empty() { Ok(&out) } else { Err(e) })?;
    Ok(())
}
