/*
 * @test id=ENABLED
 * @bug 8303215 8312182
 * @summary With the mitigation on, 1000 idle threads with 2 MiB stacks stay small — run as
 *          HotSpot's THPsInThreadStackPreventionTest runs it, with -XX:+DelayThreadStartALot
 *          (widening the window khugepaged would use) and -XX:ActiveProcessorCount=2, and
 *          bounded on RSS + swap. While the child VM holds its 1000 threads (a gate the test
 *          controls, no time window) it reads its own /proc/self/smaps: every stack is
 *          MADV_NOHUGEPAGE (nh) — expected because the mitigation is on, not because the VM
 *          says so — with a PROT_NONE guard exactly where the stack's layout puts it
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
 *          held in their start window: every collapse is refused with EINVAL because the stack
 *          is nh (smaps shows nh and no AnonHugePages on each refused stack), RSS stays small;
 *          the control runs in the same child: MADV_COLLAPSE of an unadvised 8 MB mapping
 *          with one resident page per 2 MB succeeds, so a refusal is the mitigation's doing,
 *          not a kernel without collapse
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

use rtvm_jtreg::testlib::*;

const THREADS: usize = 1000;
/// HotSpot's bound: 1000 × 128 KiB + 64 MB heap + 150 MB.
const RSS_LIMIT_MB: u64 = THREADS as u64 * 128 / 1024 + 64 + 150;
const COMMON: [&str; 6] = ["-Xlog:pagesize", "-Xlog:os+thread", "-Xms64m", "-Xmx64m", "-XX:+AlwaysPreTouch", "-Xss2m"];
const UNMITIGATED: [&str; 2] = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+DisableTHPStackMitigation"];

/// In the child: the kernel's view (this process's own smaps, read while the threads are
/// held) of every stack: mapped, `nh` when `expect_nh`, not `nh` when not, and a `---p` guard
/// exactly over the layout's guard zone.
fn check_own_stacks(threads: &[rtvm::VmThread], expect_nh: bool) -> TestResult {
    let entries = rtvm_os_linux::procfs::read_smaps()?;
    let (mut nh, mut guarded) = (0, 0);
    for t in threads {
        let l = &t.info().layout;
        let overlapping: Vec<_> = entries.iter().filter(|e| e.map.start < l.usable.end && e.map.end > l.usable.start).collect();
        check(!overlapping.is_empty(), || format!("stack {:#x}-{:#x} is not mapped", l.usable.start, l.usable.end))?;
        if overlapping.iter().all(|e| e.has_flag("nh")) {
            nh += 1;
        }
        if entries.iter().any(|e| e.map.start <= l.guard.start && e.map.end >= l.guard.end && e.map.perms == "---p") {
            guarded += 1;
        }
    }
    println!("Stacks: checked={} nh={nh} guarded={guarded}", threads.len());
    check(guarded == threads.len(), || format!("only {guarded} of {} stacks have a PROT_NONE guard", threads.len()))?;
    let expected_nh = if expect_nh { threads.len() } else { 0 };
    check(nh == expected_nh, || format!("{nh} of {} stacks are nh; expected {expected_nh}", threads.len()))?;
    Ok(())
}

/// In the child VM: `count` idle threads held at a gate the test controls; the memory line
/// and the stacks' smaps are taken while all of them exist, then they are released.
fn idle_child(vm: &Vm, count: usize) -> TestResult {
    let gate = rtvm_launcher::IdleGate::new();
    let _release = gate.release_on_drop();
    let threads = (0..count)
        .map(|i| vm.thread(&format!("Idle#{i}")).spawn(gate.parked_body()))
        .collect::<Result<Vec<_>, _>>()?;
    gate.wait_started(count);
    println!("{}", rtvm_launcher::memory_line("IdleThreads", count)?);
    let mitigated = !vm.flags().get(rtvm_flags::flag::DisableTHPStackMitigation);
    check_own_stacks(&threads, mitigated)?;
    gate.release();
    for t in threads {
        t.join()?;
    }
    Ok(())
}

/// Runs the idle child with 1000 threads.
fn idle_threads_run(extra: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    let mut args: Vec<&str> = extra.to_vec();
    args.extend(COMMON);
    let count = THREADS.to_string();
    args.extend(["THPStackMitigationTest", "idle-child", &count]);
    let out = ProcessTools::execute_limited_test_vm(&args)?;
    out.should_have_exit_value(0)?;
    Ok(out)
}

fn rss_mb(out: &OutputAnalyzer, prefix: &str) -> Result<u64, TestFailure> {
    Ok(out.number(prefix, "VmRSS")? / 1024)
}

fn enabled() -> TestResult {
    let out = idle_threads_run(&["-XX:+UnlockDiagnosticVMOptions", "-XX:+DelayThreadStartALot", "-XX:ActiveProcessorCount=2"])?;
    println!("{}", out.first_match("^Stacks: .*")?.unwrap_or_default());
    check(out.number("Stacks:", "nh")? == THREADS as u64, || "not every stack is nh".into())?;
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
    let out = idle_threads_run(&[UNMITIGATED[0], UNMITIGATED[1], "-XX:+DelayThreadStartALot"])?;
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
    // The control: collapse works on this kernel for memory nobody advised.
    check(out.field("Control:", "collapsed")? == "true", || format!("MADV_COLLAPSE of an unadvised mapping failed here: {}", out.stdout))?;
    let before = out.number("Collapse:", "rss_before_kB")? / 1024;
    let after = rss_mb(&out, "IdleThreads:")?;
    println!("collapsed={collapsed} refused={refused} RSS {before} MB -> {after} MB");
    println!("{}", out.first_match("^Control: .*")?.unwrap_or_default());
    if expect_refused {
        out.should_contain("[pagesize] JVM will attempt to prevent THPs in thread stacks.")?;
        check(collapsed == 0 && refused == THREADS as u64, || format!("{collapsed} collapses succeeded, {refused} refused"))?;
        // Refused because MADV_NOHUGEPAGE: the kernel's view of each refused stack.
        check(out.number("Collapse:", "refused_nh")? == refused, || "a refused stack is not nh (refused for another reason)".into())?;
        check(out.number("Collapse:", "refused_huge_kb")? == 0, || "a refused stack holds huge pages".into())?;
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
    let gate = rtvm_launcher::IdleGate::new();
    let _release = gate.release_on_drop();
    let mut threads = Vec::new();
    for i in 0..count {
        threads.push(vm.thread(&format!("Idle#{i}")).hold_at_start(true).spawn(gate.parked_body())?);
    }
    let rss_before = rtvm_os_linux::procfs::read_status()?.vm_rss_kb;
    let (mut collapsed, mut refused, mut other) = (0, 0, 0);
    let mut refused_stacks = Vec::new();
    for t in &threads {
        match t.info().collapse_stack() {
            Ok(()) => collapsed += 1,
            Err(e) if e.errno == rtvm_os_linux::Errno::EINVAL => {
                refused += 1;
                refused_stacks.push(t.info().layout.usable.clone());
            }
            Err(e) => {
                if other == 0 {
                    eprintln!("first unexpected collapse error: {e}");
                }
                other += 1
            }
        }
    }
    // Why each refusal: the kernel's view of the refused stacks.
    let entries = rtvm_os_linux::procfs::read_smaps()?;
    let (mut refused_nh, mut refused_huge_kb) = (0, 0);
    for r in &refused_stacks {
        let overlapping: Vec<_> = entries.iter().filter(|e| e.map.start < r.end && e.map.end > r.start).collect();
        if !overlapping.is_empty() && overlapping.iter().all(|e| e.has_flag("nh")) {
            refused_nh += 1;
        }
        refused_huge_kb += overlapping.iter().map(|e| e.anon_huge_kb).sum::<u64>();
    }
    println!("Control: collapsed={}", collapse_control());
    for t in &threads {
        t.start();
    }
    gate.wait_started(count);
    println!("Collapse: threads={count} collapsed={collapsed} refused={refused} refused_nh={refused_nh} refused_huge_kb={refused_huge_kb} other={other} rss_before_kB={rss_before}");
    println!("{}", rtvm_launcher::memory_line("IdleThreads", count)?);
    gate.release();
    for t in threads {
        t.join()?;
    }
    Ok(())
}

/// MADV_COLLAPSE of an unadvised 8 MB mapping with one resident page per PMD region — what
/// khugepaged would do to a fresh stack without the mitigation. `true` if it worked.
fn collapse_control() -> bool {
    use rtvm_os_linux::{Reservation, base_page_size};
    let pmd = rtvm_testkit::kernel::thp_pmd_size().unwrap_or(2 << 20);
    let len = 4 * pmd;
    let Ok(r) = Reservation::reserve(len, pmd) else { return false };
    if r.commit(0, len).is_err() {
        return false;
    }
    let Some(words) = r.atomic_words(0, len) else { return false };
    for region in 0..4 {
        words[(region * pmd + pmd - base_page_size()) / 8].store(1, std::sync::atomic::Ordering::Relaxed);
    }
    r.collapse(0, len).is_ok()
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("ENABLED") => enabled(),
        Some("DISABLED") => disabled(),
        Some("COLLAPSE-ENABLED") => collapse(&[], true),
        Some("COLLAPSE-DISABLED") => collapse(&UNMITIGATED, false),
        Some("idle-child") => idle_child(vm, args.get(1).and_then(|n| n.parse().ok()).unwrap_or(THREADS)),
        Some("collapse-child") => collapse_child(vm, args.get(1).and_then(|n| n.parse().ok()).unwrap_or(THREADS)),
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
