//! Reserved address space and the memory committed inside it.
//!
//! States of a page, and the calls that move between them:
//!
//! ```text
//!            reserve                commit                  pretouch
//!   (none) ──────────► Reserved ──────────────► Committed ──────────────► Resident
//!      ▲                 │  ▲      uncommit         │                        │
//!      └──── drop ───────┘  └───────────────────────┴────────────────────────┘
//! ```
//!
//! * **Reserved**: a private anonymous `PROT_NONE` mapping. It owns the addresses and costs
//!   nothing: the kernel charges only writable private mappings, so a `PROT_NONE` range is
//!   never charged, whatever its size or the overcommit mode (the effect `MAP_NORESERVE`
//!   is used for). The flag itself is left off on purpose — see the next point.
//! * **Committed**: `mprotect(PROT_READ|PROT_WRITE)`. Turning a non-`MAP_NORESERVE` range
//!   writable is charged exactly like HotSpot's `mmap(MAP_FIXED)` commit (overcommit charge,
//!   `Committed_AS`), so `-Xms100g` on a 24 GiB machine fails at commit with `ENOMEM` instead
//!   of being OOM-killed at first touch; and unlike a `MAP_FIXED` remap, `mprotect` is
//!   checked against `RLIMIT_DATA` (the kernel counts a `MAP_FIXED` remap over a reservation
//!   as no growth at all).
//! * **Resident**: backed by physical pages, after a write fault or a pretouch.
//!
//! A failed commit leaves the range **reserved and usable**: `mprotect` fails before it
//! changes anything (and a range split across several mappings is put back to `PROT_NONE`).
//! HotSpot exits the VM there, because a failed `MAP_FIXED` may have dropped the reservation.
//!
//! Uncommit remaps the range `PROT_NONE` (`MAP_FIXED`), which frees the pages and the charge
//! at once. Operations that could invalidate memory someone borrowed (uncommit, protect,
//! drop) take `&mut self`; committing a range that is not committed yet cannot, so it takes
//! `&self` and can run while other threads use the committed part.
//!
//! **Publication.** References into the reservation ([`Reservation::atomic_words`]) are
//! handed out only for *published* committed memory. [`Reservation::commit`] publishes at
//! once; [`Reservation::commit_unpublished`] commits a range that nobody can borrow yet, so
//! it can be pretouched and then either [published](Reservation::publish) or given back with
//! [`Reservation::uncommit_unpublished`] — through `&self`, because no reference to it can
//! exist. The published range that starts at offset 0 is also kept in an atomic, so
//! borrowing inside it ([`Reservation::atomic_words`]) takes no lock: the bump allocator
//! above uses it on its hot path.
//!
//! **Lost ranges.** If a failed `MAP_FIXED` remap dropped part of the reservation and it
//! could not be re-reserved, those addresses may belong to someone else by now: every later
//! operation over them is refused (`EFAULT`), and drop leaves them alone.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

use nix::errno::Errno;
use nix::sys::mman::MapFlags;

use crate::error::{Operation, OsError, Result};
use crate::pages::base_page_size;
use crate::pretouch::{pretouch_range, PretouchRequest, Pretouched};
use crate::sys::{self, Protection};

/// Huge page advice for a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugePageAdvice {
    /// `MADV_HUGEPAGE`: back with transparent huge pages where possible (`hg` in VmFlags).
    HugePage,
    /// `MADV_NOHUGEPAGE`: never back with transparent huge pages (`nh` in VmFlags).
    NoHugePage,
}

impl HugePageAdvice {
    fn raw(self) -> (libc::c_int, &'static str) {
        match self {
            HugePageAdvice::HugePage => (libc::MADV_HUGEPAGE, "MADV_HUGEPAGE"),
            HugePageAdvice::NoHugePage => (libc::MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE"),
        }
    }
}

/// A sorted set of disjoint half-open ranges of offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RangeSet(Vec<(usize, usize)>);

impl RangeSet {
    pub(crate) fn insert(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        let (mut s, mut e) = (start, end);
        self.0.retain(|&(a, b)| {
            if b < s || a > e {
                true
            } else {
                s = s.min(a);
                e = e.max(b);
                false
            }
        });
        let at = self.0.partition_point(|&(a, _)| a < s);
        self.0.insert(at, (s, e));
    }

    pub(crate) fn remove(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        let mut out = Vec::with_capacity(self.0.len() + 1);
        for &(a, b) in &self.0 {
            if b <= start || a >= end {
                out.push((a, b));
                continue;
            }
            if a < start {
                out.push((a, start));
            }
            if b > end {
                out.push((end, b));
            }
        }
        self.0 = out;
    }

    pub(crate) fn contains(&self, start: usize, end: usize) -> bool {
        start >= end || self.0.iter().any(|&(a, b)| a <= start && end <= b)
    }

    pub(crate) fn overlaps(&self, start: usize, end: usize) -> bool {
        self.0.iter().any(|&(a, b)| a < end && start < b)
    }

    pub(crate) fn total(&self) -> usize {
        self.0.iter().map(|(a, b)| b - a).sum()
    }
}

/// The state of a reservation's offsets.
#[derive(Debug, Default)]
struct Ranges {
    /// Committed offsets.
    committed: RangeSet,
    /// Committed offsets that are published and read-write (not protected): the only ones
    /// references are handed out for.
    writable: RangeSet,
    /// Offsets lost to a kernel that dropped them on a failed `MAP_FIXED` remap and that
    /// could not be re-reserved; never unmapped by us again (someone else may own them now).
    lost: RangeSet,
}

impl Ranges {
    /// The end of the published, writable range that starts at offset 0 (0 if none).
    fn published_prefix(&self) -> usize {
        match self.writable.0.first() {
            Some(&(0, end)) => end,
            _ => 0,
        }
    }
}

/// `n` bytes as HotSpot's logs show sizes: the largest of G, M, K that divides it exactly.
fn format_size(n: usize) -> String {
    for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    format!("{n}B")
}

/// A reserved range of address space. Releases it on drop.
#[derive(Debug)]
pub struct Reservation {
    base: usize,
    len: usize,
    ranges: Mutex<Ranges>,
    /// `Ranges::published_prefix`, readable without the lock. Grows with Release after the
    /// memory is writable; shrinks through `&mut self`, or `uncommit_shared` of a reservation
    /// that lends nothing.
    prefix: AtomicUsize,
    /// Held for reading while a pretouch runs, for writing while an unpublished range is
    /// uncommitted: a pretouch never races with the range disappearing under it.
    pretouch_gate: RwLock<()>,
    name: Option<String>,
    /// Set by [`Reservation::forbid_lending`]: no atomic words are lent.
    lending_forbidden: bool,
}

impl Reservation {
    /// Reserves `len` bytes aligned to `alignment` (a power of two; the base page size or
    /// less means no extra alignment). Over-reserves by the alignment and trims the ends.
    pub fn reserve(len: usize, alignment: usize) -> Result<Reservation> {
        let page = base_page_size();
        let alignment = alignment.max(page);
        if len == 0 || !len.is_multiple_of(page) || !alignment.is_power_of_two() {
            return Err(OsError::new(Operation::Reserve, 0, len, Errno::EINVAL));
        }
        let extra = alignment - page;
        let total = len.checked_add(extra).ok_or(OsError::new(
            Operation::Reserve,
            0,
            len,
            Errno::ENOMEM,
        ))?;
        let raw = sys::map_anonymous(total, Protection::None, MapFlags::empty())
            .map_err(|e| OsError::new(Operation::Reserve, 0, len, e))?;
        let base = (raw + alignment - 1) & !(alignment - 1);
        let head = base - raw;
        let tail = total - head - len;
        // SAFETY: [raw, base) and [base+len, raw+total) are the trimmed ends of the mapping
        // this function just created; nothing refers to them.
        unsafe {
            if head > 0 {
                let _ = sys::unmap(raw, head);
            }
            if tail > 0 {
                let _ = sys::unmap(base + len, tail);
            }
        }
        log::debug!(target: "os", "Reserved [{base:#018x} - {:#018x}), {len} bytes", base + len);
        Ok(Reservation {
            base,
            len,
            ranges: Mutex::new(Ranges::default()),
            prefix: AtomicUsize::new(0),
            pretouch_gate: RwLock::new(()),
            lending_forbidden: false,
            name: None,
        })
    }

    /// Reserves and commits `len` bytes on explicit huge pages of `page_size` from hugetlbfs
    /// (`MAP_HUGETLB` with the size encoded), as HotSpot reserves "special" memory: the whole
    /// range is committed (the kernel sets the huge pages aside at once, or fails with
    /// `ENOMEM`) and published; pages are faulted in on first touch or by a pretouch. `len`
    /// must be a multiple of `page_size`, a power of two above the base page size.
    pub fn reserve_huge_pages(len: usize, page_size: usize) -> Result<Reservation> {
        if !page_size.is_power_of_two()
            || page_size <= base_page_size()
            || len == 0
            || !len.is_multiple_of(page_size)
        {
            return Err(OsError::new(Operation::Reserve, 0, len, Errno::EINVAL));
        }
        let base = sys::map_anonymous(len, Protection::ReadWrite, sys::huge_page_flags(page_size))
            .map_err(|e| OsError::new(Operation::Reserve, 0, len, e))?;
        let mut ranges = Ranges::default();
        ranges.committed.insert(0, len);
        ranges.writable.insert(0, len);
        log::debug!(target: "pagesize", "Commit special mapping: {base:#018x}, size={}, page size={}", format_size(len), format_size(page_size));
        Ok(Reservation {
            base,
            len,
            prefix: AtomicUsize::new(ranges.published_prefix()),
            ranges: Mutex::new(ranges),
            pretouch_gate: RwLock::new(()),
            lending_forbidden: false,
            name: None,
        })
    }

    /// The first address.
    pub fn base(&self) -> usize {
        self.base
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the reservation is empty (never: reservations have at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The reserved address range.
    pub fn range(&self) -> Range<usize> {
        self.base..self.base + self.len
    }

    /// A raw pointer to the first byte, for handing committed memory to C code.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base as *mut u8
    }

    /// Checks that `[offset, offset+len)` is a non-empty, page-aligned part of the
    /// reservation (`EINVAL`) that was not lost (`EFAULT`); returns its address.
    fn check(&self, ranges: &Ranges, op: Operation, offset: usize, len: usize) -> Result<usize> {
        Self::check_in(self.base, self.len, ranges, op, offset, len)
    }

    /// [`check`](Reservation::check) for callers holding `&mut self`'s ranges.
    fn check_in(
        base: usize,
        size: usize,
        ranges: &Ranges,
        op: Operation,
        offset: usize,
        len: usize,
    ) -> Result<usize> {
        let page = base_page_size();
        let err = |errno| OsError::new(op, base.wrapping_add(offset), len, errno);
        let end = offset.checked_add(len);
        if len == 0
            || !offset.is_multiple_of(page)
            || !len.is_multiple_of(page)
            || end.is_none_or(|e| e > size)
        {
            return Err(err(Errno::EINVAL));
        }
        if ranges.lost.overlaps(offset, offset + len) {
            return Err(err(Errno::EFAULT));
        }
        Ok(base + offset)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ranges> {
        self.ranges.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update_prefix(&self, ranges: &Ranges) {
        self.prefix
            .store(ranges.published_prefix(), Ordering::Release);
    }

    /// Commits `[offset, offset+len)` read-write and publishes it. The range must not be
    /// committed already (`EEXIST`): replacing committed memory would discard data others
    /// may be using.
    pub fn commit(&self, offset: usize, len: usize) -> Result<()> {
        self.commit_unpublished(offset, len)?;
        self.publish(offset, len)
    }

    /// Commits `[offset, offset+len)` read-write without publishing it: no reference into it
    /// is handed out until [`publish`](Reservation::publish), and it can be pretouched and
    /// then given back with [`uncommit_unpublished`](Reservation::uncommit_unpublished).
    pub fn commit_unpublished(&self, offset: usize, len: usize) -> Result<()> {
        let mut ranges = self.lock();
        let addr = self.check(&ranges, Operation::Commit, offset, len)?;
        if ranges.committed.overlaps(offset, offset + len) {
            return Err(OsError::new(Operation::Commit, addr, len, Errno::EEXIST));
        }
        // SAFETY: the range lies in this reservation and is not committed, so no reference
        // into it exists (references are only handed out for committed ranges, under this
        // lock). Making it writable exposes zero pages.
        if let Err(errno) = unsafe { sys::protect(addr, len, Protection::ReadWrite) } {
            // mprotect works mapping by mapping: if the range spans several and a later one
            // failed, put the earlier ones back.
            // SAFETY: as above; the range was PROT_NONE and holds no data anyone can see.
            let _ = unsafe { sys::protect(addr, len, Protection::None) };
            let err = OsError::new(Operation::Commit, addr, len, errno);
            log::info!(target: "os", "Failed to commit [{addr:#018x} - {:#018x}): {err}", addr + len);
            return Err(err);
        }
        ranges.committed.insert(offset, offset + len);
        drop(ranges);
        self.apply_name(addr, len);
        log::debug!(target: "os", "Committed [{addr:#018x} - {:#018x}), {len} bytes", addr + len);
        Ok(())
    }

    /// Publishes a range committed with
    /// [`commit_unpublished`](Reservation::commit_unpublished): from now on it can be
    /// borrowed. `EINVAL` unless the whole range is committed and unpublished.
    pub fn publish(&self, offset: usize, len: usize) -> Result<()> {
        let mut ranges = self.lock();
        let addr = self.check(&ranges, Operation::Commit, offset, len)?;
        if !ranges.committed.contains(offset, offset + len)
            || ranges.writable.overlaps(offset, offset + len)
        {
            return Err(OsError::new(Operation::Commit, addr, len, Errno::EINVAL));
        }
        ranges.writable.insert(offset, offset + len);
        self.update_prefix(&ranges);
        Ok(())
    }

    /// Gives back a committed range that was never published (its pretouch failed, say):
    /// the memory and its commit charge return to the kernel, the range stays reserved.
    /// Waits for pretouches in flight. `EINVAL` unless the whole range is committed and
    /// unpublished.
    pub fn uncommit_unpublished(&self, offset: usize, len: usize) -> Result<()> {
        let _gate = self
            .pretouch_gate
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let mut ranges = self.lock();
        let addr = self.check(&ranges, Operation::Uncommit, offset, len)?;
        if !ranges.committed.contains(offset, offset + len)
            || ranges.writable.overlaps(offset, offset + len)
        {
            return Err(OsError::new(Operation::Uncommit, addr, len, Errno::EINVAL));
        }
        // SAFETY: the range is committed but was never published, so no reference into it
        // was ever handed out; the write gate excludes pretouches, the only other accessor.
        let result =
            unsafe { sys::map_fixed(addr, len, Protection::None, MapFlags::empty(), false) };
        if let Err(errno) = result {
            Self::restore_reservation(self.base, &mut ranges, offset, len);
            return Err(OsError::new(Operation::Uncommit, addr, len, errno));
        }
        ranges.committed.remove(offset, offset + len);
        log::debug!(target: "os", "Uncommitted [{addr:#018x} - {:#018x}), {len} bytes (never published)", addr + len);
        Ok(())
    }

    /// After a failed `MAP_FIXED` remap of `[offset, offset+len)` (uncommit): makes sure the
    /// range is still reserved. The kernel checks limits before it unmaps anything and, since
    /// 6.12, restores the old mapping on later failures; on older kernels the range may be a
    /// hole, which `MAP_FIXED_NOREPLACE` refills without clobbering anything that raced in.
    fn restore_reservation(base: usize, ranges: &mut Ranges, offset: usize, len: usize) {
        let addr = base + offset;
        // SAFETY: MAP_FIXED_NOREPLACE never replaces a mapping: it either fills a hole the
        // kernel left in our reservation, or fails with EEXIST because the old mapping is
        // still there.
        match unsafe { sys::map_fixed(addr, len, Protection::None, MapFlags::empty(), true) } {
            Err(Errno::EEXIST) => {} // the kernel kept the reservation
            Ok(()) => log::warn!(
                target: "os",
                "The kernel dropped [{addr:#018x} - {:#018x}) on a failed remap; re-reserved it",
                addr + len
            ),
            Err(e) => {
                log::error!(
                    target: "os",
                    "Could not re-reserve [{addr:#018x} - {:#018x}) after a failed remap ({}); the range is lost",
                    addr + len,
                    crate::error::strerror(e)
                );
                ranges.lost.insert(offset, offset + len);
                ranges.committed.remove(offset, offset + len);
                ranges.writable.remove(offset, offset + len);
            }
        }
    }

    /// Uncommits `[offset, offset+len)`: the memory goes back to the kernel (RSS and commit
    /// charge drop) and the range stays reserved.
    pub fn uncommit(&mut self, offset: usize, len: usize) -> Result<()> {
        let base = self.base;
        let ranges = self.ranges.get_mut().unwrap_or_else(|p| p.into_inner());
        let addr = Self::check_in(base, self.len, ranges, Operation::Uncommit, offset, len)?;
        // SAFETY: `&mut self` guarantees no reference into the reservation is live, and the
        // range is ours (not lost).
        let result =
            unsafe { sys::map_fixed(addr, len, Protection::None, MapFlags::empty(), false) };
        if let Err(errno) = result {
            Self::restore_reservation(base, ranges, offset, len);
            self.prefix
                .store(ranges.published_prefix(), Ordering::Release);
            return Err(OsError::new(Operation::Uncommit, addr, len, errno));
        }
        ranges.committed.remove(offset, offset + len);
        ranges.writable.remove(offset, offset + len);
        self.prefix
            .store(ranges.published_prefix(), Ordering::Release);
        log::debug!(target: "os", "Uncommitted [{addr:#018x} - {:#018x}), {len} bytes", addr + len);
        Ok(())
    }

    /// Gives back the pages of a committed range while keeping it committed and usable: it
    /// reads as zero afterwards and faults pages in again when touched (`MADV_DONTNEED`).
    /// `EINVAL` unless the whole range is committed.
    ///
    /// Safe: the only references this reservation lends are atomic words
    /// ([`atomic_words`](Reservation::atomic_words)), for which the kernel zeroing a page is
    /// one more concurrent store (of zero); the memory stays mapped and writable. The caller
    /// decides that nobody needs the contents.
    pub fn discard(&self, offset: usize, len: usize) -> Result<()> {
        let ranges = self.lock();
        let addr = self.check(&ranges, Operation::Advise("MADV_DONTNEED"), offset, len)?;
        if !ranges.committed.contains(offset, offset + len) {
            return Err(OsError::new(
                Operation::Advise("MADV_DONTNEED"),
                addr,
                len,
                Errno::EINVAL,
            ));
        }
        drop(ranges);
        // SAFETY: the range is committed memory of this reservation, which lends only atomic
        // references into it (see above); it stays mapped read-write.
        unsafe { sys::madvise(addr, len, libc::MADV_DONTNEED) }
            .map_err(|e| OsError::new(Operation::Advise("MADV_DONTNEED"), addr, len, e))?;
        log::debug!(target: "os", "Discarded [{addr:#018x} - {:#018x}), {len} bytes", addr + len);
        Ok(())
    }

    /// Stops this reservation from lending references ([`atomic_words`] answers `None` from
    /// now on), which lets it uncommit published memory through a shared reference
    /// ([`uncommit_shared`](Reservation::uncommit_shared)): its users reach it only through
    /// the raw pointer, whose dereferences are theirs to make safe.
    ///
    /// [`atomic_words`]: Reservation::atomic_words
    pub fn forbid_lending(&mut self) {
        self.lending_forbidden = true;
    }

    /// Uncommits a committed range through a shared reference: the memory and its commit
    /// charge go back to the kernel and the range is reserved (`PROT_NONE`) again — an access
    /// faults until it is committed anew. Waits for pretouches in flight (a later pretouch
    /// of the range fails with `EINVAL`). `EPERM` unless lending was forbidden
    /// ([`forbid_lending`](Reservation::forbid_lending)), `EINVAL` unless the whole range is
    /// committed.
    pub fn uncommit_shared(&self, offset: usize, len: usize) -> Result<()> {
        let _gate = self
            .pretouch_gate
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let mut ranges = self.lock();
        let addr = self.check(&ranges, Operation::Uncommit, offset, len)?;
        if !self.lending_forbidden {
            return Err(OsError::new(Operation::Uncommit, addr, len, Errno::EPERM));
        }
        if !ranges.committed.contains(offset, offset + len) {
            return Err(OsError::new(Operation::Uncommit, addr, len, Errno::EINVAL));
        }
        // SAFETY: the range is ours and committed; this reservation lends no references (so
        // none into the range is live), and the write gate excludes pretouches.
        let result =
            unsafe { sys::map_fixed(addr, len, Protection::None, MapFlags::empty(), false) };
        if let Err(errno) = result {
            Self::restore_reservation(self.base, &mut ranges, offset, len);
            self.update_prefix(&ranges);
            return Err(OsError::new(Operation::Uncommit, addr, len, errno));
        }
        ranges.committed.remove(offset, offset + len);
        ranges.writable.remove(offset, offset + len);
        self.update_prefix(&ranges);
        log::debug!(target: "os", "Uncommitted [{addr:#018x} - {:#018x}), {len} bytes", addr + len);
        Ok(())
    }

    /// Changes the protection of a committed range (guard zones, read-only regions).
    pub fn protect(&mut self, offset: usize, len: usize, prot: Protection) -> Result<()> {
        let base = self.base;
        let ranges = self.ranges.get_mut().unwrap_or_else(|p| p.into_inner());
        let addr = Self::check_in(base, self.len, ranges, Operation::Protect, offset, len)?;
        if !ranges.committed.contains(offset, offset + len) {
            return Err(OsError::new(Operation::Protect, addr, len, Errno::EINVAL));
        }
        // SAFETY: `&mut self` guarantees no reference into the reservation is live, and the
        // range is committed memory of this reservation.
        unsafe { sys::protect(addr, len, prot) }
            .map_err(|e| OsError::new(Operation::Protect, addr, len, e))?;
        match prot {
            Protection::ReadWrite => ranges.writable.insert(offset, offset + len),
            Protection::None | Protection::Read => ranges.writable.remove(offset, offset + len),
        }
        self.prefix
            .store(ranges.published_prefix(), Ordering::Release);
        log::debug!(target: "os", "Protecting memory [{addr:#018x} - {:#018x}) with {prot:?}", addr + len);
        Ok(())
    }

    /// Whether `[offset, offset+len)` is committed.
    pub fn is_committed(&self, offset: usize, len: usize) -> bool {
        offset
            .checked_add(len)
            .is_some_and(|end| end <= self.len && self.lock().committed.contains(offset, end))
    }

    /// Bytes committed.
    pub fn committed_bytes(&self) -> usize {
        self.lock().committed.total()
    }

    /// Advises a range for or against transparent huge pages. Contents are unaffected.
    pub fn advise(&self, offset: usize, len: usize, advice: HugePageAdvice) -> Result<()> {
        let (raw, name) = advice.raw();
        let addr = self.check(&self.lock(), Operation::Advise(name), offset, len)?;
        // SAFETY: the range is ours; (NO)HUGEPAGE changes VMA flags, never contents.
        unsafe { sys::madvise(addr, len, raw) }
            .map_err(|e| OsError::new(Operation::Advise(name), addr, len, e))
    }

    /// `MADV_COLLAPSE`: synchronously collapses the range into PMD-sized huge pages, as
    /// khugepaged would. Refused (`EINVAL`) for `MADV_NOHUGEPAGE` ranges. Contents are kept.
    /// A test tool (khugepaged made deterministic): only with the `testing` feature.
    #[cfg(any(test, feature = "testing"))]
    pub fn collapse(&self, offset: usize, len: usize) -> Result<()> {
        let addr = self.check(
            &self.lock(),
            Operation::Advise("MADV_COLLAPSE"),
            offset,
            len,
        )?;
        // SAFETY: the range is ours; a collapse copies pages into a huge page and keeps
        // every byte.
        unsafe { sys::madvise(addr, len, sys::MADV_COLLAPSE) }
            .map_err(|e| OsError::new(Operation::Advise("MADV_COLLAPSE"), addr, len, e))
    }

    /// Makes a committed range (published or not) resident without changing its contents;
    /// safe while other threads use the range. `EINVAL` for a range that is not page-aligned
    /// or not committed read-write, before any system call.
    pub fn pretouch(
        &self,
        offset: usize,
        len: usize,
        request: &PretouchRequest,
    ) -> Result<Pretouched> {
        let _gate = self.pretouch_gate.read().unwrap_or_else(|p| p.into_inner());
        let addr = {
            let ranges = self.lock();
            let addr = self.check(&ranges, Operation::Pretouch, offset, len)?;
            let end = offset + len;
            let unpublished_ok =
                ranges.committed.contains(offset, end) && !ranges.writable.overlaps(offset, end);
            if !(ranges.writable.contains(offset, end) || unpublished_ok) {
                return Err(OsError::new(Operation::Pretouch, addr, len, Errno::EINVAL));
            }
            addr
        };
        // SAFETY: the range is committed and writable (checked above) and stays so for the
        // call: uncommit and protect need `&mut self`, which cannot coexist with `&self`, and
        // an unpublished range is uncommitted only under the write gate this call holds for
        // reading.
        unsafe { pretouch_range(addr, len, request) }
    }

    /// Bytes of `[offset, offset+len)` that are resident, per `mincore`.
    pub fn resident_bytes(&self, offset: usize, len: usize) -> Result<usize> {
        let addr = self.check(&self.lock(), Operation::Mincore, offset, len)?;
        let page = base_page_size();
        sys::resident_pages(addr, len, page)
            .map(|p| p * page)
            .map_err(|e| OsError::new(Operation::Mincore, addr, len, e))
    }

    /// A committed, published range as 64-bit atomic words, for safe concurrent use (a
    /// pretouch may run at the same time). `None` unless the range is published read-write
    /// memory, 8-byte aligned and a whole number of words. Inside the published range that
    /// starts at offset 0 this takes no lock: one atomic load.
    #[inline]
    pub fn atomic_words(&self, offset: usize, len: usize) -> Option<&[AtomicU64]> {
        let end = offset.checked_add(len)?;
        if !offset.is_multiple_of(8)
            || !len.is_multiple_of(8)
            || end > self.len
            || self.lending_forbidden
        {
            return None;
        }
        if end > self.prefix.load(Ordering::Acquire) && !self.lock().writable.contains(offset, end)
        {
            return None;
        }
        if len == 0 {
            return Some(&[]);
        }
        // SAFETY: the range is published read-write memory inside this reservation (below the
        // published prefix, which was stored with Release after the memory became writable, or
        // checked under the lock) and stays mapped while `&self` is borrowed: uncommit,
        // protect and drop need `&mut self`, and unpublished-only uncommits never touch
        // published memory. It is 8-byte aligned and a multiple of 8 long; AtomicU64 permits
        // shared mutation.
        Some(unsafe {
            std::slice::from_raw_parts((self.base + offset) as *const AtomicU64, len / 8)
        })
    }

    /// Names the mapping (`[anon:<name>]` in `/proc/self/maps`) where the kernel supports
    /// it (`PR_SET_VMA_ANON_NAME`, Linux 5.17 with `CONFIG_ANON_VMA_NAME`); silently skipped
    /// elsewhere. Returns whether the kernel took the name.
    pub fn set_name(&mut self, name: &str) -> bool {
        self.name = Some(name.to_owned());
        self.apply_name(self.base, self.len)
    }

    fn apply_name(&self, addr: usize, len: usize) -> bool {
        match &self.name {
            Some(name) => crate::naming::name_range(addr, len, name),
            None => false,
        }
    }
}

#[cfg(any(test, feature = "testing"))]
impl Reservation {
    /// What a kernel that dropped part of the reservation on a failed remap leaves behind:
    /// unmaps `[offset, offset+len)` and records it as lost, as `restore_reservation` does
    /// when re-reserving fails. For tests of the lost-range rules only.
    pub fn lose_range_for_test(&mut self, offset: usize, len: usize) -> Result<()> {
        let base = self.base;
        let ranges = self.ranges.get_mut().unwrap_or_else(|p| p.into_inner());
        let addr = Self::check_in(base, self.len, ranges, Operation::Release, offset, len)?;
        // SAFETY: `&mut self`: no reference into the reservation is live; the range is ours.
        unsafe { sys::unmap(addr, len) }
            .map_err(|e| OsError::new(Operation::Release, addr, len, e))?;
        ranges.lost.insert(offset, offset + len);
        ranges.committed.remove(offset, offset + len);
        ranges.writable.remove(offset, offset + len);
        self.prefix
            .store(ranges.published_prefix(), Ordering::Release);
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut keep = RangeSet::default();
        keep.insert(0, self.len);
        let ranges = self.ranges.get_mut().unwrap_or_else(|p| p.into_inner());
        for &(a, b) in &ranges.lost.0 {
            keep.remove(a, b);
        }
        for &(a, b) in &keep.0 {
            // SAFETY: we own the reservation and `&mut self` in drop means no reference into
            // it is live. Lost ranges (possibly someone else's now) are skipped.
            if let Err(e) = unsafe { sys::unmap(self.base + a, b - a) } {
                log::error!(target: "os", "{}", OsError::new(Operation::Release, self.base + a, b - a, e));
            }
        }
        log::debug!(target: "os", "Released [{:#018x} - {:#018x})", self.base, self.base + self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_set() {
        let mut s = RangeSet::default();
        s.insert(10, 20);
        s.insert(30, 40);
        s.insert(20, 30);
        assert_eq!(s.0, vec![(10, 40)]);
        assert!(s.contains(15, 35) && !s.contains(5, 15));
        s.remove(15, 25);
        assert_eq!(s.0, vec![(10, 15), (25, 40)]);
        assert!(s.overlaps(14, 16) && !s.overlaps(15, 25));
        s.insert(0, 100);
        assert_eq!(s.0, vec![(0, 100)]);
        assert_eq!(s.total(), 100);
        s.remove(0, 100);
        assert!(s.0.is_empty());
        assert!(s.contains(5, 5), "empty ranges are trivially contained");
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert_eq!(Reservation::reserve(0, 0).unwrap_err().errno, Errno::EINVAL);
        assert_eq!(
            Reservation::reserve(100, 0).unwrap_err().errno,
            Errno::EINVAL
        );
        assert_eq!(
            Reservation::reserve(4096, 3 * 4096).unwrap_err().errno,
            Errno::EINVAL
        );
        let r = Reservation::reserve(1 << 20, 0).unwrap();
        assert_eq!(r.commit(1, 4096).unwrap_err().errno, Errno::EINVAL);
        assert_eq!(r.commit(0, 2 << 20).unwrap_err().errno, Errno::EINVAL);
        assert_eq!(
            r.commit(usize::MAX - 4095, 4096).unwrap_err().errno,
            Errno::EINVAL
        );
        r.commit(0, 8192).unwrap();
        assert_eq!(
            r.commit(4096, 8192).unwrap_err().errno,
            Errno::EEXIST,
            "no double commit"
        );
        assert!(r.atomic_words(0, 8192).is_some());
        assert!(r.atomic_words(4, 8).is_none());
        assert!(r.atomic_words(0, 16384).is_none());
        assert!(r.pretouch(8192, 4096, &PretouchRequest::default()).is_err());
    }
}
