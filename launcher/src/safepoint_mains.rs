//! Built-in mains that work stops of the world and handshakes: the programs behind rtvm's ports
//! of HotSpot's `runtime/handshake` and `runtime/Safepoint` tests, and what an operator runs to
//! try `-XX:+SafepointALot`, `-XX:+HandshakeALot`, `-XX:+SafepointTimeout`,
//! `-XX:+AbortVMOnSafepointTimeout` and `-XX:HandshakeTimeout` on a machine.
//!
//! * `NativeTransitions <threads> <calls> [<sleep-us>]` (HotSpot's `HandshakeTransitionTest`):
//!   every thread alternates a short blocking call inside a safe region with a poll;
//! * `ThreadStartExit <rounds> <threads>` (`HandshakeWalkExitTest`): threads start and exit
//!   while a handshaker walks every mutator in turn;
//! * `StopStraggler <mode> <seconds>` (`TestAbortVMOnSafepointTimeout`): a thread that no stop
//!   can reach — blocked in the C library outside a safe region, or spinning in a no-stop
//!   section — or, for the negative, one that polls.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtvm::{
    NoAsyncStop, SafeRegion, SafepointError, StopHow, StoppedThread, ThreadKind, ThreadState, Vm,
};

use crate::MainResult;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, usage: &str) -> Result<T, String> {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("usage: {usage}"))
}

fn say(line: &str) -> MainResult {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())?;
    Ok(())
}

/// Joins every thread, returning the first error (all are joined whatever happens).
fn join_all(threads: Vec<rtvm::VmThread>) -> MainResult {
    let mut first: MainResult = Ok(());
    for t in threads {
        if let Err(e) = t.join() {
            if first.is_ok() {
                first = Err(e.into());
            }
        }
    }
    first
}

/// `NativeTransitions <threads> <calls> [<sleep-us> [<polls>]]`: starts `threads` threads;
/// each makes `calls` short blocking calls (a sleep of `sleep-us` µs, 1000 by default; 0
/// yields the CPU) inside a safe region — a native call in HotSpot's terms — and between
/// them runs `polls` steps of work (1 by default), polling after each, with a value it keeps
/// only in locals across the call. Prints
/// `NativeTransitions: threads=<n> calls=<n> total=<n> in <ms> ms` and `JOINED` once every
/// thread has been joined; fails if a call went missing.
pub fn native_transitions(vm: &Vm, args: &[String]) -> MainResult {
    let usage = "NativeTransitions <threads> <calls> [<sleep-us> [<polls>]]";
    let threads: usize = arg(args, 0, usage)?;
    let calls: u64 = arg(args, 1, usage)?;
    let sleep = Duration::from_micros(match args.get(2) {
        Some(_) => arg(args, 2, usage)?,
        None => 1000,
    });
    let polls: u64 = match args.get(3) {
        Some(_) => arg(args, 3, usage)?,
        None => 1,
    };
    let total = Arc::new(AtomicU64::new(0));
    let begun = Instant::now();
    let mut started = Vec::new();
    for i in 0..threads {
        let total = Arc::clone(&total);
        let t = vm.spawn(&format!("Transitions#{i}"), move || {
            let mut acc = std::hint::black_box(i as u64 + 1);
            for call in 0..calls {
                {
                    let _native = SafeRegion::enter();
                    if sleep.is_zero() {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(sleep);
                    }
                }
                for step in 0..polls {
                    acc = std::hint::black_box(acc.wrapping_mul(31).wrapping_add(call ^ step));
                    rtvm::safepoint_poll();
                }
                total.fetch_add(1, Ordering::Relaxed);
            }
            std::hint::black_box(acc);
        });
        match t {
            Ok(t) => started.push(t),
            Err(e) => {
                // Every thread started so far is joined before the error is reported.
                join_all(started)?;
                return Err(e.into());
            }
        }
    }
    join_all(started)?;
    let done = total.load(Ordering::Relaxed);
    say(&format!(
        "NativeTransitions: threads={threads} calls={calls} total={done} in {} ms",
        begun.elapsed().as_millis()
    ))?;
    if done != threads as u64 * calls {
        return Err(format!("{done} calls made, {} expected", threads as u64 * calls).into());
    }
    say("JOINED")
}

/// The kernel's view of a thread blocked in a system call: its stack pointer
/// (`/proc/self/task/<tid>/syscall`); `None` while it runs, or once it is gone.
fn blocked_sp(tid: i32) -> Option<usize> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    let fields: Vec<&str> = text.split_whitespace().collect();
    // `<nr> <6 args> <sp> <pc>` in a system call, `-1 <sp> <pc>` blocked outside one.
    let sp = match fields.len() {
        9 => fields[7],
        3 => fields[1],
        _ => return None,
    };
    usize::from_str_radix(sp.trim_start_matches("0x"), 16).ok()
}

/// What the handshaker's walks found.
#[derive(Debug, Default)]
struct Walks {
    at_poll: u64,
    by_requester: u64,
    gone: u64,
    kernel_checked: u64,
    failures: Vec<String>,
}

/// A handshake's walk of thread `t` (a conservative scan's view: the part of its stack in
/// use). The target runs it at its poll — then on its own stack, below the registers it
/// spilled — or the requester runs it while the target is safe or stopped — then the
/// kernel's stack pointer for the target, if it is blocked in a system call, lies on the
/// target's stack.
fn walk(t: &StoppedThread<'_>, walks: &Mutex<Walks>) {
    let me = rtvm_os_linux::system::current_tid();
    let (stack, scan) = (t.stack(), t.scan());
    let mut failure = None;
    let mut kernel_checked = false;
    if !(stack.start <= scan.start && scan.end <= stack.end) {
        failure = Some(format!("scan range {scan:x?} outside the stack {stack:x?}"));
    } else if me == t.tid() {
        // Only a target that answers at its poll runs the operation itself.
        let local = std::hint::black_box(0u8);
        let here = std::ptr::addr_of!(local) as usize;
        if t.how() != StopHow::Poll {
            failure = Some(format!("{:?}, but run by the target itself", t.how()));
        } else if t.other_stack().is_none() && !(stack.start <= here && here < scan.start) {
            failure = Some(format!(
                "the operation runs at {here:#x}, not below the spill at {:#x}",
                scan.start
            ));
        }
    } else if let Some(sp) = blocked_sp(t.tid()).filter(|_| t.other_stack().is_none()) {
        // Run by the requester while the target is safe, stopped by the signal, or still
        // stopped at a poll from a stop of the world that has just ended: blocked in the
        // kernel, on its own stack (these threads run on no other).
        kernel_checked = true;
        if !stack.contains(&sp) {
            failure = Some(format!(
                "blocked with its stack pointer at {sp:#x}, outside its stack {stack:x?}"
            ));
        }
    }
    let mut w = walks.lock().unwrap_or_else(|p| p.into_inner());
    if me == t.tid() {
        w.at_poll += 1;
    } else {
        w.by_requester += 1;
    }
    w.kernel_checked += u64::from(kernel_checked);
    if let Some(f) = failure {
        w.failures
            .push(format!("\"{}\" (tid {}): {f}", t.name(), t.tid()));
    }
}

/// `ThreadStartExit <rounds> <threads>`: a handshaker thread walks every mutator in turn with
/// handshakes (1 ms apart) while the main thread starts `threads` short threads — each polls a
/// few times and exits — and joins them, `rounds` times. Prints
/// `ThreadStartExit: started=<n> handshakes=<n> (at a poll <n>, by the requester <n>, gone
/// <n>; kernel stack pointers checked <n>)`; fails if a walk found a thread somewhere its
/// handshake said it was not, or a handshake failed other than for a thread that had exited.
pub fn thread_start_exit(vm: &Vm, args: &[String]) -> MainResult {
    let usage = "ThreadStartExit <rounds> <threads>";
    let rounds: usize = arg(args, 0, usage)?;
    let threads: usize = arg(args, 1, usage)?;
    let stop = Arc::new(AtomicBool::new(false));
    let walks = Arc::new(Mutex::new(Walks::default()));
    let handshaker = {
        let (h, stop, walks) = (vm.handle(), Arc::clone(&stop), Arc::clone(&walks));
        vm.spawn("Handshaker", move || {
            let me = h.current_thread_id();
            while !stop.load(Ordering::Relaxed) {
                for info in h.threads() {
                    // Threads that have returned (and wait to be joined) are not walked.
                    if info.kind != ThreadKind::Java
                        || Some(info.id) == me
                        || info.state() == ThreadState::Finished
                    {
                        continue;
                    }
                    let w = Arc::clone(&walks);
                    match h.handshake(info.id, move |t| walk(t, &w)) {
                        Ok(()) => {}
                        Err(SafepointError::NoSuchThread { .. }) => {
                            walks.lock().unwrap_or_else(|p| p.into_inner()).gone += 1;
                        }
                        Err(e) => walks
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .failures
                            .push(format!("handshake with \"{}\": {e}", info.name)),
                    }
                }
                let _sleeping = SafeRegion::enter();
                std::thread::sleep(Duration::from_millis(1));
            }
        })?
    };
    let mut started = 0u64;
    let mut result: MainResult = Ok(());
    'rounds: for round in 0..rounds {
        let mut batch = Vec::with_capacity(threads);
        for i in 0..threads {
            match vm.spawn(&format!("Exiter#{round}.{i}"), move || {
                // A little work with polls (where a handshake may find it), then exit.
                let mut acc = std::hint::black_box(i as u64);
                for n in 0..1000u64 {
                    acc = std::hint::black_box(acc.wrapping_mul(31).wrapping_add(n));
                    rtvm::safepoint_poll();
                }
                std::hint::black_box(acc);
            }) {
                Ok(t) => {
                    batch.push(t);
                    started += 1;
                }
                Err(e) => {
                    result = Err(e.into());
                    join_all(batch)?;
                    break 'rounds;
                }
            }
        }
        join_all(batch)?;
    }
    stop.store(true, Ordering::Relaxed);
    handshaker.join()?;
    result?;
    let w = std::mem::take(&mut *walks.lock().unwrap_or_else(|p| p.into_inner()));
    say(&format!(
        "ThreadStartExit: started={started} handshakes={} (at a poll {}, by the requester {}, gone {}; kernel stack pointers checked {})",
        w.at_poll + w.by_requester + w.gone,
        w.at_poll,
        w.by_requester,
        w.gone,
        w.kernel_checked
    ))?;
    if !w.failures.is_empty() {
        return Err(format!(
            "{} walks failed, the first: {}",
            w.failures.len(),
            w.failures[0]
        )
        .into());
    }
    if started != (rounds * threads) as u64 {
        return Err(format!("{started} threads started, {} expected", rounds * threads).into());
    }
    Ok(())
}

/// `StopStraggler <mode> <seconds>`: a thread named `Straggler` that for `seconds`
/// * `blocked-in-libc`: sleeps in the C library outside a safe region — the stop signal never
///   stops a thread there, so no stop or handshake can reach it (HotSpot's thread that does
///   not reach the safepoint);
/// * `no-stop-section`: spins inside a no-stop section ([`NoAsyncStop`]), never polling;
/// * `polling`: spins and polls (every stop reaches it: the negative case).
///
/// Prints `StopStraggler: <mode> for <seconds> s: done` after joining it — which, under
/// `-XX:+SafepointALot -XX:+AbortVMOnSafepointTimeout` with a short `SafepointTimeoutDelay`,
/// or `-XX:+HandshakeALot -XX:HandshakeTimeout=<ms>`, a straggler never lets happen.
pub fn stop_straggler(vm: &Vm, args: &[String]) -> MainResult {
    let usage = "StopStraggler blocked-in-libc|no-stop-section|polling <seconds>";
    let mode = args.first().ok_or(usage)?.clone();
    let seconds: f64 = arg(args, 1, usage)?;
    let length = Duration::try_from_secs_f64(seconds).map_err(|_| usage)?;
    if !["blocked-in-libc", "no-stop-section", "polling"].contains(&mode.as_str()) {
        return Err(format!("usage: {usage}").into());
    }
    let polls = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&polls);
    let m = mode.clone();
    let t = vm.spawn("Straggler", move || {
        let end = Instant::now() + length;
        match m.as_str() {
            // Not in a safe region: a sleep inside the C library (the signal interrupts it
            // and returns; the sleep goes on for what is left).
            "blocked-in-libc" => std::thread::sleep(length),
            "no-stop-section" => {
                let _section = NoAsyncStop::enter();
                while Instant::now() < end {
                    std::hint::spin_loop();
                }
            }
            _ => {
                while Instant::now() < end {
                    rtvm::safepoint_poll();
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    })?;
    t.join()?;
    let polls = polls.load(Ordering::Relaxed);
    if mode == "polling" {
        say(&format!(
            "StopStraggler: {mode} for {seconds} s ({polls} polls): done"
        ))
    } else {
        say(&format!("StopStraggler: {mode} for {seconds} s: done"))
    }
}
