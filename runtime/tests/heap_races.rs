//! The heap under races that held-out C programs found (issue 30), each in a child process of
//! its own (one VM per process), bounded by a count of rounds and a few seconds:
//!
//! * allocations (shared and TLAB) racing `shrink`/`expand` never fail while the heap the
//!   shrink leaves has room, and the figures read meanwhile never say it is full;
//! * allocations that fill a heap while it shrinks and grows lose no byte and hand none out
//!   twice: once they stop, `used` is exactly the sum of the blocks handed out, no two blocks
//!   overlap, and every block keeps what its owner wrote;
//! * a hold on the heap's background pretouch holds that pretouch only: an embedder memory's
//!   background pretouch, its wait, shrink and release, a heap shrink below the initial size
//!   and an expansion all complete while it stays held.
//!
//! A call that would hang is run on a helper thread and given a generous deadline (a hang
//! detector, not a timing assertion: each call takes milliseconds).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use rtvm::{Heap, InitArgs, MemoryRequest, Vm};
use rtvm_testkit::child::isolated;

const MB: usize = 1 << 20;

fn create(options: &[&str]) -> Vm {
    Vm::create(InitArgs::new(options.iter().copied())).unwrap()
}

/// Runs `f` on a helper thread; panics naming `what` if it has not returned after a minute
/// (it would hang for ever otherwise; the child process then exits with the failure).
fn returns<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} did not return: it waits behind the held pretouch"))
}

/// One allocator: `bytes`-byte blocks (through a TLAB if `tlab`) until `budget` bytes or
/// `stop`; each block's first word gets a tag. Returns (bytes allocated, blocks, failure).
fn allocate_until(
    heap: &Heap,
    bytes: usize,
    budget: usize,
    tlab: bool,
    stop: &AtomicBool,
) -> (usize, Vec<usize>, Option<String>) {
    let mut t = heap.tlab_with_size(4096);
    let mut done = 0;
    let mut sampled = Vec::new();
    while done < budget && !stop.load(Ordering::Relaxed) {
        let block = if tlab {
            t.allocate(bytes)
        } else {
            heap.allocate(bytes)
        };
        let Some(b) = block else {
            let s = heap.stats();
            return (
                done,
                sampled,
                Some(format!(
                    "a {bytes}-byte allocation failed after {done} bytes (tlab: {tlab}); now {} used of {} committed",
                    s.used, s.committed
                )),
            );
        };
        if done % (64 * 1024) == 0 {
            b.words()[0].store(b.as_ptr() as u64, Ordering::Relaxed);
            sampled.push(b.as_ptr() as usize);
        }
        done += bytes;
    }
    (done, sampled, None)
}

/// Two allocators (one shared, one through small TLABs) of 8-byte blocks, 32 MiB each,
/// while a thread shrinks a 1 GiB heap to 512 MiB and grows it back as long as they run (at
/// most 50,000 times or 4 s), and a fourth reads the figures: no allocation fails (the heap
/// the shrink leaves always has 440 MiB of room), the figures never show less room than that,
/// and every sampled block still holds its tag.
#[test]
fn allocations_and_figures_racing_shrinks_never_see_a_full_heap() {
    if isolated("allocations_and_figures_racing_shrinks_never_see_a_full_heap") {
        return;
    }
    let vm = create(&["-Xms1g", "-Xmx1g", "-XX:MinHeapSize=16m"]);
    let heap = Arc::clone(vm.heap());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(4));
    let running = Arc::new(AtomicUsize::new(2));
    let allocators: Vec<_> = [false, true]
        .into_iter()
        .map(|tlab| {
            let (heap, stop, start) = (Arc::clone(&heap), Arc::clone(&stop), Arc::clone(&start));
            let running = Arc::clone(&running);
            std::thread::spawn(move || {
                start.wait();
                let r = allocate_until(&heap, 8, 32 * MB, tlab, &stop);
                running.fetch_sub(1, Ordering::Release);
                r
            })
        })
        .collect();
    let reader = {
        let (heap, stop, start) = (Arc::clone(&heap), Arc::clone(&stop), Arc::clone(&start));
        std::thread::spawn(move || {
            start.wait();
            let mut reads = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let s = heap.stats();
                assert!(
                    s.committed >= 512 * MB && s.committed - s.used >= 440 * MB,
                    "read during a shrink: {} used of {} committed",
                    s.used,
                    s.committed
                );
                reads += 1;
            }
            reads
        })
    };
    start.wait();
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut rounds = 0;
    while running.load(Ordering::Acquire) > 0 && rounds < 50_000 && Instant::now() < deadline {
        assert_eq!(vm.shrink_heap(512 * MB).unwrap(), 512 * MB);
        assert_eq!(vm.expand_heap(512 * MB).unwrap(), 1024 * MB);
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().unwrap();
    let mut total = 0;
    for a in allocators {
        let (done, sampled, failure) = a.join().unwrap();
        if let Some(f) = failure {
            panic!("{f} — while the heap shrank to 512 MiB, of which at most 66 MiB were used");
        }
        for p in sampled {
            // SAFETY: a live heap block of at least 8 bytes, 8-byte aligned (the VM lives).
            let word = unsafe { &*(p as *const AtomicUsize) };
            assert_eq!(word.load(Ordering::Relaxed), p, "a block lost its contents");
        }
        total += done;
    }
    println!("{rounds} shrinks and regrowths raced {total} bytes of 8-byte allocations and {reads} reads of the figures: no failure, never full");
    assert!(
        rounds > 50 && reads > 50,
        "only {rounds} rounds, {reads} reads"
    );
}

/// Four allocators of mixed sizes (24 B to 1.5 MiB: the fetch-and-add and the
/// compare-and-swap paths) fill a heap of up to 48 MiB while a thread shrinks it to just
/// above what is used and grows it back, until each allocator has tried 20,000 times and the
/// thread has done 100 rounds (at most 5 s). Once
/// they stop: `used` is the sum of the blocks handed out to the byte, no two blocks overlap,
/// and every block still holds its owner's tags.
#[test]
fn allocations_filling_a_shrinking_heap_lose_nothing_and_share_nothing() {
    if isolated("allocations_filling_a_shrinking_heap_lose_nothing_and_share_nothing") {
        return;
    }
    let vm = create(&["-Xms16m", "-Xmx64m", "-XX:MinHeapSize=8m"]);
    let heap = Arc::clone(vm.heap());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(5));
    let slowest = Arc::new([(); 4].map(|()| AtomicUsize::new(0)));
    let allocators: Vec<_> = (0..4usize)
        .map(|a| {
            let (heap, stop, start) = (Arc::clone(&heap), Arc::clone(&stop), Arc::clone(&start));
            let tries = Arc::clone(&slowest);
            std::thread::spawn(move || {
                start.wait();
                let sizes = [24, 4096, 64 * 1024, 3 * MB / 2, 200, 40 * 1024];
                let mut blocks = Vec::new();
                let mut failures = 0usize;
                let mut i = a;
                while !stop.load(Ordering::Relaxed) {
                    let size = sizes[i % sizes.len()];
                    i += 1;
                    tries[a].fetch_add(1, Ordering::Relaxed);
                    match heap.allocate(size) {
                        Some(b) => {
                            let words = b.words();
                            let tag = ((a as u64) << 56) | blocks.len() as u64;
                            words[0].store(tag, Ordering::Relaxed);
                            words[words.len() - 1].store(!tag, Ordering::Relaxed);
                            blocks.push((b.as_ptr() as usize, b.len(), tag));
                        }
                        None => {
                            // As an allocator would, before it tries again.
                            failures += 1;
                            std::thread::yield_now();
                        }
                    }
                }
                (blocks, failures)
            })
        })
        .collect();
    start.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut rounds, mut shrunk) = (0, 0);
    let tried = || {
        slowest
            .iter()
            .map(|t| t.load(Ordering::Relaxed))
            .min()
            .unwrap()
    };
    while (tried() < 20_000 || rounds < 100) && Instant::now() < deadline {
        let s = heap.stats();
        if vm
            .shrink_heap(s.used + (rounds % 4) * MB)
            .is_ok_and(|c| c < s.committed)
        {
            shrunk += 1;
        }
        // Below 48 MiB, so that the heap never fills up to MaxHeapSize (no shrink then).
        if heap.stats().committed < 48 * MB {
            let _ = vm.expand_heap((rounds % 3 + 1) * MB);
        }
        rounds += 1;
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let mut failures = 0;
    for a in allocators {
        let (blocks, f) = a.join().unwrap();
        all.extend(blocks);
        failures += f;
    }
    all.sort_unstable();
    for w in all.windows(2) {
        assert!(
            w[0].0 + w[0].1 <= w[1].0,
            "blocks handed out twice: {:#x}+{} and {:#x}+{}",
            w[0].0,
            w[0].1,
            w[1].0,
            w[1].1
        );
    }
    for &(p, len, tag) in &all {
        // SAFETY: live heap blocks of `len` bytes, 8-byte aligned (the VM lives).
        let (first, last) = unsafe {
            (
                &*(p as *const AtomicUsize),
                &*((p + len - 8) as *const AtomicUsize),
            )
        };
        assert_eq!(
            (
                first.load(Ordering::Relaxed) as u64,
                last.load(Ordering::Relaxed) as u64
            ),
            (tag, !tag),
            "block {p:#x}+{len} lost its contents"
        );
    }
    let handed_out: usize = all.iter().map(|b| b.1).sum();
    let s = heap.stats();
    let tried = tried();
    println!(
        "{} blocks ({handed_out} bytes) and {failures} failed allocations (the slowest allocator tried {tried} times) raced {rounds} rounds ({shrunk} shrinks); {} used of {} committed",
        all.len(),
        s.used,
        s.committed
    );
    assert_eq!(
        s.used, handed_out,
        "the heap counts {} bytes used, the allocators got {handed_out}: bytes were lost",
        s.used
    );
    assert!(rounds >= 20 && failures > 0, "the race did not happen");
}

/// With `-XX:+HoldBackgroundPreTouch` holding the heap's pretouch, everything else that
/// pretouches or waits completes: an embedder memory reserved with a background pretouch is
/// pretouched by the gang and its wait returns, another is shrunk and a third dropped; the
/// heap shrinks below its initial size and grows again. Through all of it the heap's own
/// pretouch stays held; released, it completes.
#[test]
fn a_held_heap_pretouch_holds_nothing_else() {
    if isolated("a_held_heap_pretouch_holds_nothing_else") {
        return;
    }
    let vm = Arc::new(create(&[
        "-Xms64m",
        "-Xmx64m",
        "-XX:MinHeapSize=8m",
        "-XX:+AlwaysPreTouch",
        "-XX:+UnlockExperimentalVMOptions",
        "-XX:+BackgroundPreTouch",
        "-XX:+HoldBackgroundPreTouch",
        "-XX:ParallelGCThreads=2",
    ]));
    let held = |vm: &Vm| vm.heap().pretouch_progress() == Some((0, 64 * MB));
    assert!(held(&vm));
    let v = Arc::clone(&vm);
    let resident = returns("a memory's wait for its background pretouch", move || {
        let mut m = v
            .handle()
            .reserve_memory(MemoryRequest::new("Wasm Memory", 32 * MB).initial(32 * MB))
            .unwrap();
        let report = m
            .wait_for_pretouch()
            .unwrap()
            .expect("a background pretouch");
        assert!(report.workers > 0, "pretouched on the caller: {report:?}");
        m.resident_bytes()
    });
    assert_eq!(resident, 32 * MB, "the memory's pretouch did not complete");
    let v = Arc::clone(&vm);
    returns("a memory's shrink", move || {
        let mut m = v
            .handle()
            .reserve_memory(MemoryRequest::new("Wasm Memory", 16 * MB).initial(16 * MB))
            .unwrap();
        m.shrink_to(4 * MB).unwrap();
        assert_eq!(m.size(), 4 * MB);
    });
    let v = Arc::clone(&vm);
    returns("a memory's release", move || {
        drop(
            v.handle()
                .reserve_memory(MemoryRequest::new("Wasm Memory", 16 * MB).initial(16 * MB))
                .unwrap(),
        )
    });
    let v = Arc::clone(&vm);
    let shrunk = returns("a heap shrink below the initial size", move || {
        v.shrink_heap(16 * MB)
    });
    assert_eq!(shrunk.unwrap(), 16 * MB, "a shrink over a held pretouch");
    let v = Arc::clone(&vm);
    let grown = returns("a heap expansion", move || v.expand_heap(48 * MB));
    assert_eq!(grown.unwrap(), 64 * MB);
    assert_eq!(
        vm.heap().resident_bytes(),
        48 * MB,
        "the expansion pretouched its part, the held pretouch nothing"
    );
    assert!(
        held(&vm),
        "the hold did not hold: {:?}",
        vm.heap().pretouch_progress()
    );
    assert!(vm.release_pretouch());
    let v = Arc::clone(&vm);
    let report = returns("the released pretouch", move || v.wait_for_pretouch())
        .unwrap()
        .unwrap();
    assert_eq!(vm.heap().resident_bytes(), 64 * MB);
    println!("held throughout: memories pretouched, waited for, shrunk and dropped; the heap shrunk and grown; released: {report:?}");
}
