/*
 * @test id=short
 * @summary Background pretouch while two mutators write and verify patterns across the
 *          heap, repeated in fresh VMs; -XX:+HoldBackgroundPreTouch is the handshake: the
 *          mutators' first pass is written before the pretouch starts, later passes while it
 *          runs: zero lost or torn writes, heap fully resident
 * @requires os.family == "linux" & os.maxMemory > 4G
 * @run driver TestBackgroundPreTouchStress 2 256m
 */

/*
 * @test id=full
 * @summary The full-length stress: 20 repetitions over a 2 GiB heap
 * @key stress memory-heavy
 * @requires os.family == "linux" & os.maxMemory > 8G
 * @run main/manual TestBackgroundPreTouchStress 20 2g
 */

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rtvm_jtreg::testlib::*;

fn pattern(i: usize, pass: u64, mutator: u64) -> u64 {
    ((i as u64) << 20 | mutator << 16 | (pass & 0xffff)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// In the child VM (started with the background pretouch held): two mutators, each owning
/// alternate 4 KiB pages, write a full page of words per visit and verify it before moving
/// on. Their first pass runs while the pretouch is held, so every page holds data before the
/// pretouch reaches it; then the pretouch is released and runs under their further passes,
/// until it is done and they have covered the heap at least twice more.
fn child(vm: &Vm) -> TestResult {
    let heap = vm.heap();
    let committed = vm.heap_stats().committed;
    check(heap.pretouch_progress() == Some((0, committed)), || format!("not held at start: {:?}", heap.pretouch_progress()))?;
    let block = vm.allocate(committed - 4096).ok_or_else(|| TestFailure("allocation failed".into()))?;
    let words = block.words();
    let pages = words.len() / 512;
    let stop = AtomicBool::new(false);
    let first_passes = AtomicUsize::new(0);
    let results: Vec<Result<(u64, u64), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u64)
            .map(|m| {
                let (stop, first_passes) = (&stop, &first_passes);
                s.spawn(move || {
                    let (mut pass, mut checked, mut after_release) = (0u64, 0u64, 0u64);
                    loop {
                        pass += 1;
                        let released = first_passes.load(Ordering::Acquire) >= 2;
                        for page in (m as usize..pages).step_by(2) {
                            let w = &words[page * 512..page * 512 + 512];
                            // The previous pass's words are intact (the pretouch may have
                            // passed over them meanwhile).
                            if pass > 1 {
                                for (k, x) in w.iter().enumerate() {
                                    let got = x.load(Ordering::Relaxed);
                                    if got != pattern(page * 512 + k, pass - 1, m) {
                                        return Err(format!("mutator {m} before pass {pass}: word {} holds {got:#x}", page * 512 + k));
                                    }
                                }
                            }
                            for (k, x) in w.iter().enumerate() {
                                x.store(pattern(page * 512 + k, pass, m), Ordering::Relaxed);
                            }
                            for (k, x) in w.iter().enumerate() {
                                let got = x.load(Ordering::Relaxed);
                                if got != pattern(page * 512 + k, pass, m) {
                                    return Err(format!("mutator {m} pass {pass}: word {} holds {got:#x}", page * 512 + k));
                                }
                                checked += 1;
                            }
                        }
                        if pass == 1 {
                            first_passes.fetch_add(1, Ordering::Release);
                        } else if released {
                            after_release += 1;
                        }
                        if after_release >= 2 && stop.load(Ordering::Relaxed) {
                            return Ok((pass, checked));
                        }
                    }
                })
            })
            .collect();
        // Both first passes done under the hold: release, and wait for the pretouch.
        while first_passes.load(Ordering::Acquire) < 2 && !hs.iter().any(|h| h.is_finished()) {
            std::thread::yield_now();
        }
        let held_until_now = heap.pretouch_progress() == Some((0, committed));
        let released = vm.release_pretouch();
        let r = vm.wait_for_pretouch();
        stop.store(true, Ordering::Relaxed);
        let mut out: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        if !held_until_now || !released {
            out.push(Err(format!("the pretouch was not held through the first passes (held {held_until_now}, released {released})")));
        }
        if let Err(e) = r {
            out.push(Err(e.to_string()));
        }
        out
    });
    let mut total = 0;
    for r in results {
        let (_, checked) = r.map_err(TestFailure)?;
        total += checked;
    }
    let s = vm.heap_stats();
    let resident = vm.heap().resident_bytes();
    println!("Stress: checked={total} committed={} resident={}", s.committed, resident);
    check(resident == s.committed, || format!("{} of {} bytes resident", resident, s.committed))?;
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("child") {
        return child(vm);
    }
    let reps: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(3);
    let size = args.get(1).cloned().unwrap_or_else(|| "512m".into());
    let (xms, xmx) = (format!("-Xms{size}"), format!("-Xmx{size}"));
    let mut words = 0;
    for rep in 0..reps {
        let out = ProcessTools::execute_limited_test_vm(&[
            &xms,
            &xmx,
            "-XX:+AlwaysPreTouch",
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+BackgroundPreTouch",
            "-XX:+HoldBackgroundPreTouch",
            "-XX:ParallelGCThreads=2",
            "TestBackgroundPreTouchStress",
            "child",
        ])?;
        out.should_have_exit_value(0)?;
        words += out.number("Stress:", "checked")?;
        println!("repetition {rep}: ok");
    }
    println!("{reps} repetitions, {words} words written and verified, each written before the pretouch reached it and again while it ran; 0 lost or torn");
    Ok(())
}
