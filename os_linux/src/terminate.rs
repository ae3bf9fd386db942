//! `SIGTERM`, `SIGINT` and `SIGHUP` for a VM that must not leave its files behind, as
//! HotSpot's shutdown signals: the handler only records the signal and wakes the dispatcher
//! (the futex word of [`crate::quit`]); the dispatcher, on a normal thread, removes what the
//! VM put in `/tmp` and ends the process.
//!
//! **Whose signals.** [`install`] takes only the signals whose action is `SIG_DFL` (the
//! process would end at once, files left behind): a handler the host installed stays the
//! host's, and an ignored signal stays ignored (`nohup`, a shell's background job), as
//! HotSpot leaves an ignored shutdown signal alone. rtvm's handler left by an earlier VM
//! counts as `SIG_DFL` (it was installed over it).
//!
//! **No VM to clean up after.** Whenever no dispatcher of this process will act on the
//! signal — [`TerminationHandlers::stop_accepting`] was called, or this is a child of
//! `fork()`, whose copy of the VM has no threads — the handler puts `SIG_DFL` back and
//! raises the signal again: it ends the process as it would have without rtvm.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Mutex;

use nix::errno::Errno;

/// The signals handled here, in the order [`take_pending`] reports them.
pub const SIGNALS: [c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// Signals received and not yet taken, one bit per signal number.
static PENDING: AtomicU32 = AtomicU32::new(0);
/// The pid of the process whose dispatcher takes the signals, or 0 when none does.
static ACCEPTING: AtomicI32 = AtomicI32::new(0);
/// Serializes install and restore.
static LOCK: Mutex<()> = Mutex::new(());

fn our_handler() -> usize {
    on_signal as *const () as usize
}

/// Whether a handler address is rtvm's termination handler.
pub fn is_ours(handler: usize) -> bool {
    handler == our_handler()
}

/// The name of one of [`SIGNALS`].
pub fn name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

fn query(sig: c_int) -> libc::sigaction {
    // SAFETY: a zeroed sigaction is a valid out-parameter; a NULL new action only queries.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old);
        old
    }
}

fn set(sig: c_int, handler: usize, flags: c_int) -> Result<(), Errno> {
    // SAFETY: a zeroed-then-filled sigaction naming SIG_DFL or rtvm's handler.
    let rc = unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = handler;
        a.sa_flags = flags;
        libc::sigemptyset(&mut a.sa_mask);
        libc::sigaction(sig, &a, std::ptr::null_mut())
    };
    Errno::result(rc).map(drop)
}

/// rtvm's handlers for the signals [`install`] took; [`restore`](Self::restore) (or
/// dropping it) puts `SIG_DFL` back where rtvm's handler still is.
#[derive(Debug)]
pub struct TerminationHandlers {
    owned: Vec<c_int>,
    restored: bool,
}

/// Installs rtvm's handler for each of [`SIGNALS`] whose action is `SIG_DFL`, and makes the
/// calling process the one that takes them ([`take_pending`]). Signals with another action
/// are left alone (logged at debug level).
pub fn install() -> Result<TerminationHandlers, Errno> {
    let _guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    PENDING.store(0, Ordering::Release);
    ACCEPTING.store(std::process::id() as i32, Ordering::Release);
    let mut owned = Vec::new();
    for sig in SIGNALS {
        let current = query(sig).sa_sigaction;
        if current == libc::SIG_DFL || current == our_handler() {
            if let Err(e) = set(sig, our_handler(), libc::SA_SIGINFO | libc::SA_RESTART) {
                for &s in &owned {
                    let _ = set(s, libc::SIG_DFL, 0);
                }
                ACCEPTING.store(0, Ordering::Release);
                return Err(e);
            }
            owned.push(sig);
        } else {
            let what = if current == libc::SIG_IGN {
                "ignored: it stays ignored"
            } else {
                "the host's handler: it stays the host's"
            };
            log::debug!(target: "os", "{}: {what}", name(sig));
        }
    }
    Ok(TerminationHandlers {
        owned,
        restored: false,
    })
}

impl TerminationHandlers {
    /// The signals rtvm handles.
    pub fn signals(&self) -> &[c_int] {
        &self.owned
    }

    /// From now on the handler ends the process at once by the signal's default action: no
    /// dispatcher takes signals any more. Returns a signal received before and not taken.
    pub fn stop_accepting(&self) -> Option<c_int> {
        ACCEPTING.store(0, Ordering::Release);
        take_pending()
    }

    /// Puts `SIG_DFL` back for every signal whose action is still rtvm's handler (a handler
    /// the host installed on top stays). Returns a signal received and not taken, if any.
    pub fn restore(mut self) -> Option<c_int> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Option<c_int> {
        if std::mem::replace(&mut self.restored, true) {
            return None;
        }
        let _guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let pending = self.stop_accepting();
        for &sig in &self.owned {
            if query(sig).sa_sigaction == our_handler() {
                if let Err(e) = set(sig, libc::SIG_DFL, 0) {
                    log::warn!(target: "os", "Restoring {} failed: {}", name(sig), crate::error::strerror(e));
                }
            } else {
                log::info!(target: "os", "{}: the handler was replaced after rtvm installed its own; leaving it in place", name(sig));
            }
        }
        pending
    }
}

impl Drop for TerminationHandlers {
    fn drop(&mut self) {
        if let Some(sig) = self.restore_now() {
            // Nobody is left to act on it: what the signal would have done.
            end_by_default(sig);
        }
    }
}

extern "C" fn on_signal(sig: c_int, _info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {
    // SAFETY: getpid is async-signal-safe and touches no memory.
    let me = unsafe { libc::getpid() };
    if ACCEPTING.load(Ordering::Acquire) == me && (0..32).contains(&sig) {
        PENDING.fetch_or(1 << sig, Ordering::AcqRel);
        crate::quit::post();
        return;
    }
    // SAFETY: sigaction and raise are async-signal-safe; SIG_DFL is installed, and the signal
    // raised again is delivered when this handler returns (it is blocked until then).
    unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut a.sa_mask);
        libc::sigaction(sig, &a, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// A signal received and not yet taken (at most one per call: `SIGTERM`, then `SIGINT`,
/// then `SIGHUP`), now taken.
pub fn take_pending() -> Option<c_int> {
    for sig in SIGNALS {
        let bit = 1u32 << sig;
        if PENDING.fetch_and(!bit, Ordering::AcqRel) & bit != 0 {
            return Some(sig);
        }
    }
    None
}

/// Ends the process by `sig`'s default action, as if rtvm had never handled it: `SIG_DFL`
/// put back, the signal unblocked in the calling thread and raised. Returns only if that did
/// not end the process (a handler installed meanwhile by the host took the signal).
pub fn end_by_default(sig: c_int) {
    let _ = set(sig, libc::SIG_DFL, 0);
    // SAFETY: a local signal set naming `sig`, unblocked in this thread, then raised.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a child process: the handler records the signal; after `stop_accepting` it ends the
    /// process by the default action.
    #[test]
    fn records_then_ends_by_default() {
        // SAFETY: fork in a test; the child only calls async-signal-safe functions and this
        // module's, then _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = (|| {
                let h = install().ok()?;
                if h.signals() != SIGNALS {
                    return Some(10);
                }
                // SAFETY: raising SIGTERM with rtvm's handler installed.
                unsafe { libc::raise(libc::SIGTERM) };
                if take_pending() != Some(libc::SIGTERM) || take_pending().is_some() {
                    return Some(11);
                }
                // SAFETY: as above.
                unsafe { libc::raise(libc::SIGHUP) };
                if h.stop_accepting() != Some(libc::SIGHUP) {
                    return Some(12);
                }
                // No dispatcher: the default action ends the process here.
                // SAFETY: as above.
                unsafe { libc::raise(libc::SIGINT) };
                Some(13)
            })()
            .unwrap_or(14);
            // SAFETY: ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGINT,
            "the child ended with status {status:#x}, not by SIGINT"
        );
    }
}
