/*
 * @test id=reserved
 * @bug 8256155 8310233
 * @summary With -XX:+UseLargePages and enough hugetlbfs pages of the default size already
 *          reserved on the machine, a 64 MB heap lives on them as the kernel sees it: its
 *          mapping in /proc/self/smaps is hugetlb (VmFlags ht) with KernelPageSize equal to the
 *          default huge page size; the whole heap is reserved from the pool at start-up
 *          (HugePages_Free - HugePages_Rsvd drops by the heap's page count) and with
 *          -XX:+AlwaysPreTouch HugePages_Free itself drops by that count. -Xlog:pagesize and
 *          -Xlog:gc+init say so. The test never changes the page count: with fewer pages free
 *          than the heap needs it is skipped with that reason
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestLargePageHeap reserved
 */

/*
 * @test id=none
 * @summary With -XX:+UseLargePages and no hugetlbfs pages configured: HotSpot's warning
 *          "UseLargePages disabled, no large pages configured and available on the system.",
 *          exit 0, and the heap on base pages (KernelPageSize 4 kB, no ht flag). Skipped with
 *          the reason where pages are configured
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestLargePageHeap none
 */

/*
 * @test id=reserve
 * @summary Manual: the reserved case with pages the test reserves itself. It raises
 *          /proc/sys/vm/nr_hugepages by the heap's page count (and reserves one 1 GiB page
 *          where the kernel has them, for -XX:LargePageSizeInBytes=1g), runs the checks, and
 *          restores every value it changed on every exit path. A 1 GiB heap beyond the pool
 *          gets HotSpot's "Failed to reserve and commit memory" warning, as java prints it, and
 *          base pages. Values are restored on return, on failure, on a
 *          panic (a guard), and when the test process is killed (a watchdog process in its own
 *          process group writes the old value back once the test process is gone)
 * @requires os.family == "linux"
 * @run main/manual TestLargePageHeap reserve
 */

use std::path::{Path, PathBuf};

use rtvm_os_linux::setting::TemporarySetting;
use rtvm_jtreg::testlib::*;

const HEAP_MB: u64 = 64;

fn meminfo(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0)
}

/// In the child VM: what the kernel says about the heap and the huge page pool.
fn report(vm: &Vm) -> TestResult {
    let r = vm.heap().range();
    let entries = rtvm_os_linux::procfs::smaps_overlapping(r.start, r.end)?;
    let page_kb: Vec<u64> = entries.iter().map(|e| e.kernel_page_kb).collect();
    let ht = !entries.is_empty() && entries.iter().all(|e| e.has_flag("ht"));
    let size_kb: u64 = entries.iter().map(|e| e.size_kb).sum();
    println!(
        "LargePageReport: kernel_page_kb={} ht={ht} size_kb={size_kb} free={} rsvd={}",
        page_kb.iter().max().copied().unwrap_or(0),
        meminfo("HugePages_Free"),
        meminfo("HugePages_Rsvd")
    );
    Ok(())
}

fn run(extra: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    let heap = format!("-Xmx{HEAP_MB}m");
    let initial = format!("-Xms{HEAP_MB}m");
    let mut args = vec!["-XX:+UseLargePages", initial.as_str(), heap.as_str(), "-Xlog:pagesize,gc+init"];
    args.extend(extra);
    args.extend(["TestLargePageHeap", "report"]);
    let out = ProcessTools::execute_limited_test_vm(&args)?;
    out.should_have_exit_value(0)?;
    Ok(out)
}

/// The heap on `page_kb` hugetlbfs pages, taken from the pool as the kernel counts it.
fn check_on_huge_pages(extra: &[&str], page_kb: u64) -> TestResult {
    let pages = HEAP_MB * 1024 / page_kb;
    for pretouch in [false, true] {
        let mut args = extra.to_vec();
        if pretouch {
            args.push("-XX:+AlwaysPreTouch");
        }
        // The pool is machine-wide: another process taking or giving pages meanwhile would
        // skew the counts, so a mismatch is retried before it fails.
        let mut last = String::new();
        let mut passed = false;
        for attempt in 1..=3 {
            let (free, rsvd) = (meminfo("HugePages_Free"), meminfo("HugePages_Rsvd"));
            let out = run(&args)?;
            out.should_match(r"UseLargePages=1, UseTransparentHugePages=0, UseHugeTLBFS=1")?
                .should_contain("Large page support enabled.")?
                .should_match(&format!(r"\[gc,init *\] Heap Page Size: {} hugetlbfs pages", rtvm_flags::value::format_exact_size(page_kb << 10)))?
                .should_match(r"\[gc,init *\] Large Page Support: Enabled \(Explicit\)")?;
            check(out.number("LargePageReport:", "kernel_page_kb")? == page_kb, || format!("heap KernelPageSize is not {page_kb} kB: {}", out.stdout))?;
            out.should_contain("ht=true")?;
            check(out.number("LargePageReport:", "size_kb")? == HEAP_MB << 10, || format!("heap mapping is not {HEAP_MB} MB: {}", out.stdout))?;
            let (free_now, rsvd_now) = (out.number("LargePageReport:", "free")?, out.number("LargePageReport:", "rsvd")?);
            let available_drop = (free as i64 - rsvd as i64) - (free_now as i64 - rsvd_now as i64);
            let free_drop = free as i64 - free_now as i64;
            last = format!("pretouch={pretouch}: {pages} pages expected; HugePages_Free {free} -> {free_now}, HugePages_Rsvd {rsvd} -> {rsvd_now}");
            println!("attempt {attempt}: {last}");
            let ok = available_drop == pages as i64 && (!pretouch || free_drop == pages as i64);
            if ok {
                passed = true;
                break;
            }
        }
        check(passed, || format!("the huge page pool does not show the heap: {last}"))?;
    }
    Ok(())
}

/// A heap larger than the pool: HotSpot's warning for the heap, as java words it, and the
/// heap on base pages.
fn heap_beyond_the_pool(page_kb: u64) -> TestResult {
    let page = page_kb << 10;
    let args = ["-XX:+UseLargePages", "-Xmx1g", "-Xlog:pagesize", "-version"];
    let ours = ProcessTools::execute_test_vm(&args)?;
    ours.should_have_exit_value(0)?;
    let tail = format!("bytes: 1073741824 page size: {page} (errno = 12).");
    check(ours.stderr.contains(&format!("rtvm warning: Failed to reserve and commit memory. req_addr: 0x0000000000000000 {tail}")), || format!("no heap warning from rtvm: {}", ours.stderr))?;
    ours.should_match(r"Heap: .* page_size=4K size=1G")?;
    if let Some(java) = JavaTools::execute(&args)? {
        check(java.stderr.lines().any(|l| l.contains("warning: Failed to reserve and commit memory.") && l.ends_with(&tail)), || format!("java no longer warns for the heap like that: {}", java.stderr))?;
        println!("a 1 GiB heap beyond the pool: both warn '... {tail}'");
    } else {
        println!("java is not installed here: the heap warning checked against HotSpot's recorded wording only");
    }
    Ok(())
}

fn default_page_kb() -> u64 {
    meminfo("Hugepagesize")
}

/// Changes a system setting until the guard is dropped (or the test process is gone).
fn set(path: &Path, value: u64) -> Result<TemporarySetting, TestFailure> {
    let guard = TemporarySetting::set(path, &value.to_string()).map_err(TestFailure)?;
    println!("{}: {} -> {value} (restored on exit)", path.display(), guard.old());
    Ok(guard)
}

fn sysfs_pages(page_kb: u64) -> PathBuf {
    PathBuf::from(format!("/sys/kernel/mm/hugepages/hugepages-{page_kb}kB/nr_hugepages"))
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    let page_kb = default_page_kb();
    match args.first().map(String::as_str) {
        Some("report") => report(vm),
        Some("reserved") => {
            if page_kb == 0 {
                return skip("the kernel has no hugetlbfs (no Hugepagesize in /proc/meminfo)");
            }
            let (free, rsvd, needed) = (meminfo("HugePages_Free"), meminfo("HugePages_Rsvd"), HEAP_MB * 1024 / page_kb);
            if free.saturating_sub(rsvd) < needed {
                return skip(format!("{} of the {needed} hugetlbfs pages of {page_kb} kB a {HEAP_MB} MB heap needs are free (HugePages_Free {free}, HugePages_Rsvd {rsvd}); automatic tests never change /proc/sys/vm/nr_hugepages — the manual TestLargePageHeap#reserve does", free.saturating_sub(rsvd)));
            }
            check_on_huge_pages(&[], page_kb)
        }
        Some("none") => {
            let configured = meminfo("HugePages_Total") > 0 || std::fs::read_to_string("/proc/sys/vm/nr_overcommit_hugepages").is_ok_and(|v| v.trim() != "0");
            if configured {
                return skip("hugetlbfs pages are configured here (HugePages_Total or nr_overcommit_hugepages): the no-pages case cannot be shown");
            }
            let out = run(&[])?;
            out.should_match(r"\[warning\]\[pagesize *\] UseLargePages disabled, no large pages configured and available on the system.")?
                .should_contain("Large page support disabled")?
                .should_match(r"\[gc,init *\] Large Page Support: Disabled")?;
            check(out.number("LargePageReport:", "kernel_page_kb")? == 4, || format!("heap not on 4 kB pages: {}", out.stdout))?;
            out.should_contain("ht=false")?;
            Ok(())
        }
        Some("reserve") => {
            if page_kb == 0 {
                return skip("the kernel has no hugetlbfs (no Hugepagesize in /proc/meminfo)");
            }
            let needed = HEAP_MB * 1024 / page_kb;
            let total = meminfo("HugePages_Total");
            let restore = set(Path::new("/proc/sys/vm/nr_hugepages"), total + needed)?;
            let got = meminfo("HugePages_Total");
            check(got >= total + needed, || format!("the kernel reserved only {got} of {} pages (memory too fragmented?)", total + needed))?;
            check_on_huge_pages(&[], page_kb)?;
            heap_beyond_the_pool(page_kb)?;
            drop(restore);
            // 1 GiB pages, where the kernel has them and can reserve one now.
            let gib = sysfs_pages(1 << 20);
            if gib.exists() {
                let before: u64 = std::fs::read_to_string(&gib)?.trim().parse().unwrap_or(0);
                let _restore = set(&gib, before + 1)?;
                let now: u64 = std::fs::read_to_string(&gib)?.trim().parse().unwrap_or(0);
                if now > before {
                    let out = ProcessTools::execute_limited_test_vm(&["-XX:+UseLargePages", "-XX:LargePageSizeInBytes=1g", "-Xms1g", "-Xmx1g", "-Xlog:pagesize", "TestLargePageHeap", "report"])?;
                    out.should_have_exit_value(0)?.should_contain("Overriding default large page size (2M) using LargePageSizeInBytes: 1G")?;
                    let kb = out.number("LargePageReport:", "kernel_page_kb")?;
                    println!("-XX:LargePageSizeInBytes=1g: the 1 GiB heap is on {kb} kB pages");
                    check(kb == 1 << 20, || format!("the 1 GiB heap is not on 1 GiB pages: {}", out.stdout))?;
                } else {
                    println!("no 1 GiB page could be reserved now (no contiguous gigabyte free): that part not run");
                }
            } else {
                println!("the kernel has no 1 GiB huge pages: that part not run");
            }
            Ok(())
        }
        other => Err(Box::new(TestFailure(format!("unknown mode {other:?}")))),
    }
}
