/*
 * @test id=short
 * @summary 10,000 thread create/join cycles keep the mapping count, the open file count and
 *          RSS flat: every stack is unmapped at join, nothing accumulates
 * @requires os.family == "linux"
 * @run main/othervm -XX:ParallelGCThreads=1 TestThreadChurn 10000
 */

/*
 * @test id=full
 * @summary The full-length churn: 100,000 cycles
 * @key stress
 * @requires os.family == "linux"
 * @run main/manual -XX:ParallelGCThreads=1 TestThreadChurn 100000
 */

use rtvm_jtreg::testlib::*;

fn measure() -> Result<(usize, usize, u64), TestFailure> {
    // glibc malloc arenas (one more may appear as threads come and go) are the C allocator's.
    let maps = rtvm_os_linux::procfs::read_maps().map_err(|e| TestFailure(e.to_string()))?;
    let maps = rtvm_os_linux::procfs::without_malloc_arenas(&maps).len();
    let fds = rtvm_os_linux::procfs::count_fds().map_err(|e| TestFailure(e.to_string()))?;
    let rss = rtvm_os_linux::procfs::read_status().map_err(|e| TestFailure(e.to_string()))?.vm_rss_kb;
    Ok((maps, fds, rss))
}

fn churn(vm: &Vm, cycles: usize) -> TestResult {
    for i in 0..cycles {
        // Two threads alive at a time, so stacks are reused from different places.
        let a = vm.spawn("churn-a", move || {
            std::hint::black_box(i);
        })?;
        let b = vm.spawn("churn-b", || {})?;
        a.join()?;
        b.join()?;
    }
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    let cycles: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    // Warm-up: malloc arenas and thread-local caches reach their steady state.
    churn(vm, 200)?;
    let registered = vm.threads().len();
    let (maps0, fds0, rss0) = measure()?;
    churn(vm, cycles)?;
    let (maps1, fds1, rss1) = measure()?;
    println!("{cycles} cycles ({} threads): mappings {maps0} -> {maps1}, fds {fds0} -> {fds1}, VmRSS {rss0} -> {rss1} kB", 2 * cycles);
    check(maps1 <= maps0, || format!("mappings grew from {maps0} to {maps1}"))?;
    check(fds1 <= fds0, || format!("open files grew from {fds0} to {fds1}"))?;
    check(rss1 <= rss0 + 8 * 1024, || format!("RSS grew from {rss0} kB to {rss1} kB"))?;
    check(vm.threads().len() == registered, || format!("{} threads registered, {registered} before", vm.threads().len()))?;
    Ok(())
}
