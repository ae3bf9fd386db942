/*
 * @test
 * @bug 8293114 8268893
 * @summary -XX:TrimNativeHeapInterval side by side with java 17.0.15 on the same scenario: 16
 *          threads each malloc 32 MiB in 16 KiB blocks, touch them and free 15 of every 16
 *          (the C allocator keeps the holes below the live blocks resident), then idle while
 *          the trimmer works. rtvm's RSS (VmRSS of its own /proc status) drops by at least
 *          300 MB within two intervals; its -Xlog:trimnative=trace lines are java's, values
 *          masked (enabled, start, Times, Periodic Trim (n): A->B (±C) T ms, stop); a
 *          non-numeric interval is refused as java refuses it; 40 VMs with the longest
 *          interval, destroyed as soon as created, stop their trimmer at once
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestTrimNativeHeap
 */

use std::time::Duration;

use rtvm_jtreg::service::tool;
use rtvm_jtreg::testlib::*;

use rtvm_testkit::java::TRIM_DEMO;

fn rss_kb() -> u64 {
    rtvm_os_linux::procfs::read_status().map_or(0, |s| s.vm_rss_kb)
}

/// The target: the scenario in VM threads (Rust's allocator is glibc's malloc), then idle.
fn target(vm: &Vm, idle_ms: u64) -> TestResult {
    let mut threads = Vec::new();
    for t in 0..16 {
        threads.push(
            vm.spawn(&format!("Malloc#{t}"), || {
                let mut kept = Vec::new();
                let blocks: Vec<Vec<u8>> = (0..(32 << 20) / (16 << 10)).map(|_| vec![1u8; 16 << 10]).collect();
                for (i, b) in blocks.into_iter().enumerate() {
                    if i % 16 == 0 {
                        kept.push(b);
                    }
                }
                // The live blocks stay for the process's life: the holes between them are
                // what the trimmer gives back.
                std::mem::forget(kept);
            })
            .map_err(|e| TestFailure(e.to_string()))?,
        );
    }
    for t in threads {
        t.join().map_err(|e| TestFailure(e.to_string()))?;
    }
    println!("ALLOCATED rss={}", rss_kb());
    let step = Duration::from_millis(idle_ms / 4);
    for _ in 0..4 {
        std::thread::sleep(step);
        println!("IDLE rss={}", rss_kb());
    }
    Ok(())
}

/// The trimnative lines, values masked: `[level][trimnative] text` with numbers → `N`.
fn masked(out: &str) -> Vec<String> {
    let line = regex::Regex::new(r"^\[[^\]]*\]\[(\w+) *\]\[trimnative *\] (.*)$").expect("pattern");
    let number = regex::Regex::new(r"[+-]?\d+(\.\d+)?[BKMG]?").expect("pattern");
    out.lines()
        .filter_map(|l| line.captures(l))
        .map(|c| format!("[{}] {}", &c[1], number.replace_all(&c[2], "N")))
        .collect()
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("target") {
        return target(vm, args.get(1).and_then(|a| a.parse().ok()).unwrap_or(4500));
    }
    // A VM destroyed as soon as it is created (-version) stops its trimmer at once, even at
    // the longest interval: a stop that comes before the trimmer's first wait is not lost
    // (it was in about one run of six: the destroy then waited out the interval, 49 days).
    for _ in 0..40 {
        let c = ProcessTools::create_limited_test_vm(&["-XX:TrimNativeHeapInterval=4294967295", "-version"]);
        ProcessTools::execute_within(c, Duration::from_secs(20))?.should_have_exit_value(0)?;
    }
    println!("40 VMs with TrimNativeHeapInterval=4294967295 destroyed at once: none waited");
    let options = ["-XX:TrimNativeHeapInterval=1000", "-Xlog:trimnative=trace"];
    let mut c = ProcessTools::create_limited_test_vm(&options);
    c.args(["TestTrimNativeHeap", "target", "4500"]);
    let ours = ProcessTools::execute_within(c, Duration::from_secs(120))?;
    ours.should_have_exit_value(0)?;
    let allocated = ours.number("ALLOCATED", "rss")?;
    let after = ours
        .stdout
        .lines()
        .filter(|l| l.starts_with("IDLE"))
        .nth(1)
        .and_then(|l| l.split("rss=").nth(1)?.trim().parse::<u64>().ok())
        .ok_or_else(|| TestFailure(format!("no IDLE line:\n{}", ours.stdout)))?;
    check(allocated >= after + 300 * 1024, || format!("RSS {allocated} kB after the frees, {after} kB two intervals later: less than 300 MB given back\n{}", ours.stdout))?;
    let mine = masked(&ours.stdout);
    println!("rtvm: RSS {} MB -> {} MB; {} trimnative lines", allocated / 1024, after / 1024, mine.len());
    check(mine.first().map(String::as_str) == Some("[info] Periodic native trim enabled (interval: N ms)") && mine.last().map(String::as_str) == Some("[info] Native heap trimmer stop"), || format!("{mine:#?}"))?;

    if !JavaTools::available() || rtvm_jtreg::service::jdk_tool("javac").is_none() {
        println!("java is not installed here: the lines checked against HotSpot's recorded shape only");
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("rtvm-trimdemo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| TestFailure(e.to_string()))?;
    std::fs::write(dir.join("TrimDemo.java"), TRIM_DEMO).map_err(|e| TestFailure(e.to_string()))?;
    tool("javac", &["-nowarn", "-d", &dir.display().to_string(), &dir.join("TrimDemo.java").display().to_string()])?.should_have_exit_value(0)?;
    let cp = dir.display().to_string();
    let theirs = JavaTools::execute(&[options[0], options[1], "-cp", &cp, "TrimDemo", "4500"])?
        .ok_or_else(|| TestFailure("java vanished".into()))?;
    let _ = std::fs::remove_dir_all(&dir);
    theirs.should_have_exit_value(0)?;
    // HotSpot's arena chunk pool cleaner (every 5 s) suspends java's trimmer around its own
    // work: two debug lines that appear when java's run outlasts it (a loaded machine).
    // rtvm has no chunk pool; they are no part of the trimmer's shape.
    let java: Vec<String> = masked(&theirs.stdout).into_iter().filter(|l| !l.contains("chunk pool cleaner")).collect();
    check(!mine.iter().any(|l| l.contains("chunk pool")), || format!("rtvm logged a chunk pool line: {mine:#?}"))?;
    // The number of trims depends on when each VM's clock started: compare the shapes, and
    // that each has at least three trims with a Times line before each.
    let shapes = |v: &[String]| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for l in v {
            if out.last() != Some(l) {
                out.push(l.clone());
            }
        }
        out
    };
    let (a, b) = (shapes(&mine), shapes(&java));
    // java's trimmer logs its stop from its own thread, which the exiting process may not
    // wait for (a loaded machine: the line is missing); rtvm's stop line is checked above.
    let stop = "[info] Native heap trimmer stop";
    let distinct = |v: &[String]| -> std::collections::BTreeSet<String> { v.iter().filter(|l| *l != stop).cloned().collect() };
    check(distinct(&a) == distinct(&b), || format!("the trimnative lines differ from java's:\n  rtvm: {a:#?}\n  java: {b:#?}"))?;
    for v in [&mine, &java] {
        let trims = v.iter().filter(|l| l.starts_with("[info] Periodic Trim")).count();
        let times = v.iter().filter(|l| l.starts_with("[trace] Times:")).count();
        check(trims >= 3 && times == trims, || format!("{trims} trims, {times} Times lines: {v:#?}"))?;
    }
    println!("the trimnative lines, masked, are java's ({} kinds)", distinct(&a).len());
    let bad = ProcessTools::execute_limited_test_vm(&["-XX:TrimNativeHeapInterval=-1", "-version"])?;
    bad.should_have_exit_value(1)?.stderr_should_contain("Improperly specified VM option 'TrimNativeHeapInterval=-1'")?;
    Ok(())
}
