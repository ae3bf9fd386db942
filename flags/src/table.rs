//! THE flag table: every flag rtvm has, declared once.
//!
//! Kinds follow HotSpot: `product` flags are for everyone, `product_pd` ones have a
//! platform-dependent default, `diagnostic` and `experimental` ones are locked until
//! `-XX:+UnlockDiagnosticVMOptions` / `-XX:+UnlockExperimentalVMOptions` appear *before*
//! them. A `range` is checked whenever a value is set; a `constraint` runs at parse time
//! (`AtParse`) or once ergonomics have run (`AfterErgo`).

use crate::constraints;
use crate::value::{G, K, M};

/// Platform-dependent defaults (`{pd product}`).
mod pd {
    use crate::value::M;

    /// Default stack size, in K, of threads created for the application (`-Xss`).
    /// 1024K on x86_64; 2040K on aarch64 where HotSpot lowered it below the 2M THP size
    /// (JDK-8303215).
    #[cfg(not(target_arch = "aarch64"))]
    pub const THREAD_STACK_SIZE_K: i64 = 1024;
    #[cfg(target_arch = "aarch64")]
    pub const THREAD_STACK_SIZE_K: i64 = 2040;
    /// Default stack size, in K, of VM-internal threads and workers.
    pub const VM_THREAD_STACK_SIZE_K: i64 = THREAD_STACK_SIZE_K;
    /// Per-worker pretouch chunk: 4M on Linux (JDK-8254699), 1G elsewhere.
    #[cfg(target_os = "linux")]
    pub const PRETOUCH_CHUNK: u64 = 4 * M;
    #[cfg(not(target_os = "linux"))]
    pub const PRETOUCH_CHUNK: u64 = 1024 * M;
    /// Largest Java thread stack size, in K, `ThreadStackSize` may ask for: 1M kilobytes,
    /// i.e. 1 GiB (`VMThreadStackSize` goes to `max_intx / K`, as in HotSpot 17).
    pub const MAX_STACK_SIZE_K: i64 = M as i64;

    // HotSpot 17's x86-64 stack zones, in 4K pages (`globals_x86.hpp`), and their ranges.
    pub const STACK_RED_PAGES: i64 = 1;
    pub const MIN_STACK_RED_PAGES: i64 = 1;
    pub const MAX_STACK_RED_PAGES: i64 = 3;
    pub const STACK_YELLOW_PAGES: i64 = 2;
    pub const MIN_STACK_YELLOW_PAGES: i64 = 2;
    pub const MAX_STACK_YELLOW_PAGES: i64 = STACK_YELLOW_PAGES + 5;
    pub const STACK_RESERVED_PAGES: i64 = 1;
    pub const MIN_STACK_RESERVED_PAGES: i64 = 0;
    pub const MAX_STACK_RESERVED_PAGES: i64 = 11;
    pub const STACK_SHADOW_PAGES: i64 = 20;
    pub const MIN_STACK_SHADOW_PAGES: i64 = 10;
    pub const MAX_STACK_SHADOW_PAGES: i64 = 50;
}

/// HotSpot's `ScaleForWordSize(96 * M)` on a 64-bit VM: MaxHeapSize's table default.
const SCALED_96M: u64 = (96 * M * 13 / 10) & !7;
/// HotSpot's `ScaleForWordSize(1 * M)`: NewSize's table default.
const SCALED_1M: u64 = (M * 13 / 10) & !7;

/// The largest value a `size_t` chunk size may take (`SIZE_MAX / 2`).
const SIZE_MAX_HALF: u64 = u64::MAX / 2;

define_flags! {
    diagnostic(bool, AbortVMOnSafepointTimeout, false,
        "With SafepointTimeout, end the process with a fatal error once the threads that did not reach the stop are reported (SIGABRT sent to the first of them, so a core shows its stack)");
    product(int, ActiveProcessorCount, -1,
        "Specify the CPU count the VM should use and report as active; -1 uses the count the OS makes available to the process");
    product(bool, AlwaysPreTouch, false,
        "Force all freshly committed heap pages to be pre-touched (made resident) before use");
    diagnostic(bool, AlwaysPreTouchStacks, false,
        "Force each thread stack to be fully pre-touched below its guard zone before the thread body runs");
    experimental(bool, BackgroundPreTouch, false,
        "With AlwaysPreTouch, return from VM creation once the heap is committed and pre-touch it in the background while the application runs")
        constraint(constraints::background_pretouch, AfterErgo);
    experimental(bool, HoldBackgroundPreTouch, false,
        "With AlwaysPreTouch and BackgroundPreTouch, hold the background pretouch before its first chunk until the embedder releases it (VmHandle::release_pretouch, rtvm_release_pretouch) or the VM shuts down: the VM is up at once, the heap is pretouched when the application chooses")
        constraint(constraints::hold_background_pretouch, AfterErgo);
    product(bool, CreateCoredumpOnCrash, true,
        "Create core/mini dump on VM fatal error");
    product(bool, DisableAttachMechanism, false,
        "Disable mechanism that allows tools to attach to this VM: no attach listener, SIGQUIT always prints a thread dump, and the perf data says so");
    diagnostic(bool, DelayThreadStartALot, false,
        "Delay each thread start by 100ms between the start handshake and the thread's own set-up, widening the window in which an unmitigated stack can turn into huge pages");
    diagnostic(bool, DisableTHPStackMitigation, false,
        "Do not protect thread stacks from transparent huge pages: map them like glibc on kernels before 6.8 (no MADV_NOHUGEPAGE, guard zone placed late by the thread). For negative tests only");
    diagnostic(intx, GuaranteedSafepointInterval, 1000,
        "Milliseconds between the stops of the world of SafepointALot and the handshake rounds of HandshakeALot (0: none)")
        range(0, 2_147_483_647);
    diagnostic(bool, HandshakeALot, false,
        "Send a no-op handshake to every mutator in turn each GuaranteedSafepointInterval, verifying that the target is not running while the operation runs for it");
    diagnostic(uint, HandshakeTimeout, 0,
        "Milliseconds after which a handshake that has not completed is a fatal error naming its thread (0: no limit)");
    product(bool, IgnoreUnrecognizedVMOptions, false,
        "Ignore unrecognized VM options");
    product(double, InitialRAMPercentage, 1.5625,
        "Percentage of real memory (the container's limit inside a container) used for the initial heap size")
        range(0.0, 100.0);
    product(size_t, InitialHeapSize, 0,
        "Initial heap size (in bytes); zero means use ergonomics (InitialRAMPercentage of physical memory, or of the container's limit)")
        type_range();
    product(size_t, LargePageSizeInBytes, 0,
        "Maximum large page size used (0 is the default large page size)")
        type_range();
    product(ccstr, MMTkPlan, "Immix",
        "The MMTk plan (collector) of programs that run on the MMTk heap (rtvm-mmtk): Immix, StickyImmix, MarkSweep or NoGC; plans that cannot take conservative roots are refused");
    product(size_t, MaxHeapSize, SCALED_96M,
        "Maximum heap size (in bytes); ergonomics set it from MaxRAMPercentage (MinRAMPercentage on small memory) of physical memory, or of the container's limit, unless given")
        type_range();
    product_pd(uint64_t, MaxRAM, 128 * G,
        "Real memory size (in bytes) used to set maximum heap size")
        type_range();
    product(double, MaxRAMPercentage, 25.0,
        "Maximum percentage of real memory used for maximum heap size")
        range(0.0, 100.0);
    product(size_t, MaxNewSize, u64::MAX,
        "Maximum size of the nursery (in bytes); -Xmn sets it together with NewSize")
        type_range();
    product(double, MinRAMPercentage, 50.0,
        "Minimum percentage of real memory used for maximum heap size on systems with small physical memory size")
        range(0.0, 100.0);
    product(size_t, MinHeapSize, 0,
        "Minimum heap size (in bytes); zero means use ergonomics")
        type_range();
    product(ccstr, NativeMemoryTracking, "off",
        "Native memory tracking options: off, summary or detail")
        constraint(constraints::native_memory_tracking, AtParse);
    product(size_t, NewSize, SCALED_1M,
        "Size of the nursery (in bytes): a region at the heap's low end that the embedder can empty in one step; there is a nursery only when NewSize (or -Xmn) is given")
        type_range();
    product(uint, ParallelGCThreads, 0,
        "Number of parallel worker threads (pre-touch and other parallel VM tasks), started as tasks need them; zero means use ergonomics")
        type_range();
    product_pd(size_t, PreTouchParallelChunkSize, pd::PRETOUCH_CHUNK,
        "Per-thread chunk size for parallel memory pre-touch")
        range(4 * K, SIZE_MAX_HALF);
    product(bool, PerfDataSaveToFile, false,
        "Save PerfData memory to hsperfdata_<pid> file on exit");
    product(ccstr, PerfDataSaveFile, "",
        "Save PerfData memory to the specified absolute pathname. The string %p in the file name (if present) will be replaced by pid");
    product(intx, PerfDataMemorySize, 32 * K as i64,
        "Size of performance data memory region. Will be rounded up to a multiple of the native os page size.")
        range(128, 32 * 64 * K as i64);
    product(bool, PrintCommandLineFlags, false,
        "Print flags specified on command line or set by ergonomics");
    product(bool, PrintFlagsFinal, false,
        "Print all VM flags after argument and ergonomic processing");
    product(bool, PrintFlagsInitial, false,
        "Print all VM flags before argument processing and exit VM");
    product(bool, PrintFlagsRanges, false,
        "Print VM flags and their ranges");
    diagnostic(bool, PrintNMTStatistics, false,
        "Print native memory tracking summary data if it is on");
    product(bool, PrintVMOptions, false,
        "Print flags that appeared on the command line");
    product(bool, ReduceSignalUsage, false,
        "Reduce the use of OS signals in Java and/or the VM: rtvm installs no signal handler at all (-Xrs): no SIGSEGV/SIGBUS reporter, no SIGQUIT dispatcher (the attach listener starts with the VM), no SIGTERM/SIGINT/SIGHUP handler");
    product(intx, SafepointSignal, 38,
        "The real-time signal that stops a thread which neither polls nor is in a safe region when a stop of the world or a handshake waits for it (SIGRTMIN+4 with glibc); never delivered on the alternate signal stack. Not installed with -Xrs")
        range(34, 64);
    product(intx, SafepointSignalDelay, 200,
        "Microseconds a stop of the world or a handshake waits for threads to poll or enter a safe region before it sends SafepointSignal to those still running (0: at once)")
        range(0, 10_000_000);
    diagnostic(bool, SafepointALot, false,
        "Stop the world every GuaranteedSafepointInterval and verify the stop: no stopped thread runs, every scan range lies on its thread's stack, what a stopped thread published stays as it was");
    product(bool, SafepointTimeout, false,
        "Time out and warn or fail after SafepointTimeoutDelay milliseconds if failed to reach safepoint");
    product(intx, SafepointTimeoutDelay, 10000,
        "Delay in milliseconds for option SafepointTimeout")
        range(0, 9_223_372_036_854);
    product_pd(intx, StackRedPages, pd::STACK_RED_PAGES,
        "Number of red zone (unrecoverable overflows) pages of size 4KB. If pages are bigger red zone is aligned up.")
        range(pd::MIN_STACK_RED_PAGES, pd::MAX_STACK_RED_PAGES);
    product_pd(intx, StackReservedPages, pd::STACK_RESERVED_PAGES,
        "Number of reserved zone (reserved to annotated methods) pages of size 4KB. If pages are bigger reserved zone is aligned up.")
        range(pd::MIN_STACK_RESERVED_PAGES, pd::MAX_STACK_RESERVED_PAGES);
    product_pd(intx, StackShadowPages, pd::STACK_SHADOW_PAGES,
        "Number of shadow zone (for overflow checking) pages of size 4KB. If pages are bigger shadow zone is aligned up. This should exceed the depth of the VM and native call stack.")
        range(pd::MIN_STACK_SHADOW_PAGES, pd::MAX_STACK_SHADOW_PAGES);
    product_pd(intx, StackYellowPages, pd::STACK_YELLOW_PAGES,
        "Number of yellow zone (recoverable overflows) pages of size 4KB. If pages are bigger yellow zone is aligned up.")
        range(pd::MIN_STACK_YELLOW_PAGES, pd::MAX_STACK_YELLOW_PAGES);
    product(bool, StartAttachListener, false,
        "Always start Attach Listener at VM startup");
    manageable(size_t, ThreadStackCacheSize, 40 * M,
        "Bytes of stacks of ended VM threads kept, guard zones and advice in place and their pages given back, for the next threads of the same size to start on; 0 keeps none");
    product_pd(intx, ThreadStackSize, pd::THREAD_STACK_SIZE_K,
        "Thread stack size (in Kbytes) of application threads; 0 uses the system default (RLIMIT_STACK)")
        range(0, pd::MAX_STACK_SIZE_K);
    product(uint, TrimNativeHeapInterval, 0,
        "Interval, in ms, at which the JVM will trim the native heap if the platform supports that. Lower values will reclaim memory more eagerly at the cost of higher overhead. A value of 0 (default) disables native heap trimming.")
        range(0, u32::MAX);
    diagnostic(bool, UnlockDiagnosticVMOptions, false,
        "Enable normal processing of flags relating to field diagnostics");
    experimental(bool, UnlockExperimentalVMOptions, false,
        "Enable normal processing of flags relating to experimental features");
    diagnostic(bool, UseMadvPopulateWrite, true,
        "Use MADV_POPULATE_WRITE to pre-touch memory where the kernel has it; off forces touching every page with an atomic add of zero");
    product(bool, UseContainerSupport, true,
        "Enable detection and runtime container configuration support: memory limit and CPU quota of the process's cgroup");
    product_pd(bool, UseLargePages, false,
        "Use large page memory: explicit huge pages from hugetlbfs for the heap (on Linux, with UseTransparentHugePages: THP)");
    product(bool, UsePerfData, true,
        "Flag to disable jvmstat instrumentation for performance testing and problem isolation purposes: with it off, no hsperfdata file (jps and jcmd -l do not list the VM)");
    product(bool, UseTransparentHugePages, false,
        "Use MADV_HUGEPAGE for the heap so the kernel backs it with transparent huge pages");
    product_pd(intx, VMThreadStackSize, pd::VM_THREAD_STACK_SIZE_K,
        "Thread stack size (in Kbytes) of VM-internal threads and workers; 0 uses the system default (RLIMIT_STACK)")
        range(0, i64::MAX / 1024);
}

/// Names of the flags that unlock others; they are always settable themselves.
pub(crate) const UNLOCKERS: [&str; 2] =
    ["UnlockDiagnosticVMOptions", "UnlockExperimentalVMOptions"];
