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
//! the library exits the process; errors come back as values.
//!
//! The embedding surface is this crate root: [`Vm`] and its [`InitArgs`], thread and heap
//! handles, NMT, and the error types; the C API mirrors it (`include/rtvm.h`). The launcher
//! ([`launcher`]) is the `rtvm` program as a library. Test tools are behind the `testing`
//! feature. `unsafe` code is confined to the OS layer and to the C API.
#![deny(unsafe_code)]

mod args;
#[allow(unsafe_code)]
mod capi;
mod ergonomics;
mod error;
mod heap;
mod memory;
mod nmt;
mod output;
mod threads;
mod vm;
mod workers;
mod xlog;

pub use args::{lossy, InitArgs, ENV_OPTIONS};
pub use error::{CreateError, ErrorCode, ErrorKind, ShutdownError};
pub use heap::{
    Heap, HeapBlock, HeapError, HeapStats, Nursery, PretouchHold, PretouchReport, Tlab,
};
pub use memory::{MemoryError, MemoryRequest, VmMemory};
pub use nmt::{MemoryDetail, NmtScale, NmtSummary, StackDetail, Usage};
pub use output::{Output, Stream};
pub use threads::{
    AttachedThread, StackBounds, StackPolicy, ThreadError, ThreadInfo, ThreadKind, ThreadState,
    VmState, VmThread,
};
pub use vm::{version_text, ThreadBuilder, Vm, VmHandle};
pub use workers::TaskPanicked;

/// The flag values a VM runs with ([`VmHandle::flags`]): typed handles and values.
pub mod flags {
    pub use rtvm_flags::{flag, Flag, FlagInfo, FlagKind, FlagType, Flags, Origin, Source, Value};
}

/// The page-size and THP facts a VM started with ([`VmHandle::page_info`]).
pub mod pages {
    pub use rtvm_os_linux::pages::{
        DefragMode, HugetlbInfo, MthpSetting, MthpSize, PageInfo, ShmemMode, ThpInfo, ThpMode,
    };
    pub use rtvm_os_linux::StackLayout;
}

/// What the jtreg-like tests and the benches need beyond the embedding API: the lower
/// crates, the idle-thread gate, the `-Xlog` parser. Not for embedders.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::workers::{GangTask, TaskHandle, WorkerGang};
    pub use crate::xlog::{
        help_text, parse_xlog, LogConfig, XlogError, RTVM_TAG_SETS, TAGS, TAG_SETS,
    };
}

/// README.md's Rust examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
