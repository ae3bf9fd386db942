/*
 * @test id=default
 * @bug 8254699 8324817
 * @summary With -XX:+AlwaysPreTouch a 256 MB heap is fully resident when the application
 *          starts: mincore counts every page, and VmRSS is strictly greater than the heap (as
 *          HotSpot's test asserts, guarded by the available memory); without it RSS stays far
 *          below
 * @requires os.family == "linux" & os.maxMemory > 2G
 * @run driver TestAlwaysPreTouchBehavior
 */

use rtvm_jtreg::testlib::*;

const HEAP_MB: u64 = 256;

/// In the child: what the kernel says about the heap.
fn report(vm: &Vm) -> TestResult {
    let stats = vm.heap_stats();
    let rss_kb = rtvm_os_linux::procfs::read_status()?.vm_rss_kb;
    println!("HeapReport: committed={} resident={} rss_kb={rss_kb}", stats.committed, vm.heap().resident_bytes());
    Ok(())
}

fn run(extra: &[&str]) -> Result<(u64, u64, u64), TestFailure> {
    let mut args = vec!["-Xms256m", "-Xmx256m"];
    args.extend(extra);
    args.extend(["TestAlwaysPreTouchBehavior", "report"]);
    let out = ProcessTools::execute_limited_test_vm(&args)?;
    out.should_have_exit_value(0)?;
    Ok((out.number("HeapReport:", "committed")?, out.number("HeapReport:", "resident")?, out.number("HeapReport:", "rss_kb")?))
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("report") {
        return report(vm);
    }
    let heap = HEAP_MB << 20;
    // HotSpot's guard: RSS can only be asserted when the memory to hold the heap is there.
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    let available_kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:")?.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| TestFailure("no MemAvailable in /proc/meminfo".into()))?;
    if available_kb < 2 * HEAP_MB * 1024 {
        return skip(format!("only {available_kb} kB available: not enough to hold a pretouched {HEAP_MB} MB heap with room to spare"));
    }
    let (_, resident, rss_kb) = run(&[])?;
    println!("no pretouch: heap resident {resident} B, VmRSS {rss_kb} kB");
    check(rss_kb < HEAP_MB * 1024 / 4, || format!("without AlwaysPreTouch RSS is {rss_kb} kB, not far below {HEAP_MB} MB"))?;
    for threads in ["1", "2"] {
        for chunk in ["4k", "4m", "1g", "3m"] {
            let gc = format!("-XX:ParallelGCThreads={threads}");
            let ch = format!("-XX:PreTouchParallelChunkSize={chunk}");
            let (committed, resident, rss_kb) = run(&["-XX:+AlwaysPreTouch", &gc, &ch])?;
            println!("{gc} {ch}: committed {committed} B, resident {resident} B, VmRSS {rss_kb} kB");
            check(committed == heap, || format!("committed {committed}"))?;
            check(resident == heap, || format!("{gc} {ch}: only {resident} of {heap} bytes resident"))?;
            // HotSpot's assertion: RSS strictly greater than the heap.
            check(rss_kb > HEAP_MB * 1024, || format!("{gc} {ch}: RSS {rss_kb} kB is not above the {HEAP_MB} MB heap"))?;
        }
    }
    // The fallback primitive does the same.
    let (_, resident, _) = run(&["-XX:+AlwaysPreTouch", "-XX:+UnlockDiagnosticVMOptions", "-XX:-UseMadvPopulateWrite"])?;
    check(resident == heap, || format!("-XX:-UseMadvPopulateWrite: only {resident} bytes resident"))?;
    Ok(())
}
