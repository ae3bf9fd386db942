//! OS-layer errors: every failure names the operation, the range and the errno.

use std::fmt;

use nix::errno::Errno;

/// The memory operation that failed, named as HotSpot names it in its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Reserving address space (`os::reserve_memory`).
    Reserve,
    /// Making reserved memory usable (`os::commit_memory`).
    Commit,
    /// Returning committed memory to the kernel (`os::uncommit_memory`).
    Uncommit,
    /// Unmapping (`os::release_memory`).
    Release,
    /// Changing protection (`os::protect_memory`).
    Protect,
    /// Advising the kernel (`madvise`), with the advice's name.
    Advise(&'static str),
    /// Making memory resident (`os::pretouch_memory`).
    Pretouch,
    /// Mapping a thread stack.
    MapStack,
    /// Naming a mapping (`prctl(PR_SET_VMA_ANON_NAME)`).
    Name,
    /// Asking which pages are resident (`mincore`).
    Mincore,
}

/// A failed OS memory operation.
///
/// Displays like HotSpot's warning:
/// `os::commit_memory(0x00000000c0000000, 1073741824, 0) failed; error='Not enough space' (errno=12)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct OsError {
    /// What was attempted.
    pub op: Operation,
    /// Start of the range (0 when the kernel was free to choose).
    pub addr: usize,
    /// Length of the range in bytes.
    pub len: usize,
    /// The kernel's error.
    pub errno: Errno,
}

impl OsError {
    pub(crate) fn new(op: Operation, addr: usize, len: usize, errno: Errno) -> OsError {
        OsError {
            op,
            addr,
            len,
            errno,
        }
    }

    /// The errno's description as HotSpot words it in these messages (POSIX's: `Not
    /// enough space` for `ENOMEM`; see [`posix_description`]).
    pub fn description(&self) -> String {
        posix_description(self.errno)
    }

    /// Whether the failure means "not enough memory" (address space, commit charge, limits).
    pub fn is_out_of_memory(&self) -> bool {
        self.errno == Errno::ENOMEM
    }
}

impl fmt::Display for OsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (addr, len, errno) = (self.addr, self.len, self.errno as i32);
        match self.op {
            Operation::Reserve => write!(f, "os::reserve_memory({len}) failed")?,
            Operation::Commit => write!(f, "os::commit_memory({addr:#018x}, {len}, 0) failed")?,
            Operation::Uncommit => write!(f, "os::uncommit_memory({addr:#018x}, {len}) failed")?,
            Operation::Release => write!(f, "os::release_memory({addr:#018x}, {len}) failed")?,
            Operation::Protect => write!(f, "os::protect_memory({addr:#018x}, {len}) failed")?,
            Operation::Advise(advice) => {
                write!(f, "::madvise({addr:#018x}, {len}, {advice}) failed")?
            }
            Operation::Pretouch => write!(
                f,
                "os::pretouch_memory({addr:#018x}, {len}) failed: [{addr:#018x}, {:#018x}) was not made resident",
                addr + len
            )?,
            Operation::MapStack => write!(f, "mapping a thread stack of {len} bytes failed")?,
            Operation::Name => write!(f, "naming the mapping at {addr:#018x} ({len} bytes) failed")?,
            Operation::Mincore => write!(f, "mincore({addr:#018x}, {len}) failed")?,
        }
        write!(f, "; error='{}' (errno={errno})", self.description())
    }
}

/// An errno's description in the words of POSIX's `<errno.h>` — the words HotSpot prints
/// in `error='...' (errno=N)` (its own table, not the C library's: `Not enough space`
/// where glibc says `Cannot allocate memory`). Errnos POSIX does not describe fall back to
/// [`strerror`].
pub fn posix_description(errno: Errno) -> String {
    let text = match errno {
        Errno::E2BIG => "Argument list too long",
        Errno::EACCES => "Permission denied",
        Errno::EAGAIN => "Resource unavailable, try again",
        Errno::EBADF => "Bad file descriptor",
        Errno::EBUSY => "Device or resource busy",
        Errno::EEXIST => "File exists",
        Errno::EFAULT => "Bad address",
        Errno::EFBIG => "File too large",
        Errno::EINTR => "Interrupted function",
        Errno::EINVAL => "Invalid argument",
        Errno::EIO => "I/O error",
        Errno::EMFILE => "File descriptor value too large",
        Errno::ENFILE => "Too many files open in system",
        Errno::ENODEV => "No such device",
        Errno::ENOENT => "No such file or directory",
        Errno::ENOMEM => "Not enough space",
        Errno::ENOSPC => "No space left on device",
        Errno::ENOSYS => "Functionality not supported",
        Errno::ENXIO => "No such device or address",
        Errno::EOVERFLOW => "Value too large to be stored in data type",
        Errno::EPERM => "Operation not permitted",
        Errno::ESRCH => "No such process",
        _ => return strerror(errno),
    };
    text.to_owned()
}

/// The C library's description of an errno (`strerror`), for rtvm's own messages.
pub fn strerror(errno: Errno) -> String {
    let text = std::io::Error::from_raw_os_error(errno as i32).to_string();
    match text.rfind(" (os error ") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    }
}

/// Result of an OS-layer call.
pub type Result<T, E = OsError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotspot_shape() {
        let e = OsError::new(Operation::Commit, 0xc000_0000, 1 << 30, Errno::ENOMEM);
        assert_eq!(
            e.to_string(),
            "os::commit_memory(0x00000000c0000000, 1073741824, 0) failed; error='Not enough space' (errno=12)"
        );
        let e = OsError::new(Operation::Pretouch, 0x1000, 0x2000, Errno::EFAULT);
        assert_eq!(
            e.to_string(),
            "os::pretouch_memory(0x0000000000001000, 8192) failed: [0x0000000000001000, 0x0000000000003000) \
             was not made resident; error='Bad address' (errno=14)"
        );
        let e = OsError::new(
            Operation::Advise("MADV_COLLAPSE"),
            0x200000,
            0x200000,
            Errno::EINVAL,
        );
        assert!(e
            .to_string()
            .starts_with("::madvise(0x0000000000200000, 2097152, MADV_COLLAPSE) failed"));
        assert!(e
            .to_string()
            .ends_with("error='Invalid argument' (errno=22)"));
    }
}
