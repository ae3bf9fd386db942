//! # rtvm-os-linux
//!
//! The Linux layer of rtvm, in the place of HotSpot's `os_linux`: it reserves, commits,
//! uncommits, protects and pretouches memory, reads page sizes and transparent-huge-page
//! (THP) modes, maps thread stacks and starts threads on them, and reads the kernel's own
//! view of the process from `/proc`.
//!
//! It takes plain parameters (a size, a page size, a stack spec) and knows nothing of flags
//! or of the runtime above it. All of rtvm's `unsafe` code lives here, each block with a
//! `SAFETY:` comment naming the invariant it relies on; public functions that take raw
//! addresses are `unsafe fn` with a `# Safety` section.
//!
//! | module | what |
//! | --- | --- |
//! | [`memory`] | [`Reservation`]: reserve → commit → pretouch, uncommit, protect, release |
//! | [`pages`] | base page size, THP mode/defrag/PMD size, mTHP sizes, hugetlbfs sizes |
//! | [`pretouch`] | `MADV_POPULATE_WRITE` (probed by effect) or an atomic add of zero per page |
//! | [`stack`] | guard-zoned thread stacks mapped before the thread exists, overflow reports |
//! | [`procfs`] | `status`, `smaps`, `smaps_rollup`, `maps` |
//! | [`system`] | physical memory, processors, limits, tid, time |
//! | [`fault`] | seccomp-based fault injection for tests |
//!
//! Log targets mirror HotSpot's `-Xlog` tags: `os`, `os+thread`, `pagesize`.

mod error;
pub mod fault;
pub mod memory;
mod naming;
pub mod pages;
pub mod pretouch;
pub mod procfs;
pub mod stack;
mod sys;
pub mod system;

pub use error::{strerror, Operation, OsError, Result};
pub use memory::{HugePageAdvice, Reservation};
pub use naming::naming_supported;
pub use pages::{base_page_size, PageInfo, SysRoots, ThpMode};
pub use pretouch::{PretouchRequest, Pretouched, Primitive};
pub use stack::{OsThread, SpawnError, StackLayout, StackMapping, StackSpec, ThreadContext};
pub use sys::Protection;

/// Re-exported so callers can name errnos without depending on nix themselves.
pub use nix::errno::Errno;
