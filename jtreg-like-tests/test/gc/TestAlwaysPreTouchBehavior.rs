/*
 * @test id=default
 * @bug 8254699 8324817
 * @summary With -XX:+AlwaysPreTouch a 256 MB heap is fully resident when the application
 *          starts (VmRSS and mincore agree); without it RSS stays far below
 * @requires os.family == "linux" & os.maxMemory > 2G
 * @run driver TestAlwaysPreTouchBehavior
 */

use rtvm_jtreg::testlib::*;

const HEAP_MB: u64 = 256;

/// In the child: what the kernel says about the heap.
fn report(vm: &Vm) -> TestResult {
    let stats = vm.heap_stats();
    let rss_kb = rtvm::testing::os::procfs::read_status()?.vm_rss_kb;
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
            check(rss_kb >= HEAP_MB * 1024, || format!("{gc} {ch}: RSS {rss_kb} kB is below {HEAP_MB} MB"))?;
        }
    }
    // The fallback primitive does the same.
    let (_, resident, _) = run(&["-XX:+AlwaysPreTouch", "-XX:+UnlockDiagnosticVMOptions", "-XX:-UseMadvPopulateWrite"])?;
    check(resident == heap, || format!("-XX:-UseMadvPopulateWrite: only {resident} bytes resident"))?;
    Ok(())
}
