//! Handshakes: an operation for one thread while only that thread is stopped. The requester
//! puts the operation in the target's slot, holds the target (it may not leave a safe region
//! or pass a poll) and arms its poll. Whoever claims the slot first runs it: the target at its
//! next poll, on its own stack; or the requester, while the target is safe or stopped — at
//! once if it is in a safe region, after the grace period by the stop signal if it neither
//! polls nor blocks.

use std::ffi::CString;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rtvm_os_linux::safepoint as os;

use super::{
    current, refuse_nested, view_of, Mutator, SafepointError, Safepoints, StopHow, StoppedThread,
    IN_STOP, POLL_PENDING,
};

/// A handshake's operation.
pub type HandshakeOp = Box<dyn for<'a> FnOnce(&StoppedThread<'a>) + Send>;

const NONE: u32 = 0;
const PENDING: u32 = 1;
const TARGET: u32 = 2;
const REQUESTER: u32 = 3;

struct Pending {
    op: HandshakeOp,
    name: CString,
    stack: Range<usize>,
}

/// A thread's slot for a handshake operation.
pub(crate) struct HandshakeSlot {
    claim: AtomicU32,
    done: AtomicBool,
    pending: Mutex<Option<Pending>>,
}

impl std::fmt::Debug for HandshakeSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeSlot")
            .field("claim", &self.claim.load(Ordering::Relaxed))
            .finish()
    }
}

impl HandshakeSlot {
    pub(super) const fn new() -> HandshakeSlot {
        HandshakeSlot {
            claim: AtomicU32::new(NONE),
            done: AtomicBool::new(false),
            pending: Mutex::new(None),
        }
    }

    pub(super) fn reset(&self) {
        self.claim.store(NONE, Ordering::SeqCst);
        self.done.store(false, Ordering::SeqCst);
        drop(self.lock().take());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The target took the operation (it runs, or ran, it itself).
    pub(super) fn taken_by_target(&self) -> bool {
        self.claim.load(Ordering::SeqCst) == TARGET
    }

    fn claim_for_requester(&self) -> bool {
        match self
            .claim
            .compare_exchange(PENDING, REQUESTER, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => true,
            Err(c) => c == REQUESTER,
        }
    }
}

/// At a poll: runs a handshake operation waiting for this thread, if the thread claims it
/// first — on its own stack, its registers spilled in its scan range.
pub(super) fn run_if_claimed(m: &'static Mutator) {
    if !m.record.held()
        || m.slot
            .claim
            .compare_exchange(PENDING, TARGET, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
    {
        return;
    }
    let pending = m.slot.lock().take();
    if let Some(p) = pending {
        // The operation runs inside the closure: the spill lies in the scan range.
        os::with_registers_spilled(|spill| {
            let view = view_of(
                m.id(),
                m.record.tid(),
                &p.name,
                &p.stack,
                StopHow::Poll,
                spill.at,
                None,
                spill.regs,
            );
            IN_STOP.with(|c| c.set(true));
            let _ = catch_unwind(AssertUnwindSafe(|| (p.op)(&view)));
            IN_STOP.with(|c| c.set(false));
        });
    }
    m.slot.done.store(true, Ordering::SeqCst);
    os::notify_stopper();
}

impl Safepoints {
    /// Runs `op` for thread `id` while only that thread is stopped (see the module). Gives up
    /// after `timeout` if the thread neither polls, nor is safe, nor takes the signal — unless
    /// it already runs the operation, which is then waited for.
    pub(crate) fn handshake(
        &self,
        id: u64,
        name: &str,
        timeout: Duration,
        op: HandshakeOp,
    ) -> Result<(), SafepointError> {
        refuse_nested("handshake")?;
        let config = self.config();
        let members = {
            let _wait = super::SafeWait::enter();
            self.lock_members()
        };
        let member = members
            .iter()
            .find(|m| m.mutator.id() == id)
            .ok_or(SafepointError::NoSuchThread { id })?;
        let m = member.mutator;
        let begun = Instant::now();
        if current().is_some_and(|me| std::ptr::eq(me, m)) {
            os::with_registers_spilled(|spill| {
                let r = &m.record;
                let view = view_of(
                    id,
                    r.tid(),
                    &member.name,
                    &member.stack,
                    StopHow::Poll,
                    spill.at,
                    None,
                    spill.regs,
                );
                op(&view);
            });
            log_handshake(name, false, begun);
            return Ok(());
        }
        *m.slot.lock() = Some(Pending {
            op,
            name: member.name.clone(),
            stack: member.stack.clone(),
        });
        m.slot.done.store(false, Ordering::SeqCst);
        m.slot.claim.store(PENDING, Ordering::SeqCst);
        m.record.set_hold(true);
        m.record.arm_poll(true);
        POLL_PENDING.fetch_add(1, Ordering::SeqCst);
        IN_STOP.with(|c| c.set(true));
        let deadline = begun + timeout;
        let grace = begun + config.grace;
        let mut signaled = false;
        let mut by_requester = false;
        let result = loop {
            let seen = os::arrivals();
            let now = Instant::now();
            if m.slot.taken_by_target() {
                if m.slot.done.load(Ordering::SeqCst) {
                    break Ok(());
                }
            } else {
                let state = m.record.state();
                if state == os::FINISHED {
                    if m.slot.claim_for_requester() {
                        break Err(SafepointError::NoSuchThread { id });
                    }
                    continue;
                }
                if state != os::RUNNING {
                    if m.slot.claim_for_requester() {
                        let pending = m.slot.lock().take();
                        if let Some(p) = pending {
                            let view = member.view(StopHow::of(state));
                            let _ = catch_unwind(AssertUnwindSafe(|| (p.op)(&view)));
                        }
                        by_requester = true;
                        break Ok(());
                    }
                    continue;
                }
                if config.signals && !signaled && now >= grace && m.slot.claim_for_requester() {
                    let _ = os::send_stop_signal(m.record.tid());
                    signaled = true;
                }
                if now >= deadline && m.slot.claim_for_requester() {
                    break Err(SafepointError::Timeout {
                        reason: name.to_owned(),
                        waited_ms: begun.elapsed().as_millis() as u64,
                        stragglers: vec![format!(
                            "\"{}\" (tid {})",
                            member.name.to_string_lossy(),
                            m.record.tid()
                        )],
                        signals: config.signals,
                    });
                }
            }
            let next = if config.signals && !signaled {
                grace.min(deadline)
            } else {
                deadline
            };
            let wait = next
                .saturating_duration_since(now)
                .clamp(Duration::from_micros(50), Duration::from_millis(10));
            os::wait_for_arrivals(seen, wait);
        };
        IN_STOP.with(|c| c.set(false));
        m.record.set_hold(false);
        m.record.arm_poll(false);
        POLL_PENDING.fetch_sub(1, Ordering::SeqCst);
        // What was not run (a timeout) is dropped here, after the thread was let go.
        let leftover = m.slot.lock().take();
        m.slot.claim.store(NONE, Ordering::SeqCst);
        drop(members);
        drop(leftover);
        if result.is_ok() {
            log_handshake(name, by_requester, begun);
        }
        result
    }
}

fn log_handshake(name: &str, by_requester: bool, begun: Instant) {
    log::info!(
        target: "handshake",
        "Handshake \"{name}\", Targeted threads: 1, Executed by requesting thread: {}, Total completion time: {} ns",
        u32::from(by_requester),
        begun.elapsed().as_nanos()
    );
}
