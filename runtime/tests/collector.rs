//! What a collector builds on, from Rust. Each case runs in a child process (the stop signal,
//! the world word and thread counts are process-wide):
//!
//! * collector threads: listed by the registry, `Thread.print` and NMT, never among the
//!   stopped threads, running and allocating while the world is stopped; joined by the
//!   shutdown once its hook told them to end;
//! * a `WorldStopped` handed to another thread and dropped there; the stopping thread may
//!   stop again afterwards, not before;
//! * mutators in tight allocation loops that never poll, stopped hundreds of times by the
//!   signal while the stopper and the collector threads allocate, format and log;
//! * a no-stop section (`NoAsyncStop`) and code declared `CodeKind::NoStop`: the signal does
//!   not stop a thread there; the section's end does (as a poll), a forgotten declaration
//!   lets the signal in again.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtvm::{
    CodeKind, InitArgs, NoAsyncStop, SafepointError, StopHow, ThreadKind, Vm, WorldStopped,
};
use rtvm_testkit::child::{check_child, child_role};

fn create(options: &[&str]) -> Vm {
    Vm::create(InitArgs::new(options.iter().copied())).unwrap()
}

const TEN_SECONDS: Duration = Duration::from_secs(10);

// The promise the API makes: a stop may be handed between threads.
const _: () = {
    const fn send<T: Send>() {}
    send::<WorldStopped>();
};

/// Allocates and frees in a loop that never polls (most of its time inside the allocator).
#[inline(never)]
fn allocate_forever(counter: &AtomicU64, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let n = counter.load(Ordering::Relaxed);
        let v: Vec<u64> = black_box(Vec::with_capacity(4 + (n as usize & 63)));
        drop(v);
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn collector_threads_run_and_allocate_while_the_world_is_stopped() {
    if child_role().is_none() {
        return check_child("collector_threads_run_and_allocate_while_the_world_is_stopped");
    }
    let vm = create(&["-Xmx16m", "-XX:NativeMemoryTracking=summary"]);
    let stop = Arc::new(AtomicBool::new(false));
    let mutator_counts: Arc<Vec<AtomicU64>> = Arc::new((0..3).map(|_| AtomicU64::new(0)).collect());
    let collector_counts: Arc<Vec<AtomicU64>> =
        Arc::new((0..2).map(|_| AtomicU64::new(0)).collect());
    let _ends = StopOnDrop(Arc::clone(&stop));
    let mut mutators = Vec::new();
    for k in 0..3 {
        let (c, s) = (Arc::clone(&mutator_counts), Arc::clone(&stop));
        mutators.push(
            vm.spawn(&format!("Allocator#{k}"), move || {
                allocate_forever(&c[k], &s)
            })
            .unwrap(),
        );
    }
    // The collector's threads end when its shutdown hook says so.
    let (quit_tx, quit_rx) = mpsc::channel::<()>();
    let quit_rx = Arc::new(std::sync::Mutex::new(quit_rx));
    let mut collector_ids = Vec::new();
    for k in 0..2 {
        let (c, q) = (Arc::clone(&collector_counts), Arc::clone(&quit_rx));
        let t = vm
            .spawn_collector(&format!("GC Thread#{k}"), move || {
                let mut log = Vec::new();
                loop {
                    log.push(format!(
                        "collector {k} pass {}",
                        c[k].load(Ordering::Relaxed)
                    ));
                    if log.len() > 64 {
                        log.clear();
                    }
                    c[k].fetch_add(1, Ordering::Relaxed);
                    if q.lock().unwrap().try_recv().is_ok() {
                        return;
                    }
                }
            })
            .unwrap();
        assert_eq!(t.info().kind, ThreadKind::Collector);
        collector_ids.push(t.info().id);
        std::mem::forget(t); // the shutdown joins it
    }
    let hook_ran = Arc::new(AtomicBool::new(false));
    let h = Arc::clone(&hook_ran);
    vm.add_shutdown_hook(move || {
        h.store(true, Ordering::SeqCst);
        for _ in 0..2 {
            quit_tx.send(()).unwrap();
        }
    })
    .unwrap();
    // Listed as VM threads: the registry, Thread.print (as HotSpot prints GC threads) and NMT.
    let threads = vm.threads();
    assert_eq!(
        threads
            .iter()
            .filter(|t| t.kind == ThreadKind::Collector)
            .count(),
        2
    );
    let dump = vm.diagnostic_command("Thread.print").unwrap();
    assert!(
        dump.lines()
            .any(|l| l.starts_with("\"GC Thread#0\" os_prio=0 ") && !l.contains(" #")),
        "{dump}"
    );
    let nmt = vm.native_memory_summary().unwrap();
    assert_eq!(
        nmt.thread_count,
        vm.threads().len(),
        "NMT counts every VM thread"
    );
    let (mut signals, mut slowest) = (0usize, Duration::ZERO);
    let stops = 300;
    let began = Instant::now();
    for _ in 0..stops {
        let world = vm.stop_the_world("GC", TEN_SECONDS).unwrap();
        slowest = slowest.max(world.time_to_stop());
        assert_eq!(world.len(), 3, "only the mutators are stopped");
        // What a collector does while the world is stopped: allocates, formats, logs.
        let names: Vec<String> = world
            .threads()
            .map(|t| {
                assert!(!collector_ids.contains(&t.id()), "{} was stopped", t.name());
                signals += usize::from(t.how() == StopHow::Signal);
                format!("{}:{}", t.name(), t.tid())
            })
            .collect();
        log::info!(target: "gc", "stopped {names:?}");
        let frozen: Vec<u64> = mutator_counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let moving: Vec<u64> = collector_counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let deadline = Instant::now() + TEN_SECONDS;
        while collector_counts
            .iter()
            .zip(&moving)
            .any(|(c, m)| c.load(Ordering::Relaxed) == *m)
        {
            assert!(
                Instant::now() < deadline,
                "a collector thread did not run during the stop"
            );
            std::thread::yield_now();
        }
        let now: Vec<u64> = mutator_counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        assert_eq!(frozen, now, "a mutator ran while the world was stopped");
        drop(world);
    }
    let took = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in mutators {
        t.join().unwrap();
    }
    vm.shutdown().unwrap();
    assert!(hook_ran.load(Ordering::SeqCst), "the shutdown hook ran");
    assert!(
        signals > 0,
        "the allocating mutators were stopped by the signal"
    );
    println!(
        "{stops} stops of 3 allocating mutators that never poll in {took:.0?} (slowest to reach {slowest:.1?}; {signals} stops by the signal); 2 collector threads allocated throughout and were joined by the shutdown"
    );
    println!("CHILD OK");
}

#[test]
fn a_stop_handed_to_another_thread_ends_there() {
    if child_role().is_none() {
        return check_child("a_stop_handed_to_another_thread_ends_there");
    }
    let vm = create(&["-Xmx16m"]);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let (c, s) = (Arc::clone(&count), Arc::clone(&stop));
    let spinner = vm
        .spawn("Spinner", move || {
            while !s.load(Ordering::Relaxed) {
                c.fetch_add(1, Ordering::Relaxed);
                rtvm::safepoint_poll();
            }
        })
        .unwrap();
    // The spinner runs before the first stop (on a loaded machine it may not have yet).
    let deadline = Instant::now() + TEN_SECONDS;
    while count.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the spinner never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    let h = vm.handle();
    let stopper = vm
        .spawn_collector("Stopper", move || {
            for round in 0..100 {
                let world = h.stop_the_world("Handed", TEN_SECONDS).unwrap();
                if round == 0 {
                    let again = h.stop_the_world("Nested", Duration::from_millis(100));
                    assert!(
                        matches!(again, Err(SafepointError::Nested { .. })),
                        "{again:?}"
                    );
                }
                let frozen = count.load(Ordering::Relaxed);
                let resumer = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_micros(200));
                    assert_eq!(world.len(), 1);
                    drop(world);
                });
                resumer.join().unwrap();
                assert!(frozen > 0);
                // Resumed by the other thread: this one may stop again at once.
                let again = h.stop_the_world("Again", TEN_SECONDS).unwrap();
                assert_eq!(again.len(), 1);
            }
        })
        .unwrap();
    // The spinner ends whatever the stopper did, so a failure is reported, not a hang.
    let stopped = stopper.join();
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
    stopped.unwrap();
    vm.shutdown().unwrap();
    println!("100 stops begun on a collector thread and ended on another");
    println!("CHILD OK");
}

/// Spins without polling, `inside` set while it is in its no-stop section.
#[inline(never)]
fn spin_in_section(count: &AtomicU64, stop: &AtomicBool, inside: &AtomicBool, section: Duration) {
    while !stop.load(Ordering::Relaxed) {
        let _ns = NoAsyncStop::enter();
        inside.store(true, Ordering::SeqCst);
        let end = Instant::now() + section;
        while Instant::now() < end {
            count.fetch_add(1, Ordering::Relaxed);
        }
        inside.store(false, Ordering::SeqCst);
    }
}

/// Spins without polling until `stop`, bumping `count`: one loop of plain instructions, no
/// call out of this function (the test declares this function's code no-stop).
#[inline(never)]
fn spin_declared(count: &AtomicU64, stop: &AtomicBool) {
    // SAFETY: reads `stop` and increments `count` (live atomics) with plain locked
    // instructions; clobbers only the flags.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!(
            "2:",
            "lock add qword ptr [{c}], 1",
            "pause",
            "cmp byte ptr [{s}], 0",
            "je 2b",
            c = in(reg) count.as_ptr(),
            s = in(reg) stop.as_ptr(),
        );
    }
    // SAFETY: as above (an exclusive-monitor increment and a byte load).
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!(
            "2:",
            "ldaxr {t}, [{c}]",
            "add {t}, {t}, #1",
            "stlxr {f:w}, {t}, [{c}]",
            "ldrb {f:w}, [{s}]",
            "cbz {f:w}, 2b",
            c = in(reg) count.as_ptr(),
            s = in(reg) stop.as_ptr(),
            t = out(reg) _,
            f = out(reg) _,
        );
    }
}

/// Sets its flag when dropped: a failing assertion still lets the spinning threads end (the
/// VM's drop waits for them).
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn no_stop_sections_and_declared_code_keep_the_signal_out() {
    if child_role().is_none() {
        return check_child("no_stop_sections_and_declared_code_keep_the_signal_out");
    }
    let vm = create(&["-Xmx16m"]);
    // A section of 20 ms: every stop that finds the thread inside waits for its end, where
    // the thread stops as at a poll.
    let (stop, inside, count) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let _ends = StopOnDrop(Arc::clone(&stop));
    let (s, i, c) = (Arc::clone(&stop), Arc::clone(&inside), Arc::clone(&count));
    let t = vm
        .spawn("InSection", move || {
            spin_in_section(&c, &s, &i, Duration::from_millis(20))
        })
        .unwrap();
    let mut at_end = 0;
    for _ in 0..20 {
        while !inside.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        let world = vm.stop_the_world("Section", TEN_SECONDS).unwrap();
        let how = world.threads().next().unwrap().how();
        assert!(
            !inside.load(Ordering::SeqCst),
            "stopped inside its no-stop section"
        );
        at_end += usize::from(how == StopHow::Poll);
        drop(world);
    }
    assert_eq!(at_end, 20, "every stop was taken at the section's end");
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();

    // Code declared no-stop: the signal leaves the thread be; forgotten, it stops it.
    let spin = spin_declared as *const () as usize;
    let range = spin..spin + 256;
    rtvm::declare_code(range.clone(), CodeKind::NoStop).unwrap();
    let (stop, count) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let _ends_too = StopOnDrop(Arc::clone(&stop));
    let (s, c) = (Arc::clone(&stop), Arc::clone(&count));
    let t = vm.spawn("Declared", move || spin_declared(&c, &s)).unwrap();
    while count.load(Ordering::Relaxed) == 0 {
        std::hint::spin_loop();
    }
    match vm.stop_the_world("Declared", Duration::from_millis(200)) {
        Err(SafepointError::Timeout { stragglers, .. }) => {
            assert!(
                stragglers[0].contains("\"Declared\"") && stragglers[0].contains("declared+"),
                "{stragglers:?}"
            );
            println!("in declared no-stop code: {}", stragglers[0]);
        }
        other => panic!("stopped in declared no-stop code: {other:?}"),
    }
    assert!(rtvm::forget_code(range));
    let world = vm.stop_the_world("Forgotten", TEN_SECONDS).unwrap();
    assert_eq!(world.threads().next().unwrap().how(), StopHow::Signal);
    drop(world);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    vm.shutdown().unwrap();
    println!("20 stops that found a thread in a 20 ms no-stop section were taken at its end");
    println!("CHILD OK");
}

#[test]
fn a_collector_heap_reserves_nothing_of_rtvms_and_nmt_reports_the_collectors() {
    if child_role().is_none() {
        return check_child(
            "a_collector_heap_reserves_nothing_of_rtvms_and_nmt_reports_the_collectors",
        );
    }
    let printed = Arc::new(std::sync::Mutex::new(String::new()));
    let p = Arc::clone(&printed);
    let vm = Vm::create(
        InitArgs::new([
            "-Xms64m",
            "-Xmx64m",
            "-XX:+AlwaysPreTouch",
            "-XX:NativeMemoryTracking=summary",
        ])
        .collector_heap(true)
        .output(move |_, text| p.lock().unwrap().push_str(text)),
    )
    .unwrap();
    // The sizes are decided and checked as always: the collector reads them.
    assert_eq!(vm.flags().get(rtvm::flags::flag::MaxHeapSize), 64 << 20);
    let page = rtvm_os_linux::base_page_size();
    let stats = vm.heap_stats();
    assert_eq!((stats.reserved, stats.committed), (page, 0), "{stats:?}");
    assert!(vm.allocate(16).is_none(), "rtvm's own heap has no room");
    assert!(
        printed.lock().unwrap().contains(
            "rtvm warning: AlwaysPreTouch is ignored: the collector maps its heap as it grows"
        ),
        "{}",
        printed.lock().unwrap()
    );
    // Before the collector reports: rtvm's page; after: the collector's figures.
    assert_eq!(
        vm.native_memory_summary().unwrap().heap.reserved,
        page as u64
    );
    vm.report_heap(|| rtvm::CollectorHeap {
        reserved: 64 << 20,
        committed: 3 << 20,
        range: 0x0200_0000_0000..0x2200_0000_0000,
        pages: "collector chunks".into(),
    });
    let nmt = vm.native_memory_summary().unwrap();
    assert_eq!((nmt.heap.reserved, nmt.heap.committed), (64 << 20, 3 << 20));
    let report = nmt.report();
    assert!(
        report.contains("Java Heap (reserved=67108864, committed=3145728)"),
        "{report}"
    );
    vm.shutdown().unwrap();
    println!("CHILD OK");
}
