//! The pretouch engine: makes a range of a reservation resident — in parallel chunks on the
//! worker gang, synchronously or in the background — without changing a byte, so the memory
//! may be used while it runs (JDK-8272807).
//!
//! It knows no client. A pretouch runs over a [`Target`] (a reservation, the page size
//! backing it, the [`PretouchPlan`] ergonomics decided, and a [`Label`] for its log lines),
//! a range, and a gang; the heap and embedder memories are two callers among any.
//!
//! | file | what |
//! | --- | --- |
//! | `task` | [`PretouchTask`]: workers claim chunks from an atomic cursor (HotSpot's `PretouchTask`), progress and completion lines |
//! | `gate` | [`Gate`] and [`PretouchHold`]: holds that pause a background pretouch before its next chunk (its workers go back to the gang meanwhile) |
//! | `grow` | [`grow`]: commit unpublished → pretouch → publish, or give back — the one growth routine |

mod gate;
mod grow;
mod task;

use std::ops::Range;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use rtvm_os_linux::{OsError, Primitive, Reservation};

use crate::policy::PretouchPlan;
use crate::workers::{GangTask, TaskHandle, TaskPanicked, WorkerGang};

pub(crate) use gate::Gate;
pub use gate::PretouchHold;
pub(crate) use grow::{grow, GrowError};
pub(crate) use task::PretouchTask;

/// How a pretouch names what it touches in its log lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Label {
    /// The `-Xlog` tag set (`gc+heap` for the heap, `os` for an embedder's memory).
    pub tag: &'static str,
    /// What is pretouched, after the size (`" of Wasm Memory [0x7f…]"`; empty for the heap,
    /// in HotSpot's words).
    pub what: String,
}

/// What a pretouch runs over.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// The reservation; the task holds it, so the range stays mapped while the task runs.
    pub reservation: Arc<Reservation>,
    /// The page size backing it (chunks are multiples of it).
    pub page_size: usize,
    /// Chunk size, primitive and stride.
    pub plan: PretouchPlan,
    /// Log lines.
    pub label: Label,
}

/// What a pretouch did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PretouchReport {
    /// Bytes made resident.
    pub bytes: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Workers that took part (0 = the calling thread).
    pub workers: usize,
    /// Chunk size used.
    pub chunk: usize,
    /// The primitive (the fallback if any chunk needed it).
    pub primitive: Primitive,
}

/// Why a pretouch failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PretouchError {
    /// A chunk could not be made resident (the message names the range).
    Os(OsError),
    /// A worker panicked (a bug).
    Panicked(TaskPanicked),
}

/// Pretouches `range` of `target` and waits: on the gang if it is free, else on the calling
/// thread alone — never waiting for another task (a background pretouch of something else).
/// Without a gang (its VM is gone) the calling thread does it.
pub(crate) fn run(
    target: &Target,
    range: Range<usize>,
    gang: Option<&WorkerGang>,
) -> Result<PretouchReport, PretouchError> {
    let workers = gang.map_or(0, WorkerGang::size);
    let task = Arc::new(PretouchTask::new(
        target.clone(),
        range,
        workers,
        None,
        None,
    ));
    task.log_start();
    match gang {
        Some(gang) => gang
            .run_now(
                Arc::clone(&task) as Arc<dyn GangTask>,
                task.workers().max(1),
            )
            .map_err(PretouchError::Panicked)?,
        None => task.work(0),
    }
    task.finish()
}

/// A pretouch running in the background on the gang (a clone is another handle to it).
#[derive(Clone, Debug)]
pub(crate) struct Background {
    handle: TaskHandle,
    task: Arc<PretouchTask>,
}

impl Background {
    /// Starts pretouching `range` of `target` on the gang and returns at once; `gate`, if any,
    /// can hold it between chunks (its workers then take other tasks of the gang); chunks at
    /// or above `limit`, if any, are skipped.
    pub(crate) fn start(
        target: &Target,
        range: Range<usize>,
        gang: &WorkerGang,
        gate: Option<Arc<Gate>>,
        limit: Option<Arc<AtomicUsize>>,
    ) -> Background {
        if let Some(g) = &gate {
            g.add_waker(gang.waker());
        }
        let task = Arc::new(PretouchTask::new(
            target.clone(),
            range,
            gang.size(),
            gate,
            limit,
        ));
        task.log_start();
        let handle = gang.start(Arc::clone(&task) as Arc<dyn GangTask>, task.workers());
        Background { handle, task }
    }

    /// Workers the task runs on.
    pub(crate) fn workers(&self) -> usize {
        self.task.workers()
    }

    /// Whether every worker has finished.
    pub(crate) fn is_done(&self) -> bool {
        self.handle.is_done()
    }

    /// `(bytes done, bytes total)`.
    #[cfg(feature = "testing")]
    pub(crate) fn progress(&self) -> (usize, usize) {
        self.task.progress()
    }

    /// Waits for the pretouch and returns what it did.
    pub(crate) fn wait(&self) -> Result<PretouchReport, PretouchError> {
        self.handle.wait().map_err(PretouchError::Panicked)?;
        self.task.finish()
    }
}
