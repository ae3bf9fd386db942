//! Stopping the world: arm every mutator's poll, count those already safe, wait for the rest
//! to poll or enter a safe region, signal those that do neither within the grace period, and
//! hand the collector every thread's scan range. Dropping [`WorldStopped`] resumes them all
//! with one wake-up.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use rtvm_os_linux::safepoint as os;

use super::{
    current, refuse_nested, Member, Mutator, SafepointError, Safepoints, StopHow, StoppedThread,
    IN_STOP, POLL_PENDING,
};

/// The world, stopped ([`VmHandle::stop_the_world`](crate::VmHandle::stop_the_world)): every
/// other mutator is at a poll, in a safe region or in the stop signal's handler, and stays
/// there until this is dropped. Not `Send`: the thread that stopped the world resumes it.
#[must_use = "the world resumes when this is dropped"]
pub struct WorldStopped<'v> {
    members: MutexGuard<'v, Vec<Member>>,
    /// Indices of the stopped members (the caller and finished threads left out).
    stopped: Vec<usize>,
    owner: &'v Safepoints,
    me: Option<&'static Mutator>,
    reason: String,
    begun: Instant,
    reached: Duration,
    cleanup: Duration,
    since_last: Option<Duration>,
    /// Given up (a timeout): resumed without a safepoint line.
    aborted: bool,
    /// `-XX:+SafepointTimeout`: the members still running when the delay passed, reported
    /// once the world resumed (logging while threads may be stopped inside the logger or
    /// malloc could wait for them forever).
    late: Vec<usize>,
    resumed: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl std::fmt::Debug for WorldStopped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldStopped")
            .field("reason", &self.reason)
            .field("threads", &self.stopped.len())
            .finish()
    }
}

impl WorldStopped<'_> {
    /// Every stopped thread, in no particular order.
    pub fn threads(&self) -> impl ExactSizeIterator<Item = StoppedThread<'_>> + '_ {
        self.stopped.iter().map(|&i| {
            let m = &self.members[i];
            m.view(StopHow::of(m.mutator.record.state()))
        })
    }

    /// How many threads are stopped.
    pub fn len(&self) -> usize {
        self.stopped.len()
    }

    /// Whether no other thread was stopped.
    pub fn is_empty(&self) -> bool {
        self.stopped.is_empty()
    }

    /// How long reaching the stop took.
    pub fn time_to_stop(&self) -> Duration {
        self.reached
    }

    /// The reason given.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl WorldStopped<'_> {
    /// Lets every thread go (once).
    fn resume(&mut self) {
        if self.resumed {
            return;
        }
        self.resumed = true;
        let at = self.begun.elapsed();
        for m in self.members.iter() {
            m.mutator.record.arm_poll(false);
        }
        POLL_PENDING.fetch_sub(1, Ordering::SeqCst);
        os::end_stop();
        if let Some(me) = self.me {
            me.record.set_exempt(false);
        }
        IN_STOP.with(|c| c.set(false));
        let total = self.begun.elapsed();
        if !self.late.is_empty() {
            report_stragglers(&self.members, &self.late);
        }
        if self.aborted {
            return;
        }
        *self
            .owner
            .last_end
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        log::info!(
            target: "safepoint",
            "Safepoint \"{}\", Time since last: {} ns, Reaching safepoint: {} ns, Cleanup: {} ns, At safepoint: {} ns, Total: {} ns",
            self.reason,
            self.since_last.map_or(0, |d| d.as_nanos()),
            self.reached.as_nanos(),
            self.cleanup.as_nanos(),
            at.saturating_sub(self.reached + self.cleanup).as_nanos(),
            total.as_nanos()
        );
    }
}

impl Drop for WorldStopped<'_> {
    fn drop(&mut self) {
        self.resume();
    }
}

impl Safepoints {
    /// Stops every other mutator (see [`WorldStopped`]), or gives up after `timeout` naming
    /// the threads that did not stop (the world is let go then).
    pub(crate) fn stop_the_world(
        &self,
        reason: &str,
        timeout: Duration,
    ) -> Result<WorldStopped<'_>, SafepointError> {
        self.stop_reserving(reason, timeout, &mut |_| {})
    }

    /// [`stop_the_world`](Self::stop_the_world), calling `reserve(n)` with the number of
    /// threads to stop before any is stopped: what the caller will need while the world is
    /// stopped is allocated then.
    pub(crate) fn stop_reserving(
        &self,
        reason: &str,
        timeout: Duration,
        reserve: &mut dyn FnMut(usize),
    ) -> Result<WorldStopped<'_>, SafepointError> {
        refuse_nested("stop_the_world")?;
        let me = current();
        if let Some(me) = me {
            if me.depth.load(Ordering::Relaxed) > 0 && os::stopping(os::world()) {
                return Err(SafepointError::CallerStopped {
                    what: "stop_the_world".into(),
                });
            }
        }
        let config = self.config();
        // Waiting for another stop or handshake to end is a safe region for a mutator.
        let members = {
            let _wait = super::SafeWait::enter();
            self.lock_members()
        };
        let since_last = self
            .last_end
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| t.elapsed());
        reserve(members.len());
        // Everything that allocates comes before the stop begins: a stop signal still pending
        // from an earlier stop may stop a thread inside malloc as soon as the world stops.
        let reason_owned = reason.to_owned();
        let mut stopped: Vec<usize> = Vec::with_capacity(members.len());
        let mut pending: Vec<usize> = Vec::with_capacity(members.len());
        let late: Vec<usize> = Vec::with_capacity(if config.report_after.is_some() {
            members.len()
        } else {
            0
        });
        let begun = Instant::now();
        if let Some(me) = me {
            me.record.set_exempt(true);
        }
        IN_STOP.with(|c| c.set(true));
        os::begin_stop();
        POLL_PENDING.fetch_add(1, Ordering::SeqCst);
        // Nothing below allocates (a thread stopped inside malloc holds its arena).
        for (i, m) in members.iter().enumerate() {
            if me.is_some_and(|me| std::ptr::eq(me, m.mutator)) {
                continue;
            }
            m.mutator.record.arm_poll(true);
            stopped.push(i);
            pending.push(i);
        }
        let mut world = WorldStopped {
            members,
            stopped,
            owner: self,
            me,
            reason: reason_owned,
            begun,
            reached: Duration::ZERO,
            cleanup: Duration::ZERO,
            since_last,
            aborted: false,
            late,
            resumed: false,
            _not_send: std::marker::PhantomData,
        };
        let deadline = begun + timeout;
        let grace = begun + config.grace;
        let report = config.report_after.map(|d| begun + d);
        let (mut signaled, mut reported) = (false, false);
        loop {
            let seen = os::arrivals();
            pending.retain(|&i| world.members[i].mutator.record.state() == os::RUNNING);
            if pending.is_empty() {
                break;
            }
            let now = Instant::now();
            if config.signals && !signaled && now >= grace {
                for &i in &pending {
                    let tid = world.members[i].mutator.record.tid();
                    if tid > 0 {
                        // ESRCH: the thread is ending; it finishes or stops on its own.
                        let _ = os::send_stop_signal(tid);
                    }
                }
                signaled = true;
            }
            if let Some(at) = report {
                if !reported && now >= at {
                    // Within the capacity reserved above: no allocation.
                    world.late.extend_from_slice(&pending);
                    reported = true;
                }
            }
            if now >= deadline {
                // Let go first: a thread the signal stopped may hold a malloc arena.
                world.aborted = true;
                world.resume();
                let stragglers: Vec<String> = pending
                    .iter()
                    .map(|&i| {
                        let m = &world.members[i];
                        format!(
                            "\"{}\" (tid {})",
                            m.name.to_string_lossy(),
                            m.mutator.record.tid()
                        )
                    })
                    .collect();
                return Err(SafepointError::Timeout {
                    reason: reason.to_owned(),
                    waited_ms: begun.elapsed().as_millis() as u64,
                    stragglers,
                    signals: config.signals,
                });
            }
            let mut next = deadline;
            if config.signals && !signaled {
                next = next.min(grace);
            }
            if let Some(at) = report.filter(|_| !reported) {
                next = next.min(at);
            }
            let wait = next
                .saturating_duration_since(now)
                .min(Duration::from_millis(10));
            os::wait_for_arrivals(seen, wait.max(Duration::from_micros(50)));
        }
        world.reached = begun.elapsed();
        let members = &world.members;
        world
            .stopped
            .retain(|&i| members[i].mutator.record.state() != os::FINISHED);
        world.cleanup = begun.elapsed().saturating_sub(world.reached);
        Ok(world)
    }
}

/// `-XX:+SafepointTimeout`: HotSpot's report of the threads that had not reached the
/// safepoint after `SafepointTimeoutDelay` (printed once the world resumed).
fn report_stragglers(members: &[Member], pending: &[usize]) {
    log::warn!(target: "safepoint", "# SafepointSynchronize::begin: Timeout detected:");
    log::warn!(target: "safepoint", "# SafepointSynchronize::begin: Timed out while spinning to reach a safepoint.");
    log::warn!(target: "safepoint", "# SafepointSynchronize::begin: Threads which did not reach the safepoint:");
    for &i in pending {
        let m = &members[i];
        let tid = m.mutator.record.tid();
        log::warn!(
            target: "safepoint",
            "# \"{}\" #{} nid={tid:#x} runnable",
            m.name.to_string_lossy(),
            m.mutator.id()
        );
    }
    log::warn!(target: "safepoint", "# SafepointSynchronize::begin: (End of list)");
}
