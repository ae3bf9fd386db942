//! The VM's lifecycle: its states and the rules for moving between them.
//!
//! ```text
//! Running ──destroy──▶ DestroyRequested ──no application thread left──▶ ShuttingDown ──▶ Destroyed
//! ```
//!
//! A [`Lifecycle`] lives inside the thread registry, **under the registry's lock**: whether a
//! thread may start and whether the destroy still waits for it are then one decision — a
//! thread registered before the VM entered [`VmState::ShuttingDown`] is waited for, a later
//! start is refused. Nothing here locks or waits; the registry does, around these rules.

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
