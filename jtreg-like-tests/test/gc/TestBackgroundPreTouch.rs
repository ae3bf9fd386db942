/*
 * @test
 * @bug 8272807
 * @summary -XX:+BackgroundPreTouch with -XX:+HoldBackgroundPreTouch as the handshake: VM
 *          creation returns with the pretouch not started (held: no byte done, nothing
 *          resident); two mutators write a pattern into every other 4 KiB page while it is
 *          held; released, the pretouch then runs over those pages while the mutators go on
 *          writing and verifying; afterwards every word holds its mutator's last pattern (the
 *          pretouch never overwrote data, JDK-8272807), the heap is fully resident, and a
 *          hold that lets a quarter of the chunks through stops the pretouch's progress there,
 *          at a chunk boundary, until it is dropped
 * @requires os.family == "linux" & os.maxMemory > 4G
 * @run main/othervm -Xms1g -Xmx1g -XX:+AlwaysPreTouch -XX:+UnlockExperimentalVMOptions -XX:+BackgroundPreTouch -XX:+HoldBackgroundPreTouch -XX:ParallelGCThreads=2 -XX:PreTouchParallelChunkSize=4m -Xlog:gc+heap TestBackgroundPreTouch
 */

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rtvm_jtreg::testlib::*;

fn pattern(i: usize, pass: u64) -> u64 {
    (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ pass.rotate_left(17)
}

/// Waits (bounded) until `cond` holds; the bound is a failure, never a pass.
fn wait_until(what: &str, cond: impl Fn() -> bool) -> Result<(), TestFailure> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        check(Instant::now() < deadline, || format!("timed out waiting until {what}"))?;
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

pub fn main(vm: &Vm, _args: &[String]) -> TestResult {
    let heap = vm.heap();
    let committed = vm.heap_stats().committed;
    // Held at start: the VM is up, the pretouch has not touched a byte.
    check(heap.background_pretouch_running(), || "no background pretouch is running".into())?;
    check(heap.pretouch_progress() == Some((0, committed)), || format!("progress {:?} while held", heap.pretouch_progress()))?;
    check(heap.resident_bytes() == 0, || format!("{} bytes resident while held", heap.resident_bytes()))?;

    let block = vm.allocate(committed - 4096).ok_or_else(|| TestFailure("cannot allocate the heap".into()))?;
    let words = block.words();
    // Phase 1, held: each mutator writes its pages (mutator m: words m*512.. of every other
    // page) before the pretouch reaches any of them.
    for i in (0..words.len()).step_by(512) {
        words[i].store(pattern(i, 1), Ordering::Relaxed);
    }
    check(heap.pretouch_progress() == Some((0, committed)), || "the pretouch moved while held".into())?;

    // Phase 2: released, the pretouch runs over the written pages while the mutators write
    // and verify further passes.
    // A hold of the test's own, taken before the release, stops the pretouch at a known
    // point later on: no timing decides where it is caught.
    let hold = heap.hold_pretouch();
    check(vm.release_pretouch(), || "the start-up hold was not there to release".into())?;
    check(!vm.release_pretouch(), || "released twice".into())?;
    let stop = AtomicBool::new(false);
    let passes: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2usize)
            .map(|m| {
                let stop = &stop;
                s.spawn(move || -> Result<u64, String> {
                    let mut pass = 1;
                    loop {
                        // The words written in phase 1 must still be there.
                        if pass == 1 {
                            for i in (m * 512..words.len()).step_by(1024) {
                                let got = words[i].load(Ordering::Relaxed);
                                if got != pattern(i, 1) {
                                    return Err(format!("mutator {m}: word {i} holds {got:#x} after the pretouch passed, wrote {:#x}", pattern(i, 1)));
                                }
                            }
                        }
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
                        if stop.load(Ordering::Relaxed) {
                            return Ok(pass);
                        }
                    }
                })
            })
            .collect();
        // The hold lets a quarter of the 4 MiB chunks through while the mutators run, and
        // stops the pretouch there (at that chunk boundary) until it is dropped.
        let held = (|| -> Result<(), TestFailure> {
            check(heap.pretouch_progress() == Some((0, committed)), || format!("moved under the test's hold: {:?}", heap.pretouch_progress()))?;
            let chunk = 4 << 20;
            let allowed = committed / chunk / 4;
            hold.let_through(allowed);
            wait_until("the allowed chunks are done", || heap.pretouch_progress().is_some_and(|(d, _)| d >= allowed * chunk))?;
            // Chunks in flight finish; then nothing moves.
            hold.wait_stopped();
            let frozen = heap.pretouch_progress();
            std::thread::sleep(Duration::from_millis(200));
            check(heap.pretouch_progress() == frozen, || format!("progress moved under a hold: {frozen:?} -> {:?}", heap.pretouch_progress()))?;
            check(frozen == Some((allowed * chunk, committed)), || format!("not held at {} bytes: {frozen:?}", allowed * chunk))?;
            println!("held mid-way at {frozen:?}");
            drop(hold);
            Ok(())
        })();
        let waited = vm.wait_for_pretouch();
        stop.store(true, Ordering::Relaxed);
        let passes = handles.into_iter().map(|h| h.join().unwrap()).collect::<Result<Vec<_>, _>>();
        held.and(waited.map_err(|e| TestFailure(e.to_string())).map(|_| ())).and(passes.map_err(TestFailure))
    })?;
    // Every word still holds its mutator's last pattern.
    for i in (0..words.len()).step_by(1024) {
        check(words[i].load(Ordering::Relaxed) == pattern(i, passes[0]), || format!("word {i} lost its last write"))?;
        let j = i + 512;
        if j < words.len() {
            check(words[j].load(Ordering::Relaxed) == pattern(j, passes[1]), || format!("word {j} lost its last write"))?;
        }
    }
    let resident = heap.resident_bytes();
    check(resident == committed, || format!("{resident} of {committed} bytes resident after the pretouch"))?;
    check(!heap.background_pretouch_running(), || "still running after the wait".into())?;
    println!("mutator passes {passes:?}; heap fully resident");
    Ok(())
}
