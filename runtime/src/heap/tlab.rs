//! Thread-local allocation buffers (HotSpot's TLABs), shared by the Rust [`Tlab`] and the C
//! API's inline TLAB.

use std::sync::atomic::AtomicU64;

use super::{alloc_size, AllocFailure, Heap, HeapBlock};

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
    buffer: &'h [AtomicU64],
    /// Words of `buffer` handed out.
    used: usize,
    /// Bytes taken from the heap per refill.
    refill: usize,
}

impl<'h> Tlab<'h> {
    /// The default buffer size: 256 KiB.
    pub const DEFAULT_SIZE: usize = 256 * 1024;

    /// An empty TLAB on `heap` that takes `bytes` (see [`tlab_refill_size`]) per refill.
    pub(crate) fn new(heap: &'h Heap, bytes: usize) -> Tlab<'h> {
        Tlab {
            heap,
            buffer: &[],
            used: 0,
            refill: tlab_refill_size(bytes),
        }
    }

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
            Refilled::Direct(block) => block.ok(),
        }
    }

    /// Bytes left in the current buffer.
    pub fn remaining(&self) -> usize {
        (self.buffer.len() - self.used) * 8
    }
}

/// What a TLAB's slow path got.
pub(crate) enum Refilled<'h> {
    /// A fresh buffer whose first `used` words are the allocation.
    Buffer {
        buffer: &'h [AtomicU64],
        used: usize,
    },
    /// Too large for a buffer, or no whole buffer left: allocated from the heap directly (or
    /// not at all, and why).
    Direct(Result<HeapBlock<'h>, AllocFailure>),
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
        return Refilled::Direct(heap.allocate_or_explain(size));
    }
    match heap.allocate(refill) {
        Some(fresh) => Refilled::Buffer {
            buffer: fresh.words,
            used: size / 8,
        },
        // No room for a whole buffer: the block alone may still fit (the failed refill gave
        // its room back).
        None => Refilled::Direct(heap.allocate_or_explain(size)),
    }
}
