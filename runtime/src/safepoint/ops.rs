//! One stop of the world or handshake at a time — and the members list changes only between
//! them. Unlike a `MutexGuard`, the lock is not tied to the thread that took it: a stop begun
//! on one thread may be ended on another (MMTk resumes the mutators from whichever GC worker
//! finishes last), so [`WorldStopped`](super::WorldStopped) is `Send`.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// The kernel thread id of the thread that began the stop or handshake under way (0: none).
/// One VM exists at a time, so one holder per process.
static HOLDER_TID: AtomicI32 = AtomicI32::new(0);

/// Whether the calling thread began the stop or handshake under way (and has not ended it,
/// nor handed it to another thread that did).
pub(super) fn held_by_caller() -> bool {
    let holder = HOLDER_TID.load(Ordering::Acquire);
    holder != 0 && holder == rtvm_os_linux::system::current_tid()
}

#[derive(Debug, Default)]
struct Busy {
    /// What holds it: a stop's or a handshake's reason, `register`, `unregister`.
    what: Option<std::borrow::Cow<'static, str>>,
    /// Threads waiting for it (counted under the mutex: a release without waiters makes no
    /// system call — every thread start and exit takes this lock).
    waiters: usize,
}

/// The lock (see the module).
#[derive(Debug, Default)]
pub(super) struct OpLock {
    busy: Mutex<Busy>,
    cv: Condvar,
}

/// Held until dropped (the scoped use: register, unregister, handshakes).
pub(super) struct OpGuard<'a> {
    lock: &'a OpLock,
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        self.lock.release();
    }
}

impl OpLock {
    pub(super) fn new() -> OpLock {
        OpLock::default()
    }

    fn state(&self) -> MutexGuard<'_, Busy> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the lock for a stop or a handshake (`what` is its reason), waiting until
    /// `deadline` at most: `Err(holder's reason)` if it is still held then. The caller counts
    /// as its holder until [`release`](Self::release).
    pub(super) fn acquire(&self, what: &str, deadline: Instant) -> Result<(), String> {
        let what = what.to_owned();
        let mut s = self.state();
        while let Some(holder) = &s.what {
            let now = Instant::now();
            if now >= deadline {
                return Err(holder.to_string());
            }
            s.waiters += 1;
            s = self
                .cv
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            s.waiters -= 1;
        }
        s.what = Some(what.into());
        HOLDER_TID.store(rtvm_os_linux::system::current_tid(), Ordering::Release);
        Ok(())
    }

    /// Takes the lock for a change of the members, however long a stop under way lasts.
    pub(super) fn acquire_forever(&self, what: &'static str) -> OpGuard<'_> {
        let mut s = self.state();
        while s.what.is_some() {
            s.waiters += 1;
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
            s.waiters -= 1;
        }
        s.what = Some(what.into());
        OpGuard { lock: self }
    }

    /// A scoped [`acquire`](Self::acquire).
    pub(super) fn acquire_scoped(
        &self,
        what: &str,
        deadline: Instant,
    ) -> Result<OpGuard<'_>, String> {
        self.acquire(what, deadline)?;
        Ok(OpGuard { lock: self })
    }

    /// Lets the lock go, from any thread.
    pub(super) fn release(&self) {
        let mut s = self.state();
        s.what = None;
        HOLDER_TID.store(0, Ordering::Release);
        let waiters = s.waiters;
        drop(s);
        if waiters > 0 {
            self.cv.notify_all();
        }
    }
}
