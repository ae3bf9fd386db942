//! Memory an embedder maps through the VM for data of its own — a language runtime's linear
//! memories, arenas, code — with the VM's policies: reserved with guard regions, committed as
//! it grows, pretouched (`-XX:+AlwaysPreTouch`, in the background with
//! `-XX:+BackgroundPreTouch`) and advised for transparent huge pages
//! (`-XX:+UseTransparentHugePages`) as the heap is, logged under `os`, and counted by NMT in
//! a category of the embedder's naming.
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

use rtvm_flags::flag;
use rtvm_flags::value::format_exact_size;
use rtvm_os_linux::{
    base_page_size, HugePageAdvice, OsError, PretouchRequest, Reservation, ThpMode,
};

use crate::heap::{pretouch_now, HeapError, PretouchReport, PretouchTarget, PretouchTask};
use crate::vm::VmHandle;
use crate::workers::{GangTask, TaskHandle};

/// What an embedder asks [`VmHandle::reserve_memory`] for.
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
    Os(OsError),
    /// The pretouch failed or its task panicked.
    #[error("{0}")]
    Pretouch(HeapError),
}

impl MemoryError {
    /// Whether the failure is a lack of memory or address space (`ENOMEM`).
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            MemoryError::Os(e) => e.is_out_of_memory(),
            MemoryError::Pretouch(HeapError::Pretouch(e)) => e.is_out_of_memory(),
            _ => false,
        }
    }
}

/// The part of a memory that background pretouches and NMT share.
#[derive(Debug)]
pub(crate) struct MemoryInner {
    pub(crate) reservation: Reservation,
    pub(crate) request: PretouchRequest,
    pub(crate) chunk_size: usize,
    pub(crate) page_size: usize,
    pub(crate) category: String,
    capacity: usize,
    guard: usize,
    size: AtomicUsize,
}

impl MemoryInner {
    /// What NMT reports for it: (category, reserved, committed, range).
    pub(crate) fn nmt(&self) -> (String, u64, u64, std::ops::Range<usize>) {
        (
            self.category.clone(),
            self.reservation.len() as u64,
            self.size.load(Ordering::Relaxed) as u64,
            self.reservation.range(),
        )
    }
}

/// The embedder memories of one VM, for NMT.
#[derive(Debug, Default)]
pub(crate) struct MemoryRegistry {
    memories: Mutex<Vec<Weak<MemoryInner>>>,
}

impl MemoryRegistry {
    fn add(&self, m: &Arc<MemoryInner>) {
        let mut list = self.memories.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(m));
    }

    /// The live memories.
    pub(crate) fn list(&self) -> Vec<Arc<MemoryInner>> {
        let list = self.memories.lock().unwrap_or_else(|p| p.into_inner());
        list.iter().filter_map(Weak::upgrade).collect()
    }
}

/// Memory an embedder mapped through the VM ([`VmHandle::reserve_memory`]): `capacity` bytes
/// it can grow into in place, then `guard` bytes that fault, at an address that never moves.
/// Growing commits (and with `-XX:+AlwaysPreTouch` pretouches) more. Dropping it unmaps it
/// (once a background pretouch of it is done). It stays usable after the VM is gone (a
/// growth is then pretouched by the calling thread alone).
#[derive(Debug)]
pub struct VmMemory {
    inner: Arc<MemoryInner>,
    /// The VM, weakly: a memory never keeps a VM (its heap, its workers) alive.
    vm: std::sync::Weak<crate::vm::VmInner>,
    pretouch: bool,
    background: Option<(TaskHandle, Arc<PretouchTask>)>,
}

impl VmHandle {
    /// Reserves memory for the embedder with the VM's policies (see [`VmMemory`]): the
    /// reservation is aligned to the transparent huge page size and advised for huge pages
    /// under `-XX:+UseTransparentHugePages` (THP mode `madvise`), `initial` bytes are
    /// committed and, with `-XX:+AlwaysPreTouch`, pretouched by the worker gang — in the
    /// background with `-XX:+BackgroundPreTouch`, so the call returns at once and the memory
    /// is usable while it runs.
    pub fn reserve_memory(&self, request: MemoryRequest) -> Result<VmMemory, MemoryError> {
        let invalid = |reason: &str| MemoryError::Invalid {
            category: request.category.clone(),
            reason: reason.to_owned(),
        };
        if self.state() != crate::VmState::Running {
            return Err(MemoryError::ShuttingDown {
                category: request.category.clone(),
            });
        }
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
        let flags = self.flags();
        let thp = &self.page_info().thp;
        let huge = flags.get(flag::UseTransparentHugePages)
            && matches!(thp.mode, ThpMode::Always | ThpMode::Madvise)
            && thp.pmd_size.is_some();
        let page_size = if huge {
            thp.pmd_size.unwrap_or(base)
        } else {
            base
        };
        let reservation = Reservation::reserve(total, page_size).map_err(MemoryError::Os)?;
        if huge && thp.mode == ThpMode::Madvise {
            reservation
                .advise(0, capacity, HugePageAdvice::HugePage)
                .map_err(MemoryError::Os)?;
        }
        if initial > 0 {
            reservation.commit(0, initial).map_err(MemoryError::Os)?;
        }
        let inner = Arc::new(MemoryInner {
            reservation,
            request: PretouchRequest {
                page_size: base,
                use_populate_write: flags.get(flag::UseMadvPopulateWrite),
            },
            chunk_size: flags.get(flag::PreTouchParallelChunkSize),
            page_size,
            category: request.category.clone(),
            capacity,
            guard,
            size: AtomicUsize::new(initial),
        });
        log::info!(
            target: "os",
            "Reserved {} [{:#018x} - {:#018x}): capacity {}, guard {}, {} committed, on {}",
            inner.category,
            inner.reservation.base(),
            inner.reservation.base() + capacity,
            format_exact_size(capacity as u64),
            format_exact_size(guard as u64),
            format_exact_size(initial as u64),
            if huge {
                format!("{} transparent huge pages", format_exact_size(page_size as u64))
            } else {
                format!("{} pages", format_exact_size(base as u64))
            }
        );
        self.memories().add(&inner);
        let mut memory = VmMemory {
            inner,
            vm: self.downgrade(),
            pretouch: flags.get(flag::AlwaysPreTouch),
            background: None,
        };
        if memory.pretouch && initial > 0 {
            let gang = self.gang();
            let target = PretouchTarget::Memory(Arc::clone(&memory.inner));
            if flags.get(flag::BackgroundPreTouch) && gang.size() > 0 {
                let task = Arc::new(PretouchTask::new(target, 0, initial, gang.size(), true));
                crate::heap::log_start(&task);
                let workers = task.workers();
                match gang.try_start(Arc::clone(&task) as Arc<dyn GangTask>, workers) {
                    Some(handle) => memory.background = Some((handle, task)),
                    // The gang is busy (the heap's own background pretouch): never wait for
                    // it — pretouch on this thread now.
                    None => {
                        pretouch_now(
                            PretouchTarget::Memory(Arc::clone(&memory.inner)),
                            gang,
                            0,
                            initial,
                        )
                        .map_err(MemoryError::Pretouch)?;
                    }
                }
            } else {
                pretouch_now(target, gang, 0, initial).map_err(MemoryError::Pretouch)?;
            }
        }
        Ok(memory)
    }
}

impl VmMemory {
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
        self.inner.capacity
    }

    /// Bytes of guard region after the capacity.
    pub fn guard(&self) -> usize {
        self.inner.guard
    }

    /// The NMT category.
    pub fn category(&self) -> &str {
        &self.inner.category
    }

    /// The page size backing it: the transparent huge page size when advised, else the base
    /// page size.
    pub fn page_size(&self) -> usize {
        self.inner.page_size
    }

    /// Bytes of the usable part that are resident (`mincore`: a system call over every page).
    pub fn resident_bytes(&self) -> usize {
        let size = self.size();
        if size == 0 {
            return 0;
        }
        self.inner.reservation.resident_bytes(0, size).unwrap_or(0)
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
        let capacity_error = || MemoryError::Capacity {
            category: self.inner.category.clone(),
            base: self.inner.reservation.base(),
            requested: new_size,
            capacity: self.inner.capacity,
        };
        let new = new_size
            .checked_next_multiple_of(base_page_size())
            .filter(|&n| n <= self.inner.capacity)
            .ok_or_else(capacity_error)?;
        let r = &self.inner.reservation;
        // Committed unpublished, pretouched, then published: a failed growth gives back what
        // it committed, and nobody saw the range meanwhile.
        r.commit_unpublished(old, new - old)
            .map_err(MemoryError::Os)?;
        let made_usable = if self.pretouch {
            let target = PretouchTarget::Memory(Arc::clone(&self.inner));
            match self.vm.upgrade() {
                Some(vm) => pretouch_now(target, &vm.gang, old, new - old).map(|_| ()),
                None => r
                    .pretouch(old, new - old, &self.inner.request)
                    .map(|_| ())
                    .map_err(HeapError::Pretouch),
            }
            .map_err(MemoryError::Pretouch)
        } else {
            Ok(())
        }
        .and_then(|()| r.publish(old, new - old).map_err(MemoryError::Os));
        if let Err(e) = made_usable {
            if let Err(u) = r.uncommit_unpublished(old, new - old) {
                log::error!(target: "os", "Giving back the failed growth of {} failed: {u}", self.inner.category);
            }
            return Err(e);
        }
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

    /// Waits for the background pretouch of the initial part, if one was started, and
    /// returns what it did (once; later calls return `Ok(None)`).
    pub fn wait_for_pretouch(&mut self) -> Result<Option<PretouchReport>, MemoryError> {
        let Some((handle, task)) = self.background.take() else {
            return Ok(None);
        };
        handle
            .wait()
            .map_err(|e| MemoryError::Pretouch(HeapError::Task(e)))?;
        task.finish().map(Some).map_err(MemoryError::Pretouch)
    }

    /// Whether a background pretouch of this memory still runs.
    pub fn pretouch_running(&self) -> bool {
        self.background.as_ref().is_some_and(|(h, _)| !h.is_done())
    }
}
