//! `Vm::create`: parse flags → logging → OS init → ergonomics → heap → worker gang → ready.
//! A `Vm` owns everything it made and releases it on drop: threads joined, stacks and heap
//! unmapped.

use std::fmt;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rtvm_flags::value::{format_exact_size, format_page_size, K, M};
use rtvm_flags::{
    flag, ArgError, ArgErrorKind, EnvOptions, Flags, ParseOptions, Phase, PrintWhich, Settings,
    Stream,
};
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::stack::{kernel_marks_map_stack_nohugepage, recommended_alt_stack_size};
use rtvm_os_linux::{base_page_size, system, PretouchRequest, ThpMode};

use crate::heap::{Heap, HeapBlock, HeapConfig, HeapError, HeapStats, PretouchReport};
use crate::logging::{self, LogHandle, XlogRequest};
use crate::nmt::NmtSummary;
use crate::threads::{self, Registry, StackPolicy, ThreadError, ThreadInfo, ThreadKind, VmThread};
use crate::workers::WorkerGang;

/// The environment variable whose options are applied before the command line.
pub const ENV_OPTIONS: &str = "RTVM_OPTIONS";

/// Arguments for [`Vm::create`], in the spirit of `JavaVMInitArgs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitArgs {
    /// VM options, as on a command line (`-Xmx1g`, `-XX:+AlwaysPreTouch`, ...).
    pub options: Vec<String>,
    /// Skip options that are not recognized instead of failing (JNI's `ignoreUnrecognized`,
    /// as HotSpot implements it: unknown `-XX:` and `-X` options are skipped; locked flags
    /// and bad values still fail).
    pub ignore_unrecognized: bool,
}

impl InitArgs {
    /// Arguments from a list of options.
    pub fn new<I, S>(options: I) -> InitArgs
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        InitArgs {
            options: options.into_iter().map(Into::into).collect(),
            ignore_unrecognized: false,
        }
    }

    /// Sets `ignore_unrecognized`.
    pub fn ignore_unrecognized(mut self, yes: bool) -> InitArgs {
        self.ignore_unrecognized = yes;
        self
    }
}

/// JNI-style result codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// `JNI_ERR` (-1): unknown error, unrecognized option.
    Err,
    /// `JNI_ENOMEM` (-4): not enough memory.
    NoMem,
    /// `JNI_EEXIST` (-5): a VM already exists in this process.
    Exists,
    /// `JNI_EINVAL` (-6): invalid arguments.
    Inval,
}

impl ErrorCode {
    /// The numeric code.
    pub const fn code(self) -> i32 {
        match self {
            ErrorCode::Err => -1,
            ErrorCode::NoMem => -4,
            ErrorCode::Exists => -5,
            ErrorCode::Inval => -6,
        }
    }
}

/// How a failed creation is reported by a launcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bad option: the message goes to stderr, then
    /// `Error: Could not create the virtual machine.`; exit status 1.
    Arguments,
    /// The VM could not initialize: `Error occurred during initialization of VM` and the
    /// message on stdout; exit status 1.
    Initialization,
    /// The options asked to print something and exit (`-XX:+PrintFlagsInitial`,
    /// `-Xlog:help`); the output has been printed; exit status 0.
    ExitRequested,
}

/// Why [`Vm::create`] failed. Nothing the creation made is left behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateError {
    /// The JNI-style code.
    pub code: ErrorCode,
    /// How to report it.
    pub kind: ErrorKind,
    /// The message, exactly as to print (with the trailing newline HotSpot has, or without).
    pub message: String,
}

impl CreateError {
    fn args(code: ErrorCode, message: impl Into<String>) -> CreateError {
        CreateError {
            code,
            kind: ErrorKind::Arguments,
            message: message.into(),
        }
    }

    fn init(code: ErrorCode, message: impl Into<String>) -> CreateError {
        CreateError {
            code,
            kind: ErrorKind::Initialization,
            message: message.into(),
        }
    }

    fn exit() -> CreateError {
        CreateError {
            code: ErrorCode::Err,
            kind: ErrorKind::ExitRequested,
            message: String::new(),
        }
    }
}

impl fmt::Display for CreateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message.trim_end())
    }
}

impl std::error::Error for CreateError {}

impl From<ArgError> for CreateError {
    fn from(e: ArgError) -> CreateError {
        let code = match e.kind {
            ArgErrorKind::InvalidOption => ErrorCode::Inval,
            ArgErrorKind::UnrecognizedOption | ArgErrorKind::OptionsFile => ErrorCode::Err,
        };
        CreateError::args(code, e.message)
    }
}

static VM_EXISTS: AtomicBool = AtomicBool::new(false);

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

/// A running VM.
pub struct Vm {
    // Drop order matters: threads are joined in `Drop::drop`; then the gang (its workers
    // may be pretouching the heap), then the heap, then logging, then the singleton.
    gang: WorkerGang,
    heap: Arc<Heap>,
    registry: Arc<Registry>,
    flags: Flags,
    policy: StackPolicy,
    pages: PageInfo,
    start: Instant,
    _log: LogHandle,
    _singleton: Singleton,
}

impl fmt::Debug for Vm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vm")
            .field("heap", &self.heap.stats())
            .field("threads", &self.registry.count())
            .finish()
    }
}

fn print(stream: Stream, text: &str) {
    match stream {
        Stream::Stdout => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
        Stream::Stderr => {
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }
}

impl Vm {
    /// Creates the VM: the `JNI_CreateJavaVM` of rtvm. Never exits the process; every
    /// failure comes back as a [`CreateError`] and leaves nothing behind.
    pub fn create(args: InitArgs) -> Result<Vm, CreateError> {
        let start = Instant::now();
        let singleton = Singleton::acquire()?;
        let env_value = std::env::var(ENV_OPTIONS).ok();
        let options = ParseOptions {
            ignore_unrecognized: args.ignore_unrecognized,
            env: env_value.as_deref().map(|value| EnvOptions {
                name: ENV_OPTIONS,
                value,
            }),
        };
        let parsed = rtvm_flags::parse(&args.options, &options, &mut print)?;
        let mut settings = parsed.settings;

        let spec = match logging::parse_xlog(&parsed.xlog) {
            Ok(XlogRequest::Help) => {
                print(Stream::Stdout, &logging::help_text());
                return Err(CreateError::exit());
            }
            Ok(XlogRequest::Configure(spec)) => spec,
            Err(e) => {
                logging::print_logging_error(&e.detail, start);
                return Err(CreateError::args(ErrorCode::Inval, e.message()));
            }
        };
        if settings.get(flag::PrintFlagsInitial) {
            let _ = rtvm_flags::print_flags(
                &mut std::io::stdout().lock(),
                &settings,
                PrintWhich::Initial,
            );
            return Err(CreateError::exit());
        }
        let log =
            logging::install(&spec, start).map_err(|m| CreateError::args(ErrorCode::Inval, m))?;

        // OS init.
        let pages = PageInfo::detect();
        for p in &pages.problems {
            log::warn!(target: "pagesize", "{p}; treated as unknown");
        }
        rtvm_os_linux::stack::install_overflow_handler();

        let ergo = ergonomics(&mut settings, &pages)?;
        settings
            .check_constraints(Phase::AfterErgo)
            .map_err(|m| CreateError::args(ErrorCode::Inval, m))?;
        let flags = settings.freeze();
        if flags.get(flag::PrintCommandLineFlags) {
            let _ = rtvm_flags::print_command_line_flags(&mut std::io::stdout().lock(), &flags);
        }
        if flags.get(flag::PrintNMTStatistics) && flags.get(flag::NativeMemoryTracking) == "off" {
            print(
                Stream::Stderr,
                "rtvm warning: PrintNMTStatistics is disabled, because native memory tracking is not enabled\n",
            );
        }
        log_page_sizes(&pages, &ergo);

        let registry = Arc::new(Registry::default());
        let gang = WorkerGang::new(ergo.gc_threads, &registry, &ergo.policy)
            .map_err(thread_create_error)?;
        let heap =
            Arc::new(Heap::reserve_and_commit(ergo.heap.clone()).map_err(heap_create_error)?);
        let vm = Vm {
            gang,
            heap,
            registry,
            flags,
            policy: ergo.policy,
            pages,
            start,
            _log: log,
            _singleton: singleton,
        };
        // Any failure from here on drops `vm`, which joins and unmaps what exists.
        vm.heap
            .pretouch_initial(&vm.gang)
            .map_err(heap_create_error)?;
        if vm.flags.get(flag::PrintFlagsFinal) {
            let _ = rtvm_flags::print_flags(
                &mut std::io::stdout().lock(),
                &vm.flags,
                PrintWhich::Final,
            );
        }
        if vm.flags.get(flag::PrintFlagsRanges) {
            let _ = rtvm_flags::print_flags_ranges(&mut std::io::stdout().lock(), &vm.flags);
        }
        log::info!(target: "startup", "VM created in {:.3} ms", start.elapsed().as_secs_f64() * 1e3);
        Ok(vm)
    }

    /// The final flag values.
    pub fn flags(&self) -> &Flags {
        &self.flags
    }

    /// The page-size and THP facts the VM started with.
    pub fn page_info(&self) -> &PageInfo {
        &self.pages
    }

    /// When the VM started.
    pub fn start_time(&self) -> Instant {
        self.start
    }

    /// The heap, shareable with threads.
    pub fn heap(&self) -> &Arc<Heap> {
        &self.heap
    }

    /// Allocates from the heap; `None` when the committed part is exhausted.
    pub fn allocate(&self, bytes: usize) -> Option<HeapBlock<'_>> {
        self.heap.allocate(bytes)
    }

    /// Grows the committed heap (and pretouches the new part with `AlwaysPreTouch`).
    /// Returns the new committed size; on failure the heap keeps its old size.
    pub fn expand_heap(&self, bytes: usize) -> Result<usize, HeapError> {
        self.heap.expand(bytes, &self.gang)
    }

    /// Heap figures.
    pub fn heap_stats(&self) -> HeapStats {
        self.heap.stats()
    }

    /// Waits for a background pretouch (`-XX:+BackgroundPreTouch`) and returns its report.
    pub fn wait_for_pretouch(&self) -> Result<Option<PretouchReport>, HeapError> {
        self.heap.wait_for_pretouch()
    }

    /// The worker gang.
    pub fn gang(&self) -> &WorkerGang {
        &self.gang
    }

    /// The stack policy in force.
    pub fn stack_policy(&self) -> &StackPolicy {
        &self.policy
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

    /// Live threads (workers included) with their stack layouts.
    pub fn threads(&self) -> Vec<Arc<ThreadInfo>> {
        self.registry.list()
    }

    /// The native memory summary, or `None` when `-XX:NativeMemoryTracking` is `off`.
    pub fn native_memory_summary(&self) -> Option<NmtSummary> {
        let mode = self.flags.get(flag::NativeMemoryTracking);
        (mode != "off").then(|| {
            NmtSummary::collect(self.heap.stats(), &self.registry.list(), mode == "detail")
        })
    }

    /// Shuts the VM down: waits for a background pretouch, joins every thread, prints the
    /// NMT report if asked, releases all memory. Errors of threads and of the pretouch are
    /// returned after everything is released.
    pub fn shutdown(mut self) -> Result<(), ShutdownError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), ShutdownError> {
        let mut errors = Vec::new();
        if let Err(e) = self.heap.wait_for_pretouch() {
            errors.push(e.to_string());
        }
        let app: Vec<_> = self
            .registry
            .list()
            .into_iter()
            .filter(|t| t.kind != ThreadKind::Worker)
            .collect();
        for info in app {
            if let Err(e) = threads::join_info(&self.registry, info) {
                errors.push(e.to_string());
            }
        }
        if self.flags.get(flag::PrintNMTStatistics) {
            if let Some(n) = self.native_memory_summary() {
                print(Stream::Stdout, &n.report());
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ShutdownError { messages: errors })
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            log::error!(target: "startup", "{e}");
        }
    }
}

/// Problems found while shutting down (everything was released regardless).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", messages.join("; "))]
pub struct ShutdownError {
    /// One message per problem.
    pub messages: Vec<String>,
}

/// Builds a VM thread.
#[derive(Debug)]
pub struct ThreadBuilder<'vm> {
    vm: &'vm Vm,
    name: String,
    kind: ThreadKind,
    stack_size: Option<usize>,
    hold: bool,
}

impl ThreadBuilder<'_> {
    /// The thread's kind (default: [`ThreadKind::Java`]).
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
    /// and it has reported in, but (unmitigated) it has not placed its guard zone yet.
    pub fn hold_at_start(mut self, hold: bool) -> Self {
        self.hold = hold;
        self
    }

    /// Starts the thread.
    pub fn spawn<F: FnOnce() + Send + 'static>(self, body: F) -> Result<VmThread, ThreadError> {
        threads::spawn(
            &self.vm.registry,
            &self.vm.policy,
            &self.name,
            self.kind,
            self.stack_size,
            self.hold,
            Box::new(body),
        )
    }
}

/// What ergonomics decided beyond flag values.
struct Ergo {
    gc_threads: usize,
    heap: HeapConfig,
    policy: StackPolicy,
    /// Why the stack policy is what it is, for `-Xlog:pagesize`.
    stack_reason: String,
    thp_heap: bool,
}

fn init_error(message: impl Into<String>) -> CreateError {
    CreateError::init(ErrorCode::Inval, message)
}

fn thread_create_error(e: ThreadError) -> CreateError {
    let code = match &e {
        ThreadError::Start { errno, .. }
            if matches!(
                *errno,
                rtvm_os_linux::Errno::ENOMEM | rtvm_os_linux::Errno::EAGAIN
            ) =>
        {
            ErrorCode::NoMem
        }
        _ => ErrorCode::Err,
    };
    CreateError::init(code, format!("{e}\n"))
}

fn heap_create_error(e: HeapError) -> CreateError {
    let code = match &e {
        HeapError::Reserve { os, .. } | HeapError::Commit(os) | HeapError::Pretouch(os)
            if os.is_out_of_memory() =>
        {
            ErrorCode::NoMem
        }
        _ => ErrorCode::Err,
    };
    CreateError::init(code, format!("{e}\n"))
}

/// HotSpot's ergonomics, for rtvm's flags: processors, worker count, heap sizes, stack sizes
/// and the THP policy. Values the user set win; derived ones are recorded `{ergonomic}`.
fn ergonomics(s: &mut Settings, pages: &PageInfo) -> Result<Ergo, CreateError> {
    let ergo_err = |m: String| init_error(format!("{m}\n"));
    let page = base_page_size();

    // Processors and workers.
    let cpus = match s.get(flag::ActiveProcessorCount) {
        n if n > 0 => n as usize,
        _ => system::available_processors(),
    };
    if s.is_default(flag::ParallelGCThreads) {
        let n = if cpus <= 8 {
            cpus
        } else {
            8 + (cpus - 8) * 5 / 8
        };
        // HotSpot presents this derived value as {default}.
        s.set_default(flag::ParallelGCThreads, n.min(4096) as u32)
            .map_err(ergo_err)?;
    }
    let gc_threads = s.get(flag::ParallelGCThreads) as usize;

    // THP for the heap.
    let thp = &pages.thp;
    let mut thp_heap = false;
    if s.get(flag::UseTransparentHugePages) {
        match (thp.mode, thp.pmd_size) {
            (ThpMode::Always | ThpMode::Madvise, Some(_)) => thp_heap = true,
            _ => {
                log::warn!(
                    target: "pagesize",
                    "UseTransparentHugePages disabled, transparent huge pages are not supported by the operating system."
                );
                s.set_ergo(flag::UseTransparentHugePages, false)
                    .map_err(ergo_err)?;
            }
        }
    }
    let heap_page = if thp_heap {
        thp.pmd_size.unwrap_or(page)
    } else {
        page
    };
    let align_up = |v: usize| v.checked_add(heap_page - 1).map(|x| x & !(heap_page - 1));
    let align_down = |v: usize| v & !(heap_page - 1);

    // Heap sizes (HotSpot: MaxRAMPercentage 25, InitialRAMPercentage 1.5625).
    let phys = system::physical_memory().unwrap_or(1 << 30) as usize;
    let user_max = !s.is_default(flag::MaxHeapSize);
    let user_initial = !s.is_default(flag::InitialHeapSize);
    let user_min = !s.is_default(flag::MinHeapSize);
    let min_heap_floor = 2 * M as usize;
    if user_max && s.get(flag::MaxHeapSize) < min_heap_floor {
        return Err(init_error("Too small maximum heap\n"));
    }
    if !user_max {
        let mut max = align_down(phys / 4).max(min_heap_floor);
        if user_initial && s.get(flag::InitialHeapSize) > max {
            max = s.get(flag::InitialHeapSize);
        }
        s.set_ergo(flag::MaxHeapSize, max).map_err(ergo_err)?;
    }
    let max =
        align_up(s.get(flag::MaxHeapSize)).ok_or_else(|| init_error("Too large maximum heap\n"))?;
    if max != s.get(flag::MaxHeapSize) {
        s.set_ergo(flag::MaxHeapSize, max).map_err(ergo_err)?;
    }
    if user_initial && s.get(flag::InitialHeapSize) > max {
        return Err(init_error(
            "Initial heap size set to a larger value than the maximum heap size\n",
        ));
    }
    if user_min && s.get(flag::MinHeapSize) > max {
        return Err(init_error(
            "Incompatible minimum and maximum heap sizes specified\n",
        ));
    }
    if !user_initial || s.get(flag::InitialHeapSize) == 0 {
        let initial = align_up(phys / 64)
            .unwrap_or(max)
            .clamp(s.get(flag::MinHeapSize), max);
        s.set_ergo(flag::InitialHeapSize, initial)
            .map_err(ergo_err)?;
    } else {
        let initial = align_up(s.get(flag::InitialHeapSize))
            .unwrap_or(max)
            .min(max);
        if initial != s.get(flag::InitialHeapSize) {
            s.set_ergo(flag::InitialHeapSize, initial)
                .map_err(ergo_err)?;
        }
    }
    let initial = s.get(flag::InitialHeapSize);
    if user_min && s.get(flag::MinHeapSize) > initial {
        return Err(init_error(
            "Incompatible minimum and initial heap sizes specified\n",
        ));
    }
    if !user_min || s.get(flag::MinHeapSize) == 0 {
        s.set_ergo(flag::MinHeapSize, initial.min(8 * M as usize))
            .map_err(ergo_err)?;
    }

    // The nursery.
    let mut nursery = s.get(flag::NewSize);
    if nursery > 0 {
        let cap = s.get(flag::MaxNewSize);
        if nursery > cap {
            log::warn!(
                target: "gc+heap",
                "NewSize ({}k) is greater than the MaxNewSize ({}k). A new max generation size of {}k will be used.",
                nursery / 1024,
                cap / 1024,
                nursery / 1024
            );
            s.set_ergo(flag::MaxNewSize, nursery).map_err(ergo_err)?;
        }
        let fitted = align_up(nursery).unwrap_or(initial).min(initial);
        if fitted != nursery {
            if fitted < nursery {
                log::warn!(target: "gc+heap", "NewSize ({}k) does not fit the initial heap ({}k); using {}k", nursery / 1024, initial / 1024, fitted / 1024);
            }
            s.set_ergo(flag::NewSize, fitted).map_err(ergo_err)?;
        }
        nursery = fitted;
    }

    // Stacks.
    let system_default = system::stack_rlimit().unwrap_or(8 * M).min(M * K) as usize;
    let k_to_bytes = |k: i64| {
        if k == 0 {
            system_default
        } else {
            k as usize * K as usize
        }
    };
    let disable = s.get(flag::DisableTHPStackMitigation);
    let (mitigated, no_huge_pages, stack_reason) = StackPolicy::decide(disable, pages);
    let policy = StackPolicy {
        mitigated,
        no_huge_pages,
        thp_page_size: thp.pmd_size,
        delay_start: s.get(flag::DelayThreadStartALot),
        pretouch_stacks: s.get(flag::AlwaysPreTouchStacks),
        pretouch_request: PretouchRequest {
            page_size: page,
            use_populate_write: s.get(flag::UseMadvPopulateWrite),
        },
        java_stack_size: k_to_bytes(s.get(flag::ThreadStackSize)),
        vm_stack_size: k_to_bytes(s.get(flag::VMThreadStackSize)),
        guard_size: page,
        alt_stack_size: recommended_alt_stack_size(),
    };
    let min_stack = policy.minimum_stack_size();
    if s.get(flag::ThreadStackSize) != 0 && policy.java_stack_size < min_stack {
        return Err(CreateError::args(
            ErrorCode::Inval,
            format!(
                "The Java thread stack size specified is too small. Specify at least {}k\n",
                min_stack / 1024
            ),
        ));
    }
    if s.get(flag::VMThreadStackSize) != 0 && policy.vm_stack_size < min_stack {
        return Err(CreateError::args(
            ErrorCode::Inval,
            format!(
                "The VMThreadStackSize specified is too small. Specify at least {}k\n",
                min_stack / 1024
            ),
        ));
    }

    let heap = HeapConfig {
        min: s.get(flag::MinHeapSize),
        initial,
        max,
        nursery,
        advise_huge: thp_heap && thp.mode == ThpMode::Madvise,
        page_size: heap_page,
        pretouch: s.get(flag::AlwaysPreTouch),
        background: s.get(flag::BackgroundPreTouch),
        chunk_size: s.get(flag::PreTouchParallelChunkSize),
        request: PretouchRequest {
            page_size: page,
            use_populate_write: s.get(flag::UseMadvPopulateWrite),
        },
    };
    Ok(Ergo {
        gc_threads,
        heap,
        policy,
        stack_reason,
        thp_heap,
    })
}

/// `-Xlog:pagesize`: what the VM found and decided, in HotSpot's words where it has them.
fn log_page_sizes(pages: &PageInfo, ergo: &Ergo) {
    if !log::log_enabled!(target: "pagesize", log::Level::Info) {
        return;
    }
    let size = |b: usize| format_exact_size(b as u64);
    let h = &pages.hugetlb;
    log::info!(target: "pagesize", "Explicit hugepage support:");
    for s in &h.sizes {
        log::info!(target: "pagesize", "  hugepage size: {}", size(*s));
    }
    match h.default_size {
        Some(d) => log::info!(target: "pagesize", "  default hugepage size: {}", size(d)),
        None => log::info!(target: "pagesize", "  default hugepage size: unknown"),
    }
    if !h.consistent() {
        log::info!(target: "pagesize", "  Support inconsistent. JVM will not use explicit hugepages.");
    }
    let t = &pages.thp;
    log::info!(target: "pagesize", "Transparent hugepage (THP) support:");
    log::info!(target: "pagesize", "  THP mode: {}", t.mode);
    match t.pmd_size {
        Some(p) => log::info!(target: "pagesize", "  THP pagesize: {}", size(p)),
        None => log::info!(target: "pagesize", "  THP pagesize: unknown"),
    }
    log::info!(target: "pagesize", "  THP defrag: {}", t.defrag);
    if let Some(n) = t.max_ptes_none {
        log::info!(target: "pagesize", "  khugepaged max_ptes_none: {n}");
    }
    if !t.mthp.is_empty() {
        let list: Vec<String> = t
            .mthp
            .iter()
            .map(|m| {
                format!(
                    "{} {} ({})",
                    format_page_size(m.size as u64),
                    m.setting,
                    m.effective
                )
            })
            .collect();
        log::info!(target: "pagesize", "  mTHP sizes: {}", list.join(", "));
    }
    log::info!(target: "pagesize", "Shared memory transparent hugepage (THP) support:");
    log::info!(target: "pagesize", "  Shared memory THP mode: {}", t.shmem);
    log::info!(
        target: "pagesize",
        "Kernel marks MAP_STACK mappings MADV_NOHUGEPAGE (nh): {} (rtvm does not rely on it)",
        if kernel_marks_map_stack_nohugepage() { "yes" } else { "no" }
    );
    if ergo.policy.mitigated {
        log::info!(target: "pagesize", "VM will attempt to prevent THPs in thread stacks.");
    } else {
        log::info!(target: "pagesize", "VM will *not* prevent THPs in thread stacks. This may cause high RSS.");
    }
    log::info!(target: "pagesize", "THP stack mitigation: {}", ergo.stack_reason);
    if ergo.thp_heap {
        log::info!(target: "pagesize", "UseLargePages=1, UseTransparentHugePages=1");
        log::info!(
            target: "pagesize",
            "Large page support enabled. Usable page sizes: {}, {}. Default large page size: {}.",
            format_page_size(base_page_size() as u64),
            format_page_size(ergo.heap.page_size as u64),
            size(ergo.heap.page_size)
        );
    } else {
        log::info!(target: "pagesize", "Large page support disabled.");
    }
}
