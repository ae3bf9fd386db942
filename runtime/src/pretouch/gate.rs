//! Holds on a background pretouch: while one lives, the pretouch's workers stop before their
//! next chunk (the chunks in flight finish) and go back to their gang, free for other work —
//! a hold holds the pretouch, never a worker, so nothing queued behind the pretouch (another
//! memory's pretouch, a growth) waits for the hold. A close overrides every hold, so a
//! forgotten one cannot hang a shutdown.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::workers::GangWaker;

/// Who holds a background pretouch, and who is inside a chunk.
#[derive(Debug, Default)]
struct Holds {
    /// Outstanding [`PretouchHold`]s, plus the initial hold.
    count: usize,
    /// The initial hold (`HoldBackgroundPreTouch`) is still taken.
    initial: bool,
    /// Closed: holds no longer stop anyone.
    closing: bool,
    /// Workers inside a chunk right now.
    active: usize,
    /// Chunks that may still start although the pretouch is held
    /// ([`PretouchHold::let_through`]); cleared when the last hold goes.
    allowance: usize,
}

impl Holds {
    fn held(&self) -> bool {
        self.count > 0 && !self.closing
    }

    /// One hold fewer; the allowance lapses with the last.
    fn drop_one(&mut self) {
        self.count = self.count.saturating_sub(1);
        if self.count == 0 {
            self.allowance = 0;
        }
    }
}

/// The gate a background pretouch's workers pass before each chunk.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    holds: Mutex<Holds>,
    changed: Condvar,
    /// The gangs whose workers left a held pretouch: told when the holds change.
    wakers: Mutex<Vec<GangWaker>>,
}

/// A worker inside a chunk (see [`PretouchHold::wait_stopped`]).
pub(crate) struct ActiveChunk<'g>(&'g Gate);

impl Drop for ActiveChunk<'_> {
    fn drop(&mut self) {
        let mut h = self.0.lock();
        h.active -= 1;
        if h.active == 0 {
            self.0.changed.notify_all();
        }
    }
}

impl Gate {
    /// An open gate.
    pub(crate) fn new() -> Arc<Gate> {
        Arc::new(Gate::default())
    }

    fn lock(&self) -> MutexGuard<'_, Holds> {
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells `waker`'s gang whenever the holds change (its workers then look again at the
    /// tasks they left because of a hold).
    pub(crate) fn add_waker(&self, waker: GangWaker) {
        let mut wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        if !wakers.iter().any(|w| w.same_gang(&waker)) {
            wakers.push(waker);
        }
    }

    /// After a change of the holds, with no lock of the gate held.
    fn changed(&self) {
        self.changed.notify_all();
        let wakers = self
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for w in wakers {
            w.wake();
        }
    }

    /// Takes a hold, released when the returned value is dropped.
    pub(crate) fn hold(self: &Arc<Self>) -> PretouchHold {
        self.lock().count += 1;
        PretouchHold {
            gate: Arc::clone(self),
        }
    }

    /// Takes the initial hold (`HoldBackgroundPreTouch`), released by
    /// [`release_initial`](Gate::release_initial) only.
    pub(crate) fn hold_initial(&self) {
        let mut h = self.lock();
        if !h.initial {
            h.initial = true;
            h.count += 1;
        }
    }

    /// Releases the initial hold; `false` if there was none (not asked for, or released).
    pub(crate) fn release_initial(&self) -> bool {
        {
            let mut h = self.lock();
            if !h.initial {
                return false;
            }
            h.initial = false;
            h.drop_one();
        }
        self.changed();
        true
    }

    fn release(&self) {
        self.lock().drop_one();
        self.changed();
    }

    /// Whether a worker would be stopped before its next chunk: a hold is taken (and not
    /// overridden by a close) and has let through all it allowed.
    pub(crate) fn is_held(&self) -> bool {
        let h = self.lock();
        h.held() && h.allowance == 0
    }

    /// Ends every hold for good (the owner shuts down and waits for the pretouch).
    pub(crate) fn close(&self) {
        self.lock().closing = true;
        self.changed();
    }

    /// A worker about to start a chunk: `None` while the pretouch is held (the worker leaves
    /// the task and goes back to its gang); else it counts as active until the returned
    /// guard is dropped.
    pub(crate) fn try_enter_chunk(&self) -> Option<ActiveChunk<'_>> {
        let mut h = self.lock();
        if h.held() {
            if h.allowance == 0 {
                return None;
            }
            h.allowance -= 1;
        }
        h.active += 1;
        Some(ActiveChunk(self))
    }

    /// Waits until no worker is inside a chunk — chunks in flight finish, holds or not (a
    /// chunk never waits for anything), so this never waits for a hold.
    pub(crate) fn wait_idle(&self) {
        let mut h = self.lock();
        while h.active > 0 {
            h = self.changed.wait(h).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A hold on a background pretouch ([`Heap::hold_pretouch`](crate::Heap::hold_pretouch)):
/// while it lives, the pretouch workers stop before their next chunk (the chunks in flight
/// finish) and are free for other work. Dropping it lets the pretouch go on. A shutdown
/// overrides every hold, so a forgotten one cannot hang the VM.
#[derive(Debug)]
pub struct PretouchHold {
    gate: Arc<Gate>,
}

impl PretouchHold {
    /// Waits until no pretouch worker is inside a chunk: from then on, while the hold lives,
    /// the pretouch makes no progress and uses no CPU.
    pub fn wait_stopped(&self) {
        let g = &self.gate;
        let mut h = g.lock();
        while h.active > 0 && !h.closing {
            h = g.changed.wait(h).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Lets `chunks` more chunks of the pretouch start although it is held (then it stops
    /// again at that chunk boundary): a held pretouch paced by its owner — part of the heap
    /// now, the rest once the hold is dropped — and a stop at a known point of its
    /// progress. The allowance is the pretouch's, whichever hold gives it; it lapses when
    /// the last hold is dropped.
    pub fn let_through(&self, chunks: usize) {
        {
            let mut h = self.gate.lock();
            h.allowance = h.allowance.saturating_add(chunks);
        }
        self.gate.changed();
    }
}

impl Drop for PretouchHold {
    fn drop(&mut self) {
        self.gate.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_lets_through_what_it_allows_and_the_allowance_lapses_with_it() {
        let gate = Gate::new();
        assert!(gate.try_enter_chunk().is_some(), "open");
        let hold = gate.hold();
        assert!(gate.try_enter_chunk().is_none(), "held");
        assert!(gate.is_held());
        hold.let_through(2);
        assert!(!gate.is_held(), "workers may take the allowed chunks");
        let (a, b) = (gate.try_enter_chunk(), gate.try_enter_chunk());
        assert!(a.is_some() && b.is_some(), "two chunks allowed");
        assert!(gate.try_enter_chunk().is_none(), "held again after two");
        assert!(gate.is_held());
        assert_eq!(gate.lock().active, 2);
        drop((a, b));
        hold.wait_stopped();
        hold.let_through(5);
        drop(hold);
        let again = gate.hold();
        assert!(
            gate.try_enter_chunk().is_none(),
            "the allowance lapsed with the last hold"
        );
        gate.close();
        assert!(
            gate.try_enter_chunk().is_some(),
            "a close overrides every hold"
        );
        drop(again);
    }
}
