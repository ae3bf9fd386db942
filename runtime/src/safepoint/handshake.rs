//! Handshakes: an operation for one thread while only that thread is stopped. The requester
//! puts the operation in the target's slot, holds the target (it may not leave a safe region
//! or pass a poll) and arms its poll ([`protocol::offer_handshake`]). Whoever claims it first
//! runs it: the target at its next poll, on its own stack — its own hold does not hold it
//! meanwhile, so the operation may enter and leave safe regions, and a stray stop signal
//! leaves it be; or the requester, while the target is safe or stopped — at once if it is in
//! a safe region, by the stop signal (where that may stop it) if it neither polls nor blocks.

use std::ffi::CStr;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtvm_os_linux::safepoint::{self as os, protocol};

use super::report::{self, Chase};
use super::{
    current, lock, refuse_nested, view_of, Mutator, SafepointError, Safepoints, StopHow,
    StoppedThread, IN_OP, POLL_PENDING,
};

/// A handshake's operation.
pub(crate) type HandshakeOp = Box<dyn for<'a> FnOnce(&StoppedThread<'a>) + Send>;

struct Pending {
    op: HandshakeOp,
    name: Arc<CStr>,
    stack: Range<usize>,
}

/// A thread's slot for a handshake operation.
pub(crate) struct HandshakeSlot {
    pending: Mutex<Option<Pending>>,
}

impl std::fmt::Debug for HandshakeSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeSlot").finish_non_exhaustive()
    }
}

impl HandshakeSlot {
    pub(super) const fn new() -> HandshakeSlot {
        HandshakeSlot {
            pending: Mutex::new(None),
        }
    }

    pub(super) fn reset(&self) {
        drop(self.take());
    }

    fn take(&self) -> Option<Pending> {
        lock(&self.pending).take()
    }
}

/// Runs `op` with `IN_OP` set (rtvm calls that would wait for this very operation are refused
/// meanwhile), catching a panic.
fn run_op(op: HandshakeOp, view: &StoppedThread<'_>) {
    IN_OP.with(|c| c.set(true));
    let _ = catch_unwind(AssertUnwindSafe(|| op(view)));
    IN_OP.with(|c| c.set(false));
}

/// At a poll: runs a handshake operation waiting for this thread, if the thread claims it
/// first — on its own stack, its registers spilled in its scan range.
pub(super) fn run_if_claimed(m: &'static Mutator) {
    let core = m.record.core();
    if !protocol::target_claims(core) {
        return;
    }
    let pending = m.slot.take();
    protocol::run_own_handshake(os::the_world(), core, || {
        if let Some(p) = pending {
            // The operation runs inside the closure: the spill lies in the scan range.
            os::with_registers_spilled(|spill| {
                let view = view_of(
                    m.id(),
                    &m.record,
                    &p.name,
                    &p.stack,
                    StopHow::Poll,
                    Some((spill.at, spill.regs)),
                );
                run_op(p.op, &view);
            });
        }
    });
}

impl Safepoints {
    /// Runs `op` for thread `id` while only that thread is stopped (see the module). Gives up
    /// after `timeout` if the thread neither polls, nor is safe, nor could be stopped by the
    /// signal — unless it already runs the operation, which is then waited for. With
    /// `-XX:HandshakeTimeout` a handshake not done in that time ends the process instead,
    /// naming the thread.
    pub(crate) fn handshake(
        &self,
        id: u64,
        name: &str,
        timeout: Duration,
        op: HandshakeOp,
    ) -> Result<(), SafepointError> {
        refuse_nested("handshake")?;
        let config = self.config();
        let fatal_after = config.handshake_timeout;
        let begun = Instant::now();
        let deadline = begun + timeout;
        let _op = self.take_ops(name, begun, deadline)?;
        let member = lock(&self.members)
            .iter()
            .find(|m| m.mutator.id() == id)
            .cloned()
            .ok_or(SafepointError::NoSuchThread { id })?;
        let m = member.mutator;
        let core = m.record.core();
        if current().is_some_and(|me| std::ptr::eq(me, m)) {
            os::with_registers_spilled(|spill| {
                let view = view_of(
                    id,
                    &m.record,
                    &member.name,
                    &member.stack,
                    StopHow::Poll,
                    Some((spill.at, spill.regs)),
                );
                run_op(op, &view);
            });
            log_handshake(name, false, begun);
            return Ok(());
        }
        if config.signals {
            os::code::refresh();
        }
        *lock(&m.slot.pending) = Some(Pending {
            op,
            name: Arc::clone(&member.name),
            stack: member.stack.clone(),
        });
        protocol::offer_handshake(core);
        POLL_PENDING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut chase = Chase::new(0, begun + config.grace);
        let mut vanished = false;
        let mut by_requester = false;
        let result = loop {
            let seen = os::arrivals();
            let now = Instant::now();
            let (claimed, done) = protocol::target_progress(core);
            if claimed {
                if done {
                    break Ok(());
                }
                if now >= deadline {
                    // The target runs the operation and it has not returned: the requester
                    // goes (the operation stays the target's to finish; its hold ends).
                    break Err(SafepointError::Timeout {
                        reason: name.to_owned(),
                        waited_ms: begun.elapsed().as_millis() as u64,
                        stragglers: vec![format!(
                            "\"{}\" (tid {}): runs the operation it took at its poll and has not returned from it",
                            member.name.to_string_lossy(),
                            m.record.tid()
                        )],
                        signals: config.signals,
                    });
                }
            } else {
                let state = m.record.state();
                if state == os::FINISHED {
                    if protocol::requester_claims(core) {
                        break Err(SafepointError::NoSuchThread { id });
                    }
                    continue;
                }
                if state != os::RUNNING {
                    if protocol::requester_claims(core) {
                        if let Some(p) = m.slot.take() {
                            let view = member.view(StopHow::of(state));
                            run_op(p.op, &view);
                        }
                        by_requester = true;
                        break Ok(());
                    }
                    continue;
                }
                if config.signals
                    && chase.signal(&m.record, now).is_err()
                    && protocol::mark_vanished(core)
                {
                    // Gone from the process without finishing: forgotten (the next look
                    // finds it FINISHED and answers NoSuchThread).
                    lock(&self.vanished).push(id);
                    self.any_vanished
                        .store(true, std::sync::atomic::Ordering::Release);
                    vanished = true;
                }
                if now >= deadline && protocol::requester_claims(core) {
                    break Err(SafepointError::Timeout {
                        reason: name.to_owned(),
                        waited_ms: begun.elapsed().as_millis() as u64,
                        stragglers: vec![report::describe(
                            &member.name.to_string_lossy(),
                            &m.record,
                            Some(&chase),
                        )],
                        signals: config.signals,
                    });
                }
            }
            // Only once the target has been looked at: a requester that ran late (a loaded
            // machine) still runs the operation for a target that is safe by now.
            if let Some(limit) = fatal_after {
                if now >= begun + limit {
                    handshake_timeout(name, &member.name.to_string_lossy(), m, &chase);
                }
            }
            let mut next = deadline;
            if config.signals && !claimed {
                next = next.min(chase.next);
            }
            if let Some(limit) = fatal_after {
                next = next.min(begun + limit);
            }
            let wait = next
                .saturating_duration_since(now)
                .clamp(Duration::from_micros(20), Duration::from_millis(10));
            os::wait_for_arrivals(seen, wait);
        };
        protocol::end_handshake(core);
        POLL_PENDING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        // What was not run (a timeout) is dropped here, after the thread was let go.
        drop(m.slot.take());
        if vanished {
            report::forgotten(&member.name, m.record.tid());
            self.remove_member(m);
        }
        if result.is_ok() {
            log_handshake(name, by_requester, begun);
        }
        result
    }
}

/// `-XX:HandshakeTimeout`: java 17's words for a handshake that did not complete in time —
/// the operation's address being that of the thread's handshake slot, and the thread named
/// where java gives its address — then what the kernel says of it, and a fatal error.
fn handshake_timeout(name: &str, thread: &str, m: &Mutator, chase: &Chase) -> ! {
    let op = std::ptr::addr_of!(m.slot) as usize;
    log::error!(target: "handshake", "Handshake timeout: {name}({op:#018x}), pending threads: 1");
    log::error!(
        target: "handshake",
        "Thread \"{thread}\" (tid {}) has not cleared handshake op: {op:#018x}",
        m.record.tid()
    );
    log::error!(
        target: "handshake",
        "   Kernel: {}",
        report::kernel_view(&m.record, Some(chase))
    );
    log::logger().flush();
    report::fatal("Handshake timeout", Some(m.record.tid()))
}

fn log_handshake(name: &str, by_requester: bool, begun: Instant) {
    log::info!(
        target: "handshake",
        "Handshake \"{name}\", Targeted threads: 1, Executed by requesting thread: {}, Total completion time: {} ns",
        u32::from(by_requester),
        begun.elapsed().as_nanos()
    );
}
