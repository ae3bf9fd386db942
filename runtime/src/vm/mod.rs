//! The life of a VM, owned by one type: created → running → shutting down → destroyed (the
//! states and their rules: [`crate::lifecycle`]).
//!
//! [`Vm::create`] runs the start-up sequence — flags (with `-Xlog` applied as it is met),
//! logging, page sizes, ergonomics, signal handlers, workers, heap, pretouch — and hands out
//! a [`Vm`] only when all of it worked; a failure on the way drops what exists (threads
//! stopped, memory unmapped, handlers and logger given back) and prints nothing more.
//!
//! [`Vm::shutdown`] is the one teardown, run at most once (`Drop` runs it if nobody did):
//!
//! 1. **Destroy requested.** Wait for a background pretouch and for every application thread
//!    to finish — threads they start meanwhile included, as `DestroyJavaVM` waits for
//!    non-daemon threads. Threads may still start.
//! 2. **Shutting down.** No application thread is left, and none can start any more. Join
//!    them (stacks unmapped), print the NMT report (`-XX:+PrintNMTStatistics`) once, stop the
//!    workers.
//! 3. **Destroyed.** Restore the signal handlers and the logger, free the one-VM-per-process
//!    slot. The heap is unmapped when the `Vm` value goes (memory handed out borrows it).
//!
//! Shutdown called from one of the VM's own threads would wait for itself: it is refused and
//! the VM runs on. A `Vm` dropped on one of its own threads hands the teardown to a reaper
//! thread that waits for the dropping thread to finish.

mod create;
mod safepoints;
mod stress;
mod teardown;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rtvm_flags::Flags;
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::quit::QuitHandler;
use rtvm_os_linux::signals::SignalHandlers;

use crate::args::InitArgs;
use crate::error::DcmdError;
use crate::error::{CreateError, ShutdownError};
use crate::heap::{Heap, HeapBlock, HeapError, HeapStats, Tlab};
use crate::lifecycle::{Singleton, VmState};
use crate::memory::{MemoryError, MemoryRegistry, MemoryRequest, VmMemory};
use crate::nmt::NmtSummary;
use crate::output::Output;
use crate::policy::Policy;
use crate::pretouch::PretouchReport;
use crate::service::dcmd::DiagnosticCommand;
use crate::service::{DumpOptions, Service};
use crate::threads::{
    AttachedThread, Registry, StackBounds, StackConfig, ThreadBuilder, ThreadError, ThreadInfo,
    VmThread,
};
use crate::workers::WorkerGang;
use crate::xlog::LogHandle;

/// What [`VmHandle::trim_native_heap`] did: RSS plus swap before and after, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TrimReport {
    /// RSS + swap before the trim.
    pub rss_before: u64,
    /// RSS + swap after it.
    pub rss_after: u64,
    /// How long the trim took.
    pub took: std::time::Duration,
}

/// What the VM changed about the process, given back in this order when dropped: signal
/// handlers, then the logger, then the slot.
#[derive(Debug)]
pub(super) struct ProcessState {
    pub(super) _signals: Option<SignalHandlers>,
    pub(super) _quit: Option<QuitHandler>,
    /// The stop signal (`-XX:SafepointSignal`), for threads that neither poll nor are safe.
    pub(super) _stop: Option<rtvm_os_linux::safepoint::StopSignal>,
    pub(super) log: LogHandle,
    pub(super) singleton: Singleton,
}

/// Everything a VM owns. Field order is drop order: the workers stop before the heap goes.
pub(crate) struct VmInner {
    pub(super) gang: Arc<WorkerGang>,
    pub(super) heap: Arc<Heap>,
    pub(super) registry: Arc<Registry>,
    pub(super) flags: Flags,
    pub(super) policy: Policy,
    pub(super) pages: PageInfo,
    pub(super) start: Instant,
    pub(super) output: Output,
    pub(super) process: Mutex<Option<ProcessState>>,
    /// Memory embedders mapped through the VM, for NMT.
    pub(super) memories: Arc<MemoryRegistry>,
    /// The serviceability threads and files (`SIGQUIT`, attach listener, perf data).
    pub(super) service: Service,
    /// The process generation at creation (`fork()` changes it in the child).
    pub(super) generation: u64,
    /// What destroy runs once the application threads are done, before it waits for the
    /// collector's threads ([`VmHandle::add_shutdown_hook`]).
    pub(super) shutdown_hooks: Mutex<Vec<ShutdownHook>>,
    /// `-XX:+SafepointALot` / `-XX:+HandshakeALot`: the stress thread.
    pub(super) stress: Mutex<Option<stress::Stress>>,
}

/// A shutdown hook ([`VmHandle::add_shutdown_hook`]).
pub(super) type ShutdownHook = Box<dyn FnOnce() + Send + 'static>;

/// The VM, owned: [`Vm::create`] makes it, [`Vm::shutdown`] (or dropping it) tears it
/// down. Everything else a VM does is on [`VmHandle`], which `Vm` dereferences to.
///
/// `Vm` is `Send + Sync` (checked at compile time); every method may be called from any
/// thread, VM threads and attached threads included — except that
/// [`shutdown`](Vm::shutdown) refuses to run on one of the threads the VM started. Threads the
/// host created join the VM with [`attach_current_thread`](VmHandle::attach_current_thread).
pub struct Vm {
    pub(super) handle: VmHandle,
}

// The thread-safety the documentation promises, checked.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Vm>();
    send_sync::<VmHandle>();
    send_sync::<Heap>();
};

/// A shared handle to a VM: `Clone + Send + Sync + 'static`, for the threads that use the
/// VM — start threads, allocate, expand the heap — while the [`Vm`] owner decides when it
/// ends. After the shutdown a handle still answers (no thread starts; the heap stays mapped
/// while a handle holds it).
#[derive(Clone)]
pub struct VmHandle {
    pub(super) inner: Arc<VmInner>,
}

impl fmt::Debug for VmHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vm")
            .field("state", &self.state())
            .field("heap", &self.inner.heap.stats())
            .field("threads", &self.inner.registry.count())
            .finish()
    }
}

impl fmt::Debug for Vm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.handle.fmt(f)
    }
}

impl std::ops::Deref for Vm {
    type Target = VmHandle;
    fn deref(&self) -> &VmHandle {
        &self.handle
    }
}

impl Vm {
    /// Creates the VM: the `JNI_CreateJavaVM` of rtvm. Never exits the process; every
    /// failure comes back as a [`CreateError`] and leaves nothing behind. Options that ask to
    /// print and stop (`-version`, `-Xlog:help`, `-XX:+PrintFlagsInitial`) print to the
    /// output and come back as [`ErrorCode::Exited`](crate::ErrorCode::Exited).
    pub fn create(args: InitArgs) -> Result<Vm, CreateError> {
        create::create(args)
    }

    /// A shared handle to this VM, for threads that start threads or allocate.
    pub fn handle(&self) -> VmHandle {
        self.handle.clone()
    }

    /// Shuts the VM down (see the module documentation): waits for a background pretouch and
    /// for every application thread — including threads they start meanwhile — joins them,
    /// prints the NMT report if asked, stops the workers, and gives back the signal handlers,
    /// the logger and the one-VM slot. The heap stays mapped until the `Vm` (and every
    /// handle) is dropped.
    ///
    /// Runs once: later calls (and `Drop`) return `Ok(())`; a call during another thread's
    /// shutdown waits for it. On one of the VM's own threads it refuses
    /// ([`ShutdownError::OnVmThread`]) and changes nothing.
    pub fn shutdown(&self) -> Result<(), ShutdownError> {
        self.inner.shutdown()
    }
}

impl VmHandle {
    /// Whether this is the process that created the VM: `false` in a child of `fork()`,
    /// where the VM's threads do not exist and it cannot be used or torn down (only its heap
    /// and memories, copies of the parent's, can be).
    pub fn in_creator_process(&self) -> bool {
        self.inner.in_creator_process()
    }

    /// The VM's id, unique in the process for its whole life (a later VM never gets it,
    /// even at the same address).
    pub(crate) fn id(&self) -> u64 {
        self.inner.registry.vm_id()
    }

    /// The lifecycle phase.
    pub fn state(&self) -> VmState {
        self.inner.registry.state()
    }

    /// The final flag values.
    pub fn flags(&self) -> &Flags {
        &self.inner.flags
    }

    /// The page-size and THP facts the VM started with.
    pub fn page_info(&self) -> &PageInfo {
        &self.inner.pages
    }

    /// When the VM started.
    pub fn start_time(&self) -> Instant {
        self.inner.start
    }

    /// Where the VM prints.
    pub fn output(&self) -> &Output {
        &self.inner.output
    }

    /// The heap, shareable with threads.
    pub fn heap(&self) -> &Arc<Heap> {
        &self.inner.heap
    }

    /// Releases the background pretouch held at start-up by `-XX:+HoldBackgroundPreTouch`;
    /// `false` if it was not held (or was released already). See also
    /// [`Heap::hold_pretouch`].
    pub fn release_pretouch(&self) -> bool {
        self.inner.heap.release_pretouch()
    }

    /// Allocates from the heap; `None` when the committed part is exhausted.
    pub fn allocate(&self, bytes: usize) -> Option<HeapBlock<'_>> {
        self.inner.heap.allocate(bytes)
    }

    /// A thread-local allocation buffer on the heap (see [`Tlab`]).
    pub fn tlab(&self) -> Tlab<'_> {
        self.inner.heap.tlab()
    }

    /// Grows the committed heap (and pretouches the new part with `AlwaysPreTouch`).
    /// Returns the new committed size; on failure the heap keeps its old size.
    pub fn expand_heap(&self, bytes: usize) -> Result<usize, HeapError> {
        self.inner.heap.expand(bytes, &self.inner.gang)
    }

    /// Heap figures (counters; no system call).
    pub fn heap_stats(&self) -> HeapStats {
        self.inner.heap.stats()
    }

    /// Waits for a background pretouch (`-XX:+BackgroundPreTouch`) and returns its report.
    pub fn wait_for_pretouch(&self) -> Result<Option<PretouchReport>, HeapError> {
        self.inner.heap.wait_for_pretouch()
    }

    /// Reserves memory for the embedder with the VM's policies (see [`VmMemory`]): the
    /// reservation is aligned to the transparent huge page size and advised for huge pages
    /// under `-XX:+UseTransparentHugePages` (THP mode `madvise`), `initial` bytes are
    /// committed and, with `-XX:+AlwaysPreTouch`, pretouched by the worker gang — in the
    /// background with `-XX:+BackgroundPreTouch`, so the call returns at once and the memory
    /// is usable while it runs.
    pub fn reserve_memory(&self, request: MemoryRequest) -> Result<VmMemory, MemoryError> {
        if self.state() != VmState::Running {
            return Err(MemoryError::ShuttingDown {
                category: request.category().to_owned(),
            });
        }
        let inner = &self.inner;
        VmMemory::reserve(request, &inner.policy.memory, &inner.gang, &inner.memories)
    }

    /// The worker gang (a test tool: it runs the VM's own parallel tasks).
    #[cfg(feature = "testing")]
    pub fn gang(&self) -> &WorkerGang {
        &self.inner.gang
    }

    /// How thread stacks are sized and laid out.
    pub fn stack_config(&self) -> StackConfig {
        StackConfig::from(&self.inner.policy.stacks)
    }

    /// A builder for a thread named `name` (a Java thread unless told otherwise).
    pub fn thread(&self, name: &str) -> ThreadBuilder<'_> {
        ThreadBuilder::new(&self.inner.registry, &self.inner.policy.stacks, name)
    }

    /// Starts a Java thread running `body`.
    pub fn spawn<F: FnOnce() + Send + 'static>(
        &self,
        name: &str,
        body: F,
    ) -> Result<VmThread, ThreadError> {
        self.thread(name).spawn(body)
    }

    /// Live threads — started, workers and attached — with their stack layouts.
    pub fn threads(&self) -> Vec<Arc<ThreadInfo>> {
        self.inner.registry.list()
    }

    /// Attaches the calling thread — one the host created — to the VM under `name`, as JNI's
    /// `AttachCurrentThread` does: it then appears in [`threads`](VmHandle::threads) and the
    /// NMT report, and [`current_stack_bounds`](VmHandle::current_stack_bounds) answers for
    /// it (its stack as glibc reports it). The returned guard detaches the thread when
    /// dropped; a thread that ends while attached is forgotten by the VM. Destroy does not
    /// wait for attached threads; after it, the guard's drop does nothing harmful.
    ///
    /// Errors: [`ThreadError::AlreadyAttached`] if the thread is already one of this VM's
    /// (attached or started by it), [`ThreadError::ShuttingDown`] once the VM is being
    /// destroyed, [`ThreadError::Attach`] if glibc cannot report the stack.
    pub fn attach_current_thread(&self, name: &str) -> Result<AttachedThread, ThreadError> {
        let info = self.attach_current_unguarded(name)?;
        Ok(AttachedThread::new(info, Arc::clone(&self.inner.registry)))
    }

    /// Attaches without a guard (the C API, whose threads detach explicitly or by ending).
    pub(crate) fn attach_current_unguarded(
        &self,
        name: &str,
    ) -> Result<Arc<ThreadInfo>, ThreadError> {
        let offset = self.inner.policy.stacks.attached_soft_limit_offset();
        self.inner.registry.attach_current(name, offset)
    }

    /// Detaches the calling thread attached without a guard.
    pub(crate) fn detach_current(&self) -> Result<(), ThreadError> {
        self.inner.registry.detach_current()
    }

    /// The calling thread's registry entry, if it is one of this VM's threads.
    pub(crate) fn current_thread(&self) -> Option<Arc<ThreadInfo>> {
        self.inner.registry.current_thread()
    }

    /// The calling thread's stack bounds and soft limit, if it is one of this VM's threads
    /// (started by it or attached); `None` for any other thread. Cheap enough to call once
    /// per thread and cache: a lock and a scan of the thread list.
    pub fn current_stack_bounds(&self) -> Option<StackBounds> {
        self.current_thread().map(|t| t.stack_bounds())
    }

    /// Makes NMT's `Java Heap` line (and `VM.native_memory`) report what `report` says of
    /// the heap: for a collector that owns it ([`InitArgs::collector_heap`]). `report` runs
    /// on whichever thread asks for the summary; it must not stop the world or wait for a
    /// collection.
    ///
    /// [`InitArgs::collector_heap`]: crate::InitArgs::collector_heap
    pub fn report_heap(
        &self,
        report: impl Fn() -> crate::nmt::CollectorHeap + Send + Sync + 'static,
    ) {
        *self
            .inner
            .service
            .context()
            .heap_report
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(report));
    }

    /// The native memory summary, or `None` when `-XX:NativeMemoryTracking` is `off`.
    pub fn native_memory_summary(&self) -> Option<NmtSummary> {
        self.inner.native_memory_summary()
    }

    /// Runs a diagnostic command as `jcmd <pid> <line>` would (`VM.native_memory summary`,
    /// `Thread.print`, `help`, or one of the embedder's): `Ok` with the text the command
    /// printed, `Err` with HotSpot's exception line for a command or argument it does not
    /// know (`java.lang.IllegalArgumentException: Unknown diagnostic command`), or with what
    /// a failed embedder's command wrote and its `java.lang.RuntimeException: …` line.
    ///
    /// An embedder's command runs on a service thread of its own while the caller waits (in
    /// a safe region, if the caller is a mutator): see
    /// [`register_diagnostic_command`](VmHandle::register_diagnostic_command).
    pub fn diagnostic_command(&self, line: &str) -> Result<String, String> {
        match self.inner.service.execute(line) {
            crate::service::dcmd::Reply::Ok(text) => Ok(text),
            crate::service::dcmd::Reply::Failed(text) => Err(text),
        }
    }

    /// Adds a diagnostic command of the embedder's (a collector's `GC.heap_info`, `GC.run`) to
    /// the VM's table: `help` lists it among rtvm's own, sorted as HotSpot sorts them, `help
    /// <name>` prints its help in HotSpot's layout, and `jcmd <pid> <name> <args>` — or
    /// [`diagnostic_command`](VmHandle::diagnostic_command) — parses its arguments with
    /// HotSpot's rules and messages and runs it.
    ///
    /// **The handler** runs on a VM service thread of its own, named `DCmd <name>`, never on
    /// a mutator: it is not stopped with the world and may block (a `GC.run` that waits for a
    /// collection). Runs may overlap (several clients, several in-process callers). A panic
    /// in it is caught: the command fails (`java.lang.RuntimeException: diagnostic command
    /// <name> panicked: …`), the VM runs on. A handler that never returns holds up only its
    /// caller: for `jcmd`, the handler's thread answers its client itself and the attach
    /// listener goes on serving the others.
    ///
    /// **At destroy** (before the attach listener stops): new runs and registrations are
    /// refused, [`DcmdArguments::cancelled`](crate::DcmdArguments::cancelled) turns true, and running handlers get 5 s to
    /// return (their callers get their replies). A handler still running then is left
    /// running — its thread, stack, arguments and the handler itself stay until it returns —
    /// its caller gets a failure, and [`Vm::shutdown`] reports it among its failures. The
    /// table is then dropped (with the handlers no run holds), which also ends any cycle a
    /// handler holding a [`VmHandle`] makes.
    ///
    /// Errors (nothing registered): [`DcmdError::InvalidName`] (not HotSpot's `Area.name`),
    /// [`DcmdError::Exists`] (one of rtvm's own commands, or one registered before),
    /// [`DcmdError::InvalidParameter`] / [`DcmdError::InvalidText`] (a malformed
    /// declaration: a default its type cannot read, say), [`DcmdError::ShuttingDown`] (the
    /// destroy has begun). Any thread.
    pub fn register_diagnostic_command(&self, command: DiagnosticCommand) -> Result<(), DcmdError> {
        if self.state() != VmState::Running {
            return Err(DcmdError::ShuttingDown {
                name: command.name().to_owned(),
            });
        }
        self.inner.service.register(command)
    }

    /// Trims the C heap now (glibc `malloc_trim(0)`, as `jcmd System.trim_native_heap`):
    /// the free parts of every arena go back to the kernel. Returns RSS plus swap before and
    /// after, or `None` where glibc is not the allocator. Any thread.
    pub fn trim_native_heap(&self) -> Option<TrimReport> {
        crate::service::trim::trim_native_heap().map(|t| {
            log::info!(target: "trimnative", "Trim native heap: RSS+Swap: {}", t.change());
            TrimReport {
                rss_before: t.before,
                rss_after: t.after,
                took: t.took,
            }
        })
    }

    /// Shrinks the heap's committed part to `target` bytes and gives the pages above it
    /// back (see [`Heap::shrink`]); returns the committed size.
    pub fn shrink_heap(&self, target: usize) -> Result<usize, HeapError> {
        self.inner.heap.shrink(target)
    }

    /// Gives back the calling thread's stack pages below its current frame — what a deep
    /// recursion once made resident — keeping only what this call stands on (its frame and
    /// the ABI's red zone); the stack stays mapped and the pages fault back in as zeroes when
    /// it grows again. For a VM thread or an attached one; `ThreadError::NotAttached` for any
    /// other thread, with nothing done. Only a thread itself trims its stack: rtvm never
    /// touches another thread's stack while it may run. Returns the bytes given back.
    pub fn trim_current_stack(&self) -> Result<usize, ThreadError> {
        self.inner.registry.trim_current_stack()
    }

    /// A thread dump in HotSpot's layout, as `SIGQUIT`, `jstack` and `Thread.print` print it:
    /// every VM and attached thread with its kernel tid, state, CPU time and — beyond what a
    /// JVM shows — its stack, guard zone, signal stack and resident stack size.
    pub fn thread_dump(&self) -> String {
        self.inner.service.thread_dump(DumpOptions::default())
    }
}

impl VmInner {
    pub(super) fn lock_process(&self) -> std::sync::MutexGuard<'_, Option<ProcessState>> {
        self.process.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this is the process that created the VM (not a child of `fork()`, in which the
    /// VM's threads do not exist).
    pub(super) fn in_creator_process(&self) -> bool {
        self.generation == rtvm_os_linux::system::process_generation()
    }

    fn native_memory_summary(&self) -> Option<NmtSummary> {
        self.service.context().native_memory()
    }
}
