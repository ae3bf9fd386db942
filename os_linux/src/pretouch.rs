//! Pretouch: make a committed range resident without changing a single byte, safely while
//! other threads read and write it (JDK-8272807).
//!
//! Two primitives, the fastest first:
//! * `MADV_POPULATE_WRITE` (Linux 5.14): the kernel faults every page in writable, as if
//!   written, without accessing the memory — contents are untouched by construction.
//!   Support is probed **by effect** once per process: a fresh page must be resident
//!   afterwards (`mincore`). A kernel that accepts advice 23 but means something else by it
//!   (Oracle UEK's `MADV_DONTEXEC`) fails the probe instead of passing it.
//! * An atomic add of zero to one byte per page: a write fault that cannot lose a
//!   concurrent store.
//!
//! Arguments are checked before any system call (a page-aligned, non-empty range; a
//! power-of-two stride): a caller's mistake is an `EINVAL` error of its own and never
//! mistaken for a kernel verdict. `EINVAL`, `ENOSYS` or `EPERM` from `MADV_POPULATE_WRITE`
//! on a valid range (an old kernel, a seccomp profile that refuses advice it does not know)
//! turn it off for the rest of the process — logged once — and the range is touched
//! instead. `ENOMEM`, `EFAULT` and `EHWPOISON` are errors naming the range that was not made
//! resident — HotSpot silently skips the rest of the chunk there; rtvm does not.

use std::fmt;
#[cfg(not(target_arch = "x86_64"))]
use std::sync::atomic::AtomicU8;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::errno::Errno;

use crate::error::{Operation, OsError, Result};
use crate::pages::base_page_size;
use crate::sys::{self, MADV_POPULATE_WRITE};
use nix::sys::mman::MapFlags;

/// How a range was made resident.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Primitive {
    /// `madvise(MADV_POPULATE_WRITE)`.
    PopulateWrite,
    /// An atomic add of zero per page.
    AtomicAdd,
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Primitive::PopulateWrite => "MADV_POPULATE_WRITE",
            Primitive::AtomicAdd => "atomic-add",
        })
    }
}

/// What a pretouch should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PretouchRequest {
    /// The stride of the touching fallback: the size of the pages backing the range as the
    /// fault path sees them. Use the base page size for THP-backed memory (a huge page fault
    /// that falls back to small pages would otherwise leave pages untouched); a power of two.
    pub page_size: usize,
    /// Use `MADV_POPULATE_WRITE` if the kernel has it (`-XX:+UseMadvPopulateWrite`).
    pub use_populate_write: bool,
}

impl Default for PretouchRequest {
    fn default() -> Self {
        PretouchRequest {
            page_size: base_page_size(),
            use_populate_write: true,
        }
    }
}

/// What a pretouch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pretouched {
    /// Bytes made resident.
    pub bytes: usize,
    /// The primitive that did it.
    pub primitive: Primitive,
    /// Wall time taken.
    pub elapsed: Duration,
}

static POPULATE_DISABLED: AtomicBool = AtomicBool::new(false);

/// Whether `MADV_POPULATE_WRITE` works here, probed once by its effect.
pub fn populate_write_supported() -> bool {
    static PROBE: OnceLock<bool> = OnceLock::new();
    *PROBE.get_or_init(|| {
        let (ok, why) = probe_populate_write();
        if ok {
            log::debug!(target: "os", "MADV_POPULATE_WRITE: supported ({why})");
        } else {
            log::info!(target: "os", "MADV_POPULATE_WRITE: not usable ({why}); pretouch will touch every page");
        }
        ok
    })
}

/// Whether an errno from `MADV_POPULATE_WRITE` on a valid range means "this process cannot
/// use the primitive" rather than "this population failed".
fn means_unsupported(errno: Errno) -> bool {
    matches!(errno, Errno::EINVAL | Errno::ENOSYS | Errno::EPERM)
}

fn probe_populate_write() -> (bool, String) {
    let page = base_page_size();
    let probe = crate::probe::on_scratch_page(MapFlags::empty(), |addr| {
        // SAFETY: `addr` is the scratch page, mapped read-write for this probe only.
        let advised = unsafe { sys::madvise(addr, page, MADV_POPULATE_WRITE) };
        (advised, sys::resident_pages(addr, page, page))
    });
    let (advised, resident) = match probe {
        Ok(r) => r,
        Err(e) => {
            return (
                false,
                format!(
                    "probe page could not be mapped: {}",
                    crate::error::strerror(e)
                ),
            )
        }
    };
    match (advised, resident) {
        // The kernel does not know the advice (before 5.14), or a filter refuses it.
        (Err(e), _) if means_unsupported(e) => (
            false,
            format!("madvise returned {}", crate::error::strerror(e)),
        ),
        // Any other error means the advice was understood but this population failed (out
        // of memory, ...): the primitive exists, and real uses report their own errors.
        (Err(e), _) => (
            true,
            format!(
                "the advice exists; the probe page failed with {}",
                crate::error::strerror(e)
            ),
        ),
        (Ok(()), Ok(1)) => (true, "a fresh page became resident".into()),
        (Ok(()), Ok(_)) => (
            false,
            "the kernel accepted advice 23 but the page stayed non-resident".into(),
        ),
        (Ok(()), Err(e)) => (
            false,
            format!("mincore failed: {}", crate::error::strerror(e)),
        ),
    }
}

/// Whether a later `EINVAL`, `ENOSYS` or `EPERM` has switched `MADV_POPULATE_WRITE` off for
/// this process.
pub fn populate_write_disabled() -> bool {
    POPULATE_DISABLED.load(Ordering::Relaxed)
}

/// The primitive a request will start with.
pub fn primitive_for(request: &PretouchRequest) -> Primitive {
    if request.use_populate_write && !populate_write_disabled() && populate_write_supported() {
        Primitive::PopulateWrite
    } else {
        Primitive::AtomicAdd
    }
}

/// Makes `[addr, addr+len)` resident without changing its contents. `addr` and `len` must
/// be multiples of the base page size and `request.page_size` a power of two (else
/// `EINVAL`, before any system call).
///
/// # Safety
/// The range must be mapped readable and writable for the whole call (committed memory
/// owned by the caller or its VM). Other threads may read and write it concurrently: neither
/// primitive changes a byte (`MADV_POPULATE_WRITE` never accesses the memory; the fallback
/// is an atomic read-modify-write of zero).
pub unsafe fn pretouch_range(
    addr: usize,
    len: usize,
    request: &PretouchRequest,
) -> Result<Pretouched> {
    let start = Instant::now();
    let page = base_page_size();
    if !addr.is_multiple_of(page)
        || !len.is_multiple_of(page)
        || addr.checked_add(len).is_none()
        || !request.page_size.is_power_of_two()
    {
        return Err(OsError::new(Operation::Pretouch, addr, len, Errno::EINVAL));
    }
    if len == 0 {
        return Ok(Pretouched {
            bytes: 0,
            primitive: primitive_for(request),
            elapsed: start.elapsed(),
        });
    }
    if primitive_for(request) == Primitive::PopulateWrite {
        // SAFETY: the caller guarantees the range is committed; POPULATE_WRITE does not
        // change contents.
        match unsafe { populate(addr, len) } {
            Ok(()) => {
                return Ok(Pretouched {
                    bytes: len,
                    primitive: Primitive::PopulateWrite,
                    elapsed: start.elapsed(),
                })
            }
            Err(errno) if means_unsupported(errno) => {
                if !POPULATE_DISABLED.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        target: "os",
                        "MADV_POPULATE_WRITE failed with {errno:?} ({}) on [{addr:#x}, {:#x}); touching pages from now on",
                        crate::error::strerror(errno),
                        addr + len
                    );
                }
            }
            Err(errno) => return Err(OsError::new(Operation::Pretouch, addr, len, errno)),
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { touch(addr, len, request.page_size) };
    Ok(Pretouched {
        bytes: len,
        primitive: Primitive::AtomicAdd,
        elapsed: start.elapsed(),
    })
}

/// # Safety
/// See [`pretouch_range`].
unsafe fn populate(addr: usize, len: usize) -> std::result::Result<(), Errno> {
    let mut attempts = 0;
    loop {
        // SAFETY: forwarded; the advice never changes contents.
        match unsafe { sys::madvise(addr, len, MADV_POPULATE_WRITE) } {
            // A pending signal interrupts population; the part done stays done.
            Err(Errno::EINTR) if attempts < 16 => attempts += 1,
            other => return other,
        }
    }
}

/// Touches one byte per `stride` with an atomic add of zero.
///
/// The add is written so that no compiler can drop it: LLVM turns an idempotent
/// `atomicrmw add 0` into a plain load, and a load of an untouched anonymous page only maps
/// the shared zero page — nothing becomes resident. On x86-64 the add is inline assembly
/// (`lock add byte ptr [p], 0`, a locked write cycle); elsewhere the zero is hidden behind
/// `black_box`.
///
/// # Safety
/// See [`pretouch_range`].
unsafe fn touch(addr: usize, len: usize, stride: usize) {
    debug_assert!(stride.is_power_of_two());
    let end = addr + len;
    let mut p = addr;
    while p < end {
        // SAFETY: `p` lies inside the committed, writable range (caller's guarantee); a
        // byte needs no alignment, and an atomic RMW of zero cannot change or tear a
        // concurrent store to the same byte.
        unsafe { atomic_add_zero(p as *mut u8) };
        p = (p & !(stride - 1)) + stride;
    }
}

/// # Safety
/// `p` must point to mapped, writable memory.
#[inline(always)]
unsafe fn atomic_add_zero(p: *mut u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller guarantees `p` is writable; a locked add of zero is an atomic
    // read-modify-write that leaves the byte as it was.
    unsafe {
        std::arch::asm!("lock add byte ptr [{p}], 0", p = in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as above; `AtomicU8` has the layout of `u8` and any address is aligned for it.
    unsafe {
        AtomicU8::from_ptr(p).fetch_add(std::hint::black_box(0), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_is_by_effect_and_stable() {
        let first = populate_write_supported();
        assert_eq!(first, populate_write_supported());
        let (direct, why) = probe_populate_write();
        assert_eq!(direct, first, "{why}");
    }

    #[test]
    fn bad_arguments_fail_before_any_system_call() {
        let page = base_page_size();
        let ok = PretouchRequest::default();
        let bad_stride = PretouchRequest {
            page_size: 3000,
            ..ok
        };
        for (addr, len, req) in [
            (page + 1, page, ok),
            (page, page + 1, ok),
            (page, page, bad_stride),
        ] {
            // SAFETY: the arguments are rejected before any memory is touched.
            let e = unsafe { pretouch_range(addr, len, &req) }.unwrap_err();
            assert_eq!(e.errno, Errno::EINVAL);
        }
        assert!(
            !populate_write_disabled(),
            "a caller's mistake is not a kernel verdict"
        );
        assert!(means_unsupported(Errno::EPERM) && means_unsupported(Errno::ENOSYS));
        assert!(!means_unsupported(Errno::ENOMEM));
    }

    #[test]
    fn request_can_force_the_fallback() {
        let r = PretouchRequest {
            page_size: 4096,
            use_populate_write: false,
        };
        assert_eq!(primitive_for(&r), Primitive::AtomicAdd);
        assert_eq!(Primitive::PopulateWrite.to_string(), "MADV_POPULATE_WRITE");
    }
}
