//! Whole-process start-up time of `rtvm -version`, next to `/bin/true` (the cost of
//! starting any process here: the machine's floor) and `java -version` (the reference),
//! measured in the same run, interleaved, medians — with and without the serviceability
//! rtvm starts by default (the perf-data file, the SIGQUIT dispatcher).
//!
//! `cargo bench -p rtvm-launcher --bench startup [-- --runs N]`

use std::time::Duration;

use rtvm_testkit::bench::{have_java, median, time_process as time};

fn main() {
    if rtvm_testkit::bench::listing() {
        return;
    }
    let runs = rtvm_testkit::bench::arg("--runs").unwrap_or(41usize);
    let rtvm = env!("CARGO_BIN_EXE_rtvm");
    let java = have_java();
    let mut floor = Vec::new();
    let mut ours = Vec::new();
    let mut no_perf = Vec::new();
    let mut no_service = Vec::new();
    let mut theirs = Vec::new();
    // Warm the page cache and the binaries first.
    for _ in 0..3 {
        time(rtvm, &["-version"]);
    }
    for _ in 0..runs {
        floor.push(time("/bin/true", &[]));
        ours.push(time(rtvm, &["-version"]));
        no_perf.push(time(rtvm, &["-XX:-UsePerfData", "-version"]));
        no_service.push(time(rtvm, &["-Xrs", "-XX:-UsePerfData", "-version"]));
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
    for (what, v) in [
        ("rtvm -XX:-UsePerfData -version", no_perf),
        (
            "rtvm -Xrs -XX:-UsePerfData -version (no SIGQUIT dispatcher)",
            no_service,
        ),
    ] {
        let m = median(v);
        println!(
            "| {what} | {:.2} ms | {:.2} ms |",
            m.as_secs_f64() * 1e3,
            (m.saturating_sub(f)).as_secs_f64() * 1e3
        );
    }
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
