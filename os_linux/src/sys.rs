//! The system calls that create, change and remove mappings. Every other module goes through
//! these; each wrapper states what its caller must guarantee.

use std::ffi::{c_int, c_void, CStr};
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use nix::errno::Errno;
use nix::sys::mman::{self, MapFlags, ProtFlags};

/// `MADV_POPULATE_WRITE` (Linux 5.14); libc only defines it on some targets.
pub(crate) const MADV_POPULATE_WRITE: c_int = 23;
/// `MADV_COLLAPSE` (Linux 6.1); libc defines it for glibc targets only.
#[cfg(any(test, feature = "testing"))]
pub(crate) const MADV_COLLAPSE: c_int = 25;

/// Page protections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    /// No access: reserved memory and guard zones.
    None,
    /// Read only.
    Read,
    /// Read and write: committed memory.
    ReadWrite,
}

impl Protection {
    fn flags(self) -> ProtFlags {
        match self {
            Protection::None => ProtFlags::PROT_NONE,
            Protection::Read => ProtFlags::PROT_READ,
            Protection::ReadWrite => ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
        }
    }
}

fn non_null(addr: usize) -> NonNull<c_void> {
    NonNull::new(addr as *mut c_void).expect("mapping address is never 0")
}

fn non_zero(len: usize) -> Result<NonZeroUsize, Errno> {
    NonZeroUsize::new(len).ok_or(Errno::EINVAL)
}

/// `MAP_HUGETLB` with `page_size` encoded (log2 in the bits from `MAP_HUGE_SHIFT`), for a
/// mapping on explicit huge pages of that size.
pub(crate) fn huge_page_flags(page_size: usize) -> MapFlags {
    let shift = page_size.trailing_zeros() as libc::c_int;
    MapFlags::MAP_HUGETLB | MapFlags::from_bits_retain(shift << libc::MAP_HUGE_SHIFT)
}

/// Maps `len` bytes of fresh anonymous private memory wherever the kernel likes and returns
/// the address. Never replaces an existing mapping, so it is safe.
pub(crate) fn map_anonymous(len: usize, prot: Protection, extra: MapFlags) -> Result<usize, Errno> {
    let flags = MapFlags::MAP_PRIVATE | MapFlags::MAP_ANONYMOUS | extra;
    debug_assert!(!flags.contains(MapFlags::MAP_FIXED));
    // SAFETY: without MAP_FIXED the kernel picks an unused range, so no existing memory
    // (and no Rust object) is affected; the new mapping is owned by the caller.
    let ptr = unsafe { mman::mmap_anonymous(None, non_zero(len)?, prot.flags(), flags) }?;
    Ok(ptr.as_ptr() as usize)
}

/// Maps fresh anonymous memory exactly at `[addr, addr+len)`, replacing what is there
/// (`MAP_FIXED`), or failing with `EEXIST` if `no_replace` and something is mapped there.
///
/// # Safety
/// Unless `no_replace`, the range must belong to the caller and no reference into it may be
/// live: its contents are replaced by zero pages.
pub(crate) unsafe fn map_fixed(
    addr: usize,
    len: usize,
    prot: Protection,
    extra: MapFlags,
    no_replace: bool,
) -> Result<(), Errno> {
    let fixed = if no_replace {
        MapFlags::MAP_FIXED_NOREPLACE
    } else {
        MapFlags::MAP_FIXED
    };
    let flags = MapFlags::MAP_PRIVATE | MapFlags::MAP_ANONYMOUS | fixed | extra;
    let want = NonZeroUsize::new(addr).ok_or(Errno::EINVAL)?;
    // SAFETY: the caller guarantees the range is theirs to replace (or no_replace is set,
    // in which case the kernel refuses to touch an existing mapping).
    let got = unsafe { mman::mmap_anonymous(Some(want), non_zero(len)?, prot.flags(), flags) }?;
    if got.as_ptr() as usize != addr {
        // Kernels before 4.17 ignore MAP_FIXED_NOREPLACE and may map elsewhere.
        // SAFETY: `got` is the mapping just created by this call and nothing refers to it.
        let _ = unsafe { mman::munmap(got, len) };
        return Err(Errno::EEXIST);
    }
    Ok(())
}

/// Unmaps `[addr, addr+len)`.
///
/// # Safety
/// The range must belong to the caller and no reference into it may be live.
pub(crate) unsafe fn unmap(addr: usize, len: usize) -> Result<(), Errno> {
    // SAFETY: forwarded to the caller.
    unsafe { mman::munmap(non_null(addr), len) }
}

/// Changes the protection of `[addr, addr+len)`.
///
/// # Safety
/// The range must belong to the caller; when access is reduced, no reference into it may be
/// used afterwards.
pub(crate) unsafe fn protect(addr: usize, len: usize, prot: Protection) -> Result<(), Errno> {
    // SAFETY: forwarded to the caller.
    unsafe { mman::mprotect(non_null(addr), len, prot.flags()) }
}

/// `madvise(addr, len, advice)` with a raw advice number (nix has no `MADV_COLLAPSE`).
///
/// # Safety
/// The range must belong to the caller. Destructive advice (`MADV_DONTNEED`, ...) also
/// requires that no reference into the range is live; the advice rtvm uses otherwise
/// (`MADV_HUGEPAGE`, `MADV_NOHUGEPAGE`, `MADV_POPULATE_WRITE`, `MADV_COLLAPSE`) never
/// changes the memory's contents.
pub(crate) unsafe fn madvise(addr: usize, len: usize, advice: c_int) -> Result<(), Errno> {
    // SAFETY: forwarded to the caller; madvise does not touch memory Rust can see except as
    // the advice documents.
    let rc = unsafe { libc::madvise(addr as *mut c_void, len, advice) };
    Errno::result(rc).map(drop)
}

/// Counts the resident pages of `[addr, addr+len)` with `mincore`. `addr` must be page
/// aligned. Only reads kernel state, so it is safe for any range; an unmapped range gives
/// `ENOMEM`.
pub(crate) fn resident_pages(addr: usize, len: usize, page: usize) -> Result<usize, Errno> {
    if len == 0 {
        return Ok(0);
    }
    const BATCH: usize = 64 * 1024;
    let pages = len.div_ceil(page);
    let mut vec = vec![0u8; pages.min(BATCH)];
    let mut resident = 0;
    let mut done = 0;
    while done < pages {
        let n = (pages - done).min(BATCH);
        let start = addr + done * page;
        let chunk_len = (n * page).min(len - done * page);
        // SAFETY: `vec` has room for `n` entries, one per page of the chunk; mincore only
        // writes into it and never accesses the queried range.
        let rc = unsafe { libc::mincore(start as *mut c_void, chunk_len, vec.as_mut_ptr()) };
        Errno::result(rc)?;
        resident += vec[..n].iter().filter(|&&b| b & 1 != 0).count();
        done += n;
    }
    Ok(resident)
}

/// Names an anonymous mapping (`[anon:<name>]` in `/proc/self/maps`). Metadata only.
pub(crate) fn set_vma_name(addr: usize, len: usize, name: &CStr) -> Result<(), Errno> {
    // SAFETY: PR_SET_VMA_ANON_NAME reads the NUL-terminated `name` (kept alive for the call)
    // and changes VMA metadata only, never memory contents.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_VMA,
            libc::PR_SET_VMA_ANON_NAME as libc::c_ulong,
            addr as libc::c_ulong,
            len as libc::c_ulong,
            name.as_ptr() as libc::c_ulong,
        )
    };
    Errno::result(rc).map(drop)
}

/// Sends `signo` to thread `tid` of this process (`tgkill`); signal 0 only asks whether the
/// thread exists (`ESRCH` once the kernel has released it).
pub(crate) fn tgkill(tid: i32, signo: libc::c_int) -> Result<(), Errno> {
    // SAFETY: a signal to a thread of this very process: its action is what the process
    // installed (or the default); no memory is passed.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, signo) };
    Errno::result(rc).map(drop)
}

/// The calling thread's kernel thread id.
pub fn current_tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}
