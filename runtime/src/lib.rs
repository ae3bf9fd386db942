//! # rtvm
//!
//! The memory-and-threads core of a managed runtime, embedded by language runtimes and
//! tuned by operators with JVM-style command-line flags.
//!
//! ```no_run
//! use rtvm::{InitArgs, Vm};
//!
//! let vm = Vm::create(InitArgs::new(["-Xms64m", "-Xmx256m", "-XX:+AlwaysPreTouch"]))?;
//! let block = vm.allocate(4096).expect("committed heap has room");
//! block.words()[0].store(42, std::sync::atomic::Ordering::Relaxed);
//! let worker = vm.spawn("worker", || {
//!     // A closed stdout loses the line; it does not panic the thread.
//!     use std::io::Write;
//!     let _ = writeln!(std::io::stdout(), "hello from a guarded, THP-proof stack");
//! })?;
//! worker.join()?;
//! vm.shutdown()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Start-up follows HotSpot's order: flags are parsed (with `-Xlog` applied as it is met),
//! the OS layer reports page sizes and THP modes, ergonomics fill in what the user did not
//! set, the worker gang starts, the heap is reserved, committed and pretouched. Nothing in
//! the library exits the process (a `SIGTERM`, `SIGINT` or `SIGHUP` left at `SIG_DFL` ends it
//! as `SIG_DFL` would, once the VM's files are removed: [`InitArgs::exit_hook`]); errors come
//! back as values.
//!
//! The embedding surface is this crate root: [`Vm`] and its [`InitArgs`], thread and heap
//! handles, embedder memories, NMT, and the error types (with the OS error types they
//! carry); the C API mirrors it (`include/rtvm.h`). The `rtvm` program is a crate of its
//! own (`rtvm-launcher`), built on this API. Test tools are behind the `testing` feature.
//! `unsafe` code is confined to the OS layer and to the C API.
//!
//! ## Where each mechanism lives
//!
//! Data flows one way: `vm` → `ergonomics` → `policy` → `heap`, `memory`, `threads` →
//! `pretouch` → `workers` → the OS layer (`rtvm_os_linux`).
//!
//! | where | what |
//! | --- | --- |
//! | `src/vm/` | [`Vm`], [`VmHandle`]: the owner of everything; `create.rs` the start-up sequence, `teardown.rs` the shutdown |
//! | `src/lifecycle.rs` | the VM's states ([`VmState`]) and transition rules |
//! | `src/args.rs` | [`InitArgs`], `RTVM_OPTIONS`, option parsing with `-Xlog` applied in order |
//! | `src/ergonomics/` | the decisions, as ordered steps: machine, large pages, heap sizes, nursery, stacks; `-Xlog:pagesize` and `gc+init` |
//! | `src/policy.rs` | what ergonomics decided, read by everything below (one memory policy for the heap and memories) |
//! | `src/heap/` | [`Heap`]: reserve and expand, the bump allocator, [`Tlab`], [`Nursery`] |
//! | `src/memory.rs` | [`VmMemory`]: memory of the embedder's own with the VM's policies |
//! | `src/pretouch/` | the engine: chunked parallel pretouch of a range, holds ([`PretouchHold`]), the one growth routine |
//! | `src/threads/` | [`VmThread`], [`AttachedThread`], the registry, stack policy, the start handshake |
//! | `src/safepoint/` | stops of the world, handshakes, safe regions and the poll ([`WorldStopped`]) |
//! | `src/workers.rs` | the worker gang and its task queue |
//! | `src/nmt.rs` | [`NmtSummary`] in HotSpot 17's layout |
//! | `src/xlog/` | `-Xlog`: selections, outputs and rotation, decorations, dispatch |
//! | `src/output.rs` | [`Output`]: standard streams or the embedder's hook |
//! | `src/error.rs` | [`CreateError`], [`ErrorCode`] and the one mapping of errors to codes |
//! | `src/service/` | serviceability: `SIGQUIT`, the attach listener, diagnostic commands (the embedder's too: [`DiagnosticCommand`]), thread dumps, perf data |
//! | `src/version.rs` | the VM's name and version |
//! | `src/capi/` | the C API of `include/rtvm.h`, by area |
#![deny(unsafe_code)]

mod args;
#[allow(unsafe_code)]
mod capi;
mod ergonomics;
mod error;
mod heap;
mod lifecycle;
mod memory;
mod nmt;
mod output;
mod policy;
mod pretouch;
mod safepoint;
mod service;
mod threads;
mod version;
mod vm;
mod workers;
mod xlog;

pub use args::{lossy, InitArgs, ENV_OPTIONS};
pub use error::{CreateError, DcmdError, ErrorCode, ErrorKind, ShutdownError};
pub use heap::{Heap, HeapBlock, HeapError, HeapStats, Nursery, Tlab};
pub use lifecycle::VmState;
pub use memory::{MemoryError, MemoryRequest, VmMemory};
pub use nmt::{CollectorHeap, MemoryDetail, NmtScale, NmtSummary, StackDetail, Usage};
pub use output::{Output, Stream};
pub use pretouch::{PretouchHold, PretouchReport};
pub use safepoint::{
    declare_code, forget_code, safepoint_poll, CodeError, CodeKind, NoAsyncStop, SafeRegion,
    SafepointError, StackKind, StopHow, StoppedThread, WorldStopped,
};
pub use service::dcmd::{DcmdArguments, DcmdParam, DcmdType, DiagnosticCommand};
pub use threads::{
    AttachedThread, StackBounds, StackConfig, ThreadBuilder, ThreadError, ThreadInfo, ThreadKind,
    ThreadState, VmThread,
};
pub use version::version_text;
pub use vm::{TrimReport, Vm, VmHandle};
pub use workers::TaskPanicked;

/// The OS errors rtvm's errors carry ([`HeapError`], [`MemoryError`], [`ThreadError`]):
/// the operation, the range and the errno.
pub use rtvm_os_linux::{Errno, Operation, OsError};

/// The flag values a VM runs with ([`VmHandle::flags`]): typed handles and values.
pub mod flags {
    pub use rtvm_flags::{flag, Flag, FlagInfo, FlagKind, FlagType, Flags, Origin, Source, Value};
}

/// The page-size and THP facts a VM started with ([`VmHandle::page_info`]), and a stack's
/// layout ([`ThreadInfo::layout`]).
pub mod pages {
    pub use rtvm_os_linux::pages::{
        DefragMode, HugetlbInfo, MthpSetting, MthpSize, PageInfo, Problem, ShmemMode, ThpInfo,
        ThpMode,
    };
    pub use rtvm_os_linux::{Primitive, StackLayout};
}

/// What the jtreg-like tests and the benches need beyond the embedding API: the worker gang
/// and its tasks, the `-Xlog` parser. Not for embedders.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::workers::{GangTask, GangWaker, TaskHandle, WorkerGang};
    pub use crate::xlog::{
        help_text, parse_xlog, LogConfig, XlogError, RTVM_TAG_SETS, TAGS, TAG_SETS,
    };
}

/// README.md's Rust examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
