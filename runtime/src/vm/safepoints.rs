//! [`VmHandle`]'s part in stopping threads: stops of the world, handshakes, safe regions.

use std::time::Duration;

use super::VmHandle;
use crate::safepoint::{SafeRegion, SafepointError, StoppedThread, WorldStopped};
use crate::threads::ThreadError;

/// How long [`VmHandle::handshake`] waits for its thread.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl VmHandle {
    /// Stops every other mutator — the VM's application threads and attached threads — at a
    /// poll, in a safe region, or (after `-XX:SafepointSignalDelay`, 200 µs by default, for a thread that does
    /// neither) by the stop signal `-XX:SafepointSignal`; returns them with their scan
    /// ranges. The world resumes when the [`WorldStopped`] is dropped. rtvm's own threads
    /// (the worker gang, the dispatcher, the attach listener, the trimmer) run only rtvm's code
    /// and go on.
    ///
    /// Threads that start meanwhile stop before their body; a thread that ends, detaches or
    /// attaches, or starts another, waits until the world resumes. While the world is stopped
    /// the caller must not allocate with `malloc` if a thread may have been stopped by the
    /// signal inside it (it may hold the allocator's lock), nor call rtvm functions that
    /// start, join, attach or detach threads, stop the world or handshake (refused with
    /// [`SafepointError::Nested`] or [`ThreadError`]).
    ///
    /// Errors: [`SafepointError::Timeout`] naming the threads that did not stop within
    /// `timeout` (the others are let go; with `-Xrs` there is no signal, so a thread that
    /// never polls is never stopped); [`SafepointError::Nested`] from the thread that holds
    /// the world stopped or runs a handshake operation; [`SafepointError::CallerStopped`] from
    /// a thread counted as stopped (in a safe region while another thread holds the world).
    /// `-Xlog:safepoint` logs each stop in HotSpot's words, and `-XX:+SafepointTimeout` the
    /// threads still running after `-XX:SafepointTimeoutDelay` ms.
    pub fn stop_the_world(
        &self,
        reason: &str,
        timeout: Duration,
    ) -> Result<WorldStopped<'_>, SafepointError> {
        self.inner
            .registry
            .safepoints()
            .stop_the_world(reason, timeout)
    }

    /// Runs `op` for the mutator `thread_id` while only that thread is stopped: by the thread
    /// itself at its next poll (on its own stack), or by the caller while the thread is in a
    /// safe region or stopped by the signal. Waits up to 10 s for a thread that neither polls
    /// nor is safe (-Xrs: no signal); a thread that already runs `op` is waited for.
    /// `-Xlog:handshake` logs it as HotSpot does. Errors: [`SafepointError::NoSuchThread`],
    /// [`SafepointError::Timeout`] (`op` did not run), [`SafepointError::Nested`].
    ///
    /// `op` must not allocate: run by the caller, the target may be stopped by the signal
    /// inside malloc (record into memory prepared before, as `Thread.print` does).
    pub fn handshake(
        &self,
        thread_id: u64,
        op: impl for<'a> FnOnce(&StoppedThread<'a>) + Send + 'static,
    ) -> Result<(), SafepointError> {
        self.inner.registry.safepoints().handshake(
            thread_id,
            "Handshake",
            HANDSHAKE_TIMEOUT,
            Box::new(op),
        )
    }

    /// Enters a safe region on the calling thread (a VM or attached thread of this VM): until
    /// the guard is dropped the thread counts as stopped for any stop of the world — it may
    /// block, sleep or call foreign code, and must not touch the collector's objects. The
    /// registers it holds now are published with its stack pointer. Dropping the guard waits
    /// while the world is stopped. Regions nest. rtvm's own waits (joins, attach and
    /// detach, thread starts, waiting for a stop or for the gang) are safe regions already.
    /// [`ThreadError::NotAttached`] for any other thread.
    #[inline(always)]
    pub fn enter_safe_region(&self) -> Result<SafeRegion, ThreadError> {
        if self.inner.registry.current_thread_id().is_none() {
            return Err(ThreadError::NotAttached { started: None });
        }
        SafeRegion::enter().ok_or(ThreadError::NotAttached { started: None })
    }

    /// The VM thread id of the calling thread (started by this VM or attached to it).
    pub fn current_thread_id(&self) -> Option<u64> {
        self.inner.registry.current_thread_id()
    }
}
