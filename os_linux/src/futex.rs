//! Private futex waits and wakes on a process's own words: raw system calls, so they may be
//! used from signal handlers (the SIGQUIT handler, the stop signal's).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Waits while `word` holds `expected`, up to `timeout` (none: forever). Returns at once if
/// it does not; spurious returns (a signal, a wake for another value) are possible, so
/// callers re-check.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a word of a live atomic with a local (or no) timeout; the kernel
    // only reads the word and the timespec. Async-signal-safe (a raw system call).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
        );
    }
}

/// Wakes up to `n` waiters on `word`.
pub(crate) fn wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE on a word of a live atomic; async-signal-safe.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
    }
}
