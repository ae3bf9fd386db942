/*
 * @test
 * @summary An expansion while a background pretouch of the 2 GiB initial heap runs commits and
 *          pretouches its own range and returns before the background pretouch ends (it does
 *          not wait for it); the new range is present page by page, allocatable, and the
 *          background pretouch still completes (the time it takes: cargo bench --bench heap)
 * @requires os.family == "linux" & os.maxMemory > 6G
 * @run main/othervm -Xms2g -Xmx3g -XX:+AlwaysPreTouch -XX:+UnlockExperimentalVMOptions -XX:+BackgroundPreTouch -XX:ParallelGCThreads=2 TestExpansionDuringPreTouch
 */

use std::sync::atomic::Ordering;

use rtvm_jtreg::testlib::*;

const MB: usize = 1 << 20;

pub fn main(vm: &Vm, _args: &[String]) -> TestResult {
    let heap = vm.heap();
    let old = vm.heap_stats().committed;
    check(heap.background_pretouch_running(), || "the background pretouch had already ended when main started".into())?;
    let new = vm.expand_heap(4 * MB)?;
    // The ordering the fix guarantees: the expansion is done while the background pretouch is
    // still busy with the initial 2 GiB.
    let progress = heap.pretouch_progress();
    let still_running = heap.background_pretouch_running();
    println!("expanded {old} -> {new}; background pretouch progress {progress:?}, running {still_running}");
    check(new == old + 4 * MB, || format!("committed {new} after expanding {old} by 4 MiB"))?;
    check(still_running, || "the expansion returned only after the background pretouch of 2 GiB had ended".into())?;
    let base = heap.range().start;
    let present = rtvm_os_linux::procfs::present_pages(base + old, base + new)?;
    let pages = 4 * MB / rtvm_os_linux::base_page_size();
    check(present == pages, || format!("{present} of the {pages} pages of the expansion are present"))?;
    // The new range is allocatable: fill the old heap, then allocate from the new part.
    let used = vm.heap_stats().used;
    let _old_part = vm.allocate(old - used).ok_or_else(|| TestFailure("cannot allocate the old heap".into()))?;
    let block = vm.allocate(4 * MB).ok_or_else(|| TestFailure("cannot allocate the expansion".into()))?;
    check(block.as_ptr() as usize == base + old, || "the block is not the expanded range".into())?;
    block.words()[0].store(1, Ordering::Relaxed);
    let report = vm.wait_for_pretouch()?.ok_or_else(|| TestFailure("no background pretouch".into()))?;
    check(report.bytes == old, || format!("background pretouch did {} of {old} bytes", report.bytes))?;
    check(heap.resident_bytes() == new, || format!("{} of {new} bytes resident at the end", heap.resident_bytes()))?;
    Ok(())
}
