//! Holds on a background pretouch: while one lives, the pretouch's workers stop before their
//! next chunk (the chunks in flight finish). A close overrides every hold, so a forgotten one
//! cannot hang a shutdown.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

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
}

/// The gate a background pretouch's workers pass before each chunk.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    holds: Mutex<Holds>,
    changed: Condvar,
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
        let mut h = self.lock();
        if !h.initial {
            return false;
        }
        h.initial = false;
        h.count = h.count.saturating_sub(1);
        self.changed.notify_all();
        true
    }

    fn release(&self) {
        let mut h = self.lock();
        h.count = h.count.saturating_sub(1);
        self.changed.notify_all();
    }

    /// Whether any hold is taken (and not overridden by a close).
    pub(crate) fn is_held(&self) -> bool {
        let h = self.lock();
        h.count > 0 && !h.closing
    }

    /// Ends every hold for good (the owner shuts down and waits for the pretouch).
    pub(crate) fn close(&self) {
        self.lock().closing = true;
        self.changed.notify_all();
    }

    /// A worker waits here before each chunk while the pretouch is held; it counts as active
    /// until the returned guard is dropped.
    pub(crate) fn enter_chunk(&self) -> ActiveChunk<'_> {
        let mut h = self.lock();
        while h.count > 0 && !h.closing {
            h = self.changed.wait(h).unwrap_or_else(|p| p.into_inner());
        }
        h.active += 1;
        ActiveChunk(self)
    }
}

/// A hold on a background pretouch ([`Heap::hold_pretouch`](crate::Heap::hold_pretouch)):
/// while it lives, the pretouch workers stop before their next chunk (the chunks in flight
/// finish). Dropping it lets them go on. A shutdown overrides every hold, so a forgotten one
/// cannot hang the VM.
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
}

impl Drop for PretouchHold {
    fn drop(&mut self) {
        self.gate.release();
    }
}
