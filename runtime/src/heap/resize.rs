//! Moving the heap's committed end: expansions (commit and pretouch, then publish) and
//! shrinks (lower the end, then give the pages back), serialized with each other across
//! their system calls and never making an allocation wait for one.

use std::sync::atomic::Ordering;

use rtvm_flags::value::format_exact_size;

use super::alloc::Lowered;
use super::{Heap, HeapError};
use crate::pretouch;
use crate::workers::WorkerGang;

impl Heap {
    /// Commits `bytes` more (rounded up to the heap's page size) and, with `AlwaysPreTouch`,
    /// pretouches them — on the gang if it is free, else on the calling thread, never waiting
    /// for a background pretouch of the initial heap. The new part is published (becomes
    /// allocatable) only once it is committed and pretouched; on any failure it is given back
    /// and the heap keeps its old size and stays usable. Returns the committed size.
    /// Allocation goes on meanwhile (the system calls run outside the allocator's lock).
    pub(crate) fn expand(&self, bytes: usize, gang: &WorkerGang) -> Result<usize, HeapError> {
        let page = self.page_size;
        let _resize = crate::safepoint::lock(&self.resize);
        let old = self.space.end();
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
            return Ok(old);
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
        self.space.raise_end(range.end);
        self.pretouch_limit.store(range.end, Ordering::SeqCst);
        log::debug!(target: "gc+heap", "Expanded heap to {}", format_exact_size(range.end as u64));
        Ok(range.end)
    }

    /// Gives committed memory above what is allocated back to the kernel: the committed part
    /// shrinks to `target` bytes (rounded up to the heap's page size) and the pages above it
    /// are returned (`MADV_DONTNEED`: RSS and the heap's committed figures drop; the range
    /// stays mapped, so the kernel's commit charge for it stays, and no allocation ever races
    /// a change of protection). An expansion makes it usable again (pretouched anew with
    /// `AlwaysPreTouch`). Refused, with nothing changed, below what is allocated (the
    /// allocation top), below `MinHeapSize` and on explicit huge pages (they are committed
    /// whole).
    ///
    /// Safe while other threads allocate, expand and read the figures: allocation never
    /// waits for its system calls (an allocation that does not fit may take the allocator's
    /// lock, which the shrink holds for a few loads and stores), a block handed out is never
    /// given back, an allocation that the heap it leaves can hold never fails because of it,
    /// and the figures show the heap before or after it, never a state between. A background pretouch is neither waited for nor held
    /// responsible: it skips the part given back (a chunk in flight there is let finish
    /// first), held or not. Returns the committed size.
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
        let _resize = crate::safepoint::lock(&self.resize);
        let mut retries = 0;
        let (old, new) = loop {
            match self.space.lower_end(new_end) {
                Lowered::Unchanged(end) => {
                    log::debug!(target: "gc+heap", "Heap shrink to {}: nothing to give back", format_exact_size(new_end as u64));
                    return Ok(end);
                }
                // Past the end: allocations that failed and are giving their room back (a
                // moment's work of theirs, never a wait for a lock or a system call).
                Lowered::Refused { top, end } if top > end && retries < 3 => {
                    retries += 1;
                    std::thread::yield_now();
                }
                Lowered::Refused { top, end } => {
                    let e = refuse(format!(
                        "{} bytes are allocated",
                        top.min(end).saturating_sub(self.space.gap_bytes())
                    ));
                    log::info!(target: "gc+heap", "Heap shrink refused: {e}");
                    return Err(e);
                }
                Lowered::Moved { old, new } => break (old, new),
            }
        };
        // Nothing in [new, old) is handed out, and no allocation reaches it until an
        // expansion (which waits for this shrink) raises the end again. The background
        // pretouch stops touching it before its pages go.
        self.pretouch_limit.store(new, Ordering::SeqCst);
        self.gate.wait_idle();
        if let Err(e) = self.reservation.discard(new, old - new) {
            // Still mapped and committed, and nothing in it was handed out: usable again.
            self.space.raise_end(old);
            self.pretouch_limit.store(old, Ordering::SeqCst);
            let e = HeapError::Commit(e);
            log::info!(target: "gc+heap", "Heap shrink refused: {e}");
            return Err(e);
        }
        log::info!(
            target: "gc+heap",
            "Heap shrunk from {} to {}: {} given back",
            format_exact_size(old as u64),
            format_exact_size(new as u64),
            format_exact_size((old - new) as u64)
        );
        Ok(new)
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        let lost = self.space.lost();
        if lost > 0 {
            log::warn!(target: "gc+heap", "{lost} bytes of the heap were lost to a full free-gap registry");
        }
    }
}
