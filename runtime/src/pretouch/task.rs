//! One pretouch: `[offset, offset+len)` of a reservation in chunks that workers claim from an
//! atomic cursor, as HotSpot's `PretouchTask` does — `units = ceil(len / chunk)`, `workers =
//! min(units, gang size)`; with no worker the calling thread runs it. A held background
//! pretouch pauses: its workers leave it between chunks and take it up again once released.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtvm_flags::value::{format_exact_size, format_page_size};
use rtvm_os_linux::{OsError, Primitive};

use super::{Gate, PretouchError, PretouchReport, Target};
use crate::workers::GangTask;

/// Work units and workers for `len` bytes in chunks of `chunk` on a gang of `gang`.
pub(crate) fn plan(len: usize, chunk: usize, gang: usize) -> (usize, usize) {
    let units = if len == 0 { 0 } else { (len - 1) / chunk + 1 };
    (units, units.min(gang))
}

/// Chunked pretouch of a range: workers claim chunks from an atomic cursor.
#[derive(Debug)]
pub(crate) struct PretouchTask {
    target: Target,
    offset: usize,
    len: usize,
    chunk: usize,
    units: usize,
    workers: usize,
    /// Holds stop a background pretouch before each chunk.
    gate: Option<Arc<Gate>>,
    /// Offsets at or above this are skipped (the owner gave them back meanwhile).
    limit: Option<Arc<AtomicUsize>>,
    cursor: AtomicUsize,
    done: AtomicUsize,
    /// Bytes skipped because they lay above the limit.
    skipped: AtomicUsize,
    fallback_used: AtomicBool,
    error: Mutex<Option<OsError>>,
    start: Instant,
    last_progress_ms: AtomicU64,
    /// Workers inside `work` now; the last one out once the cursor is past the end records
    /// the end and logs it (once: `completed`).
    in_work: AtomicUsize,
    completed: AtomicBool,
    finished_at: Mutex<Option<Duration>>,
}

impl PretouchTask {
    /// A task over `range` of `target` for a gang of `gang` workers; `gate` makes it a
    /// background pretouch that holds can stop; `limit`, if any, is an offset at and above
    /// which it skips its chunks (read before each chunk).
    pub(crate) fn new(
        target: Target,
        range: Range<usize>,
        gang: usize,
        gate: Option<Arc<Gate>>,
        limit: Option<Arc<AtomicUsize>>,
    ) -> PretouchTask {
        let chunk = target.plan.chunk_for(target.page_size);
        let len = range.len();
        let (units, workers) = plan(len, chunk, gang);
        PretouchTask {
            target,
            offset: range.start,
            len,
            chunk,
            units,
            workers,
            gate,
            limit,
            cursor: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            skipped: AtomicUsize::new(0),
            fallback_used: AtomicBool::new(false),
            error: Mutex::new(None),
            start: Instant::now(),
            last_progress_ms: AtomicU64::new(0),
            in_work: AtomicUsize::new(0),
            completed: AtomicBool::new(false),
            finished_at: Mutex::new(None),
        }
    }

    /// Workers the task runs on (0: the calling thread).
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// `(bytes done, bytes total)`.
    #[cfg(feature = "testing")]
    pub(crate) fn progress(&self) -> (usize, usize) {
        (self.done.load(Ordering::Relaxed), self.len)
    }

    fn background(&self) -> bool {
        self.gate.is_some()
    }

    /// Every chunk is claimed (or the task failed and stopped everyone).
    fn exhausted(&self) -> bool {
        self.cursor.load(Ordering::Acquire) >= self.len
    }

    /// HotSpot's line as the task starts.
    pub(crate) fn log_start(&self) {
        let (tag, what) = (self.target.label.tag, &self.target.label.what);
        if self.workers == 0 {
            log::debug!(target: tag, "Running PreTouch task pre-touching {}B{what}.", self.len);
        } else {
            log::debug!(
                target: tag,
                "Running PreTouch task with {} workers for {} work units pre-touching {}B{what}.",
                self.workers,
                self.units,
                self.len,
            );
        }
    }

    fn log_progress(&self) {
        let elapsed = self.start.elapsed().as_millis() as u64;
        let last = self.last_progress_ms.load(Ordering::Relaxed);
        if elapsed < 1000 || elapsed < last + 1000 {
            return;
        }
        if self
            .last_progress_ms
            .compare_exchange(last, elapsed, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            let done = self.done.load(Ordering::Relaxed);
            log::debug!(
                target: self.target.label.tag,
                "PreTouch progress{}: {}B of {}B ({:.0}%) after {:.3}s",
                self.target.label.what,
                done,
                self.len,
                done as f64 * 100.0 / self.len as f64,
                elapsed as f64 / 1000.0
            );
        }
    }

    fn primitive(&self) -> Primitive {
        if self.fallback_used.load(Ordering::Relaxed) {
            Primitive::AtomicAdd
        } else {
            rtvm_os_linux::pretouch::primitive_for(&self.target.plan.request)
        }
    }

    /// Called by the last worker to leave: records the end and logs it, at the moment the
    /// pretouch completes (also for a background pretouch nobody waits for).
    fn complete(&self) {
        let elapsed = self.start.elapsed();
        *self.finished_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(elapsed);
        let (tag, what) = (self.target.label.tag, &self.target.label.what);
        if let Some(e) = self
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            log::error!(target: tag, "PreTouch{what} failed after {:.3}s: {e}", elapsed.as_secs_f64());
            return;
        }
        let bytes = self.len - self.skipped.load(Ordering::Relaxed);
        if bytes < self.len {
            log::info!(target: tag, "PreTouch{what} skipped {}B given back while it ran", self.len - bytes);
        }
        log::info!(
            target: tag,
            "Pretouched {}B{what} in {:.3}s ({:.2} GB/s) with {} workers, chunk {}, {}, page size {}",
            bytes,
            elapsed.as_secs_f64(),
            bytes as f64 / elapsed.as_secs_f64().max(1e-9) / 1e9,
            self.workers,
            format_exact_size(self.chunk as u64),
            self.primitive(),
            format_page_size(self.target.page_size as u64)
        );
        if self.background() {
            log::info!(target: tag, "Background pretouch{what} completed");
        }
    }

    /// The report, or the first error, once every worker has left.
    pub(crate) fn finish(&self) -> Result<PretouchReport, PretouchError> {
        if let Some(e) = self.error.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(PretouchError::Os(e));
        }
        let elapsed = self
            .finished_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or_else(|| self.start.elapsed());
        Ok(PretouchReport {
            bytes: self.len - self.skipped.load(Ordering::Relaxed),
            elapsed,
            workers: self.workers,
            chunk: self.chunk,
            primitive: self.primitive(),
        })
    }
}

impl GangTask for PretouchTask {
    fn work(&self, _worker_id: usize) {
        let reservation = &self.target.reservation;
        self.in_work.fetch_add(1, Ordering::AcqRel);
        loop {
            // A held pretouch is left here, before the next chunk (the gang takes it up again
            // once released); counted active until the iteration ends.
            let active = match &self.gate {
                Some(g) => match g.try_enter_chunk() {
                    Some(a) => Some(a),
                    None => break,
                },
                None => None,
            };
            let start = self.cursor.fetch_add(self.chunk, Ordering::AcqRel);
            if start >= self.len {
                break;
            }
            let n = self.chunk.min(self.len - start);
            // Read after entering the chunk: an owner that lowers the limit and then waits for
            // the chunks in flight (`Gate::wait_idle`) sees this chunk, or this chunk sees it.
            let limit = self
                .limit
                .as_ref()
                .map_or(usize::MAX, |l| l.load(Ordering::SeqCst));
            let at = self.offset + start;
            let touch = n.min(limit.saturating_sub(at));
            if touch < n {
                self.skipped.fetch_add(n - touch, Ordering::Relaxed);
            }
            if touch > 0 {
                match reservation.pretouch(at, touch, &self.target.plan.request) {
                    Ok(p) => {
                        if p.primitive == Primitive::AtomicAdd {
                            self.fallback_used.store(true, Ordering::Relaxed);
                        }
                        self.done.fetch_add(touch, Ordering::Relaxed);
                    }
                    Err(e) => {
                        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
                        slot.get_or_insert(e);
                        // Stop everyone: the creation, growth or expansion fails anyway.
                        self.cursor.store(self.len, Ordering::Release);
                        break;
                    }
                }
            }
            drop(active);
            self.log_progress();
        }
        if self.in_work.fetch_sub(1, Ordering::AcqRel) == 1
            && self.exhausted()
            && !self.completed.swap(true, Ordering::AcqRel)
        {
            self.complete();
        }
    }

    fn ready(&self) -> bool {
        self.exhausted() || self.gate.as_ref().is_none_or(|g| !g.is_held())
    }

    fn finished(&self) -> bool {
        self.exhausted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_workers() {
        const M: usize = 1 << 20;
        assert_eq!(plan(256 * M, 4 * M, 2), (64, 2));
        assert_eq!(
            plan(256 * M, 1024 * M, 2),
            (1, 1),
            "a chunk larger than the range"
        );
        assert_eq!(plan(10 * M, 4 * M, 8), (3, 3));
        assert_eq!(plan(0, 4 * M, 2), (0, 0));
        assert_eq!(plan(256 * M, 4 * M, 0), (64, 0), "no gang: the caller");
    }
}
