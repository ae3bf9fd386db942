//! [`VmHandle`]'s part in stopping threads: stops of the world, handshakes, safe regions.

use std::ops::Range;
use std::time::Duration;

use super::VmHandle;
use crate::safepoint::{SafeRegion, SafepointError, StoppedThread, WorldStopped};
use crate::threads::{ThreadError, ThreadKind};

/// How long [`VmHandle::handshake`] waits for its thread.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl VmHandle {
    /// Stops every other mutator — the VM's application threads and attached threads — at a
    /// poll, in a safe region, or (after `-XX:SafepointSignalDelay`, 200 µs by default, for a
    /// thread that does neither) by the stop signal `-XX:SafepointSignal`; returns them with
    /// their scan ranges. The world resumes when the [`WorldStopped`] is dropped — on this
    /// thread or any other (it is `Send`). rtvm's own threads and the collector's
    /// ([`ThreadKind::Collector`]) are not stopped.
    ///
    /// The signal stops a thread only where it holds no process-wide lock: never inside the C
    /// library, the dynamic linker, the other system objects of
    /// [`rtvm_os_linux::safepoint::code`], code declared [`CodeKind::NoStop`](crate::CodeKind)
    /// or a [`NoAsyncStop`](crate::NoAsyncStop) section; found there, it is asked again a
    /// little later. So while the world is stopped the caller, and the collector's threads,
    /// may allocate with `malloc`, print and log. A thread blocked inside a C library call
    /// outside a safe region cannot be stopped: the stop times out naming it, with what the
    /// kernel says of it (put blocking calls in safe regions).
    ///
    /// Threads that start meanwhile stop before their body; a thread that ends, detaches or
    /// attaches, or starts another, waits until the world resumes. The thread that stopped the
    /// world must not start, join, attach or detach threads, stop the world again or handshake
    /// before it resumes it (refused with [`SafepointError::Nested`] or [`ThreadError`]); a
    /// thread it handed the stop to must not either (that would wait for itself until
    /// `timeout`).
    ///
    /// Errors: [`SafepointError::Timeout`] naming the threads that did not stop within
    /// `timeout` (the others are let go; with `-Xrs` there is no signal, so a thread that
    /// never polls is never stopped); [`SafepointError::Busy`] if another stop or handshake
    /// held the VM for the whole `timeout`; [`SafepointError::Nested`] from the thread that
    /// holds the world stopped or runs a handshake operation;
    /// [`SafepointError::CallerStopped`] from a thread counted as stopped (in a safe region
    /// while another thread holds the world). `-Xlog:safepoint` logs each stop in HotSpot's
    /// words, and `-XX:+SafepointTimeout` the threads still running after
    /// `-XX:SafepointTimeoutDelay` ms.
    pub fn stop_the_world(
        &self,
        reason: &str,
        timeout: Duration,
    ) -> Result<WorldStopped, SafepointError> {
        self.inner
            .registry
            .safepoints_arc()
            .stop_the_world(reason, timeout)
    }

    /// Starts a collector's thread named `name` running `body`: a VM thread (its stack
    /// mapped, guarded and advised by rtvm, listed by `jstack`, NMT and
    /// [`threads`](VmHandle::threads)) that is not a mutator — never stopped, free to run and
    /// allocate while the world is stopped. Destroy runs the shutdown hooks
    /// ([`add_shutdown_hook`](VmHandle::add_shutdown_hook)) once the application threads are
    /// done, then waits for these threads: a hook must make them end.
    pub fn spawn_collector<F: FnOnce() + Send + 'static>(
        &self,
        name: &str,
        body: F,
    ) -> Result<crate::VmThread, ThreadError> {
        self.thread(name).kind(ThreadKind::Collector).spawn(body)
    }

    /// Adds `hook` to what destroy runs once every application thread has finished and
    /// before it waits for the collector's threads (in the order added, on the destroying
    /// thread): where a collector tells its threads to end. A hook that panics is reported by
    /// the shutdown's error; the others still run. Refused with
    /// [`ThreadError::ShuttingDown`] once the destroy has begun running them.
    pub fn add_shutdown_hook(
        &self,
        hook: impl FnOnce() + Send + 'static,
    ) -> Result<(), ThreadError> {
        if self.state() != crate::VmState::Running {
            return Err(ThreadError::ShuttingDown {
                name: "shutdown hook".into(),
            });
        }
        crate::safepoint::lock(&self.inner.shutdown_hooks).push(Box::new(hook));
        Ok(())
    }

    /// Declares that the calling thread (a mutator of this VM) now runs on the stack
    /// `[stack.start, stack.end)` — a fiber or a coroutine of the embedder's — or on its own
    /// again (`None`). A stop then reports the part of that stack in use besides the thread's
    /// own ([`StoppedThread::other_stack`]). Without a declaration a thread found elsewhere
    /// is reported on the mapping that holds its stack pointer. [`ThreadError::NotAttached`]
    /// for any other thread.
    pub fn set_current_fiber(&self, stack: Option<Range<usize>>) -> Result<(), ThreadError> {
        if self.inner.registry.current_thread_id().is_none()
            || !crate::safepoint::set_current_fiber(stack)
        {
            return Err(ThreadError::NotAttached { started: None });
        }
        Ok(())
    }

    /// Runs `op` for the mutator `thread_id` while only that thread is stopped: by the thread
    /// itself at its next poll (on its own stack), or by the caller while the thread is in a
    /// safe region or stopped by the signal. Waits up to 10 s for a thread that neither polls
    /// nor is safe (-Xrs: no signal), and up to 10 s for an `op` the thread runs itself to
    /// return. `-Xlog:handshake` logs it as HotSpot does. Errors:
    /// [`SafepointError::NoSuchThread`], [`SafepointError::Timeout`] (`op` did not run, or
    /// runs on and has not returned), [`SafepointError::Busy`], [`SafepointError::Nested`].
    ///
    /// `op` may allocate: the signal never stops the target inside the C library. It must not
    /// stop the world or handshake (refused with [`SafepointError::Nested`]); it may enter
    /// and leave safe regions.
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
