//! The heap's lock-free bump allocator over offsets: a top that `fetch_add` moves, and a
//! committed end that expansions raise and shrinks lower. It knows nothing of the memory
//! behind the offsets; the heap turns a claim into a block.
//!
//! # The claim
//!
//! A claim moves the top with one `fetch_add` and then reads the end: its block is good if
//! it ends inside that end. A shrink stores its lower end before it reads the top, and a
//! claim moves the top before it reads the end (sequentially consistent, both), so either
//! the shrink sees the claim (and keeps its memory) or the claim sees the lower end (and
//! gives its block back if it does not fit). The end word is read once before as well, for
//! its flag: a claim on a full space fails without touching the top.
//!
//! # Giving back
//!
//! A claim that fails (its block runs past the end, or a shrink raced it) gives its block
//! back under a short lock: if the top is still the block's end, the top moves back to its
//! start; otherwise (claims came after it) the block goes into a small registry of *free
//! blocks*, and whoever moves the top back to a free block's end moves it on past that block
//! too. Free blocks below the end are handed out again by the slow path. Nothing else ever
//! lowers the top — no third party "clamps" a block whose owner has not decided — so a
//! block is never handed out twice and none is lost: once every claim has returned, the top
//! minus the free blocks is exactly what was handed out.
//!
//! # Moving the end
//!
//! Every change of the end happens under the same lock, which is held only for a few loads
//! and stores (never across a system call or an allocation): a shrink never makes a claim
//! wait for its `madvise`, and a claim that failed takes the lock only to give its block
//! back and claim again. A shrink stores its lower end *tentatively* (the figures keep the
//! old one) and reads the top: above the new end, it puts the old end back and refuses;
//! else the new end stands. An expansion raises the end after its system calls. The
//! figures ([`BumpSpace::end`], [`BumpSpace::used_top`]) never show a tentative end, so they
//! describe the space before or after a shrink, never between.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Set in the end word once a claim failed for want of room with less than [`TIGHT_ROOM`]
/// left (until the end is raised):
/// claims no longer `fetch_add` (which would overshoot the end and have to give back) but
/// compare-and-swap the top, and one larger than the room last seen — at the end or in a
/// gap — fails at once, without touching the top or taking the lock.
const TIGHT: usize = 1;

/// The room below which a failed claim makes the space [`TIGHT`] (with more, the failure was
/// a large request: the claims that fit go on the fetch-and-add way).
const TIGHT_ROOM: usize = 16 * FETCH_ADD_MAX;

/// The flag bits of the end word (ends are multiples of the page size: the low bits are
/// free).
const FLAGS: usize = TIGHT;

/// The largest block claimed with `fetch_add`; larger ones take a compare-and-swap loop that
/// never overshoots (this bounds how far failed claims can push the top).
const FETCH_ADD_MAX: usize = 1 << 20;

/// Free blocks the registry holds at most (merged when adjacent; in practice a handful).
const FREE_BLOCKS: usize = 64;

/// The size an allocation of `bytes` takes: rounded up to 8, at least 8 (so every allocation
/// has a unique address). `None` if that overflows.
#[inline(always)]
pub(crate) fn alloc_size(bytes: usize) -> Option<usize> {
    Some((bytes.checked_add(7)? & !7).max(8))
}

#[inline(always)]
fn value(word: usize) -> usize {
    word & !FLAGS
}

/// An atomic on a cache line of its own (128 bytes: adjacent-line prefetchers pair lines).
#[derive(Debug, Default)]
#[repr(align(128))]
struct OwnLine(AtomicUsize);

/// What a claim saw when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Full {
    /// The top (the next byte a claim would get), at or below `end`.
    pub top: usize,
    /// The committed end.
    pub end: usize,
    /// The largest free block below the end (a gap that claims gave back behind others).
    pub largest_free: usize,
}

/// What a shrink did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lowered {
    /// The end is at or below the target already.
    Unchanged(usize),
    /// The end moved from `old` to `new`: nothing in `[new, old)` is handed out, and no claim
    /// reaches it until the end is raised again.
    Moved { old: usize, new: usize },
    /// Claims reach `top`, above the target: nothing changed.
    Refused { top: usize, end: usize },
}

/// Blocks claimed and given back behind later claims, sorted by start, never adjacent.
#[derive(Debug)]
struct Free {
    blocks: Vec<(usize, usize)>,
}

impl Free {
    fn new() -> Free {
        Free {
            blocks: Vec::with_capacity(FREE_BLOCKS),
        }
    }

    /// Adds `[start, end)`, merging it with its neighbours. Never allocates: beyond the
    /// capacity the smallest block is dropped; returns the bytes so lost (a bound never
    /// reached in practice, counted so that it would not go unnoticed).
    fn insert(&mut self, start: usize, end: usize) -> usize {
        let at = self.blocks.partition_point(|&(a, _)| a < start);
        let mut block = (start, end);
        let mut at = at;
        if at > 0 && self.blocks[at - 1].1 == start {
            block.0 = self.blocks[at - 1].0;
            self.blocks.remove(at - 1);
            at -= 1;
        }
        if at < self.blocks.len() && self.blocks[at].0 == end {
            block.1 = self.blocks[at].1;
            self.blocks.remove(at);
        }
        if self.blocks.len() == self.blocks.capacity() {
            let smallest = (0..self.blocks.len())
                .min_by_key(|&i| self.blocks[i].1 - self.blocks[i].0)
                .expect("a full registry has blocks");
            let (a, b) = self.blocks[smallest];
            if b - a >= block.1 - block.0 {
                return block.1 - block.0;
            }
            self.blocks.remove(smallest);
            if smallest < at {
                at -= 1;
            }
            self.blocks.insert(at, block);
            return b - a;
        }
        self.blocks.insert(at, block);
        0
    }

    /// The block that ends at `end`, removed.
    fn take_ending_at(&mut self, end: usize) -> Option<(usize, usize)> {
        let i = self.blocks.iter().position(|&(_, b)| b == end)?;
        Some(self.blocks.remove(i))
    }

    /// `size` bytes from the first block that holds them below `limit`.
    fn take(&mut self, size: usize, limit: usize) -> Option<usize> {
        let i = self
            .blocks
            .iter()
            .position(|&(a, b)| b.min(limit).saturating_sub(a) >= size)?;
        let (a, b) = self.blocks[i];
        if b - a == size {
            self.blocks.remove(i);
        } else {
            self.blocks[i].0 = a + size;
        }
        Some(a)
    }

    /// The largest free block below `limit`, and the free bytes below it.
    fn below(&self, limit: usize) -> (usize, usize) {
        self.blocks
            .iter()
            .map(|&(a, b)| b.min(limit).saturating_sub(a))
            .fold((0, 0), |(max, sum), n| (max.max(n), sum + n))
    }
}

/// `[start, end)` offsets handed out by bumping a top towards a committed end.
#[derive(Debug)]
pub(crate) struct BumpSpace {
    /// The end claims check against (an offset) and [`TIGHT`]. Changed only under
    /// `free`'s lock. A shrink stores its new end here before it knows whether it can keep
    /// it (and puts the old one back if not).
    end: AtomicUsize,
    /// The committed end as the figures show it: `end`'s offset, but only once a shrink has
    /// decided (never a tentative end).
    committed: AtomicUsize,
    /// The top, alone on its cache line: every allocation writes it, and `end` (read by every
    /// allocation) must not share the line. Raised by claims; lowered only under the lock,
    /// past blocks given back.
    top: OwnLine,
    /// The free-block registry. Every change of the end and every lowering of the top
    /// happens under this lock; nothing that can block runs under it.
    free: Mutex<Free>,
    /// The largest free block below the end (what a claim may still get while the top is at
    /// the end).
    largest_free: AtomicUsize,
    /// Free bytes below the end (the figures subtract them from the top).
    free_bytes: AtomicUsize,
    /// While [`TIGHT`]: the top when the room was last seen (under the lock). Claims that fit
    /// move the top on without the lock, so the room it implies is at most what is left.
    tight_top: AtomicUsize,
    /// The largest block a claim may still get, as last seen (under the lock): the room at
    /// the end or the largest gap. While [`TIGHT`], a larger claim fails on this one load.
    room: AtomicUsize,
    /// Bytes lost to a full free-block registry (0 in practice).
    lost: AtomicUsize,
}

impl BumpSpace {
    /// A space whose top starts at `start` and whose end is `end` (a multiple of 8).
    pub(crate) fn new(start: usize, end: usize) -> BumpSpace {
        let flags = if start >= end { TIGHT } else { 0 };
        BumpSpace {
            end: AtomicUsize::new(end | flags),
            committed: AtomicUsize::new(end),
            top: OwnLine(AtomicUsize::new(start)),
            free: Mutex::new(Free::new()),
            largest_free: AtomicUsize::new(0),
            free_bytes: AtomicUsize::new(0),
            tight_top: AtomicUsize::new(start.min(end)),
            room: AtomicUsize::new(end.saturating_sub(start)),
            lost: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> crate::safepoint::Locked<'_, Free> {
        // Guards plain data that every step leaves consistent: a poisoned lock is usable.
        crate::safepoint::lock(&self.free)
    }

    /// The committed end (published: what lies below was made usable before it was stored;
    /// never the tentative end of a shrink that may still be undone).
    #[inline]
    pub(crate) fn end(&self) -> usize {
        self.committed.load(Ordering::Acquire)
    }

    /// Bytes handed out below the end: the top (never beyond the end) less the free blocks.
    /// Counters only; while claims race, a snapshot of them.
    pub(crate) fn used_top(&self) -> usize {
        let end = self.end();
        let top = self.top.0.load(Ordering::Acquire).min(end);
        top.saturating_sub(self.free_bytes.load(Ordering::Acquire))
    }

    /// Bytes in gaps below the end that failed claims left behind others (handed out again
    /// by the slow path).
    pub(crate) fn gap_bytes(&self) -> usize {
        self.free_bytes.load(Ordering::Acquire)
    }

    /// Bytes lost because the free-block registry overflowed (0 in practice: it holds
    /// [`FREE_BLOCKS`] gaps, and gaps appear only when claims race a full space or a shrink).
    pub(crate) fn lost(&self) -> usize {
        self.lost.load(Ordering::Relaxed)
    }

    /// Claims `size` bytes (already rounded by [`alloc_size`]) from any thread without a
    /// lock: one `fetch_add` and two loads in the common case. `None` when the committed
    /// part cannot hold the block — then as cheap as a success (two loads once a claim has
    /// found the space too full: no `fetch_add`, no lock).
    ///
    /// Only when failed claims race with each other near the end may one of them find less
    /// room than there is once the others have given their blocks back.
    #[inline]
    pub(crate) fn claim(&self, size: usize) -> Option<usize> {
        self.claim_as::<false>(size).ok()
    }

    /// [`claim`](BumpSpace::claim), with what it saw when it fails.
    #[inline]
    pub(crate) fn claim_explained(&self, size: usize) -> Result<usize, Full> {
        self.claim_as::<true>(size)
    }

    /// A claim; `EXPLAIN`: a failure says what it saw (else its figures are not read).
    #[inline(always)]
    fn claim_as<const EXPLAIN: bool>(&self, size: usize) -> Result<usize, Full> {
        // Only the flag is read here: a tight space takes the compare-and-swap way.
        let snapshot = self.end.load(Ordering::Acquire);
        if snapshot & FLAGS == 0 && size <= FETCH_ADD_MAX {
            let start = self.top.0.fetch_add(size, Ordering::SeqCst);
            // The end after the top moved (see the module docs). No overflow: the top stays
            // below the end plus a few MiB per thread.
            if start + size <= value(self.end.load(Ordering::SeqCst)) {
                return Ok(start);
            }
            return self.claim_failed(start, size);
        }
        self.claim_slow::<EXPLAIN>(size, snapshot)
    }

    /// Blocks over [`FETCH_ADD_MAX`], and any claim while the space is [`TIGHT`]: a
    /// compare-and-swap loop that never moves the top past the end.
    #[cold]
    #[inline(never)]
    fn claim_slow<const EXPLAIN: bool>(&self, size: usize, snapshot: usize) -> Result<usize, Full> {
        if snapshot & TIGHT != 0 && size > self.room.load(Ordering::Acquire) {
            // No more room than that was left when it was last seen (claims since only took
            // some): fail without touching the top.
            if !EXPLAIN {
                return Err(Full {
                    top: 0,
                    end: 0,
                    largest_free: 0,
                });
            }
            // The figures are read after the room: if a block given back meanwhile (or an
            // expansion) shows in them, the claim may well fit now — it claims again under
            // the lock, which says what it finds. A failure never reports room it had.
            let end = value(snapshot);
            let full = Full {
                top: self.tight_top.load(Ordering::Acquire).min(end),
                end,
                largest_free: self.largest_free.load(Ordering::Acquire),
            };
            if end - full.top < size && full.largest_free < size {
                return Err(full);
            }
            return self.claim_locked(&mut self.lock(), size);
        }
        let top = &self.top.0;
        let mut start = top.load(Ordering::Relaxed);
        loop {
            let end = match start.checked_add(size) {
                Some(end) if end <= value(self.end.load(Ordering::Acquire)) => end,
                // Not at the top: a gap may hold it, or the end moved; else a failure, under
                // the lock that says how much room there was.
                _ => return self.claim_locked(&mut self.lock(), size),
            };
            match top.compare_exchange_weak(start, end, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => {
                    // The end after the top moved, as in the fast path.
                    if end <= value(self.end.load(Ordering::SeqCst)) {
                        return Ok(start);
                    }
                    return self.claim_failed(start, size);
                }
                Err(now) => start = now,
            }
        }
    }

    /// A claim `[start, start+size)` that did not fit the end it read after moving the top:
    /// gives it back and claims again under the lock (the end may have moved, or the room
    /// left may hold the block).
    #[cold]
    #[inline(never)]
    fn claim_failed(&self, start: usize, size: usize) -> Result<usize, Full> {
        let mut free = self.lock();
        self.give_back(&mut free, start, start + size);
        self.claim_locked(&mut free, size)
    }

    /// Gives `[start, end)` back: the top moves back to `start` if it is still at `end`
    /// (and on past free blocks it then reaches), else the block joins the free blocks.
    /// Under the lock.
    fn give_back(&self, free: &mut Free, start: usize, end: usize) {
        let top = &self.top.0;
        if top
            .compare_exchange(end, start, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            // Claims came after this one; the top comes back here once they are given back
            // (or this gap is handed out again).
            let lost = free.insert(start, end);
            self.lost.fetch_add(lost, Ordering::Relaxed);
        } else {
            // Blocks given back behind this one are now at the top: the top moves past them.
            loop {
                let at = top.load(Ordering::SeqCst);
                let Some((a, b)) = free.take_ending_at(at) else {
                    break;
                };
                if top
                    .compare_exchange(b, a, Ordering::SeqCst, Ordering::Relaxed)
                    .is_err()
                {
                    // A claim moved the top meanwhile: the block stays free.
                    let lost = free.insert(a, b);
                    self.lost.fetch_add(lost, Ordering::Relaxed);
                    break;
                }
            }
        }
        self.settle(free);
    }

    /// After the top, the end or the free blocks changed (under the lock): the figures and,
    /// while [`TIGHT`], the room last seen follow. The top is read after the gaps: a room
    /// read low because a claim in flight had moved the top is seen again when that claim
    /// gives its block back (under the lock, here).
    fn settle(&self, free: &Free) {
        let end = value(self.end.load(Ordering::SeqCst));
        let (largest, bytes) = free.below(end);
        let top = self.top.0.load(Ordering::SeqCst).min(end);
        self.largest_free.store(largest, Ordering::Release);
        self.free_bytes.store(bytes, Ordering::Release);
        self.tight_top.store(top, Ordering::Release);
        self.room.store((end - top).max(largest), Ordering::Release);
    }

    /// Claims `size` bytes under the lock: the end cannot move, so a block found below it is
    /// good as it is — a free block that holds it, or the top moved by a compare-and-swap
    /// (never past the end).
    fn claim_locked(&self, free: &mut Free, size: usize) -> Result<usize, Full> {
        let end = value(self.end.load(Ordering::SeqCst));
        if let Some(start) = free.take(size, end) {
            self.settle(free);
            return Ok(start);
        }
        let top = &self.top.0;
        let mut start = top.load(Ordering::SeqCst);
        loop {
            match start.checked_add(size) {
                Some(stop) if stop <= end => {
                    match top.compare_exchange_weak(
                        start,
                        stop,
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return Ok(start),
                        Err(now) => start = now,
                    }
                }
                _ => {
                    // Too little room: from now on claims compare-and-swap, and larger ones
                    // fail at once (the room is seen before the flag is).
                    self.settle(free);
                    if end - start.min(end) < TIGHT_ROOM {
                        self.end.fetch_or(TIGHT, Ordering::SeqCst);
                    }
                    return Err(Full {
                        top: start.min(end),
                        end,
                        largest_free: self.largest_free.load(Ordering::Relaxed),
                    });
                }
            }
        }
    }

    /// Raises the end to `new` (an expansion made `[end, new)` usable; `new` a multiple of
    /// the page size). A claim that ran past the old end and reads the new one keeps its
    /// block if it fits; one that read the old end gives it back.
    pub(crate) fn raise_end(&self, new: usize) {
        let free = self.lock();
        debug_assert!(new >= self.end() && new & FLAGS == 0);
        // The figures first: a claim that fits the new end finds it there too. New room: the
        // claims go back to the fetch-and-add way.
        self.committed.store(new, Ordering::Release);
        self.end.store(new, Ordering::SeqCst);
        self.settle(&free);
    }

    /// Lowers the end to `new` (a multiple of the page size) unless claims reach above it.
    /// The new end is stored first and the top read after it, so a claim either shows in the
    /// top or reads the new end and gives its block back if it does not fit (module docs).
    /// If the top went above `new` meanwhile, the old end is put back: blocks claimed against
    /// the new one lie below it, and claims that read it and did not fit claim again.
    pub(crate) fn lower_end(&self, new: usize) -> Lowered {
        let free = self.lock();
        let old = self.end();
        if new >= old {
            return Lowered::Unchanged(old);
        }
        let top = self.top.0.load(Ordering::SeqCst);
        if top > new {
            return Lowered::Refused { top, end: old };
        }
        // Tentative (the figures keep the old end), and without the flag: a claim that failed
        // fast on the smaller room would have failed for nothing if the old end comes back.
        let word = self.end.load(Ordering::SeqCst);
        self.end.store(new, Ordering::SeqCst);
        let top = self.top.0.load(Ordering::SeqCst);
        if top > new {
            self.end.store(word, Ordering::SeqCst);
            self.settle(&free);
            return Lowered::Refused { top, end: old };
        }
        self.committed.store(new, Ordering::Release);
        // Every free block lies below the top, so below the new end. A tight space stays
        // tight (it has less room now), with the room seen first.
        self.settle(&free);
        self.end.fetch_or(word & TIGHT, Ordering::SeqCst);
        Lowered::Moved { old, new }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn claims_stop_at_the_end_and_resume_after_an_expansion() {
        let s = BumpSpace::new(0, 4096);
        assert_eq!(s.claim_explained(8), Ok(0));
        assert_eq!(s.claim_explained(4088), Ok(8));
        let full = s.claim_explained(8).unwrap_err();
        assert_eq!((full.top, full.end), (4096, 4096), "full");
        assert_eq!(s.used_top(), 4096);
        s.raise_end(8192);
        assert_eq!(
            s.claim_explained(8),
            Ok(4096),
            "the failed claim was given back"
        );
        assert_eq!(
            s.claim_explained(2 << 20).unwrap_err().top,
            4104,
            "a large block takes the CAS path, and its failure says where the top is"
        );
        assert_eq!(s.claim_explained(16), Ok(4104));
    }

    #[test]
    fn a_failed_claim_leaves_the_room_to_a_smaller_one() {
        let s = BumpSpace::new(0, 1 << 20);
        assert_eq!(s.claim_explained((1 << 20) - 4096), Ok(0));
        // 4096 bytes left: a 64 KiB claim overshoots and gives its block back.
        let full = s.claim_explained(64 << 10).unwrap_err();
        assert_eq!(
            full.top,
            (1 << 20) - 4096,
            "the failure reports the room that was there"
        );
        assert_eq!(
            s.claim_explained(4096),
            Ok((1 << 20) - 4096),
            "the room is still there"
        );
        assert_eq!(s.used_top(), 1 << 20);
    }

    #[test]
    fn blocks_given_back_behind_others_are_handed_out_again() {
        let s = BumpSpace::new(0, 1 << 16);
        let a = s.claim_explained(4096).unwrap();
        let b = s.claim_explained(4096).unwrap();
        let _c = s.claim_explained(4096).unwrap();
        // Give `a`'s and `b`'s blocks back as a racing claim would: behind `c`.
        {
            let mut free = s.lock();
            s.give_back(&mut free, a, a + 4096);
            s.give_back(&mut free, b, b + 4096);
        }
        assert_eq!(s.lock().blocks, vec![(0, 8192)], "merged");
        assert_eq!(s.used_top(), 4096, "the figures leave the gap out");
        // The fast path takes the top; the slow path (once the top is at the end) the gap.
        assert_eq!(s.claim_explained((1 << 16) - 3 * 4096), Ok(3 * 4096));
        assert_eq!(s.claim_explained(4096), Ok(0), "from the gap");
        assert_eq!(s.claim_explained(4096), Ok(4096));
        assert!(s.claim_explained(8).is_err());
        assert_eq!(s.used_top(), 1 << 16);
        // The top moves past a gap that reaches it.
        let s = BumpSpace::new(0, 1 << 16);
        let a = s.claim_explained(4096).unwrap();
        let b = s.claim_explained(4096).unwrap();
        {
            let mut free = s.lock();
            s.give_back(&mut free, a, a + 4096);
            s.give_back(&mut free, b, b + 4096);
        }
        assert_eq!(s.lock().blocks, vec![]);
        assert_eq!(s.claim_explained(8), Ok(0), "the top is back at 0");
    }

    #[test]
    fn shrinking_keeps_every_block_and_refuses_below_the_top() {
        let s = BumpSpace::new(0, 16 << 12);
        assert_eq!(s.claim_explained(3 << 12), Ok(0));
        assert_eq!(
            s.lower_end(2 << 12),
            Lowered::Refused {
                top: 3 << 12,
                end: 16 << 12
            }
        );
        assert_eq!(s.end(), 16 << 12, "a refused shrink changes nothing");
        assert_eq!(
            s.lower_end(4 << 12),
            Lowered::Moved {
                old: 16 << 12,
                new: 4 << 12
            }
        );
        assert_eq!(s.end(), 4 << 12);
        assert_eq!(s.lower_end(8 << 12), Lowered::Unchanged(4 << 12));
        assert!(s.claim_explained(4 << 12).is_err(), "beyond the new end");
        assert_eq!(
            s.claim_explained(1 << 12),
            Ok(3 << 12),
            "the top is where it was"
        );
        assert_eq!(
            s.lower_end(4 << 12),
            Lowered::Unchanged(4 << 12),
            "at the end already"
        );
        s.raise_end(8 << 12);
        assert_eq!(
            s.claim_explained(8),
            Ok(4 << 12),
            "claims go on after a regrowth"
        );
    }

    /// Claims of mixed sizes racing shrinks and expansions near the end: blocks never
    /// overlap and never lie beyond the end while they are live, a failure always saw too
    /// little room, and once the claimers stop, the top less the free gaps is exactly the
    /// sum of the blocks handed out (nothing lost).
    #[test]
    fn claims_racing_shrinks_and_expansions_neither_overlap_nor_lose_bytes() {
        let s = Arc::new(BumpSpace::new(0, 1 << 20));
        let stop = Arc::new(AtomicBool::new(false));
        let tries = Arc::new([(); 3].map(|()| AtomicUsize::new(0)));
        let failed = Arc::new(AtomicUsize::new(0));
        let claimers: Vec<_> = (0..3)
            .map(|t| {
                let (s, stop, tries, failed) = (
                    Arc::clone(&s),
                    Arc::clone(&stop),
                    Arc::clone(&tries),
                    Arc::clone(&failed),
                );
                std::thread::spawn(move || {
                    let mut blocks = Vec::new();
                    let mut failures = 0usize;
                    let sizes = [8, 64, 4096, 24 << 10, 200 << 10, (1 << 20) + 8];
                    let mut i = t;
                    while !stop.load(Ordering::Relaxed) {
                        let size = sizes[i % sizes.len()];
                        i += 1;
                        tries[t].fetch_add(1, Ordering::Relaxed);
                        match s.claim_explained(size) {
                            Ok(start) => {
                                let end = s.end();
                                assert!(start + size <= end, "block [{start:#x}, +{size}) beyond the end {end:#x}; top {:#x} gaps {:?}", s.top.0.load(Ordering::Relaxed), s.lock().blocks);
                                blocks.push((start, size));
                            }
                            Err(f) => {
                                failures += 1;
                                failed.fetch_add(1, Ordering::Relaxed);
                                assert!(
                                    f.top <= f.end && f.end - f.top < size && f.largest_free < size,
                                    "{size} bytes failed with room: {f:?}"
                                );
                            }
                        }
                    }
                    (blocks, failures)
                })
            })
            .collect();
        let (mut moved, mut refused) = (0, 0);
        // Until every claimer has tried 20,000 times and the race has happened often enough
        // (at most 20 s: on a loaded machine the claimers get less time).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let slowest = || {
            tries
                .iter()
                .map(|t| t.load(Ordering::Relaxed))
                .min()
                .unwrap()
        };
        let mut round = 0usize;
        while (slowest() < 20_000 || moved <= 100 || failed.load(Ordering::Relaxed) <= 100)
            && std::time::Instant::now() < deadline
        {
            round += 1;
            // Just above the top (often below a claim in flight), then a little more room.
            let top = s.top.0.load(Ordering::Relaxed);
            match s.lower_end((top + (round % 8) * (16 << 10)).next_multiple_of(4096)) {
                Lowered::Moved { .. } => moved += 1,
                Lowered::Refused { .. } => refused += 1,
                Lowered::Unchanged(_) => {}
            }
            s.raise_end(s.end() + (round % 3 + 1) * (256 << 10));
        }
        stop.store(true, Ordering::Relaxed);
        let (mut all, mut failures) = (Vec::new(), 0);
        for c in claimers {
            let (blocks, f) = c.join().unwrap();
            all.extend(blocks);
            failures += f;
        }
        all.sort_unstable();
        for w in all.windows(2) {
            assert!(
                w[0].0 + w[0].1 <= w[1].0,
                "overlapping blocks {:?} and {:?}",
                w[0],
                w[1]
            );
        }
        let handed_out: usize = all.iter().map(|b| b.1).sum();
        println!(
            "{} blocks, {failures} failures, {moved} shrinks, {refused} refused, gaps {:?}",
            all.len(),
            s.lock().blocks
        );
        assert_eq!(s.lost(), 0);
        assert_eq!(
            s.used_top(),
            handed_out,
            "bytes lost: top {:#x}",
            s.top.0.load(Ordering::Relaxed)
        );
        assert!(moved > 100 && failures > 100, "the race did not happen");
    }

    #[test]
    fn sizes_round_up_to_words() {
        assert_eq!(alloc_size(0), Some(8));
        assert_eq!(alloc_size(9), Some(16));
        assert_eq!(alloc_size(usize::MAX), None);
    }
}
