//! The nursery (`-Xmn`/`NewSize`): the first `NewSize` bytes of the heap, an arena whose
//! allocations all end together when a [`Heap::with_nursery`] scope returns.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::{alloc_size, Heap, HeapBlock};

/// The nursery during one [`Heap::with_nursery`] scope.
#[derive(Debug)]
pub struct Nursery<'h> {
    heap: &'h Heap,
    top: AtomicUsize,
    capacity: usize,
}

impl<'h> Nursery<'h> {
    pub(crate) fn new(heap: &'h Heap, capacity: usize) -> Nursery<'h> {
        Nursery {
            heap,
            top: AtomicUsize::new(0),
            capacity,
        }
    }

    /// Allocates `bytes` (rounded up to 8) in the nursery; `None` when it is full.
    pub fn allocate(&self, bytes: usize) -> Option<HeapBlock<'_>> {
        let size = alloc_size(bytes)?;
        let start = self
            .top
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |t| {
                t.checked_add(size).filter(|&e| e <= self.capacity)
            })
            .ok()?;
        self.heap.block(start, size)
    }

    /// Bytes allocated in this scope.
    pub fn used(&self) -> usize {
        self.top.load(Ordering::Relaxed)
    }

    /// The nursery's size (`NewSize`).
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
