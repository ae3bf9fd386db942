//! What the serviceability threads see of the VM: its flags, threads, heap, memories, output,
//! command line and logging, shared with them for as long as they run.

use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use rtvm_flags::{flag, Flags};

use crate::args::ExitHook;
use crate::heap::Heap;
use crate::memory::MemoryRegistry;
use crate::nmt::{NmtSummary, StackDetail, Usage};
use crate::output::Output;
use crate::service::dcmd::EmbedderCommands;
use crate::threads::{Registry, StackPolicy};
use crate::xlog::LogControl;

/// How the VM was started, as `VM.command_line` and the perf data tell it.
#[derive(Clone, Debug, Default)]
pub(crate) struct CommandLine {
    /// The VM options (`jvm_args`).
    pub(crate) jvm_args: Vec<String>,
    /// The main and its arguments (`java_command`), if the embedder said.
    pub(crate) java_command: Option<String>,
    /// Who created the VM (`Launcher Type`): `SUN_STANDARD` for the `rtvm` launcher,
    /// `generic` for an embedder, as HotSpot says for a VM created through JNI.
    pub(crate) launcher: String,
}

/// The VM as the serviceability code sees it.
pub(crate) struct Context {
    pub(crate) flags: Flags,
    pub(crate) registry: Arc<Registry>,
    pub(crate) heap: Arc<Heap>,
    pub(crate) memories: Arc<MemoryRegistry>,
    pub(crate) output: Output,
    pub(crate) start: Instant,
    pub(crate) started_at: SystemTime,
    pub(crate) command: CommandLine,
    /// The running logging configuration (`None` if another logger owns the process).
    pub(crate) log: Option<Arc<LogControl>>,
    pub(crate) stacks: StackPolicy,
    /// `VM.native_memory baseline`.
    pub(crate) baseline: Mutex<Option<NmtSummary>>,
    /// The diagnostic commands the embedder registered.
    pub(crate) dcmds: Arc<EmbedderCommands>,
    /// The embedder's exit hook, for the end a `SIGTERM`, `SIGINT` or `SIGHUP` brings.
    pub(crate) exit: Option<ExitHook>,
    /// The collector's report of its heap, for NMT's `Java Heap` line
    /// ([`crate::VmHandle::report_heap`]).
    pub(crate) heap_report: Mutex<Option<HeapReporter>>,
}

/// What a collector reports of its heap.
pub(crate) type HeapReporter = Arc<dyn Fn() -> crate::nmt::CollectorHeap + Send + Sync>;

impl Context {
    /// The native memory summary, or `None` when `-XX:NativeMemoryTracking` is `off`;
    /// `detail` keeps the per-stack lines (only when tracking is `detail`).
    pub(crate) fn native_memory(&self) -> Option<NmtSummary> {
        let mode = self.flags.get(flag::NativeMemoryTracking);
        if mode == "off" {
            return None;
        }
        let stacks = self
            .registry
            .list()
            .iter()
            .map(|t| StackDetail {
                name: t.name.clone(),
                start: t.layout.mapping.start,
                end: t.layout.mapping.end,
                committed: t.stack_resident_bytes() as u64,
            })
            .collect();
        let heap = &self.heap;
        // NMT counts what the OS holds committed (all of a heap on explicit huge pages), or
        // what the collector that owns the heap reports.
        let reporter = self
            .heap_report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let collector = reporter.map(|r| r());
        let usage = match &collector {
            Some(c) => Usage {
                reserved: c.reserved as u64,
                committed: c.committed as u64,
            },
            None => Usage {
                reserved: heap.stats().reserved as u64,
                committed: heap.os_committed() as u64,
            },
        };
        let cached = self
            .registry
            .stack_cache()
            .mappings()
            .into_iter()
            .map(|(mapping, resident)| StackDetail {
                name: String::new(),
                start: mapping.start,
                end: mapping.end,
                committed: resident as u64,
            })
            .collect();
        let (range, pages) = match &collector {
            Some(c) => (c.range.clone(), c.pages.clone()),
            None => (heap.range(), heap.page_description().to_owned()),
        };
        Some(NmtSummary::collect(
            usage,
            range,
            &pages,
            stacks,
            cached,
            self.memories.usage(),
            mode == "detail",
        ))
    }

    /// Applies the current values of the manageable flags a running VM honours (after
    /// `VM.set_flag` or `jinfo -flag`): the stack cache's size.
    pub(crate) fn flags_changed(&self) {
        if let rtvm_flags::Value::Uint(limit) = self.flags.current(flag::ThreadStackCacheSize) {
            self.registry
                .stack_cache()
                .set_limit(usize::try_from(limit).unwrap_or(usize::MAX));
        }
    }

    /// Whether `-XX:NativeMemoryTracking=detail`.
    pub(crate) fn nmt_detail(&self) -> bool {
        self.flags.get(flag::NativeMemoryTracking) == "detail"
    }

    /// The `-Xlog` vocabulary's uptime: seconds since the VM started.
    pub(crate) fn uptime_secs(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}
