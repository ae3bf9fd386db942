//! The threads a stop or a handshake waits for, as the kernel sees them: its scheduler
//! state, the system call it is in, its signal mask, and where the stop signal found it — so
//! a timeout names not only who did not stop but why (blocked inside the C library outside a
//! safe region, blocking the signal, gone).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rtvm_os_linux::procfs;
use rtvm_os_linux::safepoint::{self as os, StopRecord};
use rtvm_os_linux::Errno;

use super::Member;

/// `-XX:SafepointTimeoutDelay`, for the fatal error's words.
static TIMEOUT_DELAY_MS: AtomicU64 = AtomicU64::new(10_000);

fn timeout_delay_ms() -> u64 {
    TIMEOUT_DELAY_MS.load(Ordering::Relaxed)
}

/// Remembers `-XX:SafepointTimeoutDelay` for the reports.
pub(crate) fn set_timeout_delay_ms(ms: u64) {
    TIMEOUT_DELAY_MS.store(ms, Ordering::Relaxed);
}

/// `-XX:+CreateCoredumpOnCrash`, for how a fatal error ends the process.
static DUMP_CORE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

fn dump_core() -> bool {
    DUMP_CORE.load(Ordering::Relaxed)
}

/// Remembers `-XX:+CreateCoredumpOnCrash` for the fatal errors.
pub(crate) fn set_dump_core(dump: bool) {
    DUMP_CORE.store(dump, Ordering::Relaxed);
}

/// A thread a stop still waits for, and how the stop signal fares with it.
#[derive(Debug)]
pub(super) struct Chase {
    /// Its index among the stop's members.
    pub(super) index: usize,
    /// When to send it the stop signal (again).
    pub(super) next: Instant,
    /// The wait after the next signal.
    pub(super) backoff: Duration,
    /// Signals sent to it by this stop.
    pub(super) sent: u32,
    /// The last failure of `tgkill`.
    pub(super) failed: Option<Errno>,
    /// When the last signal was sent.
    sent_at: Option<Instant>,
}

/// How long a signal may stay unhandled before the stopper asks the kernel whether it is
/// still pending (a thread's own `sigwait` or `signalfd` may have taken it): a signal to a
/// thread that waits for a CPU is merely late.
const LOST_AFTER: Duration = Duration::from_millis(10);

impl Chase {
    pub(super) fn new(index: usize, first: Instant) -> Chase {
        Chase {
            index,
            next: first,
            backoff: Duration::from_micros(20),
            sent: 0,
            failed: None,
            sent_at: None,
        }
    }
}

impl Chase {
    /// Sends the stop signal to the thread of `record` if it is due (`now` past `next`),
    /// unless one is still unhandled (then it waits longer — or sends again if the thread's
    /// own `sigwait` took the last one), and schedules the next. Returns `Err(ESRCH)` for a
    /// thread gone from the process (the caller forgets it); other failures are noted in
    /// `failed` and tried again in 1 ms.
    pub(super) fn signal(&mut self, record: &StopRecord, now: Instant) -> Result<(), Errno> {
        if now < self.next {
            return Ok(());
        }
        match os::send_stop_signal(record) {
            os::SendOutcome::Sent => {
                self.sent += 1;
                self.sent_at = Some(now);
                self.next = now + self.backoff;
                self.backoff = next_backoff(self.backoff, record.unsafe_stops().2);
            }
            os::SendOutcome::Outstanding
                if self
                    .sent_at
                    .is_none_or(|t| now.saturating_duration_since(t) >= LOST_AFTER)
                    && signal_lost(record) =>
            {
                // Taken by the thread's own sigwait or signalfd: send another.
                os::protocol::resync(record.core());
            }
            os::SendOutcome::Outstanding => {
                self.next = now + self.backoff;
                self.backoff = next_backoff(self.backoff, true);
            }
            os::SendOutcome::Failed(Errno::ESRCH) if vanished(record.tid()) => {
                self.failed = Some(Errno::ESRCH);
                return Err(Errno::ESRCH);
            }
            os::SendOutcome::Failed(e) => {
                self.failed = Some(e);
                self.next = now + Duration::from_millis(1);
            }
        }
        Ok(())
    }
}

/// The next wait before the stop signal is sent to a thread again, after `backoff`: it
/// doubles up to 1 ms, and grows to 50 ms for a thread found blocked in a system call
/// outside a safe region, or with a signal still unhandled (each signal would interrupt its
/// call again).
pub(super) fn next_backoff(backoff: Duration, slow: bool) -> Duration {
    if slow {
        (backoff * 4).clamp(Duration::from_millis(5), Duration::from_millis(50))
    } else {
        (backoff * 2).min(Duration::from_millis(1))
    }
}

/// Logs that a thread gone from the process without finishing is forgotten.
pub(super) fn forgotten(name: &std::ffi::CStr, tid: i32) {
    log::warn!(
        target: "safepoint",
        "Thread \"{}\" (tid {tid}) is gone without having detached from the VM (tgkill: ESRCH); it is forgotten",
        name.to_string_lossy()
    );
}

/// Whether thread `tid` is gone from the process.
pub(super) fn vanished(tid: i32) -> bool {
    tid > 0 && !procfs::task_exists(tid)
}

/// Whether the stop signal counted as sent to the thread of `record` and not yet handled is
/// in fact gone: not pending for the thread (its own `sigwait` or `signalfd` took it).
pub(super) fn signal_lost(record: &StopRecord) -> bool {
    let signo = os::stop_signal();
    signo != 0 && procfs::task_report(record.tid()).is_some_and(|k| !k.has_pending(signo))
}

/// `"name" (tid N): S (sleeping), in system call 230, ...` — one thread that did not stop.
pub(super) fn describe(name: &str, record: &StopRecord, chase: Option<&Chase>) -> String {
    let tid = record.tid();
    let mut s = format!("\"{name}\" (tid {tid}): ");
    s.push_str(&kernel_view(record, chase));
    s
}

/// What the kernel and the stop signal say about the thread of `record`.
pub(super) fn kernel_view(record: &StopRecord, chase: Option<&Chase>) -> String {
    let tid = record.tid();
    let signo = os::stop_signal();
    let mut s = String::new();
    let mut running = false;
    match procfs::task_report(tid) {
        None => {
            let _ = write!(s, "gone (no /proc/self/task/{tid})");
        }
        Some(k) => {
            running = k.state == 'R';
            s.push_str(&k.state_words());
            if let Some(n) = k.syscall {
                let _ = write!(s, ", in system call {n}");
            }
            if let Some(w) = &k.wchan {
                let _ = write!(s, ", waiting in {w}");
            }
            if signo != 0 && k.blocks(signo) {
                let _ = write!(s, ", blocking the stop signal ({signo})");
            }
        }
    }
    // Read from another thread: a snapshot, for the report's words only.
    let in_section = record
        .core()
        .critical
        .load(std::sync::atomic::Ordering::Relaxed)
        != 0;
    if in_section {
        s.push_str(
            "; inside a no-stop section (NoAsyncStop, rtvm_async_stop_disable): it stops where the section ends",
        );
    }
    let (hits, pc, in_syscall) = record.unsafe_stops();
    if hits > 0 {
        let at = os::code::describe(pc).unwrap_or_else(|| format!("{pc:#x}"));
        let _ = write!(
            s,
            "; the stop signal found it {hits} time{} in {at}, where it may not stop a thread{}",
            if hits == 1 { "" } else { "s" },
            if in_syscall {
                " (at a system call: put blocking calls in a safe region)"
            } else {
                ""
            }
        );
    }
    if let Some(c) = chase {
        match c.failed {
            Some(Errno::EAGAIN) => s.push_str(
                "; the stop signal could not be queued (EAGAIN: the user's pending-signal limit, RLIMIT_SIGPENDING, is reached)",
            ),
            Some(e) => {
                let _ = write!(s, "; tgkill failed: {}", rtvm_os_linux::strerror(e));
            }
            None if c.sent == 0 && signo != 0 && record.signal_outstanding() => {
                s.push_str("; a stop signal sent earlier is still pending")
            }
            // A running thread takes it in a moment (it may wait for a CPU); pending for a
            // thread that does not run is worth saying.
            None if c.sent > 0 && !in_section && !running && record.signal_outstanding() => {
                s.push_str("; the stop signal is pending, not handled")
            }
            None => {}
        }
    }
    s
}

/// Every thread a stop still waits for, described.
pub(super) fn describe_all(members: &[Member], chase: &[Chase]) -> Vec<String> {
    chase
        .iter()
        .map(|c| {
            let m = &members[c.index];
            describe(&m.name.to_string_lossy(), &m.mutator.record, Some(c))
        })
        .collect()
}

/// `-XX:+SafepointTimeout`: HotSpot's report of the threads that have not reached the
/// safepoint after `SafepointTimeoutDelay`, in java 17's line layout (a blank line first; per
/// thread, its line, then an indented line — the kernel's view of it where java gives the
/// thread state — and a blank line); with `-XX:+AbortVMOnSafepointTimeout` the process then
/// ends with a fatal error naming the stop's reason, as java names the VM operation (the
/// first straggler sent `SIGABRT` so a core shows its stack).
pub(super) fn safepoint_timeout(members: &[Member], chase: &[Chase], abort: bool, reason: &str) {
    log::warn!(target: "safepoint", "");
    log::warn!(target: "safepoint", "# SafepointSynchronize::begin: Timeout detected:");
    log::warn!(target: "safepoint", "# SafepointSynchronize::begin: Timed out while spinning to reach a safepoint.");
    log::warn!(target: "safepoint", "# SafepointSynchronize::begin: Threads which did not reach the safepoint:");
    for c in chase {
        let m = &members[c.index];
        let tid = m.mutator.record.tid();
        log::warn!(
            target: "safepoint",
            "# \"{}\" #{} nid={tid:#x} runnable",
            m.name.to_string_lossy(),
            m.mutator.id()
        );
        log::warn!(
            target: "safepoint",
            "   Kernel: {}",
            kernel_view(&m.mutator.record, Some(c))
        );
        log::warn!(target: "safepoint", "");
    }
    log::warn!(target: "safepoint", "# SafepointSynchronize::begin: (End of list)");
    if abort {
        log::logger().flush();
        let straggler = chase.first().map(|c| members[c.index].mutator.record.tid());
        fatal(
            &format!(
                "Safepoint sync time longer than {}ms detected when executing {reason}.",
                timeout_delay_ms()
            ),
            straggler,
        );
    }
}

/// A fatal error of a diagnostic mode the operator asked for (`-XX:+AbortVMOnSafepointTimeout`,
/// `-XX:HandshakeTimeout`, a failed `-XX:+SafepointALot` verification): HotSpot's error
/// header on fd 2, then the process ends — with `-XX:+CreateCoredumpOnCrash` (the default) by
/// `SIGABRT` sent to `culprit` if there is one (a core then shows that thread's stack), else
/// `abort()`; with `-XX:-CreateCoredumpOnCrash` by `_exit(1)`, as java ends then.
pub(crate) fn fatal(message: &str, culprit: Option<i32>) -> ! {
    let text = format!(
        "#\n# A fatal error has been detected by rtvm:\n#\n#  Internal Error (safepoint), pid={}, tid={}\n#  fatal error: {message}\n#\n",
        std::process::id(),
        rtvm_os_linux::system::current_tid()
    );
    rtvm_os_linux::system::abort_process(&text, culprit, dump_core())
}
