//! The heap: `MaxHeapSize` reserved, `InitialHeapSize` committed, optionally advised for
//! transparent huge pages and pretouched — in parallel chunks on the worker gang, and with
//! `-XX:+BackgroundPreTouch` while the application already runs.
//!
//! The embedder allocates from it with a thread-safe bump allocator ([`Heap::allocate`]),
//! grows it with [`Heap::expand`] (commit, and pretouch with `AlwaysPreTouch`), and reads
//! [`Heap::stats`]. Memory handed out is committed and stays mapped until the VM is dropped;
//! it may be written while a pretouch runs, because neither pretouch primitive changes a
//! byte (JDK-8272807).
//!
//! With `-Xmn`/`NewSize`, the first `NewSize` bytes are a nursery: an arena whose
//! allocations all end together ([`Heap::with_nursery`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rtvm_flags::value::{format_exact_size, format_page_size};
use rtvm_os_linux::{HugePageAdvice, OsError, PretouchRequest, Primitive, Reservation};

use crate::workers::{GangTask, TaskHandle, TaskPanicked, WorkerGang};

/// How the heap is set up; decided from flags by the VM.
#[derive(Clone, Debug)]
pub(crate) struct HeapConfig {
    /// `MinHeapSize`.
    pub min: usize,
    /// `InitialHeapSize`.
    pub initial: usize,
    /// `MaxHeapSize`.
    pub max: usize,
    /// `NewSize`: the nursery at the low end (0 = none).
    pub nursery: usize,
    /// Advise `MADV_HUGEPAGE` (THP mode `madvise` with `-XX:+UseTransparentHugePages`).
    pub advise_huge: bool,
    /// The page size backing the heap: the THP size with `UseTransparentHugePages` (when THP
    /// is available), the large page size with explicit huge pages, else the base page size.
    /// Also the reservation's alignment.
    pub page_size: usize,
    /// `UseLargePages` with hugetlbfs: the heap is reserved and committed at once on explicit
    /// huge pages of `page_size`, as HotSpot reserves "special" memory.
    pub explicit_huge_pages: bool,
    /// `page_size` is the system's default huge page size.
    pub default_huge_page: bool,
    /// `AlwaysPreTouch`.
    pub pretouch: bool,
    /// `BackgroundPreTouch`.
    pub background: bool,
    /// `HoldBackgroundPreTouch`: the background pretouch starts held.
    pub hold_background: bool,
    /// `PreTouchParallelChunkSize`.
    pub chunk_size: usize,
    /// How to pretouch (`UseMadvPopulateWrite`; the stride is the base page size, because a
    /// THP fault that falls back to small pages would leave a huge-page stride untouched).
    pub request: PretouchRequest,
}

impl HeapConfig {
    fn page_description(&self) -> String {
        let size = format_exact_size(self.page_size as u64);
        if self.explicit_huge_pages {
            format!("{size} hugetlbfs pages")
        } else if self.page_size > rtvm_os_linux::base_page_size() {
            format!("{size} transparent huge pages")
        } else {
            format!("{size} pages")
        }
    }
}

/// Why a heap operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeapError {
    /// The heap could not be reserved.
    #[error("Could not reserve enough space for {}KB object heap", .bytes / 1024)]
    Reserve {
        /// Bytes asked for.
        bytes: usize,
        /// The OS error.
        os: OsError,
    },
    /// Committing failed; the heap keeps its previous size.
    #[error("{0}")]
    Commit(OsError),
    /// Pretouching failed; the message names the range that was not made resident.
    #[error("{0}")]
    Pretouch(OsError),
    /// An expansion beyond `MaxHeapSize`.
    #[error(
        "cannot expand the heap by {requested} bytes: {available} bytes left below MaxHeapSize"
    )]
    Exhausted {
        /// Bytes asked for.
        requested: usize,
        /// Bytes still reservable.
        available: usize,
    },
    /// The pretouch task failed in a way that is a bug (a worker panicked).
    #[error("{0}")]
    Task(TaskPanicked),
}

/// Heap figures, all read from counters (no system call): cheap enough for a hot path.
/// What is resident is measured separately ([`Heap::resident_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeapStats {
    /// Reserved bytes (`MaxHeapSize`, aligned).
    pub reserved: usize,
    /// Committed bytes.
    pub committed: usize,
    /// Bytes handed out by the allocator (nursery excluded).
    pub used: usize,
}

/// A block of heap memory handed to the embedder.
#[derive(Clone, Copy, Debug)]
pub struct HeapBlock<'a> {
    words: &'a [std::sync::atomic::AtomicU64],
}

impl<'a> HeapBlock<'a> {
    /// The block as 64-bit atomic words (safe to share between threads).
    pub fn words(&self) -> &'a [std::sync::atomic::AtomicU64] {
        self.words
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.words.len() * 8
    }

    /// Whether the block is empty.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The first byte, for code that manages the memory itself (C embedders).
    pub fn as_ptr(&self) -> *mut u8 {
        self.words.as_ptr() as *mut u8
    }
}

/// What a pretouch of the heap did.
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

/// The heap.
#[derive(Debug)]
pub struct Heap {
    reservation: Reservation,
    config: HeapConfig,
    /// End of the committed part (offset), with [`END_FLAGS`] in the low bits. Written only
    /// under `expand_lock` (apart from setting `CLAMP_PENDING`).
    committed: AtomicUsize,
    /// Bump pointer (offset; starts after the nursery), alone on its cache line: every
    /// allocation writes it, and `committed` (read by every allocation) must not share the line.
    top: OwnLine,
    /// Serializes expansions.
    expand_lock: Mutex<()>,
    /// The nursery's bump pointer (offset within the nursery), locked for a nursery scope.
    nursery: Mutex<usize>,
    background: Mutex<Option<BackgroundPretouch>>,
    /// The report of the synchronous initial pretouch, if one ran.
    initial_report: Mutex<Option<PretouchReport>>,
    /// HotSpot's warning when the heap could not go on explicit huge pages of a size other
    /// than the default one (the VM prints it).
    large_page_warning: Option<String>,
    /// Holds on the background pretouch ([`Heap::hold_pretouch`]).
    holds: Mutex<Holds>,
    hold_released: Condvar,
}

/// Who holds the background pretouch.
#[derive(Debug, Default)]
struct Holds {
    /// Outstanding [`PretouchHold`]s, plus the VM's own start-up hold.
    count: usize,
    /// The start-up hold (`HoldBackgroundPreTouch`) is still taken.
    initial: bool,
    /// The VM shuts down: holds no longer stop anyone.
    closing: bool,
    /// Background pretouch workers inside a chunk right now.
    active: usize,
}

/// A background pretouch worker inside a chunk (see [`PretouchHold::wait_stopped`]).
struct ActiveChunk<'h>(&'h Heap);

impl Drop for ActiveChunk<'_> {
    fn drop(&mut self) {
        let mut h = self.0.lock_holds();
        h.active -= 1;
        if h.active == 0 {
            self.0.hold_released.notify_all();
        }
    }
}

/// A hold on the heap's background pretouch: while it lives, the pretouch workers stop before
/// their next chunk (the chunks in flight finish). Dropping it lets them go on. A shutdown
/// overrides every hold, so a forgotten one cannot hang the VM.
#[derive(Debug)]
pub struct PretouchHold {
    heap: Arc<Heap>,
}

impl PretouchHold {
    /// Waits until no background pretouch worker is inside a chunk: from then on, while the
    /// hold lives, the pretouch makes no progress and uses no CPU.
    pub fn wait_stopped(&self) {
        let mut h = self.heap.lock_holds();
        while h.active > 0 && !h.closing {
            h = self
                .heap
                .hold_released
                .wait(h)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for PretouchHold {
    fn drop(&mut self) {
        self.heap.release_one(false);
    }
}

/// An atomic on a cache line of its own (128 bytes: adjacent-line prefetchers pair lines).
#[derive(Debug, Default)]
#[repr(align(128))]
struct OwnLine(AtomicUsize);

impl std::ops::Deref for OwnLine {
    type Target = AtomicUsize;
    fn deref(&self) -> &AtomicUsize {
        &self.0
    }
}

#[derive(Debug)]
struct BackgroundPretouch {
    handle: TaskHandle,
    task: Arc<PretouchTask>,
}

impl Heap {
    /// Reserves `max`, commits `initial`, advises huge pages if asked and names the mapping.
    /// Pretouching is started separately ([`Heap::pretouch_initial`]).
    pub(crate) fn reserve_and_commit(mut config: HeapConfig) -> Result<Heap, HeapError> {
        let mut special = None;
        let mut large_page_warning = None;
        if config.explicit_huge_pages {
            match Reservation::reserve_huge_pages(config.max, config.page_size) {
                Ok(r) => special = Some(r),
                Err(e) => {
                    // As HotSpot: not enough huge pages for the whole heap — regular pages,
                    // with a warning when the page size was not the system's default.
                    log::debug!(target: "gc+heap+coops", "Reserve regular memory without large pages");
                    log::info!(target: "pagesize", "Failed to reserve and commit the heap on {} pages: {e}", format_exact_size(config.page_size as u64));
                    if !config.default_huge_page {
                        large_page_warning = Some(format!(
                            "Failed to reserve and commit memory. req_addr: {:#018x} bytes: {} page size: {} (errno = {}).",
                            0,
                            config.max,
                            config.page_size,
                            e.errno as i32
                        ));
                    }
                    config.explicit_huge_pages = false;
                    config.page_size = rtvm_os_linux::base_page_size();
                }
            }
        }
        let mut reservation = match special {
            Some(r) => r,
            None => Reservation::reserve(config.max, config.page_size).map_err(|os| {
                HeapError::Reserve {
                    bytes: config.max,
                    os,
                }
            })?,
        };
        reservation.set_name("rtvm heap");
        if config.advise_huge {
            reservation
                .advise(0, config.max, HugePageAdvice::HugePage)
                .map_err(HeapError::Commit)?;
        }
        // Explicit huge pages are committed whole at reservation.
        if config.initial > 0 && !config.explicit_huge_pages {
            reservation
                .commit(0, config.initial)
                .map_err(HeapError::Commit)?;
        }
        log::info!(
            target: "pagesize",
            "Heap:  min={} max={} base={:#018x} page_size={} size={}",
            format_exact_size(config.min as u64),
            format_exact_size(config.max as u64),
            reservation.base(),
            format_exact_size(config.page_size as u64),
            format_exact_size(config.max as u64)
        );
        log::info!(
            target: "gc+heap",
            "Heap reserved [{:#018x} - {:#018x}) {}, {} committed, on {}",
            reservation.base(),
            reservation.base() + config.max,
            format_exact_size(config.max as u64),
            format_exact_size(if config.explicit_huge_pages { config.max } else { config.initial } as u64),
            config.page_description()
        );
        log::debug!(
            target: "gc+heap",
            "Minimum heap {}  Initial heap {}  Maximum heap {}",
            config.min,
            config.initial,
            config.max
        );
        Ok(Heap {
            committed: AtomicUsize::new(config.initial),
            top: OwnLine(AtomicUsize::new(config.nursery)),
            reservation,
            expand_lock: Mutex::new(()),
            nursery: Mutex::new(0),
            background: Mutex::new(None),
            initial_report: Mutex::new(None),
            large_page_warning,
            holds: Mutex::new(Holds::default()),
            hold_released: Condvar::new(),
            config,
        })
    }

    /// The reserved range's first address.
    pub fn base(&self) -> usize {
        self.reservation.base()
    }

    /// Pretouches the initially committed part: synchronously, or — with background
    /// pretouch — started on the gang and left running.
    pub(crate) fn pretouch_initial(
        self: &Arc<Self>,
        gang: &WorkerGang,
    ) -> Result<Option<PretouchReport>, HeapError> {
        let len = self.committed.load(Ordering::Acquire) & !END_FLAGS;
        if !self.config.pretouch || len == 0 {
            return Ok(None);
        }
        if self.config.background && gang.size() > 0 {
            if self.config.hold_background {
                let mut h = self.lock_holds();
                h.count += 1;
                h.initial = true;
                log::info!(target: "gc+heap", "Background pretouch held until the embedder releases it (HoldBackgroundPreTouch)");
            }
            let task = Arc::new(PretouchTask::new(
                PretouchTarget::Heap(Arc::clone(self)),
                0,
                len,
                gang.size(),
                true,
            ));
            log_start(&task);
            let handle = gang.start(Arc::clone(&task) as Arc<dyn GangTask>, task.workers);
            log::info!(target: "gc+heap", "Background pretouch started: {} on {} workers", format_exact_size(len as u64), task.workers);
            *self.background.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(BackgroundPretouch { handle, task });
            return Ok(None);
        }
        if self.config.background {
            log::info!(target: "gc+heap", "BackgroundPreTouch needs a worker thread (ParallelGCThreads=0): pretouching synchronously");
        }
        let report = self.pretouch_range(gang, 0, len)?;
        *self
            .initial_report
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(report);
        Ok(Some(report))
    }

    fn pretouch_range(
        self: &Arc<Self>,
        gang: &WorkerGang,
        offset: usize,
        len: usize,
    ) -> Result<PretouchReport, HeapError> {
        pretouch_now(PretouchTarget::Heap(Arc::clone(self)), gang, offset, len)
    }

    /// What the synchronous initial pretouch did (`None` without `AlwaysPreTouch`, or while
    /// a background pretouch runs: see [`wait_for_pretouch`](Heap::wait_for_pretouch)).
    pub fn initial_pretouch(&self) -> Option<PretouchReport> {
        *self
            .initial_report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Holds the background pretouch: its workers stop before their next chunk until the
    /// returned hold is dropped (an embedder's latency-critical phase; a test's handshake).
    /// Only the background pretouch is held — a synchronous pretouch (start-up without
    /// `BackgroundPreTouch`, an expansion) never waits, so a thread holding the pretouch
    /// cannot block itself.
    pub fn hold_pretouch(self: &Arc<Self>) -> PretouchHold {
        self.lock_holds().count += 1;
        PretouchHold {
            heap: Arc::clone(self),
        }
    }

    /// Releases the start-up hold of `-XX:+HoldBackgroundPreTouch`; `false` if there was none
    /// (not asked for, or released already).
    pub fn release_pretouch(&self) -> bool {
        self.release_one(true)
    }

    fn lock_holds(&self) -> std::sync::MutexGuard<'_, Holds> {
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn release_one(&self, initial: bool) -> bool {
        let mut h = self.lock_holds();
        if initial {
            if !h.initial {
                return false;
            }
            h.initial = false;
            log::info!(target: "gc+heap", "Background pretouch released");
        }
        h.count = h.count.saturating_sub(1);
        self.hold_released.notify_all();
        true
    }

    /// Ends every hold for good: the VM shuts down and waits for the pretouch.
    pub(crate) fn end_holds(&self) {
        self.lock_holds().closing = true;
        self.hold_released.notify_all();
    }

    /// A background pretouch worker waits here before each chunk while the pretouch is held;
    /// it counts as active until the returned guard is dropped.
    fn enter_chunk(&self) -> ActiveChunk<'_> {
        let mut h = self.lock_holds();
        while h.count > 0 && !h.closing {
            h = self
                .hold_released
                .wait(h)
                .unwrap_or_else(|p| p.into_inner());
        }
        h.active += 1;
        ActiveChunk(self)
    }

    /// Whether a background pretouch is still running.
    pub fn background_pretouch_running(&self) -> bool {
        let bg = self.background.lock().unwrap_or_else(|p| p.into_inner());
        bg.as_ref().is_some_and(|b| !b.handle.is_done())
    }

    /// Waits for a background pretouch, if one was started, and returns its outcome (once;
    /// later calls return `Ok(None)`).
    pub fn wait_for_pretouch(&self) -> Result<Option<PretouchReport>, HeapError> {
        let bg = self
            .background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(bg) = bg else { return Ok(None) };
        bg.handle.wait().map_err(HeapError::Task)?;
        bg.task.finish().map(Some)
    }

    /// Progress of a background pretouch: `(bytes done, bytes total)`, or `None` if none runs.
    pub fn pretouch_progress(&self) -> Option<(usize, usize)> {
        let bg = self.background.lock().unwrap_or_else(|p| p.into_inner());
        bg.as_ref()
            .map(|b| (b.task.done.load(Ordering::Relaxed), b.task.len))
    }

    /// Allocates `bytes` (rounded up to 8; `0` is a unique 8-byte block) from the committed
    /// part, from any thread, without a lock: one `fetch_add` on the heap's top in the common
    /// case (blocks over 1 MiB: a compare-and-swap loop). `None` when the committed part
    /// cannot hold the block — as cheap as a success (no system call, never blocking; one
    /// load once the heap is full): [`expand_heap`](crate::VmHandle::expand_heap) first. A thread that allocates a
    /// lot takes a [`Tlab`].
    ///
    /// Only when failed allocations race with each other near the end of the committed part
    /// may the last bytes before the end stay unused until the next expansion.
    #[inline]
    pub fn allocate(&self, bytes: usize) -> Option<HeapBlock<'_>> {
        let size = alloc_size(bytes)?;
        // The end is read before the claim, and a claim succeeds only inside the end it saw:
        // that is what makes moving the top back (`fail_claim`, `clamp_top`) safe.
        let snapshot = self.committed.load(Ordering::Acquire);
        if snapshot & END_FLAGS == 0 && size <= FETCH_ADD_MAX {
            let start = self.top.fetch_add(size, Ordering::Relaxed);
            if start.checked_add(size).is_some_and(|end| end <= snapshot) {
                return self.block(start, size);
            }
            self.fail_claim(start, size, snapshot);
            return None;
        }
        self.allocate_slow(size, snapshot)
    }

    /// Turns a successful claim into a block. Below the committed end, which is published
    /// (the snapshot was read with Acquire after the Release that published it).
    #[inline(always)]
    fn block(&self, start: usize, size: usize) -> Option<HeapBlock<'_>> {
        let words = self.reservation.atomic_words(start, size)?;
        Some(HeapBlock { words })
    }

    /// A `fetch_add` claim `[start, start+size)` ran past the end `snapshot` and moved the top
    /// beyond it. With the expansion lock (tried, never waited for): take the claim back if
    /// nothing was claimed after it and the end has not moved, then clamp. Without it: mark a
    /// clamp pending, which stops every `fetch_add` until someone clamps. Never blocks.
    #[cold]
    #[inline(never)]
    fn fail_claim(&self, start: usize, size: usize, snapshot: usize) {
        let Some(_guard) = self.try_expand_lock() else {
            self.committed.fetch_or(CLAMP_PENDING, Ordering::Relaxed);
            return;
        };
        if self.committed.load(Ordering::Relaxed) & !END_FLAGS == snapshot {
            // The end is the one the claim saw and cannot move (lock held). Every claim made
            // after this one started beyond it, so failed; if the top is still this claim's
            // end, each of them was taken back, and the bytes from `start` are free again.
            let _ = self.top.compare_exchange(
                start.wrapping_add(size),
                start,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        self.clamp_top();
    }

    /// The expansion lock if it is free (a poisoned lock is still usable: it guards no data).
    fn try_expand_lock(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        match self.expand_lock.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Blocks over [`FETCH_ADD_MAX`], and any allocation while the heap is full or a clamp is
    /// pending: clamp if possible, then claim with a compare-and-swap loop that never moves
    /// the top past the end.
    #[cold]
    #[inline(never)]
    fn allocate_slow(&self, size: usize, mut snapshot: usize) -> Option<HeapBlock<'_>> {
        if snapshot & CLAMP_PENDING != 0 {
            // Busy lock: an expansion runs (it clamps when it ends) or another thread clamps.
            let _guard = self.try_expand_lock()?;
            self.clamp_top();
            snapshot = self.committed.load(Ordering::Acquire);
        }
        if snapshot & END_FLAGS != 0 {
            return None;
        }
        let mut top = self.top.load(Ordering::Relaxed);
        loop {
            let end = top.checked_add(size).filter(|&end| end <= snapshot)?;
            match self
                .top
                .compare_exchange_weak(top, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return self.block(top, size),
                Err(now) => top = now,
            }
        }
    }

    /// Moves the top back to the committed end if failed claims left it beyond, clears a
    /// pending clamp, and marks the heap full if the top is at the end. Called with the
    /// expansion lock held, so the end cannot move.
    ///
    /// Safe because every successful claim ended inside a snapshot of the end taken before
    /// it, and the end only grows: no block handed out lies beyond the current end, so none
    /// is handed out twice. The top cannot run away: a thread's `fetch_add` overshoots by at
    /// most [`FETCH_ADD_MAX`] before it clamps or marks a clamp pending (which stops every
    /// `fetch_add`), so the top stays below the end plus 2 × threads × 1 MiB.
    fn clamp_top(&self) {
        let end = self.committed.load(Ordering::Relaxed) & !END_FLAGS;
        let mut top = self.top.load(Ordering::Relaxed);
        while top > end {
            match self
                .top
                .compare_exchange_weak(top, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => top = end,
                Err(now) => top = now,
            }
        }
        if top == end {
            self.committed.fetch_or(HEAP_FULL, Ordering::Relaxed);
        } else {
            self.committed.fetch_and(!HEAP_FULL, Ordering::Relaxed);
        }
        self.committed.fetch_and(!CLAMP_PENDING, Ordering::Relaxed);
    }

    /// A thread-local allocation buffer with the default size ([`Tlab::DEFAULT_SIZE`]).
    pub fn tlab(&self) -> Tlab<'_> {
        self.tlab_with_size(Tlab::DEFAULT_SIZE)
    }

    /// A thread-local allocation buffer that takes `bytes` (rounded up to 8, at least 4 KiB)
    /// from the heap at a time.
    pub fn tlab_with_size(&self, bytes: usize) -> Tlab<'_> {
        let refill = tlab_refill_size(bytes);
        Tlab {
            heap: self,
            buffer: &[],
            used: 0,
            refill,
        }
    }

    /// Commits `bytes` more (rounded up to the heap's page size) and, with `AlwaysPreTouch`,
    /// pretouches them — on the gang if it is free, else on the calling thread, never waiting
    /// for a background pretouch of the initial heap. The new part is published (becomes
    /// allocatable) only once it is committed and pretouched; on any failure it is given back
    /// and the heap keeps its old size and stays usable.
    pub(crate) fn expand(
        self: &Arc<Self>,
        bytes: usize,
        gang: &WorkerGang,
    ) -> Result<usize, HeapError> {
        let _guard = self.expand_lock.lock().unwrap_or_else(|p| p.into_inner());
        // Allocations that failed while the heap was full (and while this expansion ran) may
        // have left the top beyond the old end: reclaim that before the end moves.
        let result = self.expand_locked(bytes, gang);
        self.clamp_top();
        if let Ok(Some(end)) = result {
            self.committed.store(end, Ordering::Release);
            log::debug!(target: "gc+heap", "Expanded heap to {}", format_exact_size(end as u64));
        }
        result.map(|end| end.unwrap_or_else(|| self.stats().committed))
    }

    /// The expansion proper, with `expand_lock` held: the new end (`None`: unchanged).
    fn expand_locked(
        self: &Arc<Self>,
        bytes: usize,
        gang: &WorkerGang,
    ) -> Result<Option<usize>, HeapError> {
        let page = self.config.page_size;
        let old = self.committed.load(Ordering::Acquire) & !END_FLAGS;
        let available = self.config.max - old;
        let grow = bytes
            .checked_add(page - 1)
            .map(|b| b & !(page - 1))
            .filter(|&g| g <= available);
        let Some(grow) = grow else {
            return Err(HeapError::Exhausted {
                requested: bytes,
                available,
            });
        };
        if grow == 0 {
            return Ok(None);
        }
        if self.config.explicit_huge_pages {
            // Committed (on huge pages) since the reservation: pretouch, and move the end.
            if self.config.pretouch {
                self.pretouch_range(gang, old, grow)?;
            }
            return Ok(Some(old + grow));
        }
        self.reservation
            .commit_unpublished(old, grow)
            .map_err(HeapError::Commit)?;
        let made_usable = if self.config.pretouch {
            self.pretouch_range(gang, old, grow).map(|_| ())
        } else {
            Ok(())
        }
        .and_then(|()| {
            self.reservation
                .publish(old, grow)
                .map_err(HeapError::Commit)
        });
        if let Err(e) = made_usable {
            if let Err(u) = self.reservation.uncommit_unpublished(old, grow) {
                log::error!(target: "gc+heap", "Giving back the failed expansion failed: {u}");
            }
            log::info!(target: "gc+heap", "Expansion by {} failed; the heap keeps {}: {e}", format_exact_size(grow as u64), format_exact_size(old as u64));
            return Err(e);
        }
        Ok(Some(old + grow))
    }

    /// Current figures (counters only).
    pub fn stats(&self) -> HeapStats {
        let committed = self.committed.load(Ordering::Acquire) & !END_FLAGS;
        HeapStats {
            reserved: self.reservation.len(),
            committed,
            used: self
                .top
                .load(Ordering::Relaxed)
                .min(committed)
                .saturating_sub(self.config.nursery),
        }
    }

    /// Committed bytes that are resident, measured with `mincore` over the committed heap
    /// (a system call that walks every page: not for a hot path).
    pub fn resident_bytes(&self) -> usize {
        let committed = self.committed.load(Ordering::Acquire) & !END_FLAGS;
        if committed == 0 {
            return 0;
        }
        self.reservation.resident_bytes(0, committed).unwrap_or(0)
    }

    /// Bytes the OS holds committed for the heap: the committed part, or the whole heap on
    /// explicit huge pages (committed at reservation, as HotSpot's "special" memory).
    pub fn os_committed(&self) -> usize {
        if self.config.explicit_huge_pages {
            self.reservation.len()
        } else {
            self.stats().committed
        }
    }

    /// HotSpot's warning when the heap fell back from explicit huge pages (printed by the VM).
    pub(crate) fn large_page_warning(&self) -> Option<&str> {
        self.large_page_warning.as_deref()
    }

    /// The page size backing the heap.
    pub fn page_size(&self) -> usize {
        self.config.page_size
    }

    /// The heap's pages in words: `2M hugetlbfs pages`, `2M transparent huge pages`, `4K
    /// pages`.
    pub fn page_description(&self) -> String {
        self.config.page_description()
    }

    /// The heap's address range (reserved).
    pub fn range(&self) -> std::ops::Range<usize> {
        self.reservation.range()
    }

    /// Runs `f` with the nursery: allocations made through the [`Nursery`] live until `f`
    /// returns, then the nursery is empty again. One nursery scope at a time.
    pub fn with_nursery<R>(&self, f: impl FnOnce(&Nursery<'_>) -> R) -> R {
        let mut top = self.nursery.lock().unwrap_or_else(|p| p.into_inner());
        *top = 0;
        let nursery = Nursery {
            heap: self,
            top: AtomicUsize::new(0),
        };
        let r = f(&nursery);
        *top = 0;
        r
    }
}

/// Set in `Heap::committed` (page-aligned, so its low bits are free) while failed claims may
/// have left the top beyond the committed end and no one could clamp it yet.
const CLAMP_PENDING: usize = 1;

/// Set in `Heap::committed` when a clamp found the top at the end: every allocation fails
/// with one load until an expansion.
const HEAP_FULL: usize = 2;

/// The flag bits of `Heap::committed`.
const END_FLAGS: usize = CLAMP_PENDING | HEAP_FULL;

/// The largest block claimed with `fetch_add`; larger ones take the compare-and-swap path,
/// which never overshoots (this bounds how far failed claims can push the top).
const FETCH_ADD_MAX: usize = 1 << 20;

/// The size an allocation of `bytes` takes: rounded up to 8, at least 8 (so every allocation
/// has a unique address). `None` if that overflows.
#[inline(always)]
pub(crate) fn alloc_size(bytes: usize) -> Option<usize> {
    Some((bytes.checked_add(7)? & !7).max(8))
}

/// A thread-local allocation buffer (HotSpot's TLAB): a piece of the heap taken by one
/// thread, in which allocation is a bounds check and an add — no atomic operation, no
/// shared cache line. When it is used up the next allocation takes a new buffer from the
/// heap (one compare-and-swap); the rest of the old one is not reused (as in HotSpot, a
/// buffer counts as used when taken). Requests larger than half a buffer go to the heap
/// directly.
///
/// A `Tlab` is one thread's cursor: give each thread its own (what it hands out is shareable
/// memory, as every [`HeapBlock`] is).
#[derive(Debug)]
pub struct Tlab<'h> {
    heap: &'h Heap,
    buffer: &'h [std::sync::atomic::AtomicU64],
    /// Words of `buffer` handed out.
    used: usize,
    /// Bytes taken from the heap per refill.
    refill: usize,
}

impl<'h> Tlab<'h> {
    /// The default buffer size: 256 KiB.
    pub const DEFAULT_SIZE: usize = 256 * 1024;

    /// Allocates `bytes` (rounded up to 8; `0` is a unique 8-byte block); `None` when the
    /// heap's committed part is exhausted.
    #[inline(always)]
    pub fn allocate(&mut self, bytes: usize) -> Option<HeapBlock<'h>> {
        let words = alloc_size(bytes)? / 8;
        let end = self.used + words;
        if let Some(words) = self.buffer.get(self.used..end) {
            self.used = end;
            return Some(HeapBlock { words });
        }
        // The slow path takes and returns plain values (never `&mut self`), so the compiler
        // can keep the cursor in registers across an allocation loop.
        match refill_and_allocate(self.heap, self.refill, words * 8) {
            Refilled::Buffer { buffer, used } => {
                self.buffer = buffer;
                self.used = used;
                Some(HeapBlock {
                    words: &buffer[..used],
                })
            }
            Refilled::Direct(block) => block,
        }
    }

    /// Bytes left in the current buffer.
    pub fn remaining(&self) -> usize {
        (self.buffer.len() - self.used) * 8
    }
}

pub(crate) enum Refilled<'h> {
    /// A fresh buffer whose first `used` words are the allocation.
    Buffer {
        buffer: &'h [std::sync::atomic::AtomicU64],
        used: usize,
    },
    /// Too large for a buffer: allocated from the heap directly (or not at all).
    Direct(Option<HeapBlock<'h>>),
}

/// The buffer size a TLAB asked for `bytes` gets: rounded up to 8, at least 4 KiB; 0 (or a
/// size that cannot be rounded) means [`Tlab::DEFAULT_SIZE`].
pub(crate) fn tlab_refill_size(bytes: usize) -> usize {
    match bytes {
        0 => Tlab::DEFAULT_SIZE,
        b => alloc_size(b).unwrap_or(Tlab::DEFAULT_SIZE).max(4096),
    }
}

/// A TLAB's slow path, shared with the C API's inline TLAB: a block of `size` (already
/// rounded) from a fresh buffer of `refill` bytes, or from the heap directly if it is more
/// than half a buffer or no whole buffer is left.
#[cold]
#[inline(never)]
pub(crate) fn refill_and_allocate(heap: &Heap, refill: usize, size: usize) -> Refilled<'_> {
    if size > refill / 2 {
        return Refilled::Direct(heap.allocate(size));
    }
    match heap.allocate(refill) {
        Some(fresh) => Refilled::Buffer {
            buffer: fresh.words,
            used: size / 8,
        },
        // No room for a whole buffer: the block alone may still fit.
        None => Refilled::Direct(heap.allocate(size)),
    }
}

/// The nursery during one [`Heap::with_nursery`] scope.
#[derive(Debug)]
pub struct Nursery<'h> {
    heap: &'h Heap,
    top: AtomicUsize,
}

impl Nursery<'_> {
    /// Allocates `bytes` (rounded up to 8) in the nursery; `None` when it is full.
    pub fn allocate(&self, bytes: usize) -> Option<HeapBlock<'_>> {
        let size = alloc_size(bytes)?;
        let start = self
            .top
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |t| {
                t.checked_add(size)
                    .filter(|&e| e <= self.heap.config.nursery)
            });
        let start = start.ok()?;
        self.heap
            .reservation
            .atomic_words(start, size)
            .map(|words| HeapBlock { words })
    }

    /// Bytes allocated in this scope.
    pub fn used(&self) -> usize {
        self.top.load(Ordering::Relaxed)
    }

    /// The nursery's size (`NewSize`).
    pub fn capacity(&self) -> usize {
        self.heap.config.nursery
    }
}

/// Pretouches `[offset, offset+len)` of `target` on the gang and waits. Never waits for
/// another task (a background pretouch): without a free gang the calling thread pretouches
/// the range alone.
pub(crate) fn pretouch_now(
    target: PretouchTarget,
    gang: &WorkerGang,
    offset: usize,
    len: usize,
) -> Result<PretouchReport, HeapError> {
    let task = Arc::new(PretouchTask::new(target, offset, len, gang.size(), false));
    log_start(&task);
    gang.run_now(Arc::clone(&task) as Arc<dyn GangTask>, task.workers.max(1))
        .map_err(HeapError::Task)?;
    task.finish()
}

pub(crate) fn log_start(task: &PretouchTask) {
    let target = task.target.log_target();
    if task.workers == 0 {
        log::debug!(target: target, "Running PreTouch task pre-touching {}B{}.", task.len, task.target.what());
    } else {
        log::debug!(
            target: target,
            "Running PreTouch task with {} workers for {} work units pre-touching {}B{}.",
            task.workers,
            task.units,
            task.len,
            task.target.what()
        );
    }
}

/// What a pretouch task makes resident: the heap, or memory an embedder mapped through the
/// VM ([`VmMemory`](crate::VmMemory)).
#[derive(Debug)]
pub(crate) enum PretouchTarget {
    Heap(Arc<Heap>),
    Memory(Arc<crate::memory::MemoryInner>),
}

impl PretouchTarget {
    fn reservation(&self) -> &Reservation {
        match self {
            PretouchTarget::Heap(h) => &h.reservation,
            PretouchTarget::Memory(m) => &m.reservation,
        }
    }

    fn request(&self) -> &PretouchRequest {
        match self {
            PretouchTarget::Heap(h) => &h.config.request,
            PretouchTarget::Memory(m) => &m.request,
        }
    }

    fn page_size(&self) -> usize {
        match self {
            PretouchTarget::Heap(h) => h.config.page_size,
            PretouchTarget::Memory(m) => m.page_size,
        }
    }

    fn chunk_size(&self) -> usize {
        match self {
            PretouchTarget::Heap(h) => h.config.chunk_size,
            PretouchTarget::Memory(m) => m.chunk_size,
        }
    }

    /// The `-Xlog` tag set: the heap's is `gc+heap`, an embedder's memory is `os`'s.
    fn log_target(&self) -> &'static str {
        match self {
            PretouchTarget::Heap(_) => "gc+heap",
            PretouchTarget::Memory(_) => "os",
        }
    }

    /// What is pretouched, for log lines: nothing for the heap (HotSpot's words).
    fn what(&self) -> String {
        match self {
            PretouchTarget::Heap(_) => String::new(),
            PretouchTarget::Memory(m) => {
                format!(" of {} [{:#x}]", m.category, m.reservation.base())
            }
        }
    }

    /// Holds apply to the heap's background pretouch.
    fn enter_chunk(&self) -> Option<ActiveChunk<'_>> {
        match self {
            PretouchTarget::Heap(h) => Some(h.enter_chunk()),
            PretouchTarget::Memory(_) => None,
        }
    }
}

/// Chunked pretouch of `[offset, offset+len)`: workers claim chunks from an atomic cursor.
#[derive(Debug)]
pub(crate) struct PretouchTask {
    target: PretouchTarget,
    offset: usize,
    len: usize,
    chunk: usize,
    units: usize,
    workers: usize,
    cursor: AtomicUsize,
    done: AtomicUsize,
    fallback_used: std::sync::atomic::AtomicBool,
    error: Mutex<Option<OsError>>,
    start: Instant,
    last_progress_ms: AtomicU64,
    /// Workers still in `work`; the last one out records the end and logs it.
    workers_left: AtomicUsize,
    background: bool,
    finished_at: Mutex<Option<Duration>>,
}

/// Chunk size for a pretouch: `PreTouchParallelChunkSize` aligned down to the page size,
/// never below one page.
pub(crate) fn chunk_size(requested: usize, page_size: usize) -> usize {
    (requested & !(page_size - 1)).max(page_size)
}

/// Work units and workers for `len` bytes: `units = ceil(len / chunk)`,
/// `workers = min(units, gang size)`.
pub(crate) fn plan(len: usize, chunk: usize, gang: usize) -> (usize, usize) {
    let units = if len == 0 { 0 } else { (len - 1) / chunk + 1 };
    (units, units.min(gang))
}

impl PretouchTask {
    pub(crate) fn new(
        target: PretouchTarget,
        offset: usize,
        len: usize,
        gang: usize,
        background: bool,
    ) -> PretouchTask {
        let chunk = chunk_size(target.chunk_size(), target.page_size());
        let (units, workers) = plan(len, chunk, gang);
        PretouchTask {
            target,
            offset,
            len,
            chunk,
            units,
            workers,
            cursor: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            fallback_used: std::sync::atomic::AtomicBool::new(false),
            error: Mutex::new(None),
            start: Instant::now(),
            last_progress_ms: AtomicU64::new(0),
            // With an empty gang the task runs once, on the caller.
            workers_left: AtomicUsize::new(workers.max(1)),
            background,
            finished_at: Mutex::new(None),
        }
    }

    fn progress(&self) {
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
                target: self.target.log_target(),
                "PreTouch progress{}: {}B of {}B ({:.0}%) after {:.3}s",
                self.target.what(),
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
            rtvm_os_linux::pretouch::primitive_for(self.target.request())
        }
    }

    /// Called by the last worker to leave: records the end and logs it, at the moment the
    /// pretouch completes (also for a background pretouch nobody waits for).
    fn complete(&self) {
        let elapsed = self.start.elapsed();
        *self.finished_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(elapsed);
        if let Some(e) = self
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            log::error!(target: self.target.log_target(), "PreTouch{} failed after {:.3}s: {e}", self.target.what(), elapsed.as_secs_f64());
            return;
        }
        log::info!(
            target: self.target.log_target(),
            "Pretouched {}B{} in {:.3}s ({:.2} GB/s) with {} workers, chunk {}, {}, page size {}",
            self.len,
            self.target.what(),
            elapsed.as_secs_f64(),
            self.len as f64 / elapsed.as_secs_f64().max(1e-9) / 1e9,
            self.workers,
            format_exact_size(self.chunk as u64),
            self.primitive(),
            format_page_size(self.target.page_size() as u64)
        );
        if self.background {
            log::info!(target: self.target.log_target(), "Background pretouch{} completed", self.target.what());
        }
    }

    /// The report, or the first error, once every worker has left.
    /// Workers the task runs on.
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    pub(crate) fn finish(&self) -> Result<PretouchReport, HeapError> {
        if let Some(e) = self.error.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(HeapError::Pretouch(e));
        }
        let elapsed = self
            .finished_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or_else(|| self.start.elapsed());
        Ok(PretouchReport {
            bytes: self.len,
            elapsed,
            workers: self.workers,
            chunk: self.chunk,
            primitive: self.primitive(),
        })
    }
}

impl GangTask for PretouchTask {
    fn work(&self, _worker_id: usize) {
        loop {
            // Held here before each chunk; counted active until the iteration ends.
            let _active = self.background.then(|| self.target.enter_chunk()).flatten();
            let start = self.cursor.fetch_add(self.chunk, Ordering::Relaxed);
            if start >= self.len {
                break;
            }
            let n = self.chunk.min(self.len - start);
            match self
                .target
                .reservation()
                .pretouch(self.offset + start, n, self.target.request())
            {
                Ok(p) => {
                    if p.primitive == Primitive::AtomicAdd {
                        self.fallback_used.store(true, Ordering::Relaxed);
                    }
                    self.done.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => {
                    let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
                    slot.get_or_insert(e);
                    // Stop everyone: the VM creation (or expansion) fails anyway.
                    self.cursor.store(self.len, Ordering::Relaxed);
                    break;
                }
            }
            self.progress();
        }
        if self.workers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.complete();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_and_plan_formulas() {
        const K: usize = 1024;
        const M: usize = K * K;
        assert_eq!(chunk_size(4 * M, 4 * K), 4 * M);
        assert_eq!(chunk_size(4 * K, 2 * M), 2 * M, "never below one page");
        assert_eq!(
            chunk_size(5 * M, 2 * M),
            4 * M,
            "aligned down to the page size"
        );
        assert_eq!(plan(256 * M, 4 * M, 2), (64, 2));
        assert_eq!(
            plan(256 * M, 1024 * M, 2),
            (1, 1),
            "a chunk larger than the heap"
        );
        assert_eq!(plan(10 * M, 4 * M, 8), (3, 3));
        assert_eq!(plan(0, 4 * M, 2), (0, 0));
        assert_eq!(plan(256 * M, 4 * M, 0), (64, 0));
    }
}
