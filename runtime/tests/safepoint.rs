//! Stopping the world and handshakes, from Rust. Each case runs in a child process (the stop
//! signal, thread counts and the world word are process-wide):
//!
//! * 8 mutators — tight loops that poll, loops that never poll, reads blocked in a safe
//!   region — each holding a pointer to its own heap block only in a deep frame and in
//!   registers: every stop finds every pointer inside the thread's scan range (or, for a
//!   safe region, in the registers it published), the counters they bump do not move while
//!   stopped and move again after;
//! * 1,000 stops while threads start, exit, attach and detach: no thread lost, none hung;
//! * a thread leaving a safe region during a stop waits; refusals (a stop or a handshake from
//!   the stopping thread, a stop from a stopped thread, a destroy from the stopping thread,
//!   a thread start from it);
//! * handshakes run by the target at its poll, by the requester for a thread in a safe
//!   region, and by the signal for one that never polls; `Thread.print` reports the state;
//! * `-Xrs`: no signal fallback, the timeout says so; a stack overflow during stops is still
//!   reported as an overflow; `-Xlog:safepoint` and `-Xlog:handshake` lines have java 17's
//!   shape, and `-XX:+SafepointTimeout` prints HotSpot's report.

use std::hint::black_box;
use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use rtvm::{InitArgs, SafepointError, ShutdownError, StopHow, Vm, VmHandle};
use rtvm_testkit::child::{check_child, child_role, describe, run_child};

fn create(options: &[&str]) -> Vm {
    Vm::create(InitArgs::new(options.iter().copied())).unwrap()
}

const SECOND: Duration = Duration::from_secs(10);

/// Whether `value` is a word of `[range)` (read from a stopped thread's stack).
fn stack_holds(range: std::ops::Range<usize>, value: usize) -> bool {
    let mut a = range.start & !7;
    while a + 8 <= range.end {
        // SAFETY: [range) is the scan range of a thread the world holds stopped: mapped stack
        // memory of a live thread, read while nothing writes to it.
        if unsafe { (a as *const usize).read_volatile() } == value {
            return true;
        }
        a += 8;
    }
    false
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Polls,
    NeverPolls,
    BlockedRead,
    /// Never polls, and the pointer is in r12 only (x86-64): what the stack holds is the
    /// pointer xor a key.
    InRegisterOnly,
}

const KEY: usize = 0x5a5a_5a5a_5a5a_5a5a;

/// Spins with `block` (given masked) in r12 and nowhere in memory, bumping `counter` until
/// `stop` is set. Never polls.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn spin_with_pointer_in_r12(masked: usize, counter: &AtomicU64, stop: &AtomicBool) {
    // SAFETY: reads `stop` and increments `counter` (live atomics) with locked / plain x86
    // instructions, and clobbers only r12 (declared) and the flags.
    unsafe {
        std::arch::asm!(
            "xor r12, {key}",
            "2:",
            "lock add qword ptr [{c}], 1",
            "pause",
            "cmp byte ptr [{s}], 0",
            "je 2b",
            "xor r12, r12",
            key = in(reg) KEY,
            c = in(reg) counter.as_ptr(),
            s = in(reg) stop.as_ptr(),
            inout("r12") masked => _,
        );
    }
}

struct Mutators {
    counters: Vec<AtomicU64>,
    pointers: Vec<AtomicUsize>,
    ids: Vec<AtomicU64>,
    kinds: Vec<Kind>,
    stop: AtomicBool,
    pipes: Vec<(i32, i32)>,
}

/// The mutator body, 24 frames deep, holding `block` in locals of this frame and registers.
#[inline(never)]
fn deep(depth: usize, vm: &VmHandle, m: &Mutators, k: usize) {
    let pad = black_box([depth as u8; 256]);
    if depth > 0 {
        deep(depth - 1, vm, m, k);
        black_box(&pad);
        return;
    }
    // The block is made here, at the bottom: the pointer lives only in this frame and in
    // registers (what `pointers` holds is the test's expectation, not searched).
    let block = Box::into_raw(Box::new([7u64; 8])) as usize;
    m.pointers[k].store(block, Ordering::Release);
    #[cfg(target_arch = "x86_64")]
    if m.kinds[k] == Kind::InRegisterOnly {
        let masked = black_box(block ^ KEY);
        spin_with_pointer_in_r12(masked, &m.counters[k], &m.stop);
        // SAFETY: the block made above, freed once (found again from the expectation).
        drop(unsafe { Box::from_raw(m.pointers[k].load(Ordering::Acquire) as *mut [u64; 8]) });
        return;
    }
    let mut p = black_box(block);
    let c = &m.counters[k];
    while !m.stop.load(Ordering::Relaxed) {
        match m.kinds[k] {
            Kind::Polls => {
                p = black_box(p);
                c.fetch_add(1, Ordering::Relaxed);
                rtvm::safepoint_poll();
            }
            Kind::NeverPolls => {
                p = black_box(p.rotate_left(13).rotate_right(13));
                c.fetch_add(1, Ordering::Relaxed);
            }
            Kind::InRegisterOnly => unreachable!("spins in spin_with_pointer_in_r12"),
            Kind::BlockedRead => {
                let region = vm.enter_safe_region().unwrap();
                let mut byte = 0u8;
                // SAFETY: a read of one byte into a local from a pipe this test owns.
                let n = unsafe { libc::read(m.pipes[k].0, (&mut byte as *mut u8).cast(), 1) };
                drop(region);
                p = black_box(p);
                if n == 1 && byte == 1 {
                    c.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    // SAFETY: the block made above, freed once.
    drop(unsafe { Box::from_raw(black_box(p) as *mut [u64; 8]) });
}

/// Mutators at work; dropping it stops and joins them (also when an assertion fails, so the
/// VM's drop does not wait for them forever).
struct Running {
    m: Arc<Mutators>,
    threads: Vec<rtvm::VmThread>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.m.stop.store(true, Ordering::Relaxed);
        feed_readers(&self.m);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl std::ops::Deref for Running {
    type Target = Mutators;
    fn deref(&self) -> &Mutators {
        &self.m
    }
}

fn start_mutators(vm: &Vm, kinds: &[Kind]) -> Running {
    let pipes = kinds
        .iter()
        .map(|_| {
            let mut fds = [0; 2];
            // SAFETY: pipe() into a two-int array.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            (fds[0], fds[1])
        })
        .collect();
    let m = Arc::new(Mutators {
        counters: kinds.iter().map(|_| AtomicU64::new(0)).collect(),
        pointers: kinds.iter().map(|_| AtomicUsize::new(0)).collect(),
        ids: kinds.iter().map(|_| AtomicU64::new(0)).collect(),
        kinds: kinds.to_vec(),
        stop: AtomicBool::new(false),
        pipes,
    });
    let threads = (0..kinds.len())
        .map(|k| {
            let (mc, h) = (Arc::clone(&m), vm.handle());
            let t = vm
                .spawn(&format!("Mutator#{k}"), move || deep(24, &h, &mc, k))
                .unwrap();
            m.ids[k].store(t.info().id, Ordering::Relaxed);
            t
        })
        .collect();
    while m.pointers.iter().any(|p| p.load(Ordering::Acquire) == 0) {
        std::thread::sleep(Duration::from_millis(1));
    }
    Running { m, threads }
}

fn feed_readers(m: &Mutators) {
    for (k, kind) in m.kinds.iter().enumerate() {
        if *kind == Kind::BlockedRead {
            // SAFETY: a one-byte write to a pipe this test owns.
            unsafe { libc::write(m.pipes[k].1, [1u8].as_ptr().cast(), 1) };
        }
    }
}

#[test]
fn every_stop_finds_every_pointer_and_freezes_the_counters() {
    if child_role().is_none() {
        return check_child("every_stop_finds_every_pointer_and_freezes_the_counters");
    }
    let vm = create(&["-Xmx16m", "-Xss1m"]);
    use Kind::*;
    #[cfg(target_arch = "x86_64")]
    let kinds = [
        Polls,
        Polls,
        Polls,
        NeverPolls,
        NeverPolls,
        InRegisterOnly,
        BlockedRead,
        BlockedRead,
    ];
    #[cfg(not(target_arch = "x86_64"))]
    let kinds = [
        Polls,
        Polls,
        Polls,
        NeverPolls,
        NeverPolls,
        NeverPolls,
        BlockedRead,
        BlockedRead,
    ];
    let m = start_mutators(&vm, &kinds);
    let mut seen = std::collections::BTreeMap::new();
    let mut hows = std::collections::HashMap::new();
    for round in 0..50 {
        feed_readers(&m);
        std::thread::sleep(Duration::from_millis(2));
        let before: Vec<u64> = m
            .counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let world = vm.stop_the_world("TestPointers", SECOND).unwrap();
        assert_eq!(world.len(), kinds.len(), "every mutator is stopped");
        let frozen: Vec<u64> = m
            .counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        for t in world.threads() {
            let k = m
                .ids
                .iter()
                .position(|id| id.load(Ordering::Relaxed) == t.id())
                .unwrap();
            let p = m.pointers[k].load(Ordering::Acquire);
            let scan = t.scan();
            assert!(
                t.stack().start <= scan.start && scan.end == t.stack().end,
                "{scan:x?} in {:x?}",
                t.stack()
            );
            let in_stack = stack_holds(scan.clone(), p);
            let in_regs = t.registers().contains(&p);
            // A polling thread that was not on a CPU during the grace period (8 mutators, 2
            // CPUs) takes the signal instead.
            let expected: &[StopHow] = match kinds[k] {
                Polls => &[StopHow::Poll, StopHow::Signal],
                NeverPolls | InRegisterOnly => &[StopHow::Signal],
                // Between two reads it runs its own loop: on a loaded machine a stop may find
                // it there, past the grace period, and signal it.
                BlockedRead => &[StopHow::SafeRegion, StopHow::Signal],
            };
            assert!(expected.contains(&t.how()), "{}: {:?}", t.name(), t.how());
            *hows.entry(t.how()).or_insert(0) += 1;
            assert!(
                in_stack || (t.how() == StopHow::SafeRegion && in_regs),
                "round {round}: {} ({:?}) holds {p:#x}, not in {scan:x?} nor its registers {:x?}",
                t.name(),
                t.how(),
                t.registers()
            );
            if kinds[k] == InRegisterOnly {
                assert!(
                    in_regs,
                    "r12 from the signal's context holds {p:#x}: {:x?}",
                    t.registers()
                );
            }
            *seen.entry((kinds[k] as u8, in_stack, in_regs)).or_insert(0) += 1;
        }
        std::thread::sleep(Duration::from_millis(3));
        let later: Vec<u64> = m
            .counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        assert_eq!(frozen, later, "no counter moves while the world is stopped");
        drop(world);
        if round == 0 {
            println!("counters before the first stop: {before:?}");
        }
    }
    feed_readers(&m);
    let after_stop: Vec<u64> = m
        .counters
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    let deadline = Instant::now() + SECOND;
    loop {
        feed_readers(&m);
        std::thread::sleep(Duration::from_millis(5));
        let now: Vec<u64> = m
            .counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        if now.iter().zip(&after_stop).all(|(a, b)| a > b) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "every counter moves again after the stops: {after_stop:?} -> {now:?}"
        );
    }
    drop(m);
    assert!(
        hows.get(&StopHow::Poll).is_some_and(|&n| n > 0),
        "polling threads stop at their polls: {hows:?}"
    );
    assert!(
        hows.get(&StopHow::SafeRegion).is_some_and(|&n| n > 0),
        "blocked readers are found in their safe regions: {hows:?}"
    );
    println!("50 stops of 8 mutators: every pointer found ((kind, in stack, in registers) -> count: {seen:?}; stopped by {hows:?})");
    println!("CHILD OK");
}

#[test]
fn a_thousand_stops_while_threads_start_exit_attach_and_detach() {
    if child_role().is_none() {
        return check_child("a_thousand_stops_while_threads_start_exit_attach_and_detach");
    }
    let vm = create(&["-Xmx16m", "-Xss256k"]);
    let stop = Arc::new(AtomicBool::new(false));
    let (started, joined, attached) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    // A spawner of short-lived polling threads.
    let spawner = {
        let (vm, stop, started, joined) =
            (vm.handle(), stop.clone(), started.clone(), joined.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let t = vm
                    .spawn("Churn", || {
                        for _ in 0..1000 {
                            rtvm::safepoint_poll();
                        }
                    })
                    .unwrap();
                started.fetch_add(1, Ordering::Relaxed);
                t.join().unwrap();
                joined.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Host threads attaching and detaching.
    let attachers: Vec<_> = (0..2)
        .map(|i| {
            let (vm, stop, attached) = (vm.handle(), stop.clone(), attached.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let a = vm.attach_current_thread(&format!("Attacher#{i}")).unwrap();
                    for _ in 0..100 {
                        rtvm::safepoint_poll();
                    }
                    attached.fetch_add(1, Ordering::Relaxed);
                    a.detach().unwrap();
                    std::thread::sleep(Duration::from_micros(100));
                }
            })
        })
        .collect();
    // A steady poller and a steady non-poller.
    use Kind::*;
    let m = start_mutators(&vm, &[Polls, NeverPolls]);
    let begun = Instant::now();
    let mut max_threads = 0;
    for _ in 0..1000 {
        let world = vm.stop_the_world("TestChurn", SECOND).unwrap();
        max_threads = max_threads.max(world.len());
        for t in world.threads() {
            let scan = t.scan();
            assert!(
                scan.start <= scan.end && scan.end <= t.stack().end,
                "{}: {scan:x?}",
                t.name()
            );
        }
        drop(world);
        // A collector's pause, then the mutators' turn: threads waiting to start or attach
        // get the members' lock before the next stop takes it again.
        std::thread::sleep(Duration::from_micros(300));
    }
    let took = begun.elapsed();
    stop.store(true, Ordering::Relaxed);
    spawner.join().unwrap();
    for a in attachers {
        a.join().unwrap();
    }
    drop(m);
    assert_eq!(
        started.load(Ordering::Relaxed),
        joined.load(Ordering::Relaxed)
    );
    assert!(
        started.load(Ordering::Relaxed) > 10 && attached.load(Ordering::Relaxed) > 10,
        "started {started:?}, attached {attached:?}"
    );
    let left: Vec<String> = vm
        .threads()
        .iter()
        .filter(|t| t.kind.is_application() || t.kind == rtvm::ThreadKind::Attached)
        .map(|t| t.name.clone())
        .collect();
    assert!(left.is_empty(), "threads left registered: {left:?}");
    println!(
        "1000 stops in {:.0} ms while {} threads started and exited and {} attaches came and went (up to {max_threads} stopped at once)",
        took.as_secs_f64() * 1e3,
        started.load(Ordering::Relaxed),
        attached.load(Ordering::Relaxed)
    );
    println!("CHILD OK");
}

#[test]
fn leaving_a_safe_region_waits_and_nested_calls_are_refused() {
    if child_role().is_none() {
        return check_child("leaving_a_safe_region_waits_and_nested_calls_are_refused");
    }
    let vm = create(&["-Xmx16m"]);
    let ready = Arc::new(Barrier::new(2));
    let go = Arc::new(Barrier::new(2));
    let left = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(Mutex::new(None));
    let t = {
        let (h, ready, go, left, refused) = (
            vm.handle(),
            ready.clone(),
            go.clone(),
            left.clone(),
            refused.clone(),
        );
        vm.spawn("Sleeper", move || {
            let region = h.enter_safe_region().unwrap();
            ready.wait();
            go.wait();
            // Counted as stopped: it may not stop the world itself.
            *refused.lock().unwrap() =
                Some(h.stop_the_world("FromAStoppedThread", SECOND).unwrap_err());
            drop(region);
            left.store(true, Ordering::SeqCst);
        })
        .unwrap()
    };
    ready.wait();
    let world = vm.stop_the_world("TestLeave", SECOND).unwrap();
    assert_eq!(
        world.threads().next().map(|t| t.how()),
        Some(StopHow::SafeRegion)
    );
    go.wait();
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !left.load(Ordering::SeqCst),
        "the thread left its safe region during the stop"
    );
    // From the stopping thread: nested calls are refused, nothing changes.
    let e = vm.stop_the_world("Nested", SECOND).unwrap_err();
    assert!(matches!(e, SafepointError::Nested { .. }), "{e}");
    let e = vm.handshake(t.info().id, |_| {}).unwrap_err();
    assert!(matches!(e, SafepointError::Nested { .. }), "{e}");
    let e = vm.spawn("FromTheStopper", || {}).unwrap_err();
    assert!(e.to_string().contains("holds the world stopped"), "{e}");
    assert!(matches!(vm.shutdown(), Err(ShutdownError::WorldStopped)));
    assert!(!left.load(Ordering::SeqCst));
    drop(world);
    t.join().unwrap();
    assert!(
        left.load(Ordering::SeqCst),
        "after the stop the thread left its region"
    );
    let e = refused.lock().unwrap().take().unwrap();
    assert!(matches!(e, SafepointError::CallerStopped { .. }), "{e}");
    // A thread rtvm does not know has no safe region.
    assert!(std::thread::spawn({
        let h = vm.handle();
        move || h.enter_safe_region().is_err()
    })
    .join()
    .unwrap());
    println!("a safe region's end waited for the world; nested stop, handshake, spawn, shutdown and a stop from a stopped thread refused");
    println!("CHILD OK");
}

#[test]
fn handshakes_by_poll_by_requester_and_by_signal_and_thread_dumps() {
    if child_role().is_none() {
        return check_child("handshakes_by_poll_by_requester_and_by_signal_and_thread_dumps");
    }
    // Pollers get 50 ms to answer at their poll before the signal: on 2 loaded CPUs a
    // runnable thread waits for a CPU longer than the default 200 us.
    let vm = create(&["-Xmx16m", "-XX:SafepointSignalDelay=50000"]);
    use Kind::*;
    let m = start_mutators(&vm, &[Polls, NeverPolls, BlockedRead]);
    for (k, expected) in [
        (0, StopHow::Poll),
        (1, StopHow::Signal),
        (2, StopHow::SafeRegion),
    ] {
        let id = m.ids[k].load(Ordering::Relaxed);
        let got = Arc::new(Mutex::new(None));
        let out = got.clone();
        vm.handshake(id, move |t| {
            // SAFETY: gettid has no preconditions.
            let runner = unsafe { libc::gettid() };
            *out.lock().unwrap() = Some((t.how(), t.tid() == runner, t.scan()));
        })
        .unwrap();
        let (how, on_target, scan) = got.lock().unwrap().take().unwrap();
        // A poller that was off the CPU for the grace period is stopped by the signal.
        assert!(
            how == expected || (expected == StopHow::Poll && how == StopHow::Signal),
            "thread {k}: {how:?}"
        );
        assert_eq!(
            on_target,
            how == StopHow::Poll,
            "a polling target runs it itself, else the requester"
        );
        assert!(!scan.is_empty());
    }
    let e = vm.handshake(u64::MAX, |_| {}).unwrap_err();
    assert!(matches!(e, SafepointError::NoSuchThread { .. }));
    // A poller off the CPU for the grace period answers by the signal: a few dumps find it
    // at its poll.
    let lines = [
        "Mutator: running (answered at a poll)",
        "Mutator: in a safe region",
        "Mutator: running (stopped by the signal",
    ];
    let mut dump = String::new();
    for _ in 0..20 {
        dump = vm.thread_dump();
        if lines.iter().all(|l| dump.contains(l)) {
            break;
        }
    }
    for line in lines {
        assert!(dump.contains(line), "{line}\n{dump}");
    }
    drop(m);
    println!("handshakes: at the poll (by the target), in a safe region and by the signal (by the requester); Thread.print reports each");
    println!("CHILD OK");
}

#[test]
fn without_signals_a_thread_that_never_polls_times_out() {
    if child_role().is_none() {
        return check_child("without_signals_a_thread_that_never_polls_times_out");
    }
    let vm = create(&["-Xmx16m", "-Xrs"]);
    use Kind::*;
    let m = start_mutators(&vm, &[Polls, BlockedRead]);
    let w = vm.stop_the_world("XrsPolls", SECOND).unwrap();
    assert_eq!(w.len(), 2);
    drop(w);
    let m2 = start_mutators(&vm, &[NeverPolls]);
    let begun = Instant::now();
    let e = vm
        .stop_the_world("XrsNeverPolls", Duration::from_millis(300))
        .unwrap_err();
    let took = begun.elapsed();
    let text = e.to_string();
    assert!(
        text.contains("Mutator#0") && text.contains("no signal fallback: -Xrs"),
        "{text}"
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // The world was let go: the polling thread moves on.
    let c = m.counters[0].load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(20));
    assert!(m.counters[0].load(Ordering::Relaxed) > c);
    drop(m2);
    drop(m);
    println!("-Xrs: polls and safe regions stop threads; a thread that never polls: {text}");
    println!("CHILD OK");
}

#[inline(never)]
#[allow(unconditional_recursion)]
fn overflow(depth: u64) -> u64 {
    let frame = black_box([depth; 512]);
    overflow(depth + 1) + black_box(&frame)[511]
}

#[test]
fn a_stack_overflow_during_stops_is_reported_as_an_overflow() {
    if child_role().is_none() {
        let out = run_child(
            "a_stack_overflow_during_stops_is_reported_as_an_overflow",
            "child",
        );
        let err = String::from_utf8_lossy(&out.stderr);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGABRT),
            "{}",
            describe(&out)
        );
        assert!(
            err.contains("stack overflow in thread \"Recursor\""),
            "{}",
            describe(&out)
        );
        println!(
            "an overflow during stops 200 µs apart: {}",
            err.lines()
                .find(|l| l.contains("stack overflow"))
                .unwrap_or("")
        );
        return;
    }
    let vm = create(&["-Xmx16m", "-Xss512k"]);
    let go = Arc::new(AtomicBool::new(false));
    let g = go.clone();
    let _t = vm
        .spawn("Recursor", move || {
            while !g.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
            black_box(overflow(0));
        })
        .unwrap();
    let begun = Instant::now();
    while begun.elapsed() < Duration::from_secs(20) {
        let w = vm.stop_the_world("DuringOverflow", SECOND).unwrap();
        go.store(true, Ordering::Relaxed);
        drop(w);
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("the recursion never overflowed");
}

#[test]
fn safepoint_and_handshake_lines_have_java_17s_shape() {
    if child_role().is_none() {
        let out = run_child("safepoint_and_handshake_lines_have_java_17s_shape", "child");
        assert!(out.status.success(), "{}", describe(&out));
        let ours = String::from_utf8_lossy(&out.stdout).into_owned();
        let shape = |l: &str| -> String {
            let l = l.split_once("] ").map_or(l, |(_, r)| r);
            let mut s = String::new();
            let mut in_quote = false;
            let mut last_digit = false;
            for ch in l.chars() {
                if ch == '"' {
                    in_quote = !in_quote;
                    s.push('"');
                    continue;
                }
                if in_quote {
                    continue;
                }
                if ch.is_ascii_digit() {
                    if !last_digit {
                        s.push('N');
                    }
                    last_digit = true;
                } else {
                    last_digit = false;
                    s.push(ch);
                }
            }
            s
        };
        // -Xlog pads the level to the widest seen on the output: `[info   ]` once a warning
        // (the straggler's report, early on a loaded machine) has been printed.
        let pick = |text: &str, tag: &str| -> Option<String> {
            text.lines()
                .map(|l| l.replace("[info   ]", "[info]"))
                .find(|l| {
                    l.contains(&format!("[info][{tag}]")) && l.contains(" Time since last")
                        || l.contains(&format!("[info][{tag}]")) && l.contains("Targeted threads")
                })
                .map(|l| shape(&l))
        };
        let ours_sp = pick(&ours, "safepoint").expect("a safepoint line");
        let ours_hs = pick(&ours, "handshake").expect("a handshake line");
        assert!(
            ours.contains(
                "# SafepointSynchronize::begin: Threads which did not reach the safepoint:"
            ),
            "{ours}"
        );
        assert!(
            ours.contains("# SafepointSynchronize::begin: (End of list)"),
            "{ours}"
        );
        match java_lines() {
            Some(java) => {
                let java_sp = pick(&java, "safepoint").expect("java's safepoint line");
                let java_hs = pick(&java, "handshake").expect("java's handshake line");
                assert_eq!(ours_sp, java_sp);
                assert_eq!(ours_hs, java_hs);
                println!("side by side with java 17: {ours_sp} / {ours_hs}");
            }
            None => {
                assert!(
                    std::env::var_os("RTVM_CI").is_none(),
                    "java (javac) does not run here, and RTVM_CI is set: CI machines have it"
                );
                println!("skipped the side-by-side part: java (javac) does not run here");
            }
        }
        return;
    }
    let vm = create(&[
        "-Xmx16m",
        "-Xlog:safepoint,handshake",
        "-XX:+SafepointTimeout",
        "-XX:SafepointTimeoutDelay=20",
        "-Xrs",
    ]);
    use Kind::*;
    let m = start_mutators(&vm, &[Polls]);
    drop(vm.stop_the_world("TestLines", SECOND).unwrap());
    vm.handshake(m.ids[0].load(Ordering::Relaxed), |_| {})
        .unwrap();
    let m2 = start_mutators(&vm, &[NeverPolls]);
    let _ = vm.stop_the_world("Straggler", Duration::from_millis(100));
    drop(m2);
    drop(m);
    let _ = std::io::stdout().flush();
}

/// java 17's -Xlog:safepoint and -Xlog:handshake lines for a System.gc() under ZGC (which
/// handshakes), if java runs here.
fn java_lines() -> Option<String> {
    let dir = std::env::temp_dir().join(format!("rtvm-sp-java-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::write(
        dir.join("Gc.java"),
        "public class Gc { public static void main(String[] a) { System.gc(); } }",
    )
    .ok()?;
    let ok = Command::new("javac")
        .arg("Gc.java")
        .current_dir(&dir)
        .status()
        .ok()?
        .success();
    let out = ok.then(|| {
        Command::new("java")
            .args(["-XX:+UseZGC", "-Xlog:safepoint,handshake", "-cp", ".", "Gc"])
            .current_dir(&dir)
            .env_remove("JAVA_TOOL_OPTIONS")
            .output()
            .ok()
    })??;
    let _ = std::fs::remove_dir_all(&dir);
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_native_heap_trimmer_skips_its_ticks_during_a_stop() {
    if child_role().is_none() {
        let out = run_child(
            "the_native_heap_trimmer_skips_its_ticks_during_a_stop",
            "child",
        );
        assert!(out.status.success(), "{}", describe(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        // The first trim after the 150 ms stop counts the 10 ms ticks the stop skipped.
        let skipped = text
            .lines()
            .filter_map(|l| {
                l.split_once(" timed, ")?
                    .1
                    .strip_suffix(" safepoint")?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .unwrap_or(0);
        assert!(
            skipped >= 5,
            "no trim tick counted as skipped for the stop:\n{text}"
        );
        println!("the trimmer skipped {skipped} ticks of 10 ms during a 150 ms stop");
        return;
    }
    let vm = create(&[
        "-Xmx16m",
        "-XX:TrimNativeHeapInterval=10",
        "-Xlog:trimnative=trace",
    ]);
    let m = start_mutators(&vm, &[Kind::Polls]);
    std::thread::sleep(Duration::from_millis(50));
    let world = vm.stop_the_world("HoldForTrimmer", SECOND).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    drop(world);
    std::thread::sleep(Duration::from_millis(50));
    drop(m);
    drop(vm);
    let _ = std::io::stdout().flush();
}

#[test]
fn a_destroy_from_another_thread_waits_for_the_world_to_resume() {
    if child_role().is_none() {
        return check_child("a_destroy_from_another_thread_waits_for_the_world_to_resume");
    }
    let vm = create(&["-Xmx16m"]);
    let t = vm
        .spawn("Short", || {
            let end = Instant::now() + Duration::from_millis(100);
            while Instant::now() < end {
                rtvm::safepoint_poll();
            }
        })
        .unwrap();
    let world = vm.stop_the_world("DuringDestroy", SECOND).unwrap();
    assert_eq!(world.len(), 1);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let destroyer = s.spawn(|| {
            let r = vm.shutdown();
            done.store(true, Ordering::SeqCst);
            r
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !done.load(Ordering::SeqCst),
            "the destroy ended while a thread was stopped"
        );
        drop(world);
        destroyer.join().unwrap().unwrap();
    });
    assert!(done.load(Ordering::SeqCst));
    drop(t);
    println!("a destroy from another thread during a stop waited for the world to resume, then ended the VM");
    println!("CHILD OK");
}

// ---- the same cases under HotSpot's stress modes ----

/// Runs `test`'s child with `-XX:+SafepointALot -XX:+HandshakeALot` every 5 ms added through
/// `RTVM_OPTIONS` (read before the case's own options, as java reads `JAVA_TOOL_OPTIONS`):
/// a service thread stops the world and handshakes every mutator in turn between the case's
/// own stops, verifying each (a failed check ends the child with a fatal error). The case
/// must pass as it does alone, and the stress must have run: its stops (and handshakes) are
/// counted in the `-Xlog:safepoint,handshake` file.
fn check_child_under_stress(test: &str) {
    let log = std::env::temp_dir().join(format!("rtvm-stress-{}-{test}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let options = format!(
        "-XX:+UnlockDiagnosticVMOptions -XX:+SafepointALot -XX:+HandshakeALot -XX:GuaranteedSafepointInterval=5 -Xlog:safepoint=info,handshake=info:file={}",
        log.display()
    );
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(rtvm_testkit::child::CHILD_ROLE, "child")
        .env("RTVM_OPTIONS", &options)
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("CHILD OK"),
        "{test} under {options}:\n{}",
        describe(&out)
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let stops = text.matches("Safepoint \"None\", ").count();
    let handshakes = text.matches("Handshake \"HandshakeALot\", ").count();
    // A short case may end before a round of handshakes found one of its threads.
    assert!(
        stops > 0,
        "the stress did not run: {stops} stops, {handshakes} handshakes\n{text}"
    );
    // The case's own summary: the line before its `CHILD OK`.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let line = lines
        .iter()
        .position(|l| l.contains("CHILD OK"))
        .and_then(|i| lines[..i].last())
        .map_or("", |l| l.rsplit(" ... ").next().unwrap_or(l).trim());
    println!("under SafepointALot and HandshakeALot ({stops} verified stops, {handshakes} verified handshakes): {line}");
}

#[test]
fn every_stop_finds_every_pointer_under_safepoint_alot_and_handshake_alot() {
    if child_role().is_none() {
        check_child_under_stress("every_stop_finds_every_pointer_and_freezes_the_counters");
    }
}

#[test]
fn stops_while_threads_start_and_exit_under_safepoint_alot_and_handshake_alot() {
    if child_role().is_none() {
        check_child_under_stress("a_thousand_stops_while_threads_start_exit_attach_and_detach");
    }
}

#[test]
fn refusals_and_a_leave_that_waits_under_safepoint_alot_and_handshake_alot() {
    if child_role().is_none() {
        check_child_under_stress("leaving_a_safe_region_waits_and_nested_calls_are_refused");
    }
}
