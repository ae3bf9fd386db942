//! 8-byte allocation on 1 and 2 threads: the heap's shared path (`Heap::allocate`), a TLAB
//! (`Tlab::allocate`), a failing `Heap::allocate` on a full heap, and the yardstick — a bare `fetch_add` on one shared cursor, the
//! cheapest thing a shared bump allocator can do — measured in the same run.
//!
//! `cargo bench -p rtvm --bench alloc [-- --rounds N] [-- --allocs N]`
//!
//! A sample gives each thread its own VM-less loop of N allocations (default 10 M per
//! thread); the threads start together behind a barrier and the clock runs until the last one
//! ends. Each sample gets a fresh VM (created and shut down outside the clock) with a heap
//! large enough for all of it; allocation does not touch the memory it hands out, so nothing
//! here depends on page faults. Variants are interleaved in a rotating order; medians of
//! ns per allocation (wall time × threads / allocations) are reported, and ratios against
//! the yardstick of the same thread count.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rtvm::{InitArgs, Vm};
use rtvm_testkit::bench::{arg, listing, median};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Variant {
    FetchAdd,
    Shared,
    Tlab,
    Failing,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::FetchAdd => "fetch_add on a shared cursor (yardstick)",
            Variant::Shared => "Heap::allocate (shared, lock-free)",
            Variant::Tlab => "Tlab::allocate",
            Variant::Failing => "Heap::allocate failing (heap full)",
        }
    }
}

/// Consumes a value in a register: the allocation must happen, but unlike `black_box` this
/// claims no memory clobber, so a TLAB's cursor may stay in a register as it would in an
/// allocation loop that calls nothing opaque.
#[inline(always)]
fn sink(value: usize) {
    // SAFETY: an empty assembly block that reads one register and touches nothing.
    unsafe { std::arch::asm!("/* {0} */", in(reg) value, options(nomem, nostack, preserves_flags)) }
}

/// A cursor on its own cache line, as a shared allocator's top would be.
#[repr(align(128))]
struct Cursor(AtomicUsize);

fn sample(variant: Variant, threads: usize, allocs: usize) -> Duration {
    let heap_bytes = (threads * allocs * 8 + (64 << 20)).next_power_of_two();
    let xmx = format!("-Xmx{}m", heap_bytes >> 20);
    let xms = format!("-Xms{}m", heap_bytes >> 20);
    let vm = Vm::create(InitArgs::new([
        xms.as_str(),
        xmx.as_str(),
        "-XX:ParallelGCThreads=1",
    ]))
    .expect("create VM");
    let heap = Arc::clone(vm.heap());
    if variant == Variant::Failing {
        let free = heap.stats().committed - heap.stats().used;
        heap.allocate(free).expect("fill the heap");
    }
    let cursor = Arc::new(Cursor(AtomicUsize::new(0)));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> =
        (0..threads)
            .map(|_| {
                let (heap, cursor, barrier) =
                    (Arc::clone(&heap), Arc::clone(&cursor), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    match variant {
                        Variant::FetchAdd => {
                            for _ in 0..allocs {
                                sink(cursor.0.fetch_add(8, Ordering::Relaxed));
                            }
                        }
                        Variant::Shared => {
                            for _ in 0..allocs {
                                sink(heap.allocate(8).expect("heap sized for the run").as_ptr()
                                    as usize);
                            }
                        }
                        Variant::Failing => {
                            for _ in 0..allocs {
                                sink(heap.allocate(8).is_none() as usize);
                            }
                        }
                        Variant::Tlab => {
                            let mut tlab = heap.tlab();
                            for _ in 0..allocs {
                                sink(tlab.allocate(8).expect("heap sized for the run").as_ptr()
                                    as usize);
                            }
                        }
                    }
                    barrier.wait();
                })
            })
            .collect();
    barrier.wait();
    let start = Instant::now();
    barrier.wait();
    let elapsed = start.elapsed();
    for h in handles {
        h.join().unwrap();
    }
    drop(heap);
    vm.shutdown().unwrap();
    elapsed
}

fn main() {
    if listing() {
        return;
    }
    let rounds: usize = arg("--rounds").unwrap_or(7);
    let allocs: usize = arg("--allocs").unwrap_or(10_000_000);
    let variants = [
        Variant::FetchAdd,
        Variant::Shared,
        Variant::Tlab,
        Variant::Failing,
    ];
    let mut results: BTreeMap<(usize, Variant), Vec<u64>> = BTreeMap::new();
    for round in 0..rounds {
        for threads in [1, 2] {
            for k in 0..variants.len() {
                let v = variants[(k + round) % variants.len()];
                let d = sample(v, threads, allocs);
                // ns per allocation per thread: what one allocation costs the thread doing it.
                let ns = d.as_nanos() as u64 * 1000 / allocs as u64;
                results.entry((threads, v)).or_default().push(ns);
            }
        }
    }
    println!("8-byte allocations, {allocs} per thread, {rounds} rounds interleaved; medians");
    println!("| threads | path | ns per allocation | vs fetch_add |");
    println!("| ---: | --- | ---: | ---: |");
    for threads in [1, 2] {
        let yard = median(results[&(threads, Variant::FetchAdd)].clone()) as f64 / 1000.0;
        for v in variants {
            let ns = median(results[&(threads, v)].clone()) as f64 / 1000.0;
            println!("| {threads} | {} | {ns:.2} | {:.2}× |", v.name(), ns / yard);
        }
    }
}
