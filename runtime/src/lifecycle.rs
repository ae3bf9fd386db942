//! The VM's lifecycle: its states and the rules for moving between them.
//!
//! ```text
//! Running ──destroy──▶ DestroyRequested ──no application thread left──▶ ShuttingDown ──▶ Destroyed
//! ```
//!
//! A [`Lifecycle`] lives inside the thread registry, **under the registry's lock**: whether a
//! thread may start and whether the destroy still waits for it are then one decision — a
//! thread registered before the VM entered [`VmState::ShuttingDown`] is waited for, a later
//! start is refused. Nothing in [`Lifecycle`] locks or waits; the registry does, around these
//! rules.
//!
//! Before all of it, a create takes the process's one VM slot ([`Singleton`]): free, a
//! create under way (others wait for its outcome), or taken by a VM until it is destroyed.

use std::sync::{Condvar, Mutex};

/// The one-VM-per-process slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Free,
    /// A create is under way on this thread (`std::thread::ThreadId` is not const: the
    /// kernel tid stands for it).
    Creating(i32),
    /// A VM exists.
    Taken,
}

static SLOT: Mutex<Slot> = Mutex::new(Slot::Free);
static SLOT_CHANGED: Condvar = Condvar::new();

fn lock_slot() -> std::sync::MutexGuard<'static, Slot> {
    SLOT.lock().unwrap_or_else(|p| p.into_inner())
}

/// Holds the one-VM-per-process slot. A create that finds another create under way waits
/// for its outcome — the slot is free again if that one fails (a bad option, a heap that
/// cannot be reserved), so racing creates end with a VM whenever one of them could make it —
/// and gets `EEXIST` only when a VM exists.
#[derive(Debug)]
pub(crate) struct Singleton;

impl Singleton {
    /// The slot, or `Err(())` if a VM exists (or this thread's own create is under way).
    pub(crate) fn acquire() -> Result<Singleton, ()> {
        let me = rtvm_os_linux::system::current_tid();
        let mut slot = lock_slot();
        loop {
            match *slot {
                Slot::Free => {
                    *slot = Slot::Creating(me);
                    return Ok(Singleton);
                }
                // A create called from within this thread's own create (an output hook):
                // waiting would be for ourselves.
                Slot::Creating(t) if t == me => return Err(()),
                Slot::Creating(_) => {
                    slot = SLOT_CHANGED.wait(slot).unwrap_or_else(|p| p.into_inner());
                }
                Slot::Taken => return Err(()),
            }
        }
    }

    /// The create succeeded: the slot is taken until this value is dropped.
    pub(crate) fn taken(&self) {
        *lock_slot() = Slot::Taken;
        SLOT_CHANGED.notify_all();
    }
}

impl Drop for Singleton {
    fn drop(&mut self) {
        *lock_slot() = Slot::Free;
        SLOT_CHANGED.notify_all();
    }
}

/// The VM's lifecycle phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum VmState {
    /// Running: threads may start.
    Running,
    /// Destroy was called and waits for the application threads to finish; they may still
    /// start more threads, which it then waits for too.
    DestroyRequested,
    /// No application thread is left: no thread starts any more; the VM is being torn down.
    ShuttingDown,
    /// Torn down.
    Destroyed,
}

/// The phase and the count of application threads the destroy waits for.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    state: VmState,
    /// Application threads registered and not yet finished.
    live_application: usize,
}

impl Lifecycle {
    /// A running VM with no thread.
    pub(crate) fn new() -> Lifecycle {
        Lifecycle {
            state: VmState::Running,
            live_application: 0,
        }
    }

    /// The phase.
    pub(crate) fn state(&self) -> VmState {
        self.state
    }

    /// Whether a thread may be registered now (before [`VmState::ShuttingDown`]).
    pub(crate) fn may_start(&self) -> bool {
        self.state < VmState::ShuttingDown
    }

    /// A thread was registered; an application thread is one more the destroy waits for.
    pub(crate) fn started(&mut self, application: bool) {
        if application {
            self.live_application += 1;
        }
    }

    /// An application thread finished (or its registration was taken back).
    pub(crate) fn finished(&mut self, application: bool) {
        if application {
            self.live_application -= 1;
        }
    }

    /// Enters [`VmState::DestroyRequested`] if running. Returns the phase found: only the
    /// caller that found [`VmState::Running`] tears the VM down.
    pub(crate) fn request_destroy(&mut self) -> VmState {
        let found = self.state;
        if found == VmState::Running {
            self.state = VmState::DestroyRequested;
        }
        found
    }

    /// Whether application threads are left for the destroy to wait for.
    pub(crate) fn application_threads_left(&self) -> bool {
        self.live_application > 0
    }

    /// Enters [`VmState::ShuttingDown`]: only once no application thread is left (checked by
    /// the caller under the same lock, so no thread can start in between).
    pub(crate) fn shut_down(&mut self) {
        debug_assert_eq!(self.live_application, 0);
        self.state = VmState::ShuttingDown;
    }

    /// Enters [`VmState::Destroyed`].
    pub(crate) fn destroyed(&mut self) {
        self.state = VmState::Destroyed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions() {
        let mut l = Lifecycle::new();
        assert!(l.may_start());
        l.started(true);
        l.started(false);
        assert_eq!(l.request_destroy(), VmState::Running);
        assert_eq!(
            l.request_destroy(),
            VmState::DestroyRequested,
            "only the first tears down"
        );
        assert!(
            l.may_start(),
            "threads may still start while the destroy waits"
        );
        assert!(l.application_threads_left());
        l.finished(true);
        assert!(!l.application_threads_left(), "a worker is not waited for");
        l.shut_down();
        assert!(!l.may_start());
        l.destroyed();
        assert_eq!(l.state(), VmState::Destroyed);
    }
}
