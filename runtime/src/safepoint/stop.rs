//! Stopping the world: arm every mutator's poll, count those already safe, wait for the rest
//! to poll or enter a safe region, send the stop signal to those that do neither within the
//! grace period — again, a little later, to those it found where it may not stop them — and
//! hand the collector every thread's scan range. Dropping [`WorldStopped`], on any thread,
//! resumes them all with one wake-up.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtvm_os_linux::safepoint as os;

use super::report::{self, Chase};
use super::{
    current, lock, refuse_nested, Member, Mutator, SafepointError, Safepoints, StopHow,
    StoppedThread, POLL_PENDING,
};

/// The world, stopped ([`VmHandle::stop_the_world`](crate::VmHandle::stop_the_world)): every
/// other mutator is at a poll, in a safe region or in the stop signal's handler, and stays
/// there until this is dropped — on this thread or any other (`Send`: a collector stops the
/// world on one of its threads and resumes it from another).
#[must_use = "the world resumes when this is dropped"]
pub struct WorldStopped {
    owner: Arc<Safepoints>,
    /// The members when the stop began (none joins or leaves until it ends).
    members: Arc<Vec<Member>>,
    /// Indices of the stopped members (the caller and finished threads left out).
    stopped: Vec<usize>,
    /// Members found gone without finishing (`ESRCH`): forgotten when the world resumes.
    vanished: Vec<usize>,
    me: Option<&'static Mutator>,
    reason: String,
    begun: Instant,
    reached: Duration,
    cleanup: Duration,
    since_last: Option<Duration>,
    /// Given up (a timeout): resumed without a safepoint line.
    aborted: bool,
    resumed: bool,
}

impl std::fmt::Debug for WorldStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldStopped")
            .field("reason", &self.reason)
            .field("threads", &self.stopped.len())
            .finish()
    }
}

impl WorldStopped {
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

    /// Resumes the world now (what dropping it does).
    pub fn resume(mut self) {
        self.let_go();
    }

    /// Lets every thread go (once).
    fn let_go(&mut self) {
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
        for &i in &self.vanished {
            let m = &self.members[i];
            report::forgotten(&m.name, m.mutator.record.tid());
            lock(&self.owner.vanished).push(m.mutator.id());
            self.owner.any_vanished.store(true, Ordering::Release);
            self.owner.remove_member(m.mutator);
        }
        self.owner.ops.release();
        let total = self.begun.elapsed();
        if self.aborted {
            return;
        }
        *lock(&self.owner.last_end) = Some(Instant::now());
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

impl Drop for WorldStopped {
    fn drop(&mut self) {
        self.let_go();
    }
}

impl Safepoints {
    /// Stops every other mutator (see [`WorldStopped`]), or gives up after `timeout` naming
    /// the threads that did not stop (the world is let go then). Waiting for another stop or
    /// handshake to end counts against `timeout`.
    pub(crate) fn stop_the_world(
        self: &Arc<Self>,
        reason: &str,
        timeout: Duration,
    ) -> Result<WorldStopped, SafepointError> {
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
        let asked = Instant::now();
        let deadline = asked + timeout;
        // Released by `let_go`, on whichever thread resumes the world.
        std::mem::forget(self.take_ops(reason, asked, deadline)?);
        // Where the signal may stop threads: the loader's lock is taken here, before any
        // thread is stopped.
        if config.signals {
            os::code::refresh();
        }
        let members = self.snapshot();
        let since_last = lock(&self.last_end).map(|t| t.elapsed());
        let mut stopped: Vec<usize> = Vec::with_capacity(members.len());
        // Only threads running now are chased: one in a safe region stays out of the
        // embedder's code until the world resumes.
        let mut chase: Vec<Chase> = Vec::new();
        let begun = Instant::now();
        if let Some(me) = me {
            me.record.set_exempt(true);
        }
        os::begin_stop();
        POLL_PENDING.fetch_add(1, Ordering::SeqCst);
        for (i, m) in members.iter().enumerate() {
            if me.is_some_and(|me| std::ptr::eq(me, m.mutator)) {
                continue;
            }
            m.mutator.record.arm_poll(true);
            stopped.push(i);
            if m.mutator.record.state() == os::RUNNING {
                chase.push(Chase::new(i, begun + config.grace));
            }
        }
        let mut world = WorldStopped {
            owner: Arc::clone(self),
            members,
            stopped,
            vanished: Vec::new(),
            me,
            reason: reason.to_owned(),
            begun,
            reached: Duration::ZERO,
            cleanup: Duration::ZERO,
            since_last,
            aborted: false,
            resumed: false,
        };
        let report_at = config.report_after.map(|d| begun + d);
        let mut reported = false;
        loop {
            let seen = os::arrivals();
            chase.retain(|c| world.members[c.index].mutator.record.state() == os::RUNNING);
            if chase.is_empty() {
                break;
            }
            let now = Instant::now();
            if config.signals {
                for c in chase.iter_mut() {
                    let m = &world.members[c.index];
                    let record = &m.mutator.record;
                    if c.signal(record, now).is_err() && os::protocol::mark_vanished(record.core())
                    {
                        world.vanished.push(c.index);
                    }
                }
            }
            if let Some(at) = report_at {
                if !reported && now >= at {
                    reported = true;
                    report::safepoint_timeout(
                        &world.members,
                        &chase,
                        config.abort_on_timeout,
                        &world.reason,
                    );
                }
            }
            if now >= deadline {
                world.aborted = true;
                let stragglers = report::describe_all(&world.members, &chase);
                world.let_go();
                return Err(SafepointError::Timeout {
                    reason: reason.to_owned(),
                    waited_ms: begun.elapsed().as_millis() as u64,
                    stragglers,
                    signals: config.signals,
                });
            }
            let mut next = deadline;
            if config.signals {
                if let Some(c) = chase.iter().map(|c| c.next).min() {
                    next = next.min(c);
                }
            }
            if let Some(at) = report_at.filter(|_| !reported) {
                next = next.min(at);
            }
            let wait = next
                .saturating_duration_since(now)
                .clamp(Duration::from_micros(20), Duration::from_millis(10));
            os::wait_for_arrivals(seen, wait);
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
