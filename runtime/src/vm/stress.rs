//! HotSpot's stress modes for the stop protocol, as diagnostic flags: `-XX:+SafepointALot`
//! stops the world every `-XX:GuaranteedSafepointInterval` ms, `-XX:+HandshakeALot` sends a
//! no-op handshake to every mutator in turn each interval — both from one service thread
//! ("VM Periodic Task Thread"), and both verify what they got: no stopped thread is running
//! (by its state, and — for a thread stopped at a poll or by the signal — by the kernel's CPU
//! clock of the thread, which must not move while it is stopped), every scan range lies on its
//! thread's stack (or the other stack it was found on), what a stopped thread published stays
//! as it was while it is stopped, and a handshake's operation runs on the target itself only
//! when the target answered at its poll. A failed check is a fatal error (the operator asked
//! for the check), as a HotSpot debug build's assertion would be.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rtvm_os_linux::safepoint as os;

use crate::safepoint::report::fatal;
use crate::safepoint::{view_again, SafepointError, Safepoints, StopHow, StoppedThread};
use crate::threads::{self, Body, Registry, StackPolicy, ThreadError, ThreadKind, VmThread};

/// What the stress thread does.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StressConfig {
    /// `-XX:+SafepointALot`.
    pub(crate) safepoints: bool,
    /// `-XX:+HandshakeALot`.
    pub(crate) handshakes: bool,
    /// `-XX:GuaranteedSafepointInterval`.
    pub(crate) interval: Duration,
}

#[derive(Debug, Default)]
struct Shared {
    stop: Mutex<bool>,
    cv: Condvar,
}

/// The running stress thread.
#[derive(Debug)]
pub(crate) struct Stress {
    shared: Arc<Shared>,
    thread: Option<VmThread>,
}

impl Stress {
    /// Starts the stress thread.
    pub(crate) fn start(
        registry: &Arc<Registry>,
        policy: &StackPolicy,
        config: StressConfig,
    ) -> Result<Stress, ThreadError> {
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        let safepoints = Arc::clone(registry.safepoints_arc());
        log::info!(
            target: "safepoint",
            "Stress: {}{}every {} ms",
            if config.safepoints { "SafepointALot, " } else { "" },
            if config.handshakes { "HandshakeALot, " } else { "" },
            config.interval.as_millis()
        );
        let body = Body::Rust(Box::new(move || run(&safepoints, &s, config)));
        let thread = threads::spawn(
            registry,
            policy,
            "VM Periodic Task Thread",
            ThreadKind::Service,
            None,
            false,
            body,
        )?;
        Ok(Stress {
            shared,
            thread: Some(thread),
        })
    }

    /// Stops and joins the thread.
    pub(crate) fn stop(mut self) -> Option<String> {
        *self.shared.stop.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.shared.cv.notify_all();
        self.thread.take()?.join().err().map(|e| e.to_string())
    }
}

/// How long a stress stop waits (a straggler is reported by `-XX:+SafepointTimeout` first).
const STRESS_TIMEOUT: Duration = Duration::from_secs(60);

/// The name of `SafepointALot`'s stops: java 17 runs them as its `VM_None` operation, so
/// `-Xlog:safepoint` says `Safepoint "None", ...` and a timeout's fatal error "... when
/// executing None.".
const STRESS_STOP: &str = "None";

/// How long a stopped thread's CPU clock is watched, and how much it may move meanwhile:
/// between publishing its state and blocking, a thread that has just stopped runs for
/// microseconds; one that runs while counted as stopped gets most of the window whenever it
/// has a CPU. A thread over the limit is watched for [`CPU_CONFIRM`] more windows of twice
/// the length, and must be over it in each: on an overloaded machine (or a virtual one whose
/// host takes the CPU away) the few microseconds of a thread's way into its wait can be
/// charged hundreds of microseconds — once, as it blocks for good after.
const CPU_WINDOW: Duration = Duration::from_micros(500);
const CPU_ALLOWED: Duration = Duration::from_micros(250);
const CPU_CONFIRM: usize = 3;

/// The threads of `tids` whose CPU clock moved more than [`CPU_ALLOWED`] in `window`, with
/// how much.
fn cpu_over(tids: &[i32], window: Duration) -> Vec<(i32, Duration)> {
    let cpu = rtvm_os_linux::system::thread_cpu_time;
    let before: Vec<Option<Duration>> = tids.iter().map(|&t| cpu(t)).collect();
    std::thread::sleep(window);
    tids.iter()
        .zip(before)
        .filter_map(|(&t, b)| {
            let used = cpu(t)?.saturating_sub(b?);
            (used > CPU_ALLOWED).then_some((t, used))
        })
        .collect()
}

/// The threads of `tids` that keep using CPU: over [`CPU_ALLOWED`] in a first window of
/// [`CPU_WINDOW`] and in each of [`CPU_CONFIRM`] more of twice its length; for each, what it
/// used in every window.
fn keep_running(tids: &[i32]) -> Vec<(i32, Vec<(Duration, Duration)>)> {
    let mut suspects: Vec<(i32, Vec<(Duration, Duration)>)> =
        tids.iter().map(|&t| (t, Vec::new())).collect();
    for round in 0..=CPU_CONFIRM {
        if suspects.is_empty() {
            break;
        }
        let window = if round == 0 {
            CPU_WINDOW
        } else {
            2 * CPU_WINDOW
        };
        let watched: Vec<i32> = suspects.iter().map(|(t, _)| *t).collect();
        let over = cpu_over(&watched, window);
        suspects.retain_mut(|(t, windows)| match over.iter().find(|(o, _)| o == t) {
            Some((_, used)) => {
                windows.push((*used, window));
                true
            }
            None => false,
        });
    }
    suspects
}

fn run(safepoints: &Arc<Safepoints>, shared: &Shared, config: StressConfig) {
    let mut stopped = shared.stop.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let (next, _) = shared
            .cv
            .wait_timeout(stopped, config.interval.max(Duration::from_micros(100)))
            .unwrap_or_else(|p| p.into_inner());
        stopped = next;
        if *stopped {
            return;
        }
        drop(stopped);
        if config.safepoints {
            match safepoints.stop_the_world(STRESS_STOP, STRESS_TIMEOUT) {
                Ok(world) => {
                    let views: Vec<StoppedThread<'_>> = world.threads().collect();
                    verify_stopped(&views);
                    drop(views);
                    drop(world);
                }
                Err(e) => log::warn!(target: "safepoint", "SafepointALot: {e}"),
            }
        }
        if config.handshakes {
            for id in safepoints.member_ids() {
                let r = safepoints.handshake(
                    id,
                    "HandshakeALot",
                    STRESS_TIMEOUT,
                    Box::new(|t: &StoppedThread<'_>| verify_handshake(t)),
                );
                match r {
                    Ok(()) | Err(SafepointError::NoSuchThread { .. }) => {}
                    Err(e) => log::warn!(target: "handshake", "HandshakeALot: {e}"),
                }
            }
        }
        stopped = shared.stop.lock().unwrap_or_else(|p| p.into_inner());
    }
}

fn describe(t: &StoppedThread<'_>) -> String {
    format!("\"{}\" (tid {})", t.name(), t.tid())
}

/// The checks of a stop (see the module); a failure ends the process.
fn verify_stopped(threads: &[StoppedThread<'_>]) {
    let before: Vec<(usize, [usize; os::SAVED_REGISTERS])> = threads
        .iter()
        .map(|t| (t.scan().start, *t.registers()))
        .collect();
    for t in threads {
        check_ranges(t, "SafepointALot");
    }
    // A thread in a safe region may run (foreign code, a blocking call); one stopped at a poll
    // or by the signal waits in rtvm: the kernel's clock of its CPU time stands still.
    let watched: Vec<i32> = threads
        .iter()
        .filter(|t| t.how() != StopHow::SafeRegion)
        .map(StoppedThread::tid)
        .collect();
    if let Some((tid, windows)) = keep_running(&watched).first() {
        let t = threads.iter().find(|t| t.tid() == *tid);
        let used: Vec<String> = windows
            .iter()
            .map(|(u, w)| format!("{} of {} us", u.as_micros(), w.as_micros()))
            .collect();
        fatal(
            &format!(
                "SafepointALot: {} ({:?}) keeps using CPU while the world is stopped: {}",
                t.map_or_else(|| format!("tid {tid}"), describe),
                t.map(StoppedThread::how),
                used.join(", ")
            ),
            Some(*tid),
        );
    }
    // What a stopped thread published must not move while it is stopped.
    for (t, (sp, regs)) in threads.iter().zip(&before) {
        let now = view_again(t);
        if now.scan().start != *sp || now.registers() != regs {
            fatal(
                &format!(
                    "SafepointALot: {} changed its published state while stopped",
                    describe(t)
                ),
                None,
            );
        }
        if now.state_running() {
            fatal(
                &format!(
                    "SafepointALot: {} is running while the world is stopped",
                    describe(t)
                ),
                Some(t.tid()),
            );
        }
    }
}

fn check_ranges(t: &StoppedThread<'_>, what: &str) {
    let stack = t.stack();
    let scan = t.scan();
    let inside = scan.is_empty() || (stack.start <= scan.start && scan.end <= stack.end);
    if !inside {
        fatal(
            &format!(
                "{what}: {}'s scan range {:#x}-{:#x} lies outside its stack {:#x}-{:#x}",
                describe(t),
                scan.start,
                scan.end,
                stack.start,
                stack.end
            ),
            None,
        );
    }
    if let Some((r, _)) = t.other_stack() {
        if r.start > r.end {
            fatal(
                &format!("{what}: {}'s other stack is reversed", describe(t)),
                None,
            );
        }
    }
}

/// The checks of a handshake's operation: only a target that answers at its poll runs the
/// operation itself; otherwise this thread runs it, and the target is not running meanwhile
/// (it is in a safe region, stopped by the signal, or still stopped at a poll by a stop that
/// has just ended).
fn verify_handshake(t: &StoppedThread<'_>) {
    check_ranges(t, "HandshakeALot");
    let me = rtvm_os_linux::system::current_tid();
    if me == t.tid() {
        if t.how() != StopHow::Poll {
            fatal(
                &format!(
                    "HandshakeALot: {} runs its operation itself, found {:?}",
                    describe(t),
                    t.how()
                ),
                None,
            );
        }
    } else if view_again(t).state_running() {
        fatal(
            &format!(
                "HandshakeALot: {} is running during its handshake",
                describe(t)
            ),
            Some(t.tid()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The check catches a thread that runs (when it gets a CPU) and passes one that waits.
    #[test]
    fn a_running_thread_keeps_using_cpu_a_waiting_one_does_not() {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let spinning = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                tx.send(rtvm_os_linux::system::current_tid()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let (tx, rx_waiting) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let waiting = std::thread::spawn(move || {
            tx.send(rtvm_os_linux::system::current_tid()).unwrap();
            let _ = wait.recv();
        });
        let (spinner, waiter) = (rx.recv().unwrap(), rx_waiting.recv().unwrap());
        std::thread::sleep(Duration::from_millis(5));
        // On a loaded machine the spinner may not get enough CPU in every window (a window
        // is shorter than a scheduler slice): tries for up to 20 s, each a few milliseconds.
        let mut caught = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while caught.is_empty() && std::time::Instant::now() < deadline {
            caught = keep_running(&[spinner, waiter]);
        }
        let waiter_passes = keep_running(&[waiter]).is_empty();
        stop.store(true, Ordering::Relaxed);
        go.send(()).unwrap();
        spinning.join().unwrap();
        waiting.join().unwrap();
        assert_eq!(caught.len(), 1, "{caught:?}");
        assert_eq!(caught[0].0, spinner);
        assert_eq!(caught[0].1.len(), CPU_CONFIRM + 1);
        assert!(waiter_passes);
    }
}
