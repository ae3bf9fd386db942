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
//! let worker = vm.spawn("worker", || println!("hello from a guarded, THP-proof stack"))?;
//! worker.join()?;
//! vm.shutdown()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Start-up follows HotSpot's order: flags are parsed ([`rtvm_flags`]), `-Xlog` is set up,
//! the OS layer ([`rtvm_os_linux`]) reports page sizes and THP modes, ergonomics fill in
//! what the user did not set, the worker gang starts, the heap is reserved, committed and
//! pretouched. Nothing in the library exits the process; errors come back as values.
//!
//! `unsafe` code is confined to the OS layer and to the C API ([`capi`]).
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod capi;
pub mod heap;
pub mod launcher;
pub mod logging;
pub mod mains;
pub mod nmt;
pub mod threads;
mod vm;
pub mod workers;

pub use heap::{Heap, HeapBlock, HeapError, HeapStats, PretouchReport};
pub use nmt::NmtSummary;
pub use threads::{ThreadError, ThreadInfo, ThreadKind, ThreadState, VmThread};
pub use vm::{
    CreateError, ErrorCode, ErrorKind, InitArgs, ShutdownError, ThreadBuilder, Vm, ENV_OPTIONS,
};

/// README.md's Rust examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The flag system, re-exported for embedders that read flags.
pub use rtvm_flags as flags;
/// The OS layer, re-exported for tools and tests that look at the kernel's view.
pub use rtvm_os_linux as os;
