//! The heap: `MaxHeapSize` reserved, `InitialHeapSize` committed, optionally advised for
//! transparent huge pages (or backed by explicit huge pages) and pretouched — in parallel
//! chunks on the worker gang, and with `-XX:+BackgroundPreTouch` while the application
//! already runs.
//!
//! The embedder allocates from it with a thread-safe bump allocator ([`Heap::allocate`],
//! `alloc`), from thread-local buffers ([`Tlab`], `tlab`) and from the nursery ([`Nursery`],
//! `nursery`); grows it with [`VmHandle::expand_heap`](crate::VmHandle::expand_heap) (commit,
//! and pretouch with `AlwaysPreTouch`, through the pretouch engine's one growth routine); and
//! reads [`Heap::stats`]. Memory handed out is committed and stays mapped until the VM is
//! dropped; it may be written while a pretouch runs, because neither pretouch primitive
//! changes a byte (JDK-8272807).

mod alloc;
mod nursery;
mod tlab;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rtvm_flags::value::format_exact_size;
use rtvm_os_linux::{HugePageAdvice, OsError, Reservation};

use crate::policy::{HeapPolicy, MemoryPolicy};
use crate::pretouch::{
    self, Background, Gate, GrowError, Label, PretouchError, PretouchHold, PretouchReport, Target,
};
use crate::workers::{TaskPanicked, WorkerGang};

pub(crate) use alloc::alloc_size;
use alloc::BumpSpace;
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

/// The heap.
#[derive(Debug)]
pub struct Heap {
    reservation: Arc<Reservation>,
    /// The allocator over `[nursery, committed)`.
    space: BumpSpace,
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
            *self.background.lock().unwrap_or_else(|p| p.into_inner()) = Some(bg);
            return Ok(());
        }
        if plan.background {
            log::info!(target: "gc+heap", "BackgroundPreTouch needs a worker thread (ParallelGCThreads=0): pretouching synchronously");
        }
        let report = pretouch::run(&self.target, 0..len, Some(gang))?;
        *self
            .initial_report
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(report);
        Ok(())
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
        let bg = self.background.lock().unwrap_or_else(|p| p.into_inner());
        bg.as_ref().is_some_and(|b| !b.is_done())
    }

    /// Waits for a background pretouch, if one was started, and returns its outcome (once;
    /// later calls return `Ok(None)`). A held pretouch is waited for until it is released
    /// (or the VM shuts down): this waits for the pretouch itself. While it waits the
    /// pretouch still counts as running.
    pub fn wait_for_pretouch(&self) -> Result<Option<PretouchReport>, HeapError> {
        let bg = self
            .background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(bg) = bg else {
            return Ok(None);
        };
        let outcome = bg.wait();
        // The first waiter to come back reports it.
        match self
            .background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(_) => Ok(Some(outcome?)),
            None => Ok(None),
        }
    }

    /// Progress of a background pretouch: `(bytes done, bytes total)`, or `None` if none runs
    /// (a test tool: the handshake of the background-pretouch tests).
    #[cfg(feature = "testing")]
    pub fn pretouch_progress(&self) -> Option<(usize, usize)> {
        let bg = self.background.lock().unwrap_or_else(|p| p.into_inner());
        bg.as_ref().map(Background::progress)
    }

    /// Allocates `bytes` (rounded up to 8; `0` is a unique 8-byte block) from the committed
    /// part, from any thread, without a lock: one `fetch_add` on the heap's top in the common
    /// case (blocks over 1 MiB: a compare-and-swap loop). `None` when the committed part
    /// cannot hold the block — as cheap as a success (no system call, never blocking; one
    /// load once the heap is full): [`expand_heap`](crate::VmHandle::expand_heap) first. A
    /// thread that allocates a lot takes a [`Tlab`].
    ///
    /// Only when failed allocations race with each other near the end of the committed part
    /// may the last bytes before the end stay unused until the next expansion.
    #[inline]
    pub fn allocate(&self, bytes: usize) -> Option<HeapBlock<'_>> {
        let size = alloc_size(bytes)?;
        let start = self.space.claim(size)?;
        self.block(start, size)
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

    /// Commits `bytes` more (rounded up to the heap's page size) and, with `AlwaysPreTouch`,
    /// pretouches them — on the gang if it is free, else on the calling thread, never waiting
    /// for a background pretouch of the initial heap. The new part is published (becomes
    /// allocatable) only once it is committed and pretouched; on any failure it is given back
    /// and the heap keeps its old size and stays usable. Returns the committed size.
    pub(crate) fn expand(&self, bytes: usize, gang: &WorkerGang) -> Result<usize, HeapError> {
        let page = self.page_size;
        self.space.expand(|old| {
            let available = self.policy.max - old;
            let grow = bytes
                .checked_add(page - 1)
                .map(|b| b & !(page - 1))
                .filter(|&g| g <= available)
                .ok_or(HeapError::Exhausted {
                    requested: bytes,
                    available,
                })?;
            if grow == 0 {
                return Ok(None);
            }
            let range = old..old + grow;
            // What lies below the mapped end is committed already: on huge pages since the
            // reservation, or a part whose pages a shrink gave back (still mapped). That part
            // is pretouched; the rest is committed, pretouched and published.
            let mapped = if self.explicit {
                self.policy.max
            } else {
                self.reservation.committed_bytes()
            };
            let split = range.end.min(mapped.max(range.start));
            let remapped = match (self.target.plan.enabled, split > range.start) {
                (true, true) => pretouch::run(&self.target, range.start..split, Some(gang))
                    .map(|_| ())
                    .map_err(HeapError::from),
                _ => Ok(()),
            };
            let grown = remapped.and_then(|()| {
                if split < range.end {
                    pretouch::grow(&self.target, split..range.end, Some(gang))
                        .map(|_| ())
                        .map_err(HeapError::from)
                } else {
                    Ok(())
                }
            });
            if let Err(e) = grown {
                log::info!(target: "gc+heap", "Expansion by {} failed; the heap keeps {}: {e}", format_exact_size(grow as u64), format_exact_size(old as u64));
                return Err(e);
            }
            log::debug!(target: "gc+heap", "Expanded heap to {}", format_exact_size((old + grow) as u64));
            self.pretouch_limit.store(old + grow, Ordering::SeqCst);
            Ok(Some(old + grow))
        })
    }

    /// Current figures (counters only).
    pub fn stats(&self) -> HeapStats {
        HeapStats {
            reserved: self.reservation.len(),
            committed: self.space.end(),
            used: self.space.top().saturating_sub(self.policy.nursery),
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
        let _scope = self.nursery.lock().unwrap_or_else(|p| p.into_inner());
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

    /// Gives committed memory above what is allocated back to the kernel: the committed part
    /// shrinks to `target` bytes (rounded up to the heap's page size) and the pages above it
    /// are returned (`MADV_DONTNEED`: RSS and the heap's committed figures drop; the range
    /// stays mapped, so the kernel's commit charge for it stays, and no allocation ever races
    /// a change of protection). An expansion makes it usable again (pretouched anew with
    /// `AlwaysPreTouch`). Refused, with nothing
    /// changed, below what is allocated, below `MinHeapSize` and on explicit huge pages (they
    /// are committed whole). A background pretouch is neither waited for nor held
    /// responsible: it skips the part given back (a chunk in flight there is let finish
    /// first), held or not. Safe while other threads allocate (a block handed out is never
    /// given back; an allocation racing the shrink waits for it and then sees the new end)
    /// and expand (one waits for the other). Returns the committed size.
    pub fn shrink(&self, target: usize) -> Result<usize, HeapError> {
        let refuse = |reason: String| HeapError::Shrink { target, reason };
        if self.explicit {
            return Err(refuse(format!(
                "the heap is on {}, committed whole",
                self.page_description
            )));
        }
        let page = self.page_size;
        let new_end = target
            .checked_next_multiple_of(page)
            .ok_or_else(|| refuse("the size overflows".into()))?;
        if new_end < self.policy.min {
            return Err(refuse(format!("MinHeapSize is {} bytes", self.policy.min)));
        }
        let before = self.space.end();
        let result = self.space.shrink(
            |used, _end| {
                if used > new_end {
                    return Err(refuse(format!("{used} bytes are allocated")));
                }
                Ok(Some(new_end))
            },
            |new, old| {
                // Nothing in [new, old) was handed out (the space's shrink stopped claims and
                // found the top at or below `new`), and no claim reaches it until an
                // expansion moves the end again: its pages can go — once the background
                // pretouch skips them (a chunk in flight finishes first; never a hold).
                self.pretouch_limit.store(new, Ordering::SeqCst);
                self.gate.wait_idle();
                self.reservation.discard(new, old - new).map_err(|e| {
                    self.pretouch_limit.store(old, Ordering::SeqCst);
                    HeapError::Commit(e)
                })
            },
        );
        match &result {
            Ok(after) if *after < before => log::info!(
                target: "gc+heap",
                "Heap shrunk from {} to {}: {} given back",
                format_exact_size(before as u64),
                format_exact_size(*after as u64),
                format_exact_size((before - after) as u64)
            ),
            Ok(_) => {
                log::debug!(target: "gc+heap", "Heap shrink to {}: nothing to give back", format_exact_size(new_end as u64))
            }
            Err(e) => log::info!(target: "gc+heap", "Heap shrink refused: {e}"),
        }
        result
    }
}
