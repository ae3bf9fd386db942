//! A condition variable that costs nothing to notify when nobody waits.
//!
//! `std`'s `Condvar::notify_all` always makes a `futex` system call. A thread start and a
//! join notify several times (the registry, the thread's handshake) and almost never has a
//! waiter: with thread churn those calls were a large part of a thread's cost. [`Notifier`]
//! counts its waiters and skips the call when there are none.
//!
//! The rule that makes skipping safe: a waiter is counted under the mutex, before it sleeps;
//! a notifier changes the predicate under the same mutex, then reads the count (holding the
//! mutex or after releasing it). Either the notifier's critical section came first — the
//! waiter then sees the new predicate and does not sleep — or the waiter's did, and the
//! notifier sees the count.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, MutexGuard};

use crate::safepoint::Locked;

#[derive(Debug, Default)]
pub(crate) struct Notifier {
    cv: Condvar,
    waiters: AtomicUsize,
}

impl Notifier {
    pub(crate) fn new() -> Notifier {
        Notifier::default()
    }

    /// Waits on `guard`'s mutex (the one every notifier changes the predicate under).
    pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.waiters.fetch_add(1, Ordering::Relaxed);
        let guard = self.cv.wait(guard).unwrap_or_else(|p| p.into_inner());
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        guard
    }

    /// [`wait`](Self::wait) on rtvm's own lock, taken inside a no-stop section.
    pub(crate) fn wait_locked<'a, T>(&self, guard: Locked<'a, T>) -> Locked<'a, T> {
        guard.map_guard(|g| self.wait(g))
    }

    /// Wakes every waiter, if there is one. Call it after changing the predicate under the
    /// mutex.
    pub(crate) fn notify_all(&self) {
        // Relaxed suffices: the count and the predicate are ordered by the mutex.
        if self.waiters.load(Ordering::Relaxed) > 0 {
            self.cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn no_wake_up_is_lost() {
        // A ping-pong of 10,000 rounds: one lost notification would hang it.
        let state = Arc::new((Mutex::new(0u32), Notifier::new()));
        let s = Arc::clone(&state);
        let t = std::thread::spawn(move || {
            for i in 0..10_000u32 {
                let mut g = s.0.lock().unwrap();
                while *g != 2 * i + 1 {
                    g = s.1.wait(g);
                }
                *g += 1;
                drop(g);
                s.1.notify_all();
            }
        });
        for i in 0..10_000u32 {
            let mut g = state.0.lock().unwrap();
            while *g != 2 * i {
                g = state.1.wait(g);
            }
            *g += 1;
            state.1.notify_all();
        }
        t.join().unwrap();
        assert_eq!(*state.0.lock().unwrap(), 20_000);
    }
}
