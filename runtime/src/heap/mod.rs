//! The heap: `MaxHeapSize` reserved, `InitialHeapSize` committed, optionally advised for
//! transparent huge pages (or backed by explicit huge pages) and pretouched — in parallel
//! chunks on the worker gang, and with `-XX:+BackgroundPreTouch` while the application
//! already runs.
//!
//! The embedder allocates from it with a thread-safe bump allocator ([`Heap::allocate`],
//! `alloc`), from thread-local buffers ([`Tlab`], `tlab`) and from the nursery ([`Nursery`],
//! `nursery`); grows it with [`VmHandle::expand_heap`](crate::VmHandle::expand_heap) (commit,
//! and pretouch with `AlwaysPreTouch`, through the pretouch engine's one growth routine) and
//! shrinks it with [`Heap::shrink`] (`resize`, both); and reads [`Heap::stats`]. Memory handed out is committed and stays mapped until the VM is
//! dropped; it may be written while a pretouch runs, because neither pretouch primitive
//! changes a byte (JDK-8272807).

mod alloc;
mod nursery;
mod resize;
mod tlab;

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use rtvm_flags::value::format_exact_size;
use rtvm_os_linux::{HugePageAdvice, OsError, Reservation};

use crate::policy::{HeapPolicy, MemoryPolicy};
use crate::pretouch::{
    self, Background, Gate, GrowError, Label, PretouchError, PretouchHold, PretouchReport, Target,
};
use crate::workers::{TaskPanicked, WorkerGang};

pub(crate) use alloc::alloc_size;
use alloc::{BumpSpace, Full};
pub use nursery::Nursery;
pub use tlab::Tlab;
pub(crate) use tlab::{refill_and_allocate, tlab_refill_size, Refilled};

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
        #[source]
        os: OsError,
    },
    /// Committing failed; the heap keeps its previous size.
    #[error("{0}")]
    Commit(#[source] OsError),
    /// Pretouching failed; the message names the range that was not made resident.
    #[error("{0}")]
    Pretouch(#[source] OsError),
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
    Task(#[source] TaskPanicked),
    /// A shrink that cannot be done; nothing changed.
    #[error("cannot shrink the heap to {target} bytes: {reason}")]
    Shrink {
        /// The committed size asked for.
        target: usize,
        /// Why not.
        reason: String,
    },
}

impl From<PretouchError> for HeapError {
    fn from(e: PretouchError) -> HeapError {
        match e {
            PretouchError::Os(os) => HeapError::Pretouch(os),
            PretouchError::Panicked(p) => HeapError::Task(p),
        }
    }
}

impl From<GrowError> for HeapError {
    fn from(e: GrowError) -> HeapError {
        match e {
            GrowError::Commit(os) => HeapError::Commit(os),
            GrowError::Pretouch(p) => p.into(),
        }
    }
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
    /// The nursery (`-Xmn`/`NewSize`) at the committed heap's low end, allocated through
    /// [`Heap::with_nursery`] only (0 without one).
    pub nursery: usize,
}

/// A block of heap memory handed to the embedder.
#[derive(Clone, Copy, Debug)]
pub struct HeapBlock<'a> {
    words: &'a [AtomicU64],
}

impl<'a> HeapBlock<'a> {
    /// The block as 64-bit atomic words (safe to share between threads).
    pub fn words(&self) -> &'a [AtomicU64] {
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

/// Why an allocation failed: the figures the allocator saw when it gave up (not read again
/// afterwards, when other threads may have changed them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AllocFailure {
    /// Bytes asked for.
    pub requested: usize,
    /// Bytes handed out below the allocation top (the nursery and free gaps left out).
    pub used: usize,
    /// The committed size.
    pub committed: usize,
    /// Bytes between the allocation top and the committed end: fewer than asked for.
    pub free_at_end: usize,
    /// The largest gap below the top that failed allocations left behind others (smaller
    /// than asked for; 0 almost always).
    pub largest_gap: usize,
    /// The nursery at the heap's low end (`-Xmn`), never handed out by the shared path.
    pub nursery: usize,
}

/// The heap.
#[derive(Debug)]
pub struct Heap {
    reservation: Arc<Reservation>,
    /// The allocator over `[nursery, committed)`.
    space: BumpSpace,
    /// Serializes expansions and shrinks, across their system calls (allocation never takes
    /// it).
    resize: Mutex<()>,
    /// The background pretouch skips what lies at or above this offset: a shrink lowers it
    /// before it gives pages back (so the pretouch does not make them resident again), an
    /// expansion raises it.
    pretouch_limit: Arc<AtomicUsize>,
    /// Sizes, as decided.
    policy: HeapPolicy,
    /// The page size backing the heap (and its alignment).
    page_size: usize,
    /// Committed whole at reservation, on hugetlbfs pages (HotSpot's "special" memory).
    explicit: bool,
    page_description: String,
    /// Pretouching, and how the pretouch names the heap.
    target: Target,
    /// One nursery scope at a time.
    nursery: Mutex<()>,
    /// Holds on the background pretouch ([`Heap::hold_pretouch`]).
    gate: Arc<Gate>,
    background: Mutex<Option<Background>>,
    /// The report of the synchronous initial pretouch, if one ran.
    initial_report: Mutex<Option<PretouchReport>>,
}

impl Heap {
    /// Reserves `MaxHeapSize`, commits `InitialHeapSize`, advises huge pages if the policy
    /// says so and names the mapping. Pretouching is started separately
    /// ([`Heap::pretouch_initial`]). `warn` prints a HotSpot warning where java prints it
    /// (before the heap's `-Xlog:pagesize` line).
    pub(crate) fn reserve(
        policy: &HeapPolicy,
        memory: &MemoryPolicy,
        warn: &dyn Fn(&str),
    ) -> Result<Heap, HeapError> {
        let base_page = rtvm_os_linux::base_page_size();
        let max = policy.max;
        let mut pages = memory.pages;
        let mut special = None;
        if let Some(explicit) = policy.explicit {
            let size = explicit.page_size;
            match Reservation::reserve_huge_pages(max, size) {
                Ok(r) => {
                    special = Some(r);
                    pages.page_size = size;
                }
                Err(e) => {
                    // As HotSpot: not enough huge pages for the whole heap — regular pages,
                    // with its warning (explicit pages are used only when the user asked).
                    log::debug!(target: "gc+heap+coops", "Reserve regular memory without large pages");
                    log::info!(target: "pagesize", "Failed to reserve and commit the heap on {} pages: {e}", format_exact_size(size as u64));
                    warn(&format!(
                        "Failed to reserve and commit memory. req_addr: {:#018x} bytes: {max} page size: {size} (errno = {}).",
                        0,
                        e.errno as i32
                    ));
                    pages.page_size = base_page;
                }
            }
        }
        let explicit = special.is_some();
        let page_size = pages.page_size;
        let mut reservation = match special {
            Some(r) => r,
            None => Reservation::reserve(max, page_size)
                .map_err(|os| HeapError::Reserve { bytes: max, os })?,
        };
        reservation.set_name("rtvm heap");
        if pages.advise_huge {
            reservation
                .advise(0, max, HugePageAdvice::HugePage)
                .map_err(HeapError::Commit)?;
        }
        // Explicit huge pages are committed whole at reservation.
        if policy.initial > 0 && !explicit {
            reservation
                .commit(0, policy.initial)
                .map_err(HeapError::Commit)?;
        }
        let page_description = if explicit {
            format!("{} hugetlbfs pages", format_exact_size(page_size as u64))
        } else {
            pages.description()
        };
        let base = reservation.base();
        log::info!(
            target: "pagesize",
            "Heap:  min={} max={} base={base:#018x} page_size={} size={}",
            format_exact_size(policy.min as u64),
            format_exact_size(max as u64),
            format_exact_size(page_size as u64),
            format_exact_size(max as u64)
        );
        log::info!(
            target: "gc+heap",
            "Heap reserved [{base:#018x} - {:#018x}) {}, {} committed, on {page_description}",
            base + max,
            format_exact_size(max as u64),
            format_exact_size(if explicit { max } else { policy.initial } as u64),
        );
        log::debug!(
            target: "gc+heap",
            "Minimum heap {}  Initial heap {}  Maximum heap {}",
            policy.min,
            policy.initial,
            max
        );
        let reservation = Arc::new(reservation);
        Ok(Heap {
            space: BumpSpace::new(policy.nursery, policy.initial),
            resize: Mutex::new(()),
            pretouch_limit: Arc::new(AtomicUsize::new(policy.initial)),
            target: Target {
                reservation: Arc::clone(&reservation),
                page_size,
                plan: memory.pretouch,
                label: Label {
                    tag: "gc+heap",
                    what: String::new(),
                },
            },
            reservation,
            policy: *policy,
            page_size,
            explicit,
            page_description,
            nursery: Mutex::new(()),
            gate: Gate::new(),
            background: Mutex::new(None),
            initial_report: Mutex::new(None),
        })
    }

    /// The reserved range's first address.
    pub fn base(&self) -> usize {
        self.reservation.base()
    }

    /// Pretouches the initially committed part: synchronously, or — with background
    /// pretouch — started on the gang and left running.
    pub(crate) fn pretouch_initial(&self, gang: &WorkerGang) -> Result<(), HeapError> {
        let len = self.space.end();
        let plan = &self.target.plan;
        if !plan.enabled || len == 0 {
            return Ok(());
        }
        if plan.background && gang.size() > 0 {
            if self.policy.hold_background {
                self.gate.hold_initial();
                log::info!(target: "gc+heap", "Background pretouch held until the embedder releases it (HoldBackgroundPreTouch)");
            }
            let bg = Background::start(
                &self.target,
                0..len,
                gang,
                Some(Arc::clone(&self.gate)),
                Some(Arc::clone(&self.pretouch_limit)),
            );
            log::info!(target: "gc+heap", "Background pretouch started: {} on {} workers", format_exact_size(len as u64), bg.workers());
            *crate::safepoint::lock(&self.background) = Some(bg);
            return Ok(());
        }
        if plan.background {
            log::info!(target: "gc+heap", "BackgroundPreTouch needs a worker thread (ParallelGCThreads=0): pretouching synchronously");
        }
        let report = pretouch::run(&self.target, 0..len, Some(gang))?;
        *crate::safepoint::lock(&self.initial_report) = Some(report);
        Ok(())
    }

    /// What the synchronous initial pretouch did (`None` without `AlwaysPreTouch`, or while
    /// a background pretouch runs: see [`wait_for_pretouch`](Heap::wait_for_pretouch)).
    pub fn initial_pretouch(&self) -> Option<PretouchReport> {
        *crate::safepoint::lock(&self.initial_report)
    }

    /// Holds the background pretouch: its workers stop before their next chunk until the
    /// returned hold is dropped (an embedder's latency-critical phase; a test's handshake).
    /// Only the background pretouch is held — a synchronous pretouch (start-up without
    /// `BackgroundPreTouch`, an expansion) never waits, so a thread holding the pretouch
    /// cannot block itself.
    pub fn hold_pretouch(&self) -> PretouchHold {
        self.gate.hold()
    }

    /// Releases the start-up hold of `-XX:+HoldBackgroundPreTouch`; `false` if there was none
    /// (not asked for, or released already).
    pub fn release_pretouch(&self) -> bool {
        let released = self.gate.release_initial();
        if released {
            log::info!(target: "gc+heap", "Background pretouch released");
        }
        released
    }

    /// Ends every hold for good: the VM shuts down and waits for the pretouch.
    pub(crate) fn end_holds(&self) {
        self.gate.close();
    }

    /// Whether a background pretouch is still running.
    pub fn background_pretouch_running(&self) -> bool {
        let bg = crate::safepoint::lock(&self.background);
        bg.as_ref().is_some_and(|b| !b.is_done())
    }

    /// Waits for a background pretouch, if one was started, and returns its outcome (once;
    /// later calls return `Ok(None)`). A held pretouch is waited for until it is released
    /// (or the VM shuts down): this waits for the pretouch itself. While it waits the
    /// pretouch still counts as running.
    pub fn wait_for_pretouch(&self) -> Result<Option<PretouchReport>, HeapError> {
        let bg = crate::safepoint::lock(&self.background).clone();
        let Some(bg) = bg else {
            return Ok(None);
        };
        let outcome = bg.wait();
        // The first waiter to come back reports it.
        match crate::safepoint::lock(&self.background).take() {
            Some(_) => Ok(Some(outcome?)),
            None => Ok(None),
        }
    }

    /// Progress of a background pretouch: `(bytes done, bytes total)`, or `None` if none runs
    /// (a test tool: the handshake of the background-pretouch tests).
    #[cfg(feature = "testing")]
    pub fn pretouch_progress(&self) -> Option<(usize, usize)> {
        let bg = crate::safepoint::lock(&self.background);
        bg.as_ref().map(Background::progress)
    }

    /// Allocates `bytes` (rounded up to 8; `0` is a unique 8-byte block) from the committed
    /// part, from any thread, without a lock: one `fetch_add` on the heap's top in the common
    /// case (blocks over 1 MiB: a compare-and-swap loop). `None` when the committed part
    /// cannot hold the block — as cheap as a success (no system call; two loads once the heap
    /// is full): [`expand_heap`](crate::VmHandle::expand_heap) first. A thread that allocates
    /// a lot takes a [`Tlab`].
    ///
    /// Expansions and shrinks never make an allocation fail that the heap they leave can
    /// hold. Only when failed allocations race with each other near the end of the committed
    /// part may one of them fail that would fit once the others have given their room back.
    #[inline]
    pub fn allocate(&self, bytes: usize) -> Option<HeapBlock<'_>> {
        let size = alloc_size(bytes)?;
        let start = self.space.claim(size)?;
        self.block(start, size)
    }

    /// [`allocate`](Heap::allocate), saying why on failure: the figures the allocator saw
    /// when it gave up (the C API's message).
    pub(crate) fn allocate_or_explain(&self, bytes: usize) -> Result<HeapBlock<'_>, AllocFailure> {
        let explain = |full: Full| self.failure(bytes, full);
        let Some(size) = alloc_size(bytes) else {
            let end = self.space.end();
            return Err(explain(Full {
                top: end,
                end,
                largest_free: 0,
            }));
        };
        match self.space.claim_explained(size) {
            Ok(start) => self.block(start, size).ok_or_else(|| {
                // Never: a claim lies below the published end.
                let end = self.space.end();
                explain(Full {
                    top: end,
                    end,
                    largest_free: 0,
                })
            }),
            Err(full) => Err(explain(full)),
        }
    }

    fn failure(&self, requested: usize, full: Full) -> AllocFailure {
        let nursery = self.policy.nursery;
        AllocFailure {
            requested,
            used: full
                .top
                .saturating_sub(nursery)
                .saturating_sub(self.space.gap_bytes()),
            committed: full.end,
            free_at_end: full.end - full.top,
            largest_gap: full.largest_free,
            nursery,
        }
    }

    /// Turns a claim into a block. Below the committed end, which is published (the claim
    /// read the end with Acquire after the Release that published it).
    #[inline(always)]
    fn block(&self, start: usize, size: usize) -> Option<HeapBlock<'_>> {
        let words = self.reservation.atomic_words(start, size)?;
        Some(HeapBlock { words })
    }

    /// A thread-local allocation buffer with the default size ([`Tlab::DEFAULT_SIZE`]).
    pub fn tlab(&self) -> Tlab<'_> {
        self.tlab_with_size(Tlab::DEFAULT_SIZE)
    }

    /// A thread-local allocation buffer that takes `bytes` (rounded up to 8, at least 4 KiB)
    /// from the heap at a time.
    pub fn tlab_with_size(&self, bytes: usize) -> Tlab<'_> {
        Tlab::new(self, bytes)
    }

    /// Current figures (counters only).
    pub fn stats(&self) -> HeapStats {
        HeapStats {
            reserved: self.reservation.len(),
            committed: self.space.end(),
            used: self.space.used_top().saturating_sub(self.policy.nursery),
            nursery: self.policy.nursery,
        }
    }

    /// Committed bytes that are resident, measured with `mincore` over the committed heap
    /// (a system call that walks every page: not for a hot path).
    pub fn resident_bytes(&self) -> usize {
        match self.space.end() {
            0 => 0,
            committed => self.reservation.resident_bytes(0, committed).unwrap_or(0),
        }
    }

    /// Bytes the OS holds committed for the heap: the committed part, or the whole heap on
    /// explicit huge pages (committed at reservation, as HotSpot's "special" memory).
    pub(crate) fn os_committed(&self) -> usize {
        if self.explicit {
            self.reservation.len()
        } else {
            self.space.end()
        }
    }

    /// The page size backing the heap.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The heap's pages in words: `2M hugetlbfs pages`, `2M transparent huge pages`, `4K
    /// pages`.
    pub fn page_description(&self) -> &str {
        &self.page_description
    }

    /// The heap's address range (reserved).
    pub fn range(&self) -> std::ops::Range<usize> {
        self.reservation.range()
    }

    /// Runs `f` with the nursery: allocations made through the [`Nursery`] live until `f`
    /// returns, then the nursery is empty again. One nursery scope at a time.
    pub fn with_nursery<R>(&self, f: impl FnOnce(&Nursery<'_>) -> R) -> R {
        let _scope = crate::safepoint::lock(&self.nursery);
        let nursery = Nursery::new(self, self.policy.nursery);
        let r = f(&nursery);
        let used = nursery.used();
        // Everything the scope allocated is dead: its pages go back to the kernel (they read
        // as zero when the next scope touches them). Not on explicit huge pages, which are
        // committed whole and stay so.
        if used > 0 && !self.explicit {
            let len = used
                .next_multiple_of(rtvm_os_linux::base_page_size())
                .min(self.policy.nursery);
            // The blocks of the scope borrowed it and are gone; nothing else is allocated in
            // the nursery's range.
            if let Err(e) = self.reservation.discard(0, len) {
                log::debug!(target: "gc+heap", "The nursery's pages were not given back: {e}");
            }
        }
        r
    }
}
