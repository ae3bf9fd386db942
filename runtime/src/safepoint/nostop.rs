//! No-stop sections: code of a mutator the stop signal does not stop it in, and rtvm's own
//! locks, always held inside one.

use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use rtvm_os_linux::safepoint as os;

/// A section of a mutator's code the stop signal does not stop it in
/// (`rtvm_async_stop_disable`/`_enable` in C): the thread may be running code that holds a
/// lock a collector needs while the world is stopped, or that has allocated an object a
/// conservative scan cannot see yet (between the allocation and the metadata that marks it).
/// A stop that finds the thread inside waits for its end, where the thread stops as at a
/// poll. Sections nest; they cost two thread-local accesses. rtvm's own locks are held inside
/// one. Keep them short: a stop waits for them. Nothing on a thread that is not a mutator.
/// Not `Send`: the thread that entered leaves.
#[derive(Debug)]
#[must_use = "the section ends when the guard is dropped"]
pub struct NoAsyncStop {
    _section: os::NoStop,
}

impl NoAsyncStop {
    /// Enters a no-stop section on the calling thread.
    #[inline]
    pub fn enter() -> NoAsyncStop {
        NoAsyncStop {
            _section: os::NoStop::enter(),
        }
    }
}

pub use rtvm_os_linux::safepoint::code::{CodeError, CodeKind};

/// Declares the code in `range` (process-wide, for every VM): [`CodeKind::NoStop`] for code
/// of the embedder's that may hold a lock a collector needs while the world is stopped (a
/// statically linked allocator, a runtime's own locks) — the stop signal never stops a thread
/// there; [`CodeKind::Stoppable`] for code that must be stoppable although it lies among
/// no-stop code (a declaration wins over the system objects rtvm finds itself: the C
/// library, the dynamic linker, the unwinder, libstdc++, known allocators, rtvm as a shared
/// object). Declaring the same range again replaces its kind.
pub fn declare_code(range: Range<usize>, kind: CodeKind) -> Result<(), CodeError> {
    os::code::declare(range, kind)
}

/// Forgets a range declared with [`declare_code`] (code unloaded, JIT code freed). Returns
/// whether it was declared.
pub fn forget_code(range: Range<usize>) -> bool {
    os::code::forget(range)
}

/// A mutex guard held inside a no-stop section: how rtvm takes its own locks on paths a
/// mutator runs (a stopper or a collector may need the same lock while the world is
/// stopped). Poisoning is ignored (the data is consistent between statements).
pub(crate) struct Locked<'a, T> {
    guard: MutexGuard<'a, T>,
    _no_stop: NoAsyncStop,
}

impl<T> std::ops::Deref for Locked<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for Locked<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<'a, T> Locked<'a, T> {
    /// Hands the guard to `f` (a wait on a condition variable) and takes back what it returns;
    /// the no-stop section stays entered. A mutator waits so only inside a safe region.
    pub(crate) fn map_guard(
        self,
        f: impl FnOnce(MutexGuard<'a, T>) -> MutexGuard<'a, T>,
    ) -> Locked<'a, T> {
        let Locked { guard, _no_stop } = self;
        Locked {
            guard: f(guard),
            _no_stop,
        }
    }
}

/// Locks `m` inside a no-stop section (see [`Locked`]).
pub(crate) fn lock<T>(m: &Mutex<T>) -> Locked<'_, T> {
    let no_stop = NoAsyncStop::enter();
    Locked {
        guard: m.lock().unwrap_or_else(|p| p.into_inner()),
        _no_stop: no_stop,
    }
}
