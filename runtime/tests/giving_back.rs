//! Giving memory back, through the kernel's view (VmRSS, smaps, `mincore`), each case in a
//! child process: the C allocator trimmed (RSS down by 300 MB after 512 MB malloc'd and
//! mostly freed by VM threads); the heap shrunk (RSS and committed drop, allocation and
//! expansion work after, bad targets refused with nothing changed) — also while allocators,
//! an expander and a background pretouch run, every word they wrote checked; an embedder
//! memory discarded (zeroes, not resident) and shrunk (the tail faults, a later growth works);
//! 1,000 threads that recursed 1 MiB and trimmed their stacks against 1,000 that never did;
//! reused stacks are `nh`, guarded and empty below their frame; trimming from a thread the VM
//! does not know is refused.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rtvm::{InitArgs, MemoryRequest, ThreadError, Vm};
use rtvm_os_linux::procfs;
use rtvm_testkit::child::{check_child, child_role, describe, run_child};
use rtvm_testkit::stack::use_stack;

const MB: usize = 1 << 20;

fn rss() -> usize {
    procfs::read_status().unwrap().vm_rss_kb as usize * 1024
}

fn create(options: &[&str]) -> Vm {
    Vm::create(InitArgs::new(options.iter().copied())).unwrap()
}

#[test]
fn trim_native_heap_gives_back_freed_malloc() {
    if child_role().is_none() {
        return check_child("trim_native_heap_gives_back_freed_malloc");
    }
    let vm = create(&["-Xmx64m"]);
    // 16 VM threads malloc 32 MiB each in 16 KiB blocks, touch them and free 15 of 16.
    let threads: Vec<_> = (0..16)
        .map(|t| {
            vm.spawn(&format!("Malloc#{t}"), || {
                let blocks: Vec<Vec<u8>> = (0..2048).map(|_| vec![1u8; 16 << 10]).collect();
                let kept: Vec<Vec<u8>> = blocks.into_iter().step_by(16).collect();
                std::mem::forget(black_box(kept));
            })
            .unwrap()
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let before = rss();
    let r = vm.trim_native_heap().expect("glibc is the allocator here");
    let after = rss();
    println!(
        "trim: VmRSS {} MB -> {} MB; the report: {} -> {} MB in {:?}",
        before / MB,
        after / MB,
        r.rss_before / MB as u64,
        r.rss_after / MB as u64,
        r.took
    );
    assert!(before >= after + 300 * MB, "{before} -> {after}");
    assert!(r.rss_before >= r.rss_after + 300 * MB as u64);
    assert!(vm
        .diagnostic_command("System.trim_native_heap")
        .unwrap()
        .starts_with("Trim native heap: RSS+Swap: "));
    println!("CHILD OK");
}

#[test]
fn heap_shrink_gives_pages_back_and_refuses_bad_targets() {
    if child_role().is_none() {
        return check_child("heap_shrink_gives_pages_back_and_refuses_bad_targets");
    }
    let vm = create(&[
        "-Xms512m",
        "-Xmx1g",
        "-XX:+AlwaysPreTouch",
        "-XX:MinHeapSize=32m",
        "-XX:NativeMemoryTracking=summary",
    ]);
    let heap = vm.heap();
    let block = vm.allocate(48 * MB).unwrap();
    block.words()[0].store(7, Ordering::Relaxed);
    let last = block.words().len() - 1;
    block.words()[last].store(9, Ordering::Relaxed);
    let (committed, resident) = (vm.heap_stats().committed, heap.resident_bytes());
    assert_eq!(committed, 512 * MB);
    assert!(resident >= 500 * MB, "pretouched: {resident}");
    let nmt_before = vm.native_memory_summary().unwrap().heap.committed;
    let rss_before = rss();
    // Refused: below what is allocated, below MinHeapSize. Nothing changes.
    let used = vm.heap_stats().used + vm.heap_stats().nursery;
    for bad in [16 * MB, 8 * MB] {
        let e = vm.shrink_heap(bad).unwrap_err();
        assert!(
            e.to_string().starts_with("cannot shrink the heap to "),
            "{e}"
        );
        assert_eq!(vm.heap_stats().committed, 512 * MB, "{e}");
    }
    assert!(used > 16 * MB);
    let shrunk = vm.shrink_heap(64 * MB).unwrap();
    assert_eq!(shrunk, 64 * MB);
    assert_eq!(vm.heap_stats().committed, 64 * MB);
    let rss_after = rss();
    let resident_after = heap.resident_bytes();
    println!(
        "heap shrink 512 MB -> 64 MB: VmRSS {} MB -> {} MB, heap resident {} MB -> {} MB, NMT committed {} MB -> {} MB",
        rss_before / MB,
        rss_after / MB,
        resident / MB,
        resident_after / MB,
        nmt_before / MB as u64,
        vm.native_memory_summary().unwrap().heap.committed / MB as u64
    );
    assert!(rss_before >= rss_after + 400 * MB);
    assert!(resident_after <= 64 * MB);
    assert_eq!(
        block.words()[0].load(Ordering::Relaxed),
        7,
        "a live block keeps its contents"
    );
    assert_eq!(block.words()[last].load(Ordering::Relaxed), 9);
    // Allocation and expansion work after it; the part given back is pretouched again.
    assert!(vm.allocate(32 * MB).is_none(), "beyond the new end");
    assert!(vm.allocate(8 * MB).is_some());
    assert_eq!(vm.expand_heap(128 * MB).unwrap(), 192 * MB);
    assert!(
        heap.resident_bytes() >= 190 * MB,
        "expanded and pretouched again"
    );
    let b = vm.allocate(64 * MB).unwrap();
    assert!(
        b.words()
            .iter()
            .step_by(512)
            .all(|w| w.load(Ordering::Relaxed) == 0),
        "zero"
    );
    // Explicitly: a target above the committed size changes nothing.
    assert_eq!(vm.shrink_heap(1 << 30).unwrap(), 192 * MB);
    println!("CHILD OK");
}

/// Four allocators write every word of their blocks, an expander and a shrinker move the end
/// and a background pretouch runs at the start: every word is still what its writer wrote.
#[test]
fn shrink_races_allocators_expansion_and_background_pretouch() {
    if child_role().is_none() {
        return check_child("shrink_races_allocators_expansion_and_background_pretouch");
    }
    let vm = create(&[
        "-Xms256m",
        "-Xmx1g",
        "-XX:+AlwaysPreTouch",
        "-XX:+UnlockExperimentalVMOptions",
        "-XX:+BackgroundPreTouch",
        "-XX:MinHeapSize=8m",
        "-XX:ParallelGCThreads=2",
    ]);
    let heap = Arc::clone(vm.heap());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(6));
    let mut threads = Vec::new();
    for a in 0..4u64 {
        let (heap, stop, start) = (Arc::clone(&heap), Arc::clone(&stop), Arc::clone(&start));
        threads.push(std::thread::spawn(move || {
            start.wait();
            let mut blocks = Vec::new();
            let mut checked = 0usize;
            while !stop.load(Ordering::Relaxed) && blocks.len() < 20_000 {
                if let Some(b) = heap.allocate(4096) {
                    for (i, w) in b.words().iter().enumerate() {
                        w.store(
                            (a << 56) ^ (blocks.len() as u64) << 20 ^ i as u64,
                            Ordering::Relaxed,
                        );
                    }
                    blocks.push(b);
                } else {
                    std::thread::yield_now();
                }
            }
            for (n, b) in blocks.iter().enumerate() {
                for (i, w) in b.words().iter().enumerate() {
                    assert_eq!(
                        w.load(Ordering::Relaxed),
                        (a << 56) ^ (n as u64) << 20 ^ i as u64,
                        "allocator {a}, block {n}, word {i}"
                    );
                    checked += 1;
                }
            }
            checked
        }));
    }
    let (h, st, go) = (Arc::clone(&heap), Arc::clone(&stop), Arc::clone(&start));
    let gang_heap = vm.handle();
    threads.push(std::thread::spawn(move || {
        go.wait();
        let mut n = 0;
        while !st.load(Ordering::Relaxed) {
            let _ = gang_heap.expand_heap(4 * MB);
            n += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        let _ = h;
        n
    }));
    let (h, st, go) = (Arc::clone(&heap), Arc::clone(&stop), Arc::clone(&start));
    threads.push(std::thread::spawn(move || {
        go.wait();
        let mut shrinks = 0;
        while !st.load(Ordering::Relaxed) {
            let s = h.stats();
            if h.shrink(s.nursery + s.used + 2 * MB).is_ok() {
                shrinks += 1;
            }
            std::thread::sleep(Duration::from_micros(300));
        }
        shrinks
    }));
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let results: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let words: usize = results[..4].iter().sum();
    println!(
        "race: {} words written and checked by 4 allocators; {} expansions, {} shrinks; background pretouch: {:?}",
        words,
        results[4],
        results[5],
        vm.wait_for_pretouch().map(|r| r.map(|r| r.bytes))
    );
    assert!(results[5] > 10, "the shrinker never shrank");
    assert!(words > 100_000);
    println!("CHILD OK");
}

#[test]
fn memory_discard_zeroes_and_shrink_makes_the_tail_fault() {
    match child_role().as_deref() {
        None => {
            check_child("memory_discard_zeroes_and_shrink_makes_the_tail_fault");
            // In a child of its own: the write into the uncommitted tail must kill it.
            let out = run_child(
                "memory_discard_zeroes_and_shrink_makes_the_tail_fault",
                "fault",
            );
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                out.status.signal(),
                Some(libc::SIGSEGV),
                "{}",
                describe(&out)
            );
            return;
        }
        Some("fault") => {
            let vm = create(&["-Xmx16m"]);
            let mut m = vm
                .reserve_memory(MemoryRequest::new("Wasm Memory", 64 * MB).initial(8 * MB))
                .unwrap();
            m.shrink_to(4 * MB).unwrap();
            println!("writing beyond the shrunk size");
            let p = m.base() as usize + 6 * MB;
            poke(p);
            unreachable!("the write did not fault");
        }
        Some(_) => {}
    }
    let vm = create(&["-Xmx16m", "-XX:NativeMemoryTracking=summary"]);
    let mut m = vm
        .reserve_memory(MemoryRequest::new("Wasm Memory", 64 * MB).initial(16 * MB))
        .unwrap();
    let base = m.base() as usize;
    fill(base, 16 * MB, 0xab);
    assert_eq!(m.resident_bytes(), 16 * MB);
    m.discard(4 * MB, 8 * MB).unwrap();
    assert_eq!(
        m.resident_bytes(),
        8 * MB,
        "the discarded range is not resident"
    );
    assert_eq!(peek(base + 4 * MB), 0, "discarded memory reads zero");
    assert_eq!(peek(base + 12 * MB), 0xab, "the rest is kept");
    assert_eq!(
        m.resident_bytes(),
        8 * MB + 4096,
        "a read of a discarded page maps one zero page"
    );
    // Outside or unaligned: refused, nothing changes.
    for (o, l) in [(15 * MB, 2 * MB), (1, 4096), (0, 100)] {
        let e = m.discard(o, l).unwrap_err();
        assert!(e.to_string().contains("cannot discard"), "{e}");
    }
    let before = procfs::read_status().unwrap();
    m.shrink_to(6 * MB).unwrap();
    assert_eq!(m.size(), 6 * MB);
    let after = procfs::read_status().unwrap();
    println!(
        "memory shrink 16 MB -> 6 MB: VmRSS {} kB -> {} kB, NMT committed {} kB",
        before.vm_rss_kb,
        after.vm_rss_kb,
        vm.native_memory_summary().unwrap().memory_categories()[0]
            .1
            .committed
            / 1024
    );
    assert!(before.vm_rss_kb >= after.vm_rss_kb + 2 * 1024);
    assert_eq!(
        vm.native_memory_summary().unwrap().memory_categories()[0]
            .1
            .committed,
        6 * MB as u64
    );
    m.grow_to(10 * MB).unwrap();
    assert_eq!(peek(base + 8 * MB), 0, "a regrown tail reads zero");
    assert_eq!(
        peek(base + 3 * MB),
        0xab,
        "below the shrink point the contents stay"
    );
    println!("CHILD OK");
}

fn fill(addr: usize, len: usize, byte: u8) {
    // The memory is the embedder's, reached through its base pointer.
    let words = len / 8;
    let p = addr as *mut u64;
    for i in 0..words {
        // SAFETY: [addr, addr+len) is committed memory of a VmMemory this test owns.
        unsafe { p.add(i).write_volatile(u64::from_ne_bytes([byte; 8])) };
    }
}

fn peek(addr: usize) -> u8 {
    // SAFETY: `addr` lies in committed memory of a VmMemory this test owns.
    unsafe { (addr as *const u8).read_volatile() }
}

fn poke(addr: usize) {
    // SAFETY: deliberately invalid (uncommitted memory): the test expects SIGSEGV.
    unsafe { (addr as *mut u8).write_volatile(1) };
}

/// The RSS growth of 1,000 parked threads; each first recursed 1 MiB and trimmed its stack
/// if `deep`.
fn stacks_rss(vm: &Vm, deep: bool) -> usize {
    let n = 1000;
    let ready = Arc::new(Barrier::new(n + 1));
    let done = Arc::new(Barrier::new(n + 1));
    let before = rss();
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let (ready, done, h) = (Arc::clone(&ready), Arc::clone(&done), vm.handle());
            vm.spawn(&format!("Stack#{i}"), move || {
                if deep {
                    black_box(use_stack(MB));
                    let freed = h.trim_current_stack().unwrap();
                    assert!(freed >= 900 * 1024, "only {freed} bytes given back");
                }
                ready.wait();
                done.wait();
            })
            .unwrap()
        })
        .collect();
    ready.wait();
    let grown = rss().saturating_sub(before);
    done.wait();
    for t in threads {
        t.join().unwrap();
    }
    grown
}

#[test]
fn a_thousand_trimmed_stacks_cost_what_idle_ones_do() {
    if child_role().is_none() {
        return check_child("a_thousand_trimmed_stacks_cost_what_idle_ones_do");
    }
    let vm = create(&["-Xmx16m", "-Xss2m", "-XX:ThreadStackCacheSize=0"]);
    let idle = stacks_rss(&vm, false);
    let trimmed = stacks_rss(&vm, true);
    println!(
        "1000 threads: {} KiB of RSS idle, {} KiB after each recursed 1 MiB and trimmed ({:.2}x)",
        idle / 1024,
        trimmed / 1024,
        trimmed as f64 / idle.max(1) as f64
    );
    assert!(
        trimmed <= idle + idle / 10 + 1000 * 8 * 1024,
        "{trimmed} > {idle} + 10% + 8 KiB per thread"
    );
    // Not a VM thread: refused, nothing done.
    let e = std::thread::spawn({
        let h = vm.handle();
        move || h.trim_current_stack()
    })
    .join()
    .unwrap()
    .unwrap_err();
    assert!(
        matches!(e, ThreadError::NotAttached { started: None }),
        "{e}"
    );
    println!("CHILD OK");
}

#[test]
fn reused_stacks_are_nh_guarded_and_empty() {
    if child_role().is_none() {
        return check_child("reused_stacks_are_nh_guarded_and_empty");
    }
    let vm = create(&["-Xmx16m", "-XX:NativeMemoryTracking=summary"]);
    let first = vm.spawn("Deep", || {
        black_box(use_stack(512 * 1024));
    });
    let first = first.unwrap();
    let mapping = first.info().layout.mapping.clone();
    first.join().unwrap();
    let n = vm.native_memory_summary().unwrap();
    assert_eq!(n.stack_cache.0, 1, "the joined thread's stack is kept");
    assert!(
        n.stack_cache.1.committed <= 8192,
        "its pages were given back: {:?}",
        n.stack_cache
    );
    assert!(
        n.report().contains("(stack cache: #1, reserved="),
        "{}",
        n.report()
    );
    let h = vm.handle();
    let second = vm
        .spawn("Reuser", move || {
            let me = h
                .threads()
                .into_iter()
                .find(|t| t.name == "Reuser")
                .unwrap();
            let l = &me.layout;
            let marker = 0u8;
            let sp = black_box(&marker as *const u8 as usize);
            let below = (sp & !4095) - 8192;
            let resident = procfs::present_pages(l.usable.start, below).unwrap();
            let smaps = procfs::smaps_overlapping(l.mapping.start, l.mapping.end).unwrap();
            assert!(
                me.guard_installed(),
                "{:?} state {:?}",
                me.layout,
                me.state()
            );
            assert!(
                smaps
                    .iter()
                    .all(|e| e.has_flag("nh") && e.anon_huge_kb == 0),
                "{smaps:?}"
            );
            assert_eq!(
                resident, 0,
                "the previous thread's deep frames were given back"
            );
        })
        .unwrap();
    let second_mapping = second.info().layout.mapping.clone();
    second.join().unwrap();
    assert_eq!(
        second_mapping, mapping,
        "the second thread started on the cached stack"
    );
    // A manageable flag: the cache shrinks when told.
    assert_eq!(
        vm.diagnostic_command("VM.set_flag ThreadStackCacheSize 0")
            .unwrap(),
        ""
    );
    assert_eq!(vm.native_memory_summary().unwrap().stack_cache.0, 0);
    let flags = vm.diagnostic_command("VM.flags -all").unwrap();
    let line = flags
        .lines()
        .find(|l| l.contains(" ThreadStackCacheSize "))
        .unwrap();
    assert!(
        line.contains("= 0 ") && line.contains("{manageable} {management}"),
        "{line}"
    );
    println!("a reused stack: nh, no AnonHugePages, guarded, nothing resident below its frame");
    println!("CHILD OK");
}

#[test]
fn the_idle_workers_give_their_stacks_back() {
    if child_role().is_none() {
        return check_child("the_idle_workers_give_their_stacks_back");
    }
    let vm = create(&["-Xmx16m", "-XX:ParallelGCThreads=2"]);
    struct Deep;
    impl rtvm::testing::GangTask for Deep {
        fn work(&self, _: usize) {
            black_box(use_stack(512 * 1024));
        }
    }
    vm.gang().run(Arc::new(Deep), 2).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let workers: Vec<usize> = vm
            .threads()
            .iter()
            .filter(|t| t.name.starts_with("Worker#"))
            .map(|t| t.stack_resident_bytes())
            .collect();
        if workers.iter().all(|&r| r < 128 * 1024) {
            println!("idle workers after a 512 KiB-deep task: {workers:?} bytes resident");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "workers kept their stacks: {workers:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("CHILD OK");
}
