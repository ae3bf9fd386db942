//! Whole-process start-up time of `rtvm -version`, next to `/bin/true` (the cost of
//! starting any process here: the machine's floor) and `java -version` (the reference),
//! measured in the same run, interleaved, medians.
//!
//! `cargo bench -p rtvm --bench startup [-- --runs N]`

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn time(program: &str, args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .env_remove("RTVM_OPTIONS")
        .env_remove("JAVA_TOOL_OPTIONS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("start process");
    let elapsed = start.elapsed();
    assert!(status.success(), "{program} {args:?} failed");
    elapsed
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(41usize);
    let rtvm = env!("CARGO_BIN_EXE_rtvm");
    let java = Command::new("java")
        .arg("-version")
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut floor = Vec::new();
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    // Warm the page cache and the binaries first.
    for _ in 0..3 {
        time(rtvm, &["-version"]);
    }
    for _ in 0..runs {
        floor.push(time("/bin/true", &[]));
        ours.push(time(rtvm, &["-version"]));
        if java {
            theirs.push(time("java", &["-Xshare:auto", "-version"]));
        }
    }
    let (f, o) = (median(floor), median(ours));
    println!("start-up, whole process, median of {runs} interleaved runs:");
    println!("| command | median | above /bin/true |");
    println!("| --- | ---: | ---: |");
    println!(
        "| /bin/true (floor) | {:.2} ms | - |",
        f.as_secs_f64() * 1e3
    );
    println!(
        "| rtvm -version | {:.2} ms | {:.2} ms |",
        o.as_secs_f64() * 1e3,
        (o.saturating_sub(f)).as_secs_f64() * 1e3
    );
    if java {
        let j = median(theirs);
        println!(
            "| java -version | {:.2} ms | {:.2} ms |",
            j.as_secs_f64() * 1e3,
            (j.saturating_sub(f)).as_secs_f64() * 1e3
        );
        println!(
            "rtvm -version is {:.1}x faster than java -version",
            j.as_secs_f64() / o.as_secs_f64()
        );
    } else {
        println!("java: not installed, no reference run");
    }
    println!(
        "target: rtvm -version under 5 ms: {}",
        if o < Duration::from_millis(5) {
            "met"
        } else {
            "NOT met"
        }
    );
}
