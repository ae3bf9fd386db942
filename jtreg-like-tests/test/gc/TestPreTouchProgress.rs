/*
 * @test
 * @summary With -Xlog:gc+heap=debug a pretouch that runs longer than a second logs its
 *          progress, at most once a second, and one that takes less logs none. The long case
 *          is made long by a handshake, not by a slow machine: the background pretouch is held
 *          (-XX:+HoldBackgroundPreTouch) for 1.5 s before it is released, so its first chunk
 *          completes more than a second after it started and must log; the short case is an
 *          8 MB pretouch
 * @requires os.family == "linux"
 * @run driver TestPreTouchProgress
 */

use std::time::Duration;

use rtvm_jtreg::testlib::*;

fn seconds(line: &str) -> Option<f64> {
    line.strip_prefix('[')?.split("s]").next()?.parse().ok()
}

/// The time of the completion line and the uptimes of the progress lines.
fn progress(out: &OutputAnalyzer, bytes: u64) -> Result<(f64, Vec<f64>), TestFailure> {
    let key = format!("Pretouched {bytes}B in ");
    let done = out.first_match(&regex::escape(&key))?.ok_or_else(|| TestFailure(format!("no '{key}' line")))?;
    let took: f64 = done
        .split(&key)
        .nth(1)
        .and_then(|r| r.split('s').next()?.parse().ok())
        .ok_or_else(|| TestFailure(format!("cannot read the time in: {done}")))?;
    let stamps = out.stdout.lines().filter(|l| l.contains("] PreTouch progress: ")).filter_map(seconds).collect();
    Ok((took, stamps))
}

/// At most one line per started second, at least 0.95 s apart.
fn at_most_once_a_second(took: f64, stamps: &[f64]) -> Result<(), TestFailure> {
    check(stamps.len() as f64 <= took.floor(), || format!("{} progress lines for {took:.3}s", stamps.len()))?;
    for w in stamps.windows(2) {
        check(w[1] - w[0] >= 0.95, || format!("progress lines {:.3}s apart", w[1] - w[0]))?;
    }
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("held") {
        // In the child: hold 1.5 s, release, wait for the end.
        std::thread::sleep(Duration::from_millis(1500));
        check(vm.release_pretouch(), || "the pretouch was not held".into())?;
        vm.wait_for_pretouch()?;
        return Ok(());
    }
    let long = ProcessTools::execute_limited_test_vm(&[
        "-Xms256m",
        "-Xmx256m",
        "-XX:+AlwaysPreTouch",
        "-XX:+UnlockExperimentalVMOptions",
        "-XX:+BackgroundPreTouch",
        "-XX:+HoldBackgroundPreTouch",
        "-XX:ParallelGCThreads=1",
        "-Xlog:gc+heap=debug",
        "TestPreTouchProgress",
        "held",
    ])?;
    long.should_have_exit_value(0)?;
    let (took, stamps) = progress(&long, 256 << 20)?;
    println!("held pretouch took {took:.3}s; progress lines at {stamps:?}");
    check(took >= 1.5, || format!("a pretouch held for 1.5 s reports {took:.3}s"))?;
    check(!stamps.is_empty(), || format!("no progress logged in a {took:.3}s pretouch"))?;
    check(stamps[0] >= 1.0, || format!("the first progress line came at {:.3}s, before a second had passed", stamps[0]))?;
    at_most_once_a_second(took, &stamps)?;
    long.should_match("\\[debug\\]\\[gc,heap *\\] PreTouch progress: [0-9]+B of 268435456B \\([0-9]+%\\) after [0-9.]+s")?;

    let short = ProcessTools::execute_limited_test_vm(&["-Xms8m", "-Xmx8m", "-XX:+AlwaysPreTouch", "-Xlog:gc+heap=debug", "-version"])?;
    short.should_have_exit_value(0)?;
    let (took, stamps) = progress(&short, 8 << 20)?;
    println!("8 MB pretouch took {took:.3}s; progress lines at {stamps:?}");
    if took < 1.0 {
        check(stamps.is_empty(), || format!("progress logged for a {took:.3}s pretouch"))?;
    } else {
        println!("the 8 MB pretouch took over a second here: only the once-a-second rule is checked");
        at_most_once_a_second(took, &stamps)?;
    }
    Ok(())
}
