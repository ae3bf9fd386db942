//! The start-up sequence behind [`Vm::create`]: flags (with `-Xlog` applied as it is met),
//! logging, page sizes, ergonomics, signal handlers, workers, heap, pretouch. A [`Vm`] is
//! handed out only when all of it worked; a failure on the way drops what exists (threads
//! stopped, memory unmapped, handlers and logger given back) and prints nothing more.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtvm_flags::{flag, Phase, PrintWhich, Settings, StopReason};
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::signals;

use super::stress::{Stress, StressConfig};
use super::{ProcessState, Vm, VmHandle, VmInner};
use crate::args::{parse_options, InitArgs};
use crate::ergonomics::{self, Machine};
use crate::error::{CreateError, ErrorCode};
use crate::heap::{Heap, HeapError};
use crate::lifecycle::Singleton;
use crate::memory::MemoryRegistry;
use crate::output::{Output, OutputWriter, Stream};
use crate::safepoint::SafepointConfig;
use crate::service::context::{CommandLine, Context};
use crate::service::Service;
use crate::threads::Registry;
use crate::version::version_text;
use crate::workers::WorkerGang;
use crate::xlog;

static NEXT_VM_ID: AtomicU64 = AtomicU64::new(1);

/// Prints one of the flag listings on stdout.
fn print_listing(output: &Output, print: impl FnOnce(&mut OutputWriter<'_>)) {
    let mut w = OutputWriter {
        output,
        stream: Stream::Stdout,
    };
    print(&mut w);
}

pub(super) fn create(args: InitArgs) -> Result<Vm, CreateError> {
    let start = Instant::now();
    let started_at = std::time::SystemTime::now();
    let singleton = Singleton::acquire().map_err(|()| {
        CreateError::args(
            ErrorCode::Exists,
            "A virtual machine already exists in this process.\n",
        )
    })?;
    let output = args.output.clone();
    let (parsed, log_config) = parse_options(&args, &output, start)?;
    match parsed.stop {
        Some(StopReason::PrintFlagsInitial) => {
            print_listing(&output, |w| {
                let _ = rtvm_flags::print_flags(w, &parsed.settings, PrintWhich::Initial);
            });
            return Err(CreateError::exit());
        }
        Some(StopReason::XlogHelp) => return Err(CreateError::exit()),
        Some(StopReason::Version) | None => {}
    }
    let log = xlog::install(log_config, &output, start);

    let machine = Machine::detect(
        parsed.settings.get(flag::UseContainerSupport),
        i64::from(parsed.settings.get(flag::ActiveProcessorCount)),
    );
    let pages = PageInfo::detect();
    for p in &pages.problems {
        log::warn!(target: "pagesize", "{p}; treated as unknown");
    }
    let mut settings = parsed.settings;
    let mut print_command_line_flags = |s: &Settings| {
        if s.get(flag::PrintCommandLineFlags) {
            print_listing(&output, |w| {
                let _ = rtvm_flags::print_command_line_flags(w, s);
            });
        }
    };
    let decided = ergonomics::decide(
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
    let quit = if flags.get(flag::ReduceSignalUsage) {
        None
    } else {
        match rtvm_os_linux::quit::install() {
            Ok(h) => Some(h),
            Err(e) => {
                log::warn!(target: "os", "Installing the SIGQUIT handler failed ({}); kill -3 and the attach mechanism's signal will not reach the VM", rtvm_os_linux::strerror(e));
                None
            }
        }
    };
    let stop = if flags.get(flag::ReduceSignalUsage) {
        log::info!(target: "safepoint", "ReduceSignalUsage: no stop signal; only polls and safe regions stop threads");
        None
    } else {
        let signo = flags.get(flag::SafepointSignal) as i32;
        match rtvm_os_linux::safepoint::install_stop_signal(signo) {
            Ok(s) => {
                log::debug!(target: "safepoint", "Stop signal: {signo} (for threads that neither poll nor are in a safe region)");
                Some(s)
            }
            Err(e) => {
                log::warn!(target: "safepoint", "Installing the stop signal failed ({e}); only polls and safe regions will stop threads");
                None
            }
        }
    };
    let log_control = log.control();
    let process = ProcessState {
        _signals: signals,
        _quit: quit,
        _stop: stop,
        log,
        singleton,
    };
    if flags.get(flag::PrintNMTStatistics) && flags.get(flag::NativeMemoryTracking) == "off" {
        output.write(
            Stream::Stderr,
            "rtvm warning: PrintNMTStatistics is disabled, because native memory tracking is not enabled\n",
        );
    }
    ergonomics::log_page_sizes(&decided);

    let mut policy = decided.policy;
    if args.collector_heap {
        // The collector's heap: rtvm keeps one page of reservation (its heap API stays
        // well-defined, with no room) and commits nothing.
        let page = rtvm_os_linux::base_page_size();
        log::info!(target: "gc+heap", "Heap: owned by the embedder's collector (MaxHeapSize={}, InitialHeapSize={}); the VM reserves none", policy.heap.max, policy.heap.initial);
        if flags.get(flag::AlwaysPreTouch) {
            output.write(
                Stream::Stderr,
                "rtvm warning: AlwaysPreTouch is ignored: the collector maps its heap as it grows (-XX:MMTkPlan heaps are not pretouched)\n",
            );
        }
        policy.heap.min = 0;
        policy.heap.initial = 0;
        policy.heap.max = page;
        policy.heap.nursery = 0;
        policy.heap.explicit = None;
    }
    let mut heap_memory = policy.memory;
    if args.collector_heap {
        heap_memory.pages.advise_huge = false;
        heap_memory.pages.page_size = rtvm_os_linux::base_page_size();
    }
    let registry = Arc::new(Registry::new(
        NEXT_VM_ID.fetch_add(1, Ordering::Relaxed),
        policy.stacks.cache_size,
    ));
    let timeout_delay = flags.get(flag::SafepointTimeoutDelay).max(0) as u64;
    crate::safepoint::report::set_timeout_delay_ms(timeout_delay);
    crate::safepoint::report::set_dump_core(flags.get(flag::CreateCoredumpOnCrash));
    registry.safepoints().configure(SafepointConfig {
        signals: process._stop.is_some(),
        grace: Duration::from_micros(flags.get(flag::SafepointSignalDelay).max(0) as u64),
        report_after: flags
            .get(flag::SafepointTimeout)
            .then(|| Duration::from_millis(timeout_delay)),
        abort_on_timeout: flags.get(flag::AbortVMOnSafepointTimeout),
        handshake_timeout: Some(flags.get(flag::HandshakeTimeout))
            .filter(|&ms| ms > 0)
            .map(|ms| Duration::from_millis(u64::from(ms))),
    });
    let gang = Arc::new(WorkerGang::new(
        policy.gc_threads,
        &registry,
        &policy.stacks,
    )?);
    let warn = |w: &str| output.write(Stream::Stderr, &format!("rtvm warning: {w}\n"));
    let heap = Heap::reserve(&policy.heap, &heap_memory, &warn).inspect_err(|e| {
        // HotSpot's warning before its out-of-memory report (the error says the rest).
        if let HeapError::Commit(os) = e {
            if os.is_out_of_memory() {
                warn(&format!("INFO: {os}"));
            }
        }
    })?;
    let heap = Arc::new(heap);
    ergonomics::log_gc_init(&flags, &machine, heap.page_description(), policy.gc_threads);
    let memories = Arc::new(MemoryRegistry::default());
    let quit_baseline = process._quit.as_ref().map(|q| q.baseline());
    let service = Service::start(
        Context {
            flags: flags.clone(),
            registry: Arc::clone(&registry),
            heap: Arc::clone(&heap),
            memories: Arc::clone(&memories),
            output: output.clone(),
            start,
            started_at,
            command: CommandLine {
                jvm_args: args.options.clone(),
                java_command: args.command.clone(),
                launcher: args.launcher.clone().unwrap_or_else(|| "generic".into()),
            },
            log: Some(log_control),
            stacks: policy.stacks.clone(),
            baseline: Mutex::new(None),
            dcmds: Default::default(),
            exit: args.exit.clone(),
            heap_report: Mutex::new(None),
        },
        quit_baseline,
    )?;
    let vm = Vm {
        handle: VmHandle {
            inner: Arc::new(VmInner {
                gang,
                heap,
                registry,
                flags,
                policy,
                pages,
                start,
                output,
                process: Mutex::new(Some(process)),
                memories,
                service,
                generation: rtvm_os_linux::system::process_generation(),
                shutdown_hooks: Mutex::new(Vec::new()),
                stress: Mutex::new(None),
            }),
        },
    };
    // Any failure from here on drops `vm` quietly: workers stopped, memory unmapped,
    // handlers and logger given back — no NMT report, no shutdown messages.
    let inner = &vm.inner;
    inner.heap.pretouch_initial(&inner.gang)?;
    let interval = inner.flags.get(flag::GuaranteedSafepointInterval);
    let (safepoint_alot, handshake_alot) = (
        inner.flags.get(flag::SafepointALot),
        inner.flags.get(flag::HandshakeALot),
    );
    if (safepoint_alot || handshake_alot) && interval > 0 {
        let stress = Stress::start(
            &inner.registry,
            &inner.policy.stacks,
            StressConfig {
                safepoints: safepoint_alot,
                handshakes: handshake_alot,
                interval: Duration::from_millis(interval as u64),
            },
        )?;
        *crate::safepoint::lock(&inner.stress) = Some(stress);
    }
    // As java: with both, the ranges table alone (it lists every flag already).
    if inner.flags.get(flag::PrintFlagsRanges) {
        print_listing(&inner.output, |w| {
            let _ = rtvm_flags::print_flags_ranges(w, &inner.flags);
        });
    } else if inner.flags.get(flag::PrintFlagsFinal) {
        print_listing(&inner.output, |w| {
            let _ = rtvm_flags::print_flags(w, &inner.flags, PrintWhich::Final);
        });
    }
    log::info!(target: "startuptime", "VM created in {:.3} ms", start.elapsed().as_secs_f64() * 1e3);
    if let Some(p) = inner.lock_process().as_ref() {
        xlog::log_configuration(&p.log.description());
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
    if let Some(p) = vm.inner.lock_process().as_ref() {
        p.singleton.taken();
    }
    Ok(vm)
}
