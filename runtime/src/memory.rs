//! Memory an embedder maps through the VM for data of its own — a language runtime's linear
//! memories, arenas, code — with the VM's policies: reserved with guard regions, committed as
//! it grows, pretouched (`-XX:+AlwaysPreTouch`, in the background with
//! `-XX:+BackgroundPreTouch`) and advised for transparent huge pages
//! (`-XX:+UseTransparentHugePages`) as the heap is — the same [`MemoryPolicy`] value, decided
//! once by ergonomics — logged under `os`, and counted by NMT in a category of the embedder's
//! naming.
//!
//! A memory holds the worker gang weakly (never the VM): it outlives its VM, and a growth
//! after the VM is gone is pretouched by the calling thread.
//!
//! ```no_run
//! use rtvm::{InitArgs, MemoryRequest, Vm};
//!
//! let vm = Vm::create(InitArgs::new(["-XX:+AlwaysPreTouch"]))?;
//! // 4 GiB the memory may grow into, 2 GiB of guard behind it, 64 KiB usable now.
//! let mut memory = vm.reserve_memory(
//!     MemoryRequest::new("Wasm Memory", 4 << 30).guard(2 << 30).initial(64 << 10),
//! )?;
//! memory.grow_to(1 << 20)?;
//! assert_eq!(memory.size(), 1 << 20);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rtvm_flags::value::format_exact_size;
use rtvm_os_linux::{base_page_size, HugePageAdvice, OsError, Reservation};

use crate::nmt::MemoryDetail;
use crate::policy::MemoryPolicy;
use crate::pretouch::{self, Background, GrowError, Label, PretouchError, PretouchReport, Target};
use crate::workers::{TaskPanicked, WorkerGang};

/// What an embedder asks [`VmHandle::reserve_memory`](crate::VmHandle::reserve_memory) for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRequest {
    category: String,
    capacity: usize,
    guard: usize,
    initial: usize,
}

impl MemoryRequest {
    /// `capacity` bytes the memory can grow into in place, counted by NMT under `category`
    /// (e.g. `"Wasm Memory"`); no guard and nothing usable until set.
    pub fn new(category: impl Into<String>, capacity: usize) -> MemoryRequest {
        MemoryRequest {
            category: category.into(),
            capacity,
            guard: 0,
            initial: 0,
        }
    }

    /// Bytes of inaccessible guard region after the capacity (an access there faults; a
    /// runtime that elides bounds checks relies on it).
    pub fn guard(mut self, bytes: usize) -> MemoryRequest {
        self.guard = bytes;
        self
    }

    /// Bytes usable at once, from the start.
    pub fn initial(mut self, bytes: usize) -> MemoryRequest {
        self.initial = bytes;
        self
    }

    /// The NMT category asked for.
    pub fn category(&self) -> &str {
        &self.category
    }
}

/// Why an embedder memory operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The request is inconsistent (zero capacity, initial beyond capacity, sizes that
    /// overflow).
    #[error("invalid memory request for {category}: {reason}")]
    Invalid {
        /// The category asked for.
        category: String,
        /// What is wrong.
        reason: String,
    },
    /// The memory cannot grow beyond its capacity in place.
    #[error(
        "{category} [{base:#x}] cannot grow to {requested} bytes: its capacity is {capacity} bytes"
    )]
    Capacity {
        /// The memory's category.
        category: String,
        /// Its base address.
        base: usize,
        /// The size asked for.
        requested: usize,
        /// The capacity.
        capacity: usize,
    },
    /// The VM is shutting down: no new memory.
    #[error("cannot reserve memory for {category}: the VM is shutting down")]
    ShuttingDown {
        /// The category asked for.
        category: String,
    },
    /// A reserve, commit or advice failed (HotSpot's wording, with the errno).
    #[error("{0}")]
    Os(#[source] OsError),
    /// The pretouch failed; the message names the range that was not made resident.
    #[error("{0}")]
    Pretouch(#[source] OsError),
    /// The pretouch task failed in a way that is a bug (a worker panicked).
    #[error("{0}")]
    Task(#[source] TaskPanicked),
}

impl MemoryError {
    /// Whether the failure is a lack of memory or address space (`ENOMEM`).
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            MemoryError::Os(e) | MemoryError::Pretouch(e) => e.is_out_of_memory(),
            _ => false,
        }
    }
}

impl From<PretouchError> for MemoryError {
    fn from(e: PretouchError) -> MemoryError {
        match e {
            PretouchError::Os(os) => MemoryError::Pretouch(os),
            PretouchError::Panicked(p) => MemoryError::Task(p),
        }
    }
}

impl From<GrowError> for MemoryError {
    fn from(e: GrowError) -> MemoryError {
        match e {
            GrowError::Commit(os) => MemoryError::Os(os),
            GrowError::Pretouch(p) => p.into(),
        }
    }
}

/// The part of a memory that NMT sees.
#[derive(Debug)]
struct MemoryInner {
    reservation: Arc<Reservation>,
    category: String,
    /// Committed (usable) bytes from the base.
    size: AtomicUsize,
}

/// The embedder memories of one VM, for NMT.
#[derive(Debug, Default)]
pub(crate) struct MemoryRegistry {
    memories: Mutex<Vec<Weak<MemoryInner>>>,
}

impl MemoryRegistry {
    fn add(&self, m: &Arc<MemoryInner>) {
        let mut list = crate::safepoint::lock(&self.memories);
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(m));
    }

    /// What NMT reports for the live memories.
    pub(crate) fn usage(&self) -> Vec<MemoryDetail> {
        let list = crate::safepoint::lock(&self.memories);
        list.iter()
            .filter_map(Weak::upgrade)
            .map(|m| {
                let range = m.reservation.range();
                MemoryDetail {
                    category: m.category.clone(),
                    start: range.start,
                    end: range.end,
                    committed: m.size.load(Ordering::Relaxed) as u64,
                }
            })
            .collect()
    }
}

/// Memory an embedder mapped through the VM ([`VmHandle::reserve_memory`]): `capacity` bytes
/// it can grow into in place, then `guard` bytes that fault, at an address that never moves.
/// Growing commits (and with `-XX:+AlwaysPreTouch` pretouches) more. Dropping it unmaps it
/// (once a background pretouch of it is done). It stays usable after the VM is gone (a
/// growth is then pretouched by the calling thread alone).
///
/// [`VmHandle::reserve_memory`]: crate::VmHandle::reserve_memory
#[derive(Debug)]
pub struct VmMemory {
    inner: Arc<MemoryInner>,
    /// Where it is pretouched, how, and how it is named in log lines.
    target: Target,
    capacity: usize,
    guard: usize,
    /// The VM's workers, weakly: a memory never keeps a VM (its heap, its workers) alive.
    gang: Weak<WorkerGang>,
    background: Option<Background>,
}

impl VmMemory {
    /// Reserves the memory `request` asks for with `policy`: the reservation is aligned to
    /// the policy's page size and advised for huge pages if it says so, `initial` bytes are
    /// committed and, with pretouch on, pretouched by the gang — in the background when the
    /// plan says so, so the call returns at once and the memory is usable while it runs.
    pub(crate) fn reserve(
        request: MemoryRequest,
        policy: &MemoryPolicy,
        gang: &Arc<WorkerGang>,
        registry: &MemoryRegistry,
    ) -> Result<VmMemory, MemoryError> {
        let invalid = |reason: &str| MemoryError::Invalid {
            category: request.category.clone(),
            reason: reason.to_owned(),
        };
        let base = base_page_size();
        let round = |v: usize| v.checked_next_multiple_of(base);
        let capacity = round(request.capacity).ok_or_else(|| invalid("capacity overflows"))?;
        let guard = round(request.guard).ok_or_else(|| invalid("guard overflows"))?;
        let initial = round(request.initial).ok_or_else(|| invalid("initial size overflows"))?;
        if capacity == 0 {
            return Err(invalid("capacity is zero"));
        }
        if initial > capacity {
            return Err(invalid("initial size beyond the capacity"));
        }
        let total = capacity
            .checked_add(guard)
            .ok_or_else(|| invalid("capacity plus guard overflows"))?;
        let pages = policy.pages;
        let mut reservation =
            Reservation::reserve(total, pages.page_size).map_err(MemoryError::Os)?;
        // The embedder reaches the memory through its base pointer only: the reservation
        // lends no references, so it can give committed parts back while shared.
        reservation.forbid_lending();
        if pages.advise_huge {
            reservation
                .advise(0, capacity, HugePageAdvice::HugePage)
                .map_err(MemoryError::Os)?;
        }
        if initial > 0 {
            reservation.commit(0, initial).map_err(MemoryError::Os)?;
        }
        let category = request.category;
        let start = reservation.base();
        log::info!(
            target: "os",
            "Reserved {category} [{start:#018x} - {:#018x}): capacity {}, guard {}, {} committed, on {}",
            start + capacity,
            format_exact_size(capacity as u64),
            format_exact_size(guard as u64),
            format_exact_size(initial as u64),
            pages.description()
        );
        let reservation = Arc::new(reservation);
        let inner = Arc::new(MemoryInner {
            reservation: Arc::clone(&reservation),
            category: category.clone(),
            size: AtomicUsize::new(initial),
        });
        registry.add(&inner);
        let mut memory = VmMemory {
            target: Target {
                reservation,
                page_size: pages.page_size,
                plan: policy.pretouch,
                label: Label {
                    tag: "os",
                    what: format!(" of {category} [{start:#x}]"),
                },
            },
            inner,
            capacity,
            guard,
            gang: Arc::downgrade(gang),
            background: None,
        };
        let plan = &policy.pretouch;
        if plan.enabled && initial > 0 {
            if plan.background && gang.size() > 0 {
                memory.background = Some(Background::start(
                    &memory.target,
                    0..initial,
                    gang,
                    None,
                    None,
                ));
            } else {
                pretouch::run(&memory.target, 0..initial, Some(gang))?;
            }
        }
        Ok(memory)
    }

    /// The first byte: the memory's address for its whole life.
    pub fn base(&self) -> *mut u8 {
        self.inner.reservation.base() as *mut u8
    }

    /// Bytes usable now (committed, from the base).
    pub fn size(&self) -> usize {
        self.inner.size.load(Ordering::Acquire)
    }

    /// Bytes the memory can grow into in place.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes of guard region after the capacity.
    pub fn guard(&self) -> usize {
        self.guard
    }

    /// The NMT category.
    pub fn category(&self) -> &str {
        &self.inner.category
    }

    /// The page size backing it: the transparent huge page size when advised, else the base
    /// page size.
    pub fn page_size(&self) -> usize {
        self.target.page_size
    }

    /// Bytes of the usable part that are resident (`mincore`: a system call over every page).
    pub fn resident_bytes(&self) -> usize {
        match self.size() {
            0 => 0,
            size => self.inner.reservation.resident_bytes(0, size).unwrap_or(0),
        }
    }

    /// Grows the usable part to `new_size` bytes (rounded up to the base page), committing
    /// and — with `-XX:+AlwaysPreTouch` — pretouching the new part on the worker gang. A size
    /// at or below the current one changes nothing. On failure the memory keeps its size and
    /// what was committed for the attempt is given back.
    pub fn grow_to(&mut self, new_size: usize) -> Result<(), MemoryError> {
        let old = self.size();
        if new_size <= old {
            return Ok(());
        }
        let r = &self.inner.reservation;
        let new = new_size
            .checked_next_multiple_of(base_page_size())
            .filter(|&n| n <= self.capacity)
            .ok_or_else(|| MemoryError::Capacity {
                category: self.inner.category.clone(),
                base: r.base(),
                requested: new_size,
                capacity: self.capacity,
            })?;
        let gang = self.gang.upgrade();
        pretouch::grow(&self.target, old..new, gang.as_deref())?;
        self.inner.size.store(new, Ordering::Release);
        log::debug!(
            target: "os",
            "Grew {} [{:#x}] to {}",
            self.inner.category,
            r.base(),
            format_exact_size(new as u64)
        );
        Ok(())
    }

    /// Gives back the pages of `[offset, offset + len)` (page-aligned, inside the usable
    /// part): they read as zero afterwards and are no longer resident, and the range stays
    /// usable (a write faults a fresh page in) — Wasmtime's way to reset a linear memory for
    /// reuse. `Invalid` for a range that is not page-aligned or not inside the usable part;
    /// nothing changes then.
    pub fn discard(&mut self, offset: usize, len: usize) -> Result<(), MemoryError> {
        let page = base_page_size();
        let inside = offset
            .checked_add(len)
            .is_some_and(|end| end <= self.size());
        if !inside || !offset.is_multiple_of(page) || !len.is_multiple_of(page) {
            return Err(MemoryError::Invalid {
                category: self.inner.category.clone(),
                reason: format!(
                    "cannot discard [{offset:#x}, +{len:#x}): not page-aligned or beyond the usable {:#x} bytes",
                    self.size()
                ),
            });
        }
        if len == 0 {
            return Ok(());
        }
        self.inner
            .reservation
            .discard(offset, len)
            .map_err(MemoryError::Os)?;
        log::debug!(
            target: "os",
            "Discarded {} bytes of {} [{:#x}] at offset {offset:#x}",
            len,
            self.inner.category,
            self.inner.reservation.base()
        );
        Ok(())
    }

    /// Shrinks the usable part to `new_size` bytes (rounded up to the base page): the tail is
    /// uncommitted — an access there faults, its memory and commit charge go back to the
    /// kernel — and [`grow_to`](VmMemory::grow_to) commits it again (reading zero). A
    /// background pretouch of the initial part is waited for first. A size at or above the
    /// current one changes nothing.
    pub fn shrink_to(&mut self, new_size: usize) -> Result<(), MemoryError> {
        let old = self.size();
        let new = new_size
            .checked_next_multiple_of(base_page_size())
            .unwrap_or(old);
        if new >= old {
            return Ok(());
        }
        self.wait_for_pretouch()?;
        let r = &self.inner.reservation;
        r.uncommit_shared(new, old - new).map_err(MemoryError::Os)?;
        self.inner.size.store(new, Ordering::Release);
        log::info!(
            target: "os",
            "Shrank {} [{:#x}] from {} to {}: {} uncommitted",
            self.inner.category,
            r.base(),
            format_exact_size(old as u64),
            format_exact_size(new as u64),
            format_exact_size((old - new) as u64)
        );
        Ok(())
    }

    /// Waits for the background pretouch of the initial part, if one was started, and
    /// returns what it did (once; later calls return `Ok(None)`).
    pub fn wait_for_pretouch(&mut self) -> Result<Option<PretouchReport>, MemoryError> {
        match self.background.take() {
            Some(bg) => Ok(Some(bg.wait()?)),
            None => Ok(None),
        }
    }

    /// Whether a background pretouch of this memory still runs.
    pub fn pretouch_running(&self) -> bool {
        self.background.as_ref().is_some_and(|b| !b.is_done())
    }
}
