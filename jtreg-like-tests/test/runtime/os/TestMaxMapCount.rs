/*
 * @test
 * @summary Near vm.max_map_count (each stack costs mappings: its guard zone splits it), thread
 *          creation fails with an error naming the operation and errno, never a crash; a thread
 *          that was already running (held on a channel the test controls until after the
 *          failure) is unaffected — released, it uses 256 KiB of its stack and answers — and
 *          once mappings are freed threads start again. The limit is approached by fragmenting a reservation, not by changing the
 *          sysctl.
 * @requires os.family == "linux"
 * @run main/othervm -Xmx32m -XX:ParallelGCThreads=1 TestMaxMapCount
 */

use rtvm_os_linux::{base_page_size, procfs, system, Reservation};
use rtvm_jtreg::testlib::*;

pub fn main(vm: &Vm, _args: &[String]) -> TestResult {
    let max = system::max_map_count().ok_or_else(|| TestFailure("no vm.max_map_count".into()))? as usize;
    let page = base_page_size();
    // A thread running through the whole episode: it waits for the test's go, then proves
    // its stack and itself intact.
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let (answer, answered) = std::sync::mpsc::channel::<u64>();
    let early = vm.spawn("early", move || {
        if wait.recv().is_ok() {
            #[inline(never)]
            fn use_stack(depth: u32) -> u64 {
                let frame = std::hint::black_box([depth as u8; 4096]);
                if depth == 0 { frame[0] as u64 } else { use_stack(depth - 1) + frame[4095] as u64 }
            }
            let _ = answer.send(use_stack(64));
        }
    })?;
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
    go.send(()).map_err(|_| TestFailure("the early thread is gone".into()))?;
    let sum = answered.recv_timeout(std::time::Duration::from_secs(60)).map_err(|e| TestFailure(format!("the early thread did not answer: {e}")))?;
    check(sum == (0..=64u64).sum::<u64>(), || format!("the early thread computed {sum}"))?;
    early.join()?;
    println!("the thread running before the limit was hit is unaffected");
    drop(frag);
    vm.spawn("after", || println!("after the limit: ok"))?.join()?;
    Ok(())
}
