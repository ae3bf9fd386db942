/*
 * @test id=short
 * @summary Background pretouch while two mutators write and verify patterns across the
 *          heap, repeated in fresh VMs: zero lost or torn writes, heap fully resident
 * @requires os.family == "linux" & os.maxMemory > 4G
 * @run driver TestBackgroundPreTouchStress 3 512m
 */

/*
 * @test id=full
 * @summary The full-length stress: 20 repetitions over a 2 GiB heap
 * @key stress memory-heavy
 * @requires os.family == "linux" & os.maxMemory > 8G
 * @run main/manual TestBackgroundPreTouchStress 20 2g
 */

use std::sync::atomic::{AtomicBool, Ordering};

use rtvm_jtreg::testlib::*;

fn pattern(i: usize, pass: u64, mutator: u64) -> u64 {
    ((i as u64) << 20 | mutator << 16 | (pass & 0xffff)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// In the child VM: two mutators, each owning alternate 4 KiB pages, write a full page of
/// words per visit and verify it before moving on, until the background pretouch is done and
/// they have covered the heap at least twice.
fn child(vm: &Vm) -> TestResult {
    let heap = vm.heap();
    let started_during = heap.background_pretouch_running();
    let committed = vm.heap_stats().committed;
    let block = vm.allocate(committed - 4096).ok_or_else(|| TestFailure("allocation failed".into()))?;
    let words = block.words();
    let pages = words.len() / 512;
    let stop = AtomicBool::new(false);
    let results: Vec<Result<(u64, u64), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u64)
            .map(|m| {
                let stop = &stop;
                s.spawn(move || {
                    let (mut pass, mut checked) = (0u64, 0u64);
                    loop {
                        pass += 1;
                        for page in (m as usize..pages).step_by(2) {
                            let w = &words[page * 512..page * 512 + 512];
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
                        if pass >= 2 && (stop.load(Ordering::Relaxed) || !heap.background_pretouch_running()) {
                            return Ok((pass, checked));
                        }
                    }
                })
            })
            .collect();
        let r = vm.wait_for_pretouch();
        stop.store(true, Ordering::Relaxed);
        let out = hs.into_iter().map(|h| h.join().unwrap()).collect();
        if let Err(e) = r {
            return vec![Err(e.to_string())];
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
    println!("Stress: started_during={started_during} checked={total} committed={} resident={}", s.committed, resident);
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
    let mut overlapped = 0;
    for rep in 0..reps {
        let out = ProcessTools::execute_limited_test_vm(&[
            &xms,
            &xmx,
            "-XX:+AlwaysPreTouch",
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+BackgroundPreTouch",
            "-XX:ParallelGCThreads=2",
            "TestBackgroundPreTouchStress",
            "child",
        ])?;
        out.should_have_exit_value(0)?;
        words += out.number("Stress:", "checked")?;
        if out.field("Stress:", "started_during")? == "true" {
            overlapped += 1;
        }
        println!("repetition {rep}: ok");
    }
    println!("{reps} repetitions, {words} words written and verified, {overlapped} overlapped a running pretouch; 0 lost or torn");
    check(overlapped > 0, || "no repetition overlapped the background pretouch".into())?;
    Ok(())
}
