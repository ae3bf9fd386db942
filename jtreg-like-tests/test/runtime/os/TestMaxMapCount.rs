/*
 * @test
 * @summary Near vm.max_map_count (each stack costs mappings: its guard zone splits it), thread
 *          creation fails with an error naming the operation and errno, never a crash; the
 *          threads already running are unaffected, and once mappings are freed threads start
 *          again. The limit is approached by fragmenting a reservation, not by changing the
 *          sysctl.
 * @requires os.family == "linux"
 * @run main/othervm -Xmx32m -XX:ParallelGCThreads=1 TestMaxMapCount
 */

use rtvm::testing::os::{base_page_size, procfs, system, Reservation};
use rtvm_jtreg::testlib::*;

pub fn main(vm: &Vm, _args: &[String]) -> TestResult {
    let max = system::max_map_count().ok_or_else(|| TestFailure("no vm.max_map_count".into()))? as usize;
    let page = base_page_size();
    let early = vm.spawn("early", || std::thread::sleep(std::time::Duration::from_millis(300)))?;
    // Each committed page in the middle of a PROT_NONE reservation is its own mapping.
    let pages_needed = max / 2 + 64;
    let frag = Reservation::reserve(pages_needed * 2 * page, 0)?;
    let mut i = 0;
    let mut maps = procfs::read_maps()?.len();
    while maps < max - 8 {
        match frag.commit((2 * i + 1) * page, page) {
            Ok(()) => i += 1,
            Err(e) => {
                println!("fragmenting stopped at {maps} mappings: {e}");
                break;
            }
        }
        if i % 1024 == 0 {
            maps = procfs::read_maps()?.len();
        } else {
            maps += 2;
        }
    }
    maps = procfs::read_maps()?.len();
    println!("vm.max_map_count={max}, mappings now {maps}");
    let mut started = Vec::new();
    let error = loop {
        match vm.spawn(&format!("near-limit-{}", started.len()), || {}) {
            Ok(t) => started.push(t),
            Err(e) => break e,
        }
        check(started.len() < 10_000, || "no failure near vm.max_map_count".into())?;
    };
    println!("thread {} failed: {error}", started.len());
    let msg = error.to_string();
    check(
        msg.starts_with(&format!("Failed to start thread \"near-limit-{}\" - ", started.len())) && msg.contains("failed (ENOMEM) for attributes:"),
        || format!("unexpected message: {msg}"),
    )?;
    for t in started {
        t.join()?;
    }
    early.join()?;
    drop(frag);
    vm.spawn("after", || println!("after the limit: ok"))?.join()?;
    Ok(())
}
