//! Thread stacks that rtvm maps itself: the layout, the mapping, and what it costs.
//!
//! ```text
//!  low addresses                                                              high addresses
//!  ┌──────────────────────┬────────────────────────────────┬───────────┬─────────────────────┐
//!  │ guard zone           │ usable stack (grows down)      │ alt guard │ alternate signal    │
//!  │ red│yellow│reserved  │                  … TLS, TCB    │ 1 page    │ stack               │
//!  │ PROT_NONE            │ RW                             │ PROT_NONE │ RW                  │
//!  └──────────────────────┴────────────────────────────────┴───────────┴─────────────────────┘
//!  mapping.start = guard.start      usable.end = alt_guard.start      alt_stack.end = mapping.end
//! ```
//!
//! * The **guard zone** is HotSpot's: red + yellow + reserved pages (4 pages, 16 KiB, by
//!   default on x86-64). Any frame smaller than the zone that runs off the usable stack faults
//!   in it, whatever C compiler flags built the frame.
//! * The **alternate signal stack** lies *above* the stack top, behind its own guard page: an
//!   overflow of the stack never reaches it, and a handler that overflows the signal stack
//!   faults in that page — the kernel then switches to the top of the signal stack again and
//!   the handler reports a signal-stack overflow instead of writing into the thread's TLS.
//!
//! **Mitigated** (the default): the mapping is created `PROT_NONE`, advised
//! `MADV_NOHUGEPAGE`, and only then are the usable stack and the signal stack made
//! read-write — all before `pthread_create`. There is no moment at which any part of it is
//! writable without `nh`, and no moment at which a guard is missing.
//!
//! **Unmitigated** (for negative tests): the mapping is plain read-write anonymous memory —
//! no advice and no `MAP_STACK` (recent kernels turn `MAP_STACK` into `VM_NOHUGEPAGE`) — so
//! adjacent stacks merge into one region, and the guards are placed later by the thread
//! itself ([`ThreadContext::install_guard`](crate::thread::ThreadContext::install_guard)), as
//! glibc and HotSpot did on the kernels where JDK-8312182 struck. Stacks are never named
//! (`PR_SET_VMA_ANON_NAME`): a per-thread name would keep adjacent stacks from merging and
//! change what the unmitigated mode reproduces.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use nix::errno::Errno;
use nix::sys::mman::MapFlags;

use crate::error::{Operation, OsError, Result};
use crate::pages::base_page_size;
use crate::sys::{self, Protection};

/// The sizes of HotSpot's three guard zones, in bytes, lowest first. Each a multiple of the
/// page size; together at least one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuardZones {
    /// The red zone, at the very bottom (`StackRedPages`).
    pub red: usize,
    /// The yellow zone above it (`StackYellowPages`).
    pub yellow: usize,
    /// The reserved zone at the top of the guard (`StackReservedPages`).
    pub reserved: usize,
}

impl GuardZones {
    /// HotSpot's x86-64 defaults: red 1, yellow 2, reserved 1 page.
    pub fn hotspot_default() -> GuardZones {
        let page = base_page_size();
        GuardZones {
            red: page,
            yellow: 2 * page,
            reserved: page,
        }
    }

    /// All three together.
    pub fn total(&self) -> usize {
        self.red + self.yellow + self.reserved
    }
}

/// How to map a stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackSpec {
    /// The stack itself — guard zone plus usable part — in bytes: what `-Xss` sets.
    pub size: usize,
    /// The guard zone at its low end.
    pub zones: GuardZones,
    /// Size of the alternate signal stack above the stack (0: none), behind a guard page.
    pub alt_stack_size: usize,
    /// Advise the whole mapping `MADV_NOHUGEPAGE` before any of it is writable.
    pub no_huge_pages: bool,
    /// Protect the guards before the thread exists; otherwise the thread does it.
    pub guard_early: bool,
    /// The thread's name, for overflow reports.
    pub name: String,
}

/// Where the parts of a stack mapping are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackLayout {
    /// The whole mapping.
    pub mapping: Range<usize>,
    /// The guard zone: red, yellow and reserved zone together.
    pub guard: Range<usize>,
    /// The red zone (lowest part of the guard zone).
    pub red: Range<usize>,
    /// The yellow zone.
    pub yellow: Range<usize>,
    /// The reserved zone (highest part of the guard zone).
    pub reserved: Range<usize>,
    /// The part the thread runs on.
    pub usable: Range<usize>,
    /// The guard page below the alternate signal stack (empty without one).
    pub alt_guard: Range<usize>,
    /// The alternate signal stack (empty without one).
    pub alt_stack: Range<usize>,
}

impl StackLayout {
    /// The layout of a stack rtvm did not map (a thread attached to the VM): `usable` as
    /// glibc reports it, and `guard` bytes of guard directly below (glibc's guard page; none
    /// for the process's first thread, whose stack the kernel grows). No zones, no signal
    /// stack of rtvm's.
    pub fn foreign(usable: Range<usize>, guard: usize) -> StackLayout {
        let low = usable.start.saturating_sub(guard);
        let end = usable.end;
        StackLayout {
            mapping: low..end,
            guard: low..usable.start,
            red: low..usable.start,
            yellow: usable.start..usable.start,
            reserved: usable.start..usable.start,
            usable,
            alt_guard: end..end,
            alt_stack: end..end,
        }
    }

    fn new(base: usize, spec: &StackSpec, page: usize) -> StackLayout {
        let z = spec.zones;
        let usable_start = base + z.total();
        let usable_end = base + spec.size;
        let (alt_guard, alt_stack) = if spec.alt_stack_size > 0 {
            (
                usable_end..usable_end + page,
                usable_end + page..usable_end + page + spec.alt_stack_size,
            )
        } else {
            (usable_end..usable_end, usable_end..usable_end)
        };
        StackLayout {
            mapping: base..alt_stack.end,
            guard: base..usable_start,
            red: base..base + z.red,
            yellow: base + z.red..base + z.red + z.yellow,
            reserved: base + z.red + z.yellow..usable_start,
            usable: usable_start..usable_end,
            alt_guard,
            alt_stack,
        }
    }
}

/// The alternate signal stack size to use: 16 KiB, or four times the kernel's
/// `AT_MINSIGSTKSZ` (the signal frame size, large with AVX-512) if that is more, rounded up
/// to pages.
pub fn recommended_alt_stack_size() -> usize {
    const AT_MINSIGSTKSZ: libc::c_ulong = 51;
    let page = base_page_size();
    // SAFETY: getauxval has no preconditions; it returns 0 for a missing entry.
    let min = unsafe { libc::getauxval(AT_MINSIGSTKSZ) } as usize;
    let want = min.saturating_mul(4).max(16 * 1024);
    want.div_ceil(page) * page
}

/// The smallest usable part glibc accepts for a thread stack (`PTHREAD_STACK_MIN`).
pub fn minimum_usable_stack() -> usize {
    // SAFETY: sysconf has no preconditions.
    let min = unsafe { libc::sysconf(libc::_SC_THREAD_STACK_MIN) };
    usize::try_from(min).unwrap_or(16 * 1024).max(16 * 1024)
}

/// The size of the whole mapping a spec asks for (stack, alt guard and signal stack), or
/// `None` if it overflows.
pub fn mapping_size(spec: &StackSpec) -> Option<usize> {
    if spec.alt_stack_size == 0 {
        return Some(spec.size);
    }
    spec.size
        .checked_add(base_page_size())?
        .checked_add(spec.alt_stack_size)
}

/// A thread stack mapped by rtvm. Unmapped on drop.
#[derive(Debug)]
pub struct StackMapping {
    layout: StackLayout,
    spec: StackSpec,
    guard_installed: AtomicBool,
}

impl StackMapping {
    /// Maps a stack as `spec` says. Nothing runs on it yet; for a mitigated spec the guards
    /// are `PROT_NONE` and the whole mapping `nh` when this returns, and neither was ever
    /// otherwise.
    pub fn map(spec: &StackSpec) -> Result<StackMapping> {
        let page = base_page_size();
        let aligned = |n: usize| n.is_multiple_of(page);
        let z = spec.zones;
        let zones_ok = aligned(z.red) && aligned(z.yellow) && aligned(z.reserved);
        let total = mapping_size(spec);
        let guard = z
            .red
            .checked_add(z.yellow)
            .and_then(|g| g.checked_add(z.reserved));
        if !aligned(spec.size)
            || !aligned(spec.alt_stack_size)
            || !zones_ok
            || guard.is_none_or(|g| g == 0 || g >= spec.size)
            || total.is_none()
        {
            return Err(OsError::new(
                Operation::MapStack,
                0,
                spec.size,
                Errno::EINVAL,
            ));
        }
        let total = total.unwrap_or(spec.size);
        let mitigated = spec.guard_early;
        let initial = if mitigated {
            Protection::None
        } else {
            Protection::ReadWrite
        };
        let base = sys::map_anonymous(total, initial, MapFlags::empty())
            .map_err(|e| OsError::new(Operation::MapStack, 0, total, e))?;
        let layout = StackLayout::new(base, spec, page);
        // From here on, `mapping` owns the range: an error drops (unmaps) it.
        let mapping = StackMapping {
            layout,
            spec: spec.clone(),
            guard_installed: AtomicBool::new(false),
        };
        let l = &mapping.layout;
        if spec.no_huge_pages {
            // SAFETY: the mapping was just created here, nothing runs on it and (mitigated)
            // none of it is accessible yet; MADV_NOHUGEPAGE changes VMA flags only.
            unsafe { sys::madvise(base, total, libc::MADV_NOHUGEPAGE) }
                .map_err(|e| OsError::new(Operation::Advise("MADV_NOHUGEPAGE"), base, total, e))?;
        }
        if mitigated {
            for part in [&l.usable, &l.alt_stack] {
                if part.is_empty() {
                    continue;
                }
                // SAFETY: the part belongs to the mapping created above and holds nothing
                // yet; making it writable exposes zero pages to no one but its future thread.
                unsafe { sys::protect(part.start, part.len(), Protection::ReadWrite) }
                    .map_err(|e| OsError::new(Operation::Protect, part.start, part.len(), e))?;
            }
            mapping.guard_installed.store(true, Ordering::Release);
        }
        Ok(mapping)
    }

    /// The layout.
    pub fn layout(&self) -> &StackLayout {
        &self.layout
    }

    /// The spec it was mapped with.
    pub fn spec(&self) -> &StackSpec {
        &self.spec
    }

    /// Whether the guards are protected.
    pub fn guard_installed(&self) -> bool {
        self.guard_installed.load(Ordering::Acquire)
    }

    /// `MADV_COLLAPSE` over every `huge_page`-aligned region the stack touches: what
    /// khugepaged would do to the memory around it, done now. A stack is rarely aligned to
    /// the huge page size, so the regions reach into the neighbouring mappings — with which
    /// an unmitigated stack has merged, exactly as khugepaged sees it. Refused with `EINVAL`
    /// when any part is `MADV_NOHUGEPAGE`; `ENOMEM` if a region is not fully mapped.
    ///
    /// The call reaches memory that is not the stack's — it keeps every byte there, but
    /// changes the RSS of whatever lies around the stack — so it is a test tool, only with the
    /// `testing` feature.
    #[cfg(any(test, feature = "testing"))]
    pub fn collapse(&self, huge_page: usize) -> Result<()> {
        let m = &self.layout.mapping;
        let huge = if huge_page.is_power_of_two() {
            huge_page
        } else {
            base_page_size()
        };
        let start = m.start & !(huge - 1);
        let end = (m.end + huge - 1) & !(huge - 1);
        // SAFETY: MADV_COLLAPSE copies the pages of each region into a huge page and never
        // changes what any address reads, in our mapping and in the neighbouring ones alike;
        // unmapped parts make the call fail, not fault.
        unsafe { sys::madvise(start, end - start, sys::MADV_COLLAPSE) }
            .map_err(|e| OsError::new(Operation::Advise("MADV_COLLAPSE"), start, end - start, e))
    }

    /// Resident bytes of the whole mapping, per `mincore` (how HotSpot's NMT measures
    /// committed stack).
    pub fn resident_bytes(&self) -> Result<usize> {
        let m = &self.layout.mapping;
        let page = base_page_size();
        sys::resident_pages(m.start, m.len(), page)
            .map(|p| p * page)
            .map_err(|e| OsError::new(Operation::Mincore, m.start, m.len(), e))
    }
}

impl StackMapping {
    /// Makes a stack whose thread has been joined ready for another thread: its pages below
    /// `in_use_from` and those of its signal stack are given back (`MADV_DONTNEED`: they read
    /// as zero again and are no longer resident), while the guards stay `PROT_NONE` and the
    /// advice (`MADV_NOHUGEPAGE`) stays on the mapping. The pages from `in_use_from` (the
    /// last stack pointer its thread reported, rounded down to a page) to the top — the
    /// thread's control block and its first frames, which the next thread uses the same way
    /// — stay resident, as glibc keeps the top of the stacks it caches: a reused stack then
    /// starts without page faults. An `in_use_from` outside the usable part gives back all of
    /// it. Only stacks whose guards were in place before their thread existed (mitigated
    /// ones) can be recycled: `EINVAL` otherwise.
    pub fn recycle(&mut self, in_use_from: usize) -> Result<()> {
        let l = &self.layout;
        if !self.reusable() {
            return Err(OsError::new(
                Operation::MapStack,
                l.mapping.start,
                l.mapping.len(),
                Errno::EINVAL,
            ));
        }
        let keep_from = if l.usable.contains(&in_use_from) {
            in_use_from & !(base_page_size() - 1)
        } else {
            l.usable.end
        };
        let parts = if keep_from == l.usable.end {
            // One call over the usable part and the signal stack (the signal stack's guard
            // page between them was never populated).
            [l.usable.start..l.usable.end.max(l.alt_stack.end), 0..0]
        } else {
            [l.usable.start..keep_from, l.alt_stack.clone()]
        };
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            // SAFETY: `&mut self`: no thread runs on this stack (its thread was joined) and
            // nothing refers into it; the part lies inside this mapping.
            unsafe { sys::madvise(part.start, part.len(), libc::MADV_DONTNEED) }.map_err(|e| {
                OsError::new(
                    Operation::Advise("MADV_DONTNEED"),
                    part.start,
                    part.len(),
                    e,
                )
            })?;
        }
        Ok(())
    }

    /// Whether [`recycle`](Self::recycle) can make this stack ready for another thread: its
    /// guards were in place before its thread existed.
    pub fn reusable(&self) -> bool {
        self.guard_installed() && self.spec.guard_early
    }

    /// Names the thread the stack will be given to next.
    pub fn rename(&mut self, name: &str) {
        self.spec.name = name.to_owned();
    }

    /// Whether a thread asking for `spec` can run on this stack: the same sizes, zones,
    /// signal stack and advice (the name aside).
    pub fn fits(&self, spec: &StackSpec) -> bool {
        let s = &self.spec;
        s.size == spec.size
            && s.zones == spec.zones
            && s.alt_stack_size == spec.alt_stack_size
            && s.no_huge_pages == spec.no_huge_pages
            && s.guard_early == spec.guard_early
    }
}

/// Gives back the calling thread's own stack pages below its current frame: on a stack rtvm
/// mapped, from its lowest usable address; on any other thread's stack (one the host created),
/// from the lowest address of the stack's mapping that glibc's bounds include (the first
/// thread's stack is mapped only as far as it has grown). See [`trim_current_stack`].
pub fn trim_own_stack() -> Result<usize> {
    let marker = 0u8;
    let sp = std::hint::black_box(&marker as *const u8 as usize);
    let lowest = match crate::signals::current_usable_stack() {
        Some((start, end)) if (start..end).contains(&sp) => start,
        _ => {
            let (usable, _) = current_thread_stack().ok_or_else(|| {
                OsError::new(Operation::Advise("MADV_DONTNEED"), sp, 0, Errno::ESRCH)
            })?;
            let vma = crate::procfs::maps_overlapping(sp, sp + 1)
                .ok()
                .and_then(|m| m.into_iter().find(|e| e.start <= sp && sp < e.end))
                .ok_or_else(|| {
                    OsError::new(Operation::Advise("MADV_DONTNEED"), sp, 0, Errno::ESRCH)
                })?;
            usable.start.max(vma.start)
        }
    };
    // SAFETY: `lowest` is the lowest usable (mapped) address of this thread's own stack, and
    // the range up to the current frame is below the stack pointer: dead by the ABI.
    unsafe { trim_current_stack(lowest) }
}

/// Gives back the calling thread's stack pages from `lowest` up to just below its current
/// frame (`MADV_DONTNEED`: they read as zero and fault back in when the stack grows again),
/// keeping the page the frame is on and the one below it (the ABI's red zone, and the frames
/// of this call). Returns the bytes that were resident and were given back.
///
/// # Safety
/// `lowest` must be the lowest usable address of the calling thread's own stack (a mapping
/// whose part between `lowest` and the current stack pointer nothing refers to: memory below
/// a thread's stack pointer is dead by the ABI), or the range must otherwise be memory no one
/// uses.
#[inline(never)]
pub unsafe fn trim_current_stack(lowest: usize) -> Result<usize> {
    let marker = 0u8;
    let sp = std::hint::black_box(&marker as *const u8 as usize);
    let page = base_page_size();
    let lowest = lowest.next_multiple_of(page);
    let end = (sp & !(page - 1)).saturating_sub(page);
    if end <= lowest {
        return Ok(0);
    }
    let len = end - lowest;
    let freed = sys::resident_pages(lowest, len, page).unwrap_or(0) * page;
    // SAFETY: forwarded to the caller: the range lies below this frame and its red zone on
    // the calling thread's stack; a signal is only delivered once the call has returned.
    unsafe { sys::madvise(lowest, len, libc::MADV_DONTNEED) }
        .map_err(|e| OsError::new(Operation::Advise("MADV_DONTNEED"), lowest, len, e))?;
    Ok(freed)
}

impl Drop for StackMapping {
    fn drop(&mut self) {
        let m = &self.layout.mapping;
        // SAFETY: a StackMapping is dropped only when no thread runs on it (an `OsThread`
        // joins first), and it owns the mapping.
        if let Err(e) = unsafe { sys::unmap(m.start, m.len()) } {
            log::error!(target: "os+thread", "{}", OsError::new(Operation::Release, m.start, m.len(), e));
        }
    }
}

/// The stack bounds glibc reports for the calling thread (`pthread_getattr_np`), and its
/// guard size.
pub fn current_thread_stack() -> Option<(Range<usize>, usize)> {
    // SAFETY: `attr` is initialised by pthread_getattr_np before use and destroyed after;
    // the out-pointers point to locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let mut guard: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        let _ = libc::pthread_attr_getguardsize(&attr, &mut guard);
        libc::pthread_attr_destroy(&mut attr);
        (rc == 0).then(|| (addr as usize..addr as usize + size, guard))
    }
}

/// Whether this kernel marks `MAP_STACK` mappings `VM_NOHUGEPAGE` (`nh`), which protects
/// glibc-allocated stacks from THP since about Linux 6.8. Probed once on a mapping of our
/// own; rtvm's mitigation does not rely on it.
pub fn kernel_marks_map_stack_nohugepage() -> bool {
    static PROBE: OnceLock<bool> = OnceLock::new();
    *PROBE.get_or_init(|| {
        crate::probe::on_scratch_page(MapFlags::MAP_STACK, |addr| {
            crate::procfs::smaps_for(addr)
                .ok()
                .flatten()
                .is_some_and(|e| e.has_flag("nh"))
        })
        .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(size: usize, mitigated: bool) -> StackSpec {
        StackSpec {
            size,
            zones: GuardZones::hotspot_default(),
            alt_stack_size: recommended_alt_stack_size(),
            no_huge_pages: mitigated,
            guard_early: mitigated,
            name: "unit".into(),
        }
    }

    #[test]
    fn bad_specs() {
        let page = base_page_size();
        let zero = GuardZones {
            red: 0,
            yellow: 0,
            reserved: 0,
        };
        for s in [
            StackSpec {
                size: 100,
                ..spec(1 << 20, true)
            },
            StackSpec {
                zones: zero,
                ..spec(1 << 20, true)
            },
            StackSpec {
                zones: GuardZones {
                    red: 1 << 20,
                    ..zero
                },
                ..spec(1 << 20, true)
            },
            StackSpec {
                zones: GuardZones {
                    yellow: page + 1,
                    ..zero
                },
                ..spec(1 << 20, true)
            },
            StackSpec {
                alt_stack_size: page + 1,
                ..spec(1 << 20, true)
            },
            StackSpec {
                zones: GuardZones {
                    red: usize::MAX - page + 1,
                    yellow: page,
                    reserved: 0,
                },
                ..spec(1 << 20, true)
            },
            StackSpec {
                alt_stack_size: usize::MAX - page + 1,
                ..spec(1 << 20, true)
            },
        ] {
            assert_eq!(
                StackMapping::map(&s).unwrap_err().errno,
                Errno::EINVAL,
                "{s:?}"
            );
        }
    }

    #[test]
    fn layout_adds_up() {
        let page = base_page_size();
        let sp = spec(1 << 20, true);
        let s = StackMapping::map(&sp).unwrap();
        let l = s.layout();
        assert_eq!(l.mapping.start, l.guard.start);
        assert_eq!((l.red.start, l.red.end), (l.guard.start, l.yellow.start));
        assert_eq!(
            (l.yellow.end, l.reserved.end),
            (l.reserved.start, l.guard.end)
        );
        assert_eq!(l.guard.len(), 4 * page);
        assert_eq!(l.guard.end, l.usable.start);
        assert_eq!(
            l.usable.end - l.guard.start,
            1 << 20,
            "-Xss covers guard + usable"
        );
        assert_eq!(l.usable.end, l.alt_guard.start);
        assert_eq!(l.alt_guard.len(), page);
        assert_eq!(l.alt_guard.end, l.alt_stack.start);
        assert_eq!(l.alt_stack.len(), sp.alt_stack_size);
        assert_eq!(l.alt_stack.end, l.mapping.end);
        assert_eq!(Some(l.mapping.len()), mapping_size(&sp));
        assert!(s.guard_installed());
        let no_alt = StackMapping::map(&StackSpec {
            alt_stack_size: 0,
            ..sp
        })
        .unwrap();
        assert!(no_alt.layout().alt_stack.is_empty() && no_alt.layout().alt_guard.is_empty());
        assert_eq!(no_alt.layout().mapping.len(), 1 << 20);
    }
}
