/*
 * @test id=shared
 * @summary Four threads allocate mixed sizes (0 bytes to 2 MiB, both the fetch_add and the
 *          compare-and-swap path) from the shared heap; every word of every block carries its
 *          owner's pattern and still does after all threads are done: no block overlaps another
 * @requires os.family == "linux"
 * @run main/othervm -Xms192m -Xmx192m TestHeapAllocation shared
 */

/*
 * @test id=tlab
 * @summary The same with four thread-local allocation buffers (default and small refill
 *          sizes, blocks larger than half a buffer going to the heap directly)
 * @requires os.family == "linux"
 * @run main/othervm -Xms192m -Xmx192m TestHeapAllocation tlab
 */

/*
 * @test id=zero
 * @summary allocate(0) gives a unique 8-byte block inside the heap, from the heap and from a
 *          TLAB; sizes that cannot be rounded up fail instead of wrapping
 * @requires os.family == "linux"
 * @run main/othervm -Xms16m -Xmx16m TestHeapAllocation zero
 */

/*
 * @test id=tail
 * @summary At the end of the committed heap a request that does not fit fails and leaves the
 *          rest usable: smaller blocks (and a TLAB that cannot take a whole buffer) still get
 *          the last bytes; a full heap fails every request; an expansion makes room again
 * @requires os.family == "linux"
 * @run main/othervm -Xms8m -Xmx16m TestHeapAllocation tail
 */

/*
 * @test id=exhaustion
 * @summary Four threads allocate until the heap is full while a fifth expands it step by
 *          step: failed allocations racing with each other and with expansions never hand
 *          out a byte twice, and at the end the committed heap is used up to a bounded waste
 * @requires os.family == "linux"
 * @run main/othervm -Xms8m -Xmx160m TestHeapAllocation exhaustion
 */

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rtvm::HeapBlock;
use rtvm_jtreg::testlib::*;

const MB: usize = 1 << 20;
const THREADS: usize = 4;

/// What word `i` of block `b` of thread `t` holds: unique per word across the test.
fn pattern(t: usize, b: usize, i: usize) -> u64 {
    ((t as u64) << 56) ^ ((b as u64) << 28) ^ i as u64 ^ 0x5a5a_0000_0000_0000
}

/// The size of allocation `n` of thread `t`: mostly small, some around and above the
/// fetch_add limit (1 MiB), a few zero.
fn size_for(t: usize, n: usize) -> usize {
    let x = (n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t as u64).rotate_left(29);
    match x % 64 {
        0 => 0,
        1 => MB + 8 * (x as usize >> 40 & 0xffff),
        2 => 64 * 1024 + (x as usize >> 44 & 0xfff8),
        _ => 8 + (x as usize >> 50 & 0x3f8),
    }
}

fn fill(words: &[AtomicU64], t: usize, b: usize) {
    for (i, w) in words.iter().enumerate() {
        w.store(pattern(t, b, i), Ordering::Relaxed);
    }
}

/// Checks every word of every block and that the blocks are disjoint, 8-aligned and inside
/// the heap.
fn verify(vm: &Vm, blocks: &[Vec<HeapBlock<'_>>]) -> TestResult {
    let heap = vm.heap().range();
    let mut ranges = Vec::new();
    for (t, list) in blocks.iter().enumerate() {
        for (b, block) in list.iter().enumerate() {
            let start = block.as_ptr() as usize;
            let end = start + block.len();
            check(start % 8 == 0 && start >= heap.start && end <= heap.end, || format!("block [{start:#x}, {end:#x}) is not an aligned part of the heap {heap:x?}"))?;
            for (i, w) in block.words().iter().enumerate() {
                let got = w.load(Ordering::Relaxed);
                check(got == pattern(t, b, i), || format!("thread {t} block {b} word {i} at {:#x}: {got:#x}, wrote {:#x}", start + 8 * i, pattern(t, b, i)))?;
            }
            ranges.push((start, end));
        }
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        check(pair[0].1 <= pair[1].0, || format!("blocks {:x?} and {:x?} overlap", pair[0], pair[1]))?;
    }
    let words: usize = ranges.iter().map(|(s, e)| (e - s) / 8).sum();
    println!("{} blocks, {words} words checked", ranges.len());
    Ok(())
}

/// Each thread allocates `budget` bytes in blocks of `size_for` sizes through `alloc`.
fn allocate_from_threads<'h>(
    budget: usize,
    alloc: impl Fn(usize) -> Box<dyn FnMut(usize) -> Option<HeapBlock<'h>> + 'h> + Sync,
) -> Result<Vec<Vec<HeapBlock<'h>>>, TestFailure> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let alloc = &alloc;
                s.spawn(move || -> Result<Vec<HeapBlock<'h>>, TestFailure> {
                    let mut allocate = alloc(t);
                    let mut blocks = Vec::new();
                    let mut total = 0;
                    while total < budget {
                        let size = size_for(t, blocks.len());
                        let block = allocate(size).ok_or_else(|| TestFailure(format!("thread {t}: allocation {} of {size} bytes failed after {total}", blocks.len())))?;
                        check(block.len() == size.max(1).next_multiple_of(8), || format!("asked for {size}, got {}", block.len()))?;
                        fill(block.words(), t, blocks.len());
                        total += block.len();
                        blocks.push(block);
                    }
                    Ok(blocks)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().map_err(|_| TestFailure("an allocating thread panicked".into()))?).collect()
    })
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("shared") => {
            let blocks = allocate_from_threads(40 * MB, |_| Box::new(|size| vm.allocate(size)))?;
            verify(vm, &blocks)
        }
        Some("tlab") => {
            let blocks = allocate_from_threads(40 * MB, |t| {
                // Two threads with the default buffer, two with 64 KiB buffers (which send
                // the 64 KiB+ and 1 MiB+ requests to the heap directly).
                let mut tlab = if t % 2 == 0 { vm.heap().tlab() } else { vm.heap().tlab_with_size(64 * 1024) };
                Box::new(move |size| tlab.allocate(size))
            })?;
            verify(vm, &blocks)
        }
        Some("zero") => {
            let heap = vm.heap().range();
            let mut seen = std::collections::HashSet::new();
            let mut tlab = vm.tlab();
            for i in 0..1000 {
                let block = if i % 2 == 0 { vm.allocate(0) } else { tlab.allocate(0) };
                let block = block.ok_or_else(|| TestFailure("allocate(0) failed".into()))?;
                let at = block.as_ptr() as usize;
                check(block.len() == 8 && heap.contains(&at), || format!("allocate(0) gave {} bytes at {at:#x}, heap {heap:x?}", block.len()))?;
                check(seen.insert(at), || format!("allocate(0) gave {at:#x} twice"))?;
                block.words()[0].store(u64::MAX, Ordering::Relaxed);
            }
            for bytes in [usize::MAX, usize::MAX - 6, isize::MAX as usize, 17 * MB] {
                check(vm.allocate(bytes).is_none(), || format!("allocate({bytes}) succeeded"))?;
                check(tlab.allocate(bytes).is_none(), || format!("tlab.allocate({bytes}) succeeded"))?;
            }
            // The heap is still usable after the refusals.
            check(vm.allocate(64).is_some() && tlab.allocate(64).is_some(), || "allocation failed after refusals".into())?;
            println!("1000 zero-byte allocations, all distinct");
            Ok(())
        }
        Some("tail") => {
            let stats = vm.heap_stats();
            let free = stats.committed - stats.used;
            let _bulk = vm.allocate(free - 100 * 1024).ok_or_else(|| TestFailure("cannot fill the heap".into()))?;
            // 100 KiB left: a 200 KiB request (fetch_add path) fails, a 2 MiB one (CAS path) too.
            check(vm.allocate(200 * 1024).is_none() && vm.allocate(2 * MB).is_none(), || "a block larger than the rest was allocated".into())?;
            // A TLAB cannot take its 256 KiB buffer, but its small blocks fit.
            let mut tlab = vm.tlab();
            let small = tlab.allocate(64).ok_or_else(|| TestFailure("a TLAB allocation failed with 100 KiB left".into()))?;
            let rest = 100 * 1024 - 64;
            let last = vm.allocate(rest - 8).ok_or_else(|| TestFailure("the rest of the heap cannot be allocated after a failure".into()))?;
            let end = vm.heap().range().start + vm.heap_stats().committed;
            let final_word = vm.allocate(8).ok_or_else(|| TestFailure("the last word cannot be allocated".into()))?;
            check(final_word.as_ptr() as usize + 8 == end, || format!("the last word is at {:p}, the end at {end:#x}", final_word.as_ptr()))?;
            check(small.as_ptr() < last.as_ptr(), || "blocks out of order".into())?;
            for _ in 0..3 {
                check(vm.allocate(0).is_none() && vm.allocate(8).is_none() && tlab.allocate(8).is_none(), || "allocation from a full heap succeeded".into())?;
            }
            check(vm.heap_stats().used == vm.heap_stats().committed, || format!("used {} of {}", vm.heap_stats().used, vm.heap_stats().committed))?;
            vm.expand_heap(MB)?;
            let after = vm.allocate(MB).ok_or_else(|| TestFailure("no room after the expansion".into()))?;
            check(after.as_ptr() as usize == end, || "the expansion's first block is not at the old end".into())?;
            println!("tail: failures left the rest usable; full heap refused; expansion reused from the old end");
            Ok(())
        }
        Some("exhaustion") => {
            let max = vm.heap_stats().reserved;
            let done = AtomicBool::new(false);
            let failed = AtomicU64::new(0);
            let (blocks, expansions) = std::thread::scope(|s| {
                let expander = s.spawn(|| {
                    let mut n = 0;
                    while vm.heap_stats().committed < max {
                        // Expand only once allocations fail: the expansion races with them.
                        let seen = failed.load(Ordering::Acquire);
                        while failed.load(Ordering::Acquire) < seen + 16 {
                            std::thread::yield_now();
                        }
                        if vm.expand_heap(2 * MB).is_ok() {
                            n += 1;
                        }
                    }
                    done.store(true, Ordering::Release);
                    n
                });
                let handles: Vec<_> = (0..THREADS)
                    .map(|t| {
                        let (done, failed) = (&done, &failed);
                        s.spawn(move || {
                            let mut blocks = Vec::new();
                            let mut tlab = vm.heap().tlab_with_size(32 * 1024);
                            let mut failures = 0u64;
                            loop {
                                let size = size_for(t, blocks.len());
                                let block = if t % 2 == 0 { vm.allocate(size) } else { tlab.allocate(size) };
                                match block {
                                    Some(block) => {
                                        fill(block.words(), t, blocks.len());
                                        blocks.push(block);
                                    }
                                    None if done.load(Ordering::Acquire) => {
                                        // Full at MaxHeapSize: drain with small blocks.
                                        match vm.allocate(8) {
                                            Some(block) => {
                                                fill(block.words(), t, blocks.len());
                                                blocks.push(block);
                                            }
                                            None => break,
                                        }
                                    }
                                    None => {
                                        failures += 1;
                                        failed.fetch_add(1, Ordering::Release);
                                        std::thread::yield_now();
                                    }
                                }
                            }
                            (blocks, failures)
                        })
                    })
                    .collect();
                let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
                (results, expander.join().unwrap())
            });
            let failures: u64 = blocks.iter().map(|(_, f)| f).sum();
            let blocks: Vec<_> = blocks.into_iter().map(|(b, _)| b).collect();
            verify(vm, &blocks)?;
            let stats = vm.heap_stats();
            let handed_out: usize = blocks.iter().flatten().map(|b| b.len()).sum();
            println!("{expansions} expansions, {failures} failed allocations; committed {}, used {}, handed out {handed_out}", stats.committed, stats.used);
            check(stats.committed == max, || format!("committed {} of {max}", stats.committed))?;
            check(failures > 0, || "no allocation failed: the test did not race with expansions".into())?;
            check(stats.used <= stats.committed, || format!("used {} beyond committed {}", stats.used, stats.committed))?;
            // What is not handed out: the unused tails of two TLABs (32 KiB each) and bytes
            // left before the end by racing failures at the very end (at most one block each).
            let waste = stats.committed - handed_out;
            check(waste <= 2 * 32 * 1024 + THREADS * 2 * MB, || format!("{waste} bytes of the committed heap were never handed out"))?;
            Ok(())
        }
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
