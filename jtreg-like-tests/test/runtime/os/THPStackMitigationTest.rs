/*
 * @test id=ENABLED
 * @bug 8303215 8312182
 * @summary With the mitigation on, 1000 idle threads with 2 MiB stacks stay small — run as
 *          HotSpot's THPsInThreadStackPreventionTest runs it, with -XX:+DelayThreadStartALot
 *          (widening the window khugepaged would use) and -XX:ActiveProcessorCount=2, and
 *          bounded on RSS + swap: every stack is MADV_NOHUGEPAGE with a PROT_NONE guard below it
 *          before the thread runs
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver THPStackMitigationTest ENABLED
 */

/*
 * @test id=DISABLED
 * @bug 8303215 8312182
 * @summary Negative test: with the mitigation off and thread starts delayed, khugepaged
 *          turns the stacks into huge pages and RSS exceeds HotSpot's bound (needs THP
 *          "always" or an mTHP size effectively "always"; allocates about 2 GB)
 * @key thp memory-heavy
 * @requires os.family == "linux"
 * @requires thp.mode == "always" | thp.mthp.always
 * @run main/manual THPStackMitigationTest DISABLED
 */

/*
 * @test id=COLLAPSE-ENABLED
 * @bug 8312182
 * @summary Khugepaged emulated with MADV_COLLAPSE on every stack while all 1000 threads are
 *          held in their start window: every collapse is refused, RSS stays small
 * @key thp
 * @requires os.family == "linux"
 * @requires thp.mode != "never"
 * @requires vm.flagless
 * @run driver THPStackMitigationTest COLLAPSE-ENABLED
 */

/*
 * @test id=COLLAPSE-DISABLED
 * @bug 8312182
 * @summary Negative test: the same collapse with the mitigation off succeeds for most stacks
 *          and the stacks end up holding well over 1 GB (the JDK-8312182 blow-up, shown on a
 *          madvise machine without changing any system setting)
 * @key thp memory-heavy
 * @requires os.family == "linux"
 * @requires thp.mode != "never"
 * @requires vm.flagless
 * @run main/manual THPStackMitigationTest COLLAPSE-DISABLED
 */

use std::time::Duration;

use rtvm_jtreg::testlib::*;

const THREADS: usize = 1000;
/// HotSpot's bound: 1000 × 128 KiB + 64 MB heap + 150 MB.
const RSS_LIMIT_MB: u64 = THREADS as u64 * 128 / 1024 + 64 + 150;
const COMMON: [&str; 6] = ["-Xlog:pagesize", "-Xlog:os+thread", "-Xms64m", "-Xmx64m", "-XX:+AlwaysPreTouch", "-Xss2m"];
const UNMITIGATED: [&str; 2] = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+DisableTHPStackMitigation"];

/// `(guard, usable)` ranges of every `Idle#` stack, from the child's `-Xlog:os+thread` lines.
fn stack_ranges(stdout: &str) -> Result<Vec<((u64, u64), (u64, u64))>, TestFailure> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|_| TestFailure(format!("bad address {s}")));
    let range = |line: &str, key: &str| -> Result<(u64, u64), TestFailure> {
        let at = line.find(key).ok_or_else(|| TestFailure(format!("no '{key}' in {line}")))? + key.len();
        let text = line[at..].split([',', ')']).next().unwrap_or("");
        let (a, b) = text.split_once('-').ok_or_else(|| TestFailure(format!("bad range in {line}")))?;
        Ok((hex(a)?, hex(b)?))
    };
    stdout
        .lines()
        .filter(|l| l.contains("] Thread \"Idle#") && l.contains(" started "))
        .map(|l| Ok((range(l, "guard: ")?, range(l, "stack: ")?)))
        .collect()
}

/// The child's smaps, read while it held its threads: every stack `nh` (when the VM said it
/// would advise so) and a `---p` guard exactly where the VM said.
fn check_stacks(smaps: &str, ranges: &[((u64, u64), (u64, u64))], expect_nh: bool) -> Result<(), TestFailure> {
    let entries = rtvm::testing::os::procfs::parse_smaps(smaps);
    let (mut nh_ok, mut guard_ok) = (0, 0);
    for &((gs, ge), (us, ue)) in ranges {
        let overlapping: Vec<_> = entries.iter().filter(|e| (e.map.start as u64) < ue && (e.map.end as u64) > us).collect();
        check(!overlapping.is_empty(), || format!("stack {us:#x}-{ue:#x} is not mapped"))?;
        if overlapping.iter().all(|e| e.has_flag("nh")) {
            nh_ok += 1;
        }
        if entries.iter().any(|e| e.map.start as u64 == gs && e.map.end as u64 == ge && e.map.perms == "---p") {
            guard_ok += 1;
        }
    }
    println!("stacks: {} checked, {nh_ok} nh, {guard_ok} with a PROT_NONE guard below", ranges.len());
    check(guard_ok == ranges.len(), || format!("only {guard_ok} of {} stacks have a PROT_NONE guard", ranges.len()))?;
    if expect_nh {
        check(nh_ok == ranges.len(), || format!("only {nh_ok} of {} stacks are nh", ranges.len()))?;
    }
    Ok(())
}

/// Runs `IdleThreads 1000` in a child VM; with `check_smaps`, reads the child's smaps while
/// it holds its threads and checks every stack.
fn idle_threads_run(extra: &[&str], check_smaps: bool) -> Result<OutputAnalyzer, TestFailure> {
    let mut args: Vec<&str> = extra.to_vec();
    args.extend(COMMON);
    let count = THREADS.to_string();
    args.extend(["IdleThreads", &count, "3"]);
    let mut child = ProcessTools::start(ProcessTools::create_limited_test_vm(&args))?;
    let line = child.wait_for_line("IdleThreads:", Duration::from_secs(120))?;
    println!("{line}");
    let pid = child.pid();
    let smaps = if check_smaps {
        Some(std::fs::read_to_string(format!("/proc/{pid}/smaps")).map_err(|e| TestFailure(format!("smaps of {pid}: {e}")))?)
    } else {
        None
    };
    let out = child.finish()?;
    out.should_have_exit_value(0)?;
    if let Some(smaps) = smaps {
        let ranges = stack_ranges(&out.stdout)?;
        check(ranges.len() == THREADS, || format!("{} Idle stacks logged", ranges.len()))?;
        check_stacks(&smaps, &ranges, out.stdout.contains("stacks are MADV_NOHUGEPAGE"))?;
    }
    Ok(out)
}

fn rss_mb(out: &OutputAnalyzer, prefix: &str) -> Result<u64, TestFailure> {
    Ok(out.number(prefix, "VmRSS")? / 1024)
}

fn enabled() -> TestResult {
    let out = idle_threads_run(&["-XX:+UnlockDiagnosticVMOptions", "-XX:+DelayThreadStartALot", "-XX:ActiveProcessorCount=2"], true)?;
    out.should_contain("[pagesize] JVM will attempt to prevent THPs in thread stacks.")?;
    let threads = out.number("IdleThreads:", "Threads")?;
    check(threads >= THREADS as u64, || format!("Threads={threads}, expected at least {THREADS}"))?;
    let rss = rss_mb(&out, "IdleThreads:")?;
    let swap = out.number("IdleThreads:", "VmSwap")? / 1024;
    println!("VmRSS {rss} MB + VmSwap {swap} MB with the mitigation on (limit {RSS_LIMIT_MB} MB)");
    check(rss + swap <= RSS_LIMIT_MB, || format!("RSS + swap {} MB larger than expected ({RSS_LIMIT_MB} MB)", rss + swap))?;
    check(rss >= 64, || format!("RSS {rss} MB suspiciously low: the 64 MB heap was pretouched"))?;
    Ok(())
}

fn disabled() -> TestResult {
    let out = idle_threads_run(&[UNMITIGATED[0], UNMITIGATED[1], "-XX:+DelayThreadStartALot"], false)?;
    out.should_contain("[pagesize] JVM will *not* prevent THPs in thread stacks. This may cause high RSS.")?;
    let rss = rss_mb(&out, "IdleThreads:")?;
    println!("VmRSS {rss} MB with the mitigation off (bound {RSS_LIMIT_MB} MB)");
    check(rss > RSS_LIMIT_MB, || format!("RSS {rss} MB is not above {RSS_LIMIT_MB} MB: THPs did not form in the stacks"))?;
    Ok(())
}

fn collapse(extra: &[&str], expect_refused: bool) -> TestResult {
    let mut args: Vec<&str> = extra.to_vec();
    args.extend(COMMON);
    let count = THREADS.to_string();
    args.extend(["THPStackMitigationTest", "collapse-child", &count]);
    let out = ProcessTools::execute_limited_test_vm(&args)?;
    out.should_have_exit_value(0)?;
    let (collapsed, refused) = (out.number("Collapse:", "collapsed")?, out.number("Collapse:", "refused")?);
    let before = out.number("Collapse:", "rss_before_kB")? / 1024;
    let after = rss_mb(&out, "IdleThreads:")?;
    println!("collapsed={collapsed} refused={refused} RSS {before} MB -> {after} MB");
    if expect_refused {
        out.should_contain("[pagesize] JVM will attempt to prevent THPs in thread stacks.")?;
        check(collapsed == 0 && refused == THREADS as u64, || format!("{collapsed} collapses succeeded, {refused} refused"))?;
        check(after <= RSS_LIMIT_MB, || format!("RSS {after} MB larger than expected ({RSS_LIMIT_MB} MB)"))?;
    } else {
        check(collapsed * 10 >= THREADS as u64 * 9, || format!("only {collapsed} of {THREADS} collapses succeeded"))?;
        // On a madvise machine RSS jumps at the collapse; in THP "always" mode the page faults
        // already made the huge pages before it. Either way the stacks now hold over 1 GB
        // beyond the 64 MB heap.
        check(after >= 64 + 1024, || format!("RSS went from {before} MB to {after} MB: the stacks do not hold over 1 GB"))?;
    }
    Ok(())
}

/// In the child VM: start the threads held in their start window, collapse every stack,
/// let them run, report.
fn collapse_child(vm: &Vm, count: usize) -> TestResult {
    let gate = rtvm::testing::IdleGate::new();
    let _release = gate.release_on_drop();
    let mut threads = Vec::new();
    for i in 0..count {
        threads.push(vm.thread(&format!("Idle#{i}")).hold_at_start(true).spawn(gate.parked_body())?);
    }
    let rss_before = rtvm::testing::os::procfs::read_status()?.vm_rss_kb;
    let (mut collapsed, mut refused, mut other) = (0, 0, 0);
    for t in &threads {
        match t.info().collapse_stack() {
            Ok(()) => collapsed += 1,
            Err(e) if e.errno == rtvm::testing::os::Errno::EINVAL => refused += 1,
            Err(e) => {
                if other == 0 {
                    eprintln!("first unexpected collapse error: {e}");
                }
                other += 1
            }
        }
    }
    for t in &threads {
        t.start();
    }
    gate.wait_started(count);
    println!("Collapse: threads={count} collapsed={collapsed} refused={refused} other={other} rss_before_kB={rss_before}");
    println!("{}", rtvm::testing::memory_line("IdleThreads", count)?);
    gate.release();
    for t in threads {
        t.join()?;
    }
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("ENABLED") => enabled(),
        Some("DISABLED") => disabled(),
        Some("COLLAPSE-ENABLED") => collapse(&[], true),
        Some("COLLAPSE-DISABLED") => collapse(&UNMITIGATED, false),
        Some("collapse-child") => collapse_child(vm, args.get(1).and_then(|n| n.parse().ok()).unwrap_or(THREADS)),
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
