/*
 * @test
 * @summary -XX:+BackgroundPreTouch: VM creation returns while the gang still pretouches;
 *          two mutators write and verify patterns across the heap during the pretouch with
 *          no lost or torn write; the heap ends fully resident
 * @requires os.family == "linux" & os.maxMemory > 4G
 * @run main/othervm -Xms1g -Xmx1g -XX:+AlwaysPreTouch -XX:+UnlockExperimentalVMOptions -XX:+BackgroundPreTouch -XX:ParallelGCThreads=2 -Xlog:gc+heap,startup TestBackgroundPreTouch
 */

use std::sync::atomic::Ordering;
use std::sync::Arc;

use rtvm_jtreg::testlib::*;

fn pattern(i: usize, pass: u64) -> u64 {
    (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ pass.rotate_left(17)
}

pub fn main(vm: &Vm, _args: &[String]) -> TestResult {
    let heap = vm.heap();
    let running_at_start = heap.background_pretouch_running();
    let progress_at_start = heap.pretouch_progress();
    println!("pretouch running when main started: {running_at_start}, progress {progress_at_start:?}");
    let committed = vm.heap_stats().committed;
    let block = vm.allocate(committed - 4096).ok_or_else(|| TestFailure("cannot allocate the heap".into()))?;
    let words = block.words();
    let mid = words.len() / 2;
    // Two mutators, each owning every other page, write and verify while pretouch runs.
    let passes: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|m| {
                let heap = Arc::clone(heap);
                s.spawn(move || -> Result<u64, String> {
                    let mut pass = 0;
                    loop {
                        pass += 1;
                        for i in (m * 512..words.len()).step_by(1024) {
                            words[i].store(pattern(i, pass), Ordering::Relaxed);
                        }
                        for i in (m * 512..words.len()).step_by(1024) {
                            let got = words[i].load(Ordering::Relaxed);
                            if got != pattern(i, pass) {
                                return Err(format!("mutator {m}: word {i} holds {got:#x}, wrote {:#x}", pattern(i, pass)));
                            }
                        }
                        if !heap.background_pretouch_running() && pass >= 2 {
                            return Ok(pass);
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Result<Vec<_>, _>>()
    })
    .map_err(TestFailure)?;
    let report = vm.wait_for_pretouch()?.ok_or_else(|| TestFailure("no background pretouch was started".into()))?;
    println!("mutator passes {passes:?}; pretouch: {} B in {:?} with {} workers ({})", report.bytes, report.elapsed, report.workers, report.primitive);
    // Every word still holds its mutator's last pattern.
    for i in (0..words.len()).step_by(1024) {
        let expected = pattern(i, passes[0]);
        check(words[i].load(Ordering::Relaxed) == expected, || format!("word {i} lost its last write"))?;
        let j = i + 512;
        if j < words.len() {
            check(words[j].load(Ordering::Relaxed) == pattern(j, passes[1]), || format!("word {j} lost its last write"))?;
        }
    }
    let _ = mid;
    let stats = vm.heap_stats();
    let resident = vm.heap().resident_bytes();
    check(resident == stats.committed, || format!("{} of {} bytes resident after the pretouch", resident, stats.committed))?;
    check(report.bytes == committed, || format!("pretouched {} of {committed}", report.bytes))?;
    check(running_at_start || progress_at_start.is_some_and(|(d, t)| d < t), || "the pretouch had already finished when main started".into())?;
    Ok(())
}
