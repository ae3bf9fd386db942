//! The life of a VM, owned by one type: created → running → shutting down → destroyed.
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

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rtvm_flags::{
    flag, ArgError, EnvOptions, Flags, ParseOptions, Phase, PrintWhich, StopReason, XlogAction,
};
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::signals::{self, SignalHandlers};

use crate::args::{self, InitArgs, ENV_OPTIONS};
use crate::ergonomics::{self, heap_create_error, thread_create_error};
use crate::error::{CreateError, ErrorCode, ShutdownError};
use crate::heap::{Heap, HeapBlock, HeapError, HeapStats, PretouchReport, Tlab};
use crate::nmt::NmtSummary;
use crate::output::{Output, OutputWriter, Stream};
use crate::threads::{
    self, AttachedThread, Body, Registry, StackBounds, StackPolicy, ThreadError, ThreadInfo,
    ThreadKind, VmState, VmThread,
};
use crate::workers::WorkerGang;
use crate::xlog::{self, LogConfig, LogHandle, XlogStep};

static VM_EXISTS: AtomicBool = AtomicBool::new(false);
static NEXT_VM_ID: AtomicU64 = AtomicU64::new(1);

/// Holds the one-VM-per-process slot.
#[derive(Debug)]
struct Singleton;

impl Singleton {
    fn acquire() -> Result<Singleton, CreateError> {
        VM_EXISTS
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Singleton)
            .map_err(|_| {
                CreateError::args(
                    ErrorCode::Exists,
                    "A virtual machine already exists in this process.\n",
                )
            })
    }
}

impl Drop for Singleton {
    fn drop(&mut self) {
        VM_EXISTS.store(false, Ordering::Release);
    }
}

/// What the VM changed about the process, given back in this order when dropped: signal
/// handlers, then the logger, then the slot.
#[derive(Debug)]
struct ProcessState {
    _signals: Option<SignalHandlers>,
    log: LogHandle,
    _singleton: Singleton,
}

/// The version text `-version` prints (to stderr).
pub fn version_text() -> String {
    let v = env!("CARGO_PKG_VERSION");
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    format!(
        "rtvm version \"{v}\"\nrtvm Runtime Environment (build {v}, {profile})\nrtvm 64-Bit VM (build {v}, {profile}, {}-linux)\n",
        std::env::consts::ARCH
    )
}

/// `-Xlog:gc+init`: HotSpot's start-up summary (its `GCInitLogger` lines, those rtvm has a
/// meaning for), plus the heap's page size.
fn log_gc_init(flags: &Flags, machine: &ergonomics::Machine, heap: &Heap, workers: usize) {
    if !log::log_enabled!(target: "gc+init", log::Level::Info) {
        return;
    }
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let info = |text: String| log::info!(target: "gc+init", "{text}");
    info(format!(
        "Version: {} ({profile})",
        env!("CARGO_PKG_VERSION")
    ));
    info(format!(
        "CPUs: {} total, {} available",
        rtvm_os_linux::system::configured_processors(),
        machine.processors()
    ));
    info(format!("Memory: {}", proper_unit(machine.memory())));
    let large_pages = if flags.get(flag::UseTransparentHugePages) {
        "Enabled (Transparent)"
    } else if flags.get(flag::UseLargePages) {
        "Enabled (Explicit)"
    } else {
        "Disabled"
    };
    info(format!("Large Page Support: {large_pages}"));
    info("NUMA Support: Disabled".into());
    info(format!("Heap Page Size: {}", heap.page_description()));
    let size = |f| rtvm_flags::value::format_exact_size(flags.get(f) as u64);
    info(format!("Heap Min Capacity: {}", size(flag::MinHeapSize)));
    info(format!(
        "Heap Initial Capacity: {}",
        size(flag::InitialHeapSize)
    ));
    info(format!("Heap Max Capacity: {}", size(flag::MaxHeapSize)));
    let enabled = |b: bool| if b { "Enabled" } else { "Disabled" };
    info(format!(
        "Pre-touch: {}",
        enabled(flags.get(flag::AlwaysPreTouch))
    ));
    info(format!("Parallel Workers: {workers}"));
}

/// A byte count in the largest unit that leaves at least 100 of it, truncated (HotSpot's
/// `byte_size_in_proper_unit`): `24105M`, `512M`.
fn proper_unit(bytes: u64) -> String {
    const K: u64 = 1 << 10;
    const M: u64 = 1 << 20;
    const G: u64 = 1 << 30;
    match bytes {
        b if b >= 100 * G => format!("{}G", b / G),
        b if b >= 100 * M => format!("{}M", b / M),
        b if b >= 100 * K => format!("{}K", b / K),
        b => format!("{b}B"),
    }
}

/// Everything a VM owns. Field order is drop order: the workers stop before the heap goes.
pub(crate) struct VmInner {
    pub(crate) gang: WorkerGang,
    heap: Arc<Heap>,
    registry: Arc<Registry>,
    flags: Flags,
    policy: StackPolicy,
    pages: PageInfo,
    start: Instant,
    output: Output,
    process: Mutex<Option<ProcessState>>,
    /// Memory embedders mapped through the VM, for NMT.
    memories: crate::memory::MemoryRegistry,
}

/// The VM, owned: [`Vm::create`] makes it, [`Vm::shutdown`] (or dropping it) tears it
/// down. Everything else a VM does is on [`VmHandle`], which `Vm` dereferences to.
///
/// `Vm` is `Send + Sync` (checked at compile time); every method may be called from any
/// thread, VM threads and attached threads included — except that
/// [`shutdown`](Vm::shutdown) refuses to run on one of the threads the VM started. Threads the
/// host created join the VM with [`attach_current_thread`](VmHandle::attach_current_thread).
pub struct Vm {
    handle: VmHandle,
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
    inner: Arc<VmInner>,
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

/// Parses the options with `-Xlog` applied in order, and stops where `java` stops.
fn parse_options(
    args: &InitArgs,
    output: &Output,
    start: Instant,
) -> Result<(rtvm_flags::Parsed, LogConfig), CreateError> {
    let env_value = args::env_options();
    let xlog = RefCell::new(LogConfig::new());
    let hook = |option: &str| -> Result<XlogAction, ArgError> {
        match xlog.borrow_mut().apply(option) {
            Ok(XlogStep::Continue) => Ok(XlogAction::Continue),
            Ok(XlogStep::Help) => {
                output.write(Stream::Stdout, &xlog::help_text());
                Ok(XlogAction::Stop)
            }
            Err(e) => {
                xlog::print_error(&e, output, start);
                Err(ArgError {
                    message: e.message(),
                    kind: rtvm_flags::ArgErrorKind::InvalidOption,
                })
            }
        }
    };
    let options = ParseOptions {
        ignore_unrecognized: args.ignore_unrecognized,
        env: env_value.as_deref().map(|value| EnvOptions {
            name: ENV_OPTIONS,
            value,
        }),
        xlog: Some(&hook),
    };
    let parsed = rtvm_flags::parse(&args.options, &options, &mut |s, t| output.write(s, t))?;
    Ok((parsed, xlog.into_inner()))
}

impl Vm {
    /// Creates the VM: the `JNI_CreateJavaVM` of rtvm. Never exits the process; every
    /// failure comes back as a [`CreateError`] and leaves nothing behind. Options that ask to
    /// print and stop (`-version`, `-Xlog:help`, `-XX:+PrintFlagsInitial`) print to the
    /// output and come back as [`ErrorCode::Exited`].
    pub fn create(args: InitArgs) -> Result<Vm, CreateError> {
        let start = Instant::now();
        let singleton = Singleton::acquire()?;
        let output = args.output.clone();
        let (parsed, log_config) = parse_options(&args, &output, start)?;
        match parsed.stop {
            Some(StopReason::PrintFlagsInitial) => {
                let mut w = OutputWriter {
                    output: &output,
                    stream: Stream::Stdout,
                };
                let _ = rtvm_flags::print_flags(&mut w, &parsed.settings, PrintWhich::Initial);
                return Err(CreateError::exit());
            }
            Some(StopReason::XlogHelp) => return Err(CreateError::exit()),
            Some(StopReason::Version) | None => {}
        }
        let log = xlog::install(log_config, &output, start);

        let machine = ergonomics::Machine::detect(parsed.settings.get(flag::UseContainerSupport));
        let pages = PageInfo::detect();
        for p in &pages.problems {
            log::warn!(target: "pagesize", "{p}; treated as unknown");
        }
        let mut settings = parsed.settings;
        let mut print_command_line_flags = |s: &rtvm_flags::Settings| {
            if s.get(flag::PrintCommandLineFlags) {
                let mut w = OutputWriter {
                    output: &output,
                    stream: Stream::Stdout,
                };
                let _ = rtvm_flags::print_command_line_flags(&mut w, s);
            }
        };
        let ergo = ergonomics::ergonomics(
            &mut settings,
            &pages,
            &machine,
            &mut print_command_line_flags,
        )?;
        settings
            .check_constraints(Phase::AfterErgo)
            .map_err(|m| CreateError::args(ErrorCode::Inval, m))?;
        let flags = settings.freeze();
        let signals = if flags.get(flag::ReduceSignalUsage) {
            log::info!(target: "os", "ReduceSignalUsage: no signal handler installed; a stack overflow is whatever the host's SIGSEGV handler makes of it");
            None
        } else {
            match signals::install(flags.get(flag::CreateCoredumpOnCrash)) {
                Ok(h) => Some(h),
                Err(e) => {
                    log::warn!(target: "os", "Installing the SIGSEGV/SIGBUS handlers failed ({}); stack overflows will not be reported", rtvm_os_linux::strerror(e));
                    None
                }
            }
        };
        let process = ProcessState {
            _signals: signals,
            log,
            _singleton: singleton,
        };
        if flags.get(flag::PrintNMTStatistics) && flags.get(flag::NativeMemoryTracking) == "off" {
            output.write(
                Stream::Stderr,
                "rtvm warning: PrintNMTStatistics is disabled, because native memory tracking is not enabled\n",
            );
        }
        ergonomics::log_page_sizes(&pages, &ergo);

        let id = NEXT_VM_ID.fetch_add(1, Ordering::Relaxed);
        let registry = Arc::new(Registry::new(id));
        let gang = WorkerGang::new(ergo.gc_threads, &registry, &ergo.policy)
            .map_err(thread_create_error)?;
        let heap =
            Arc::new(Heap::reserve_and_commit(ergo.heap.clone()).map_err(heap_create_error)?);
        if let Some(w) = heap.large_page_warning() {
            output.write(Stream::Stderr, &format!("rtvm warning: {w}\n"));
        }
        log_gc_init(&flags, &machine, &heap, ergo.gc_threads);
        let vm = Vm {
            handle: VmHandle {
                inner: Arc::new(VmInner {
                    gang,
                    heap,
                    registry,
                    flags,
                    policy: ergo.policy,
                    pages,
                    start,
                    output,
                    process: Mutex::new(Some(process)),
                    memories: crate::memory::MemoryRegistry::default(),
                }),
            },
        };
        // Any failure from here on drops `vm` quietly: workers stopped, memory unmapped,
        // handlers and logger given back — no NMT report, no shutdown messages.
        let inner = &vm.inner;
        inner
            .heap
            .pretouch_initial(&inner.gang)
            .map_err(heap_create_error)?;
        let mut out = OutputWriter {
            output: &inner.output,
            stream: Stream::Stdout,
        };
        if inner.flags.get(flag::PrintFlagsFinal) {
            let _ = rtvm_flags::print_flags(&mut out, &inner.flags, PrintWhich::Final);
        }
        if inner.flags.get(flag::PrintFlagsRanges) {
            let _ = rtvm_flags::print_flags_ranges(&mut out, &inner.flags);
        }
        log::info!(target: "startuptime", "VM created in {:.3} ms", start.elapsed().as_secs_f64() * 1e3);
        if let Some(p) = inner
            .process
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            xlog::log_configuration(p.log.description());
        }
        if parsed.show_version || parsed.stop == Some(StopReason::Version) {
            inner.output.write(Stream::Stderr, &version_text());
        }
        if parsed.stop == Some(StopReason::Version) {
            return match vm.shutdown() {
                Ok(()) => Err(CreateError::exit()),
                Err(e) => Err(CreateError::init(ErrorCode::Err, format!("{e}\n"))),
            };
        }
        Ok(vm)
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

    pub(crate) fn memories(&self) -> &crate::memory::MemoryRegistry {
        &self.inner.memories
    }

    pub(crate) fn downgrade(&self) -> std::sync::Weak<VmInner> {
        Arc::downgrade(&self.inner)
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

    /// The worker gang (a test tool: it runs the VM's own parallel tasks).
    #[cfg(feature = "testing")]
    pub fn gang(&self) -> &WorkerGang {
        &self.inner.gang
    }

    #[cfg(not(feature = "testing"))]
    pub(crate) fn gang(&self) -> &WorkerGang {
        &self.inner.gang
    }

    /// The stack policy in force.
    pub fn stack_policy(&self) -> &StackPolicy {
        &self.inner.policy
    }

    /// A builder for a thread named `name` (a Java thread unless told otherwise).
    pub fn thread(&self, name: &str) -> ThreadBuilder<'_> {
        ThreadBuilder {
            vm: self,
            name: name.to_owned(),
            kind: ThreadKind::Java,
            stack_size: None,
            hold: false,
        }
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
        let shadow = self.inner.policy.zones.total() + self.inner.policy.shadow_zone;
        self.inner.registry.attach_current(name, shadow)
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
        self.inner
            .registry
            .current_thread()
            .map(|t| t.stack_bounds())
    }

    /// The native memory summary, or `None` when `-XX:NativeMemoryTracking` is `off`.
    pub fn native_memory_summary(&self) -> Option<NmtSummary> {
        self.inner.native_memory_summary()
    }
}

impl VmInner {
    fn native_memory_summary(&self) -> Option<NmtSummary> {
        let mode = self.flags.get(flag::NativeMemoryTracking);
        (mode != "off").then(|| {
            // NMT counts what the OS holds committed (all of a heap on explicit huge pages).
            let mut heap = self.heap.stats();
            heap.committed = self.heap.os_committed();
            NmtSummary::collect(
                heap,
                self.heap.range(),
                self.heap.page_description(),
                &self.registry.list(),
                &self.memories.list(),
                mode == "detail",
            )
        })
    }

    fn shutdown(&self) -> Result<(), ShutdownError> {
        if let Some(thread) = self.registry.current_started_thread_name() {
            return Err(ShutdownError::OnVmThread { thread });
        }
        if self.registry.request_destroy() != VmState::Running {
            self.registry.wait_destroyed();
            return Ok(());
        }
        let mut errors = Vec::new();
        self.heap.end_holds();
        if let Err(e) = self.heap.wait_for_pretouch() {
            errors.push(e.to_string());
        }
        self.registry.wait_for_application_threads();
        for info in self.registry.list() {
            if info.kind.is_application() {
                if let Err(e) = threads::join_info(&self.registry, &info) {
                    errors.push(e.to_string());
                }
            }
        }
        if self.flags.get(flag::PrintNMTStatistics) {
            if let Some(n) = self.native_memory_summary() {
                self.output.write(Stream::Stdout, &n.report());
            }
        }
        errors.extend(self.gang.stop());
        drop(
            self.process
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        self.registry.set_destroyed();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ShutdownError::Failures { messages: errors })
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        if self.inner.registry.state() == VmState::Destroyed {
            return;
        }
        if self.inner.registry.current_started_thread_name().is_some() {
            // This thread cannot wait for itself: a reaper does, once it has finished.
            let inner = Arc::clone(&self.inner);
            let reaper = std::thread::Builder::new()
                .name("rtvm-reaper".into())
                .spawn(move || {
                    if let Err(e) = inner.shutdown() {
                        inner.output.write(Stream::Stderr, &format!("rtvm: {e}\n"));
                    }
                });
            if let Err(e) = reaper {
                self.inner.output.write(
                    Stream::Stderr,
                    &format!("rtvm: the VM was dropped on its own thread and no reaper thread could start ({e}); it stays alive\n"),
                );
            }
            return;
        }
        if let Err(e) = self.inner.shutdown() {
            self.inner
                .output
                .write(Stream::Stderr, &format!("rtvm: {e}\n"));
        }
    }
}

/// Builds a VM thread.
#[derive(Debug)]
pub struct ThreadBuilder<'vm> {
    vm: &'vm VmHandle,
    name: String,
    kind: ThreadKind,
    stack_size: Option<usize>,
    hold: bool,
}

impl ThreadBuilder<'_> {
    /// The thread's kind (default: [`ThreadKind::Java`]; [`ThreadKind::Worker`], the gang's
    /// own, and [`ThreadKind::Attached`] are refused).
    pub fn kind(mut self, kind: ThreadKind) -> Self {
        self.kind = kind;
        self
    }

    /// An explicit stack size in bytes instead of the kind's default.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Keep the thread in its start handshake until [`VmThread::start`]: its stack is mapped
    /// and it has reported in, but (unmitigated) it has not placed its guards yet. A test
    /// tool (the window khugepaged could use, made deterministic).
    #[cfg(feature = "testing")]
    pub fn hold_at_start(mut self, hold: bool) -> Self {
        self.hold = hold;
        self
    }

    /// Starts the thread.
    pub fn spawn<F: FnOnce() + Send + 'static>(self, body: F) -> Result<VmThread, ThreadError> {
        self.spawn_body(Body::Rust(Box::new(body)))
    }

    pub(crate) fn spawn_body(self, body: Body) -> Result<VmThread, ThreadError> {
        if !self.kind.is_application() {
            // Workers belong to the gang, which the shutdown stops; attached threads are the
            // host's; a thread the VM starts for the embedder is an application thread (Java
            // or Vm), which the shutdown waits for.
            return Err(ThreadError::Start {
                message: format!(
                    "Failed to start thread \"{}\" - ThreadKind::{:?} cannot be started (only Java and Vm threads can)",
                    self.name, self.kind
                ),
                errno: rtvm_os_linux::Errno::EINVAL,
            });
        }
        let inner = &self.vm.inner;
        threads::spawn(
            &inner.registry,
            &inner.policy,
            &self.name,
            self.kind,
            self.stack_size,
            self.hold,
            body,
        )
    }
}
