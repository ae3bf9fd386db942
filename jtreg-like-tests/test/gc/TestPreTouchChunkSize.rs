/*
 * @test
 * @bug 8254699 8254972
 * @summary The pretouch task logs the worker and work-unit counts of the formula
 *          units = ceil(heap / chunk), workers = min(units, ParallelGCThreads), with the
 *          chunk aligned down to the page size and never below a page
 * @requires os.family == "linux"
 * @run driver TestPreTouchChunkSize
 */

use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    let page = rtvm_os_linux::base_page_size() as u64;
    // (heap, chunk, threads)
    let cases: [(u64, u64, u32); 8] = [
        (64 << 20, 4 << 20, 2),
        (64 << 20, 4 << 20, 1),
        (64 << 20, 64 << 10, 2),
        (64 << 20, 1 << 30, 2),  // a chunk larger than the heap: one unit, one worker
        (66 << 20, 4 << 20, 2),  // a heap the chunk does not divide
        (64 << 20, 5 << 20, 3),  // a chunk the page size... divides; 13 units, 3 workers
        (8 << 20, 4 << 10, 4),   // the minimum chunk
        (64 << 20, (4 << 20) + 100, 2), // aligned down to the page size
    ];
    for (heap, chunk, threads) in cases {
        let xms = format!("-Xms{}k", heap >> 10);
        let gc = format!("-XX:ParallelGCThreads={threads}");
        let ch = format!("-XX:PreTouchParallelChunkSize={chunk}");
        let out = ProcessTools::execute_limited_test_vm(&[&xms, &xms.replace("Xms", "Xmx"), &gc, &ch, "-XX:+AlwaysPreTouch", "-Xlog:gc+heap=debug", "-version"])?;
        out.should_have_exit_value(0)?;
        let effective = (chunk / page * page).max(page);
        let units = heap.div_ceil(effective);
        let workers = units.min(threads as u64);
        let line = format!("Running PreTouch task with {workers} workers for {units} work units pre-touching {heap}B.");
        println!("heap {heap} chunk {chunk} threads {threads}: expect '{line}'");
        out.stdout_should_contain(&line)?;
        out.should_match(&format!("Pretouched {heap}B in [0-9.]+s \\([0-9.]+ GB/s\\) with {workers} workers, chunk "))?;
    }
    // With no workers the task runs on the VM's own thread.
    ProcessTools::execute_limited_test_vm(&["-Xms8m", "-Xmx8m", "-XX:ParallelGCThreads=0", "-XX:+AlwaysPreTouch", "-Xlog:gc+heap=debug", "-version"])?
        .should_have_exit_value(0)?
        .stdout_should_contain("Running PreTouch task pre-touching 8388608B.")?;
    Ok(())
}
