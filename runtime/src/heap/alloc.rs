//! The heap's lock-free bump allocator over offsets: a top that `fetch_add` moves, and a
//! committed end that only expansions move. It knows nothing of the memory behind the
//! offsets; the heap turns a claim into a block.
//!
//! The end is read before a claim, and a claim succeeds only inside the end it saw: that is
//! what makes moving the top back (`fail_claim`, `clamp_top`) safe.
//!
//! The end may also move down ([`BumpSpace::shrink`]). A claim made against an end read
//! before the shrink began must then not succeed beyond the new end, so every claim checks
//! the end again after it moved the top: the shrink raises a flag in the end word and then
//! swaps the top, the claim moves the top and then reads the end (sequentially consistent,
//! both), so either the shrink's swap sees the claim (and keeps its memory) or the claim sees
//! the flag (and fails, to be retried once the shrink is over).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// Set in the end word (page-aligned, so its low bits are free) while failed claims may have
/// left the top beyond the committed end and no one could clamp it yet.
const CLAMP_PENDING: usize = 1;

/// Set in the end word when a clamp found the top at the end: every claim fails with one load
/// until an expansion.
const HEAP_FULL: usize = 2;

/// Set in the end word while a shrink runs: claims that see it fail and wait for the shrink.
const SHRINKING: usize = 4;

/// The flag bits of the end word.
const END_FLAGS: usize = CLAMP_PENDING | HEAP_FULL | SHRINKING;

/// The largest block claimed with `fetch_add`; larger ones take the compare-and-swap path,
/// which never overshoots (this bounds how far failed claims can push the top).
const FETCH_ADD_MAX: usize = 1 << 20;

/// The size an allocation of `bytes` takes: rounded up to 8, at least 8 (so every allocation
/// has a unique address). `None` if that overflows.
#[inline(always)]
pub(crate) fn alloc_size(bytes: usize) -> Option<usize> {
    Some((bytes.checked_add(7)? & !7).max(8))
}

/// An atomic on a cache line of its own (128 bytes: adjacent-line prefetchers pair lines).
#[derive(Debug, Default)]
#[repr(align(128))]
struct OwnLine(AtomicUsize);

/// `[start, end)` offsets handed out by bumping a top towards a committed end.
#[derive(Debug)]
pub(crate) struct BumpSpace {
    /// End of the committed part (offset), with [`END_FLAGS`] in the low bits. Written only
    /// under `expand_lock` (apart from setting `CLAMP_PENDING`).
    end: AtomicUsize,
    /// The top, alone on its cache line: every allocation writes it, and `end` (read by every
    /// allocation) must not share the line.
    top: OwnLine,
    /// Serializes moving the end; guards no data (a poisoned lock is still usable).
    expand_lock: Mutex<()>,
}

impl BumpSpace {
    /// A space whose top starts at `start` and whose end is `end` (page-aligned).
    pub(crate) fn new(start: usize, end: usize) -> BumpSpace {
        BumpSpace {
            end: AtomicUsize::new(end),
            top: OwnLine(AtomicUsize::new(start)),
            expand_lock: Mutex::new(()),
        }
    }

    /// The committed end (published: what lies below was made usable before it was stored).
    #[inline]
    pub(crate) fn end(&self) -> usize {
        self.end.load(Ordering::Acquire) & !END_FLAGS
    }

    /// The top, never beyond the end.
    pub(crate) fn top(&self) -> usize {
        self.top.0.load(Ordering::Relaxed).min(self.end())
    }

    /// Claims `size` bytes (already rounded by [`alloc_size`]) from any thread without a
    /// lock: one `fetch_add` in the common case (blocks over 1 MiB: a compare-and-swap
    /// loop). `None` when the committed part cannot hold them — as cheap as a success (never
    /// blocking; one load once the space is full).
    ///
    /// Only when failed claims race with each other near the end may the last bytes before
    /// the end stay unused until the next expansion.
    #[inline]
    pub(crate) fn claim(&self, size: usize) -> Option<usize> {
        let snapshot = self.end.load(Ordering::Acquire);
        if snapshot & END_FLAGS == 0 && size <= FETCH_ADD_MAX {
            let start = self.top.0.fetch_add(size, Ordering::SeqCst);
            if start.checked_add(size).is_some_and(|end| end <= snapshot) {
                // The end again, after the top moved: a shrink that began meanwhile (see the
                // module docs) makes the claim fail and wait for it.
                let now = self.end.load(Ordering::SeqCst);
                if now & SHRINKING == 0 && start + size <= now & !END_FLAGS {
                    return Some(start);
                }
                self.fail_claim(start, size, snapshot);
                return self.claim_after_shrink(size, now);
            }
            self.fail_claim(start, size, snapshot);
            return None;
        }
        self.claim_slow(size, snapshot)
    }

    /// A claim that met a shrink: waits for it to end and claims again (against the new end).
    #[cold]
    #[inline(never)]
    fn claim_after_shrink(&self, size: usize, seen: usize) -> Option<usize> {
        if seen & SHRINKING == 0 {
            return None;
        }
        drop(self.expand_lock.lock().unwrap_or_else(|p| p.into_inner()));
        self.claim(size)
    }

    /// A `fetch_add` claim `[start, start+size)` ran past the end `snapshot` and moved the top
    /// beyond it. With the expansion lock (tried, never waited for): take the claim back if
    /// nothing was claimed after it and the end has not moved, then clamp. Without it: mark a
    /// clamp pending, which stops every `fetch_add` until someone clamps. Never blocks.
    #[cold]
    #[inline(never)]
    fn fail_claim(&self, start: usize, size: usize, snapshot: usize) {
        let Some(_guard) = self.try_lock() else {
            self.end.fetch_or(CLAMP_PENDING, Ordering::Relaxed);
            return;
        };
        if self.end.load(Ordering::Relaxed) & !END_FLAGS == snapshot {
            // The end is the one the claim saw and cannot move (lock held). Every claim made
            // after this one started beyond it, so failed; if the top is still this claim's
            // end, each of them was taken back, and the bytes from `start` are free again.
            let _ = self.top.0.compare_exchange(
                start.wrapping_add(size),
                start,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        self.clamp_top();
    }

    fn try_lock(&self) -> Option<MutexGuard<'_, ()>> {
        match self.expand_lock.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Blocks over [`FETCH_ADD_MAX`], and any claim while the space is full or a clamp is
    /// pending: clamp if possible, then claim with a compare-and-swap loop that never moves
    /// the top past the end.
    #[cold]
    #[inline(never)]
    fn claim_slow(&self, size: usize, mut snapshot: usize) -> Option<usize> {
        if snapshot & CLAMP_PENDING != 0 {
            // Busy lock: an expansion runs (it clamps when it ends) or another thread clamps.
            let _guard = self.try_lock()?;
            self.clamp_top();
            snapshot = self.end.load(Ordering::Acquire);
        }
        if snapshot & END_FLAGS != 0 {
            return None;
        }
        let top = &self.top.0;
        let mut start = top.load(Ordering::Relaxed);
        loop {
            let end = start.checked_add(size).filter(|&end| end <= snapshot)?;
            match top.compare_exchange_weak(start, end, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => {
                    let now = self.end.load(Ordering::SeqCst);
                    if now & SHRINKING == 0 && end <= now & !END_FLAGS {
                        return Some(start);
                    }
                    // A shrink began: give the block back if nothing came after it, wait.
                    let _ = top.compare_exchange(end, start, Ordering::Relaxed, Ordering::Relaxed);
                    return self.claim_after_shrink(size, now);
                }
                Err(now) => start = now,
            }
        }
    }

    /// Moves the top back to the end if failed claims left it beyond, clears a pending
    /// clamp, and marks the space full if the top is at the end. Called with the expansion
    /// lock held, so the end cannot move.
    ///
    /// Safe because every successful claim ended inside a snapshot of the end taken before
    /// it, and the end only grows: no offset handed out lies beyond the current end, so none
    /// is handed out twice. The top cannot run away: a thread's `fetch_add` overshoots by at
    /// most [`FETCH_ADD_MAX`] before it clamps or marks a clamp pending (which stops every
    /// `fetch_add`), so the top stays below the end plus 2 × threads × 1 MiB.
    fn clamp_top(&self) {
        let end = self.end.load(Ordering::Relaxed) & !END_FLAGS;
        let top = &self.top.0;
        let mut now = top.load(Ordering::Relaxed);
        while now > end {
            match top.compare_exchange_weak(now, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => now = end,
                Err(seen) => now = seen,
            }
        }
        if now == end {
            self.end.fetch_or(HEAP_FULL, Ordering::Relaxed);
        } else {
            self.end.fetch_and(!HEAP_FULL, Ordering::Relaxed);
        }
        self.end.fetch_and(!CLAMP_PENDING, Ordering::Relaxed);
    }

    /// Moves the end under the expansion lock: `grow(old_end)` makes the memory beyond the
    /// end usable and returns the new end (`Ok(None)`: unchanged). Allocations that failed
    /// while the space was full (and while `grow` ran) may have left the top beyond the old
    /// end: that is reclaimed before the end moves.
    pub(crate) fn expand<E>(
        &self,
        grow: impl FnOnce(usize) -> Result<Option<usize>, E>,
    ) -> Result<usize, E> {
        let _guard = self.expand_lock.lock().unwrap_or_else(|p| p.into_inner());
        let result = grow(self.end());
        self.clamp_top();
        match result {
            Ok(Some(end)) => {
                self.end.store(end, Ordering::Release);
                Ok(end)
            }
            Ok(None) => Ok(self.end()),
            Err(e) => Err(e),
        }
    }

    /// Moves the end down under the expansion lock. Claims are stopped first (the end word
    /// flagged, the top swapped to the end: from then on no claim succeeds), so the top then
    /// read is at or above the end of every block handed out: `decide(used, end)` returns
    /// the new end (`Ok(None)`: keep the end) and `give_back(new, old)` releases the memory
    /// between. On any failure the space is as it was; claims that met the shrink are
    /// retried against the end it leaves.
    pub(crate) fn shrink<E>(
        &self,
        decide: impl FnOnce(usize, usize) -> Result<Option<usize>, E>,
        give_back: impl FnOnce(usize, usize) -> Result<(), E>,
    ) -> Result<usize, E> {
        let _guard = self.expand_lock.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.end();
        self.end.fetch_or(SHRINKING, Ordering::SeqCst);
        let used = self.top.0.swap(old, Ordering::SeqCst).min(old);
        let outcome = decide(used, old).and_then(|new| match new {
            Some(new) if new < old && new >= used => give_back(new, old).map(|()| new),
            _ => Ok(old),
        });
        self.top.0.store(used, Ordering::SeqCst);
        match &outcome {
            Ok(new) => self.end.store(*new, Ordering::SeqCst),
            Err(_) => {
                self.end.fetch_and(!SHRINKING, Ordering::SeqCst);
            }
        }
        self.clamp_top();
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_stop_at_the_end_and_resume_after_an_expansion() {
        let s = BumpSpace::new(0, 4096);
        assert_eq!(s.claim(8), Some(0));
        assert_eq!(s.claim(4088), Some(8));
        assert_eq!(s.claim(8), None, "full");
        assert_eq!(s.top(), 4096);
        assert_eq!(s.expand(|old| Ok::<_, ()>(Some(old + 4096))), Ok(8192));
        assert_eq!(s.claim(8), Some(4096), "the failed claim was taken back");
        assert_eq!(s.claim(2 << 20), None, "a large block takes the CAS path");
        assert_eq!(s.expand(|_| Err::<Option<usize>, _>("no")), Err("no"));
        assert_eq!(s.end(), 8192, "a failed expansion keeps the end");
    }

    #[test]
    fn shrinking_keeps_every_block_and_stops_claims_meanwhile() {
        let s = BumpSpace::new(0, 16 << 12);
        assert_eq!(s.claim(3 << 12), Some(0));
        let new = s.shrink(
            |used, end| {
                assert_eq!((used, end), (3 << 12, 16 << 12));
                assert_eq!(
                    s.claim(8),
                    None,
                    "no claim succeeds while the top is swapped"
                );
                Ok::<_, ()>(Some(4 << 12))
            },
            |new, old| {
                assert_eq!((new, old), (4 << 12, 16 << 12));
                Ok(())
            },
        );
        assert_eq!(new, Ok(4 << 12));
        assert_eq!(s.end(), 4 << 12);
        assert_eq!(s.claim(4 << 12), None, "beyond the new end");
        assert_eq!(s.claim(1 << 12), Some(3 << 12), "the top is where it was");
        // A failed give-back leaves the space as it was.
        assert_eq!(
            s.shrink(|_, _| Ok(Some(4 << 12)), |_, _| Err("no")),
            Ok(4 << 12),
            "nothing below the top is given back"
        );
        assert_eq!(
            s.shrink(|_, _| Ok::<_, &str>(None), |_, _| unreachable!()),
            Ok(4 << 12)
        );
        let s = BumpSpace::new(0, 8 << 12);
        assert_eq!(
            s.shrink(|_, _| Ok(Some(4 << 12)), |_, _| Err("no")),
            Err("no")
        );
        assert_eq!(s.end(), 8 << 12);
        assert_eq!(s.claim(8), Some(0), "claims work after a failed shrink");
    }

    /// Claims racing a loop of shrinks and expansions: no block ever lies beyond the end a
    /// shrink left (each claimer checks its block against the end after the claim; each
    /// give-back against the blocks recorded so far).
    #[test]
    fn claims_racing_shrinks_never_get_given_back_memory() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let s = Arc::new(BumpSpace::new(0, 1 << 24));
        let highest = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let claimers: Vec<_> = (0..3)
            .map(|_| {
                let (s, highest, stop) = (Arc::clone(&s), Arc::clone(&highest), Arc::clone(&stop));
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(start) = s.claim(64) {
                            highest.fetch_max(start + 64, Ordering::SeqCst);
                            // Once handed out, a block is below every end from then on.
                            assert!(
                                s.end() >= start + 64,
                                "block [{start}, +64) beyond the end {}",
                                s.end()
                            );
                        }
                    }
                })
            })
            .collect();
        for _ in 0..2000 {
            let _ = s.shrink(
                |used, end| Ok::<_, ()>(Some(((used + 4095) & !4095).min(end))),
                |new, _| {
                    assert!(
                        highest.load(Ordering::SeqCst) <= new,
                        "a block beyond the new end {new}"
                    );
                    Ok(())
                },
            );
            let _ = s.expand(|old| Ok::<_, ()>(Some((old + (1 << 16)).min(1 << 24))));
        }
        stop.store(true, Ordering::Relaxed);
        for c in claimers {
            c.join().unwrap();
        }
    }

    #[test]
    fn sizes_round_up_to_words() {
        assert_eq!(alloc_size(0), Some(8));
        assert_eq!(alloc_size(9), Some(16));
        assert_eq!(alloc_size(usize::MAX), None);
    }
}
