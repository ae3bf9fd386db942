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
//! | [`stack`] | thread stacks: HotSpot's guard zones, a guarded signal stack, no writable window |
//! | [`thread`] | threads on those stacks: start, exit hooks (also after `pthread_exit`), join |
//! | [`signals`] | the guard-zone reporter, alternate signal stacks, chaining, install/restore |
//! | [`quit`] | `SIGQUIT` counted and posted to a dispatcher (a futex), the host's handler kept |
//! | [`terminate`] | `SIGTERM`, `SIGINT`, `SIGHUP` posted to the dispatcher where they were `SIG_DFL` |
//! | [`safepoint`] | thread states, the world word, register spills, the stop signal |
//! | [`attach`] | the attach listener's private socket, peer credentials, a poll waker |
//! | [`perfmem`] | the `hsperfdata` file `jps` and the attach client read |
//! | [`procfs`] | `status`, `smaps`, `smaps_rollup`, `maps` |
//! | [`system`] | physical memory, processors, limits, tid, time |
//! | `fault` | seccomp-based fault injection for tests (`testing` feature) |
//!
//! Log targets mirror HotSpot's `-Xlog` tags: `os`, `os+thread`, `pagesize`.

pub mod attach;
pub mod container;
mod error;
#[cfg(any(test, feature = "testing"))]
pub mod fault;
mod futex;
pub mod memory;
mod naming;
pub mod pages;
pub mod perfmem;
pub mod pretouch;
mod probe;
pub mod procfs;
pub mod quit;
pub mod safepoint;
#[cfg(any(test, feature = "testing"))]
pub mod setting;
pub mod signals;
pub mod stack;
mod sys;
pub mod system;
pub mod terminate;
pub mod thread;

pub use error::{posix_description, strerror, Operation, OsError, Result};
pub use memory::{HugePageAdvice, Reservation};
pub use naming::naming_supported;
pub use pages::{base_page_size, PageInfo, SysRoots, ThpMode};
pub use pretouch::{PretouchRequest, Pretouched, Primitive};
pub use stack::{GuardZones, StackLayout, StackMapping, StackSpec};
pub use sys::Protection;
pub use thread::{ForeignCall, Joined, Joiner, OsThread, SpawnError, ThreadContext};

/// Re-exported so callers can name errnos without depending on nix themselves.
pub use nix::errno::Errno;
