//! `SIGQUIT` for a dispatcher thread, as HotSpot's signal dispatcher takes it: the handler
//! does nothing but count the signal and wake whoever waits — a futex on a word of this
//! library's own, so no descriptor can be closed under it and nothing is left to leak — and
//! the dispatcher, on a normal thread, decides what the signal means (start the attach
//! listener, print a thread dump).
//!
//! **Ownership and chaining.** [`install`] saves the action that was there and puts rtvm's
//! on top; [`QuitHandler::restore`] (or dropping it) puts a saved handler or `SIG_IGN` back
//! — unless a handler was installed on top in the meantime: that one stays, and rtvm's stays
//! in the chain below it (it may be called through it; it then only counts). Over `SIG_DFL`
//! rtvm's handler stays too, only counting: the default action is a core dump, and a
//! `SIGQUIT` meant for a VM that is going away (a `kill -3`, an attach client that found it
//! a moment before) must not end the process — during the rest of the teardown, the heap's
//! unmapping, the exit, or in a host that runs on without a VM. HotSpot's handler stays for
//! the life of the process too; `-Xrs` leaves `SIGQUIT` to the host altogether. The next VM
//! takes the handler over. rtvm's handler is
//! never saved as its own "previous", and a handler known to sit above rtvm's in the chain
//! is never saved as the previous either (the two would call each other) — the rules of
//! [`crate::signals`], for one signal.
//!
//! **The host's handler.** A handler the process had installed before is not called in
//! signal context: the dispatcher calls it, on its own thread, with the signal's `siginfo`
//! (the last one received) and a zeroed `ucontext` ([`forward_to_previous`]), when it decides
//! the signal was not rtvm's.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use nix::errno::Errno;

/// SIGQUITs received since the process started.
static QUITS: AtomicU32 = AtomicU32::new(0);
/// Everything a dispatcher must wake for: a SIGQUIT, or a [`kick`]. The futex word.
static EVENTS: AtomicU32 = AtomicU32::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// rtvm's handler is in the chain: installed, or below a handler installed after it.
static IN_CHAIN: AtomicBool = AtomicBool::new(false);
/// The action rtvm's handler was installed over (read by the dispatcher, never by the
/// handler).
static PREVIOUS: Mutex<Option<Action>> = Mutex::new(None);

/// The last `siginfo`, copied by the handler when nobody reads it.
struct LastInfo {
    busy: AtomicBool,
    info: UnsafeCell<MaybeUninit<libc::siginfo_t>>,
    valid: AtomicBool,
}

// SAFETY: `info` is written and read only by whoever set `busy` from false to true.
unsafe impl Sync for LastInfo {}

static LAST_INFO: LastInfo = LastInfo {
    busy: AtomicBool::new(false),
    info: UnsafeCell::new(MaybeUninit::uninit()),
    valid: AtomicBool::new(false),
};

/// A saved `sigaction`.
#[derive(Clone, Copy)]
struct Action(libc::sigaction);

// SAFETY: a sigaction is plain data (a handler address, a mask, flags).
unsafe impl Send for Action {}

/// rtvm's `SIGQUIT` handler, installed; restores the previous action when dropped.
#[derive(Debug)]
pub struct QuitHandler {
    restored: bool,
    baseline: u32,
}

fn our_handler() -> usize {
    on_quit as *const () as usize
}

/// Whether a handler address is rtvm's `SIGQUIT` handler.
pub fn is_ours(handler: usize) -> bool {
    handler == our_handler()
}

fn query() -> libc::sigaction {
    // SAFETY: a zeroed sigaction is a valid out-parameter; a NULL new action only queries.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGQUIT, std::ptr::null(), &mut old);
        old
    }
}

fn set_action(action: &libc::sigaction) -> Result<(), Errno> {
    // SAFETY: a fully initialised sigaction naming rtvm's handler or one the process had.
    Errno::result(unsafe { libc::sigaction(libc::SIGQUIT, action, std::ptr::null_mut()) }).map(drop)
}

fn is_default_or_ignore(a: &libc::sigaction) -> bool {
    a.sa_sigaction == libc::SIG_DFL || a.sa_sigaction == libc::SIG_IGN
}

fn lock_previous() -> std::sync::MutexGuard<'static, Option<Action>> {
    PREVIOUS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Installs rtvm's `SIGQUIT` handler (see the module documentation for the chain's rules).
/// Fails with `EBUSY` while another [`QuitHandler`] is alive.
pub fn install() -> Result<QuitHandler, Errno> {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return Err(Errno::EBUSY);
    }
    let baseline = quit_count();
    let current = query();
    if current.sa_sigaction == our_handler() {
        // Left by an earlier VM, or put back by a host handler that chained to it: keep it
        // and what it forwards to.
        log::debug!(target: "os", "SIGQUIT: rtvm's handler already installed");
    } else if IN_CHAIN.load(Ordering::Acquire) && !is_default_or_ignore(&current) {
        // A host handler on top that may call rtvm's: stay below it.
        log::debug!(target: "os", "SIGQUIT: rtvm's handler stays below a handler installed after it");
    } else {
        // SAFETY: zeroed-then-filled sigaction naming our handler.
        let ours = unsafe {
            let mut a: libc::sigaction = std::mem::zeroed();
            a.sa_sigaction = our_handler();
            a.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut a.sa_mask);
            a
        };
        *lock_previous() = Some(Action(current));
        if let Err(e) = set_action(&ours) {
            INSTALLED.store(false, Ordering::Release);
            return Err(e);
        }
        log::debug!(target: "os", "SIGQUIT: rtvm's handler installed over {}", describe(&current));
    }
    IN_CHAIN.store(true, Ordering::Release);
    Ok(QuitHandler {
        restored: false,
        baseline,
    })
}

fn describe(a: &libc::sigaction) -> &'static str {
    match a.sa_sigaction {
        libc::SIG_DFL => "SIG_DFL",
        libc::SIG_IGN => "SIG_IGN",
        _ => "a handler",
    }
}

/// Whether rtvm's `SIGQUIT` handler is the installed action right now (after a restore too,
/// when it was installed over `SIG_DFL`).
pub fn handler_installed() -> bool {
    query().sa_sigaction == our_handler()
}

impl QuitHandler {
    /// [`quit_count`] just before the handler went in: every `SIGQUIT` counted beyond it
    /// arrived while it was installed (a dispatcher starting later misses none).
    pub fn baseline(&self) -> u32 {
        self.baseline
    }

    /// Puts the previous action back where rtvm's handler is still installed; below a
    /// handler installed after it, rtvm's stays in the chain (counting only).
    pub fn restore(mut self) {
        self.restore_now();
    }

    fn restore_now(&mut self) {
        if std::mem::replace(&mut self.restored, true) {
            return;
        }
        if query().sa_sigaction == our_handler() {
            match lock_previous().map(|a| a.0) {
                Some(previous) if previous.sa_sigaction != libc::SIG_DFL => {
                    match set_action(&previous) {
                        Ok(()) => IN_CHAIN.store(false, Ordering::Release),
                        Err(e) => {
                            log::warn!(target: "os", "Restoring the SIGQUIT handler failed: {}", crate::error::strerror(e))
                        }
                    }
                }
                _ => {
                    log::debug!(target: "os", "SIGQUIT: rtvm's handler stays installed over SIG_DFL, counting only (a late SIGQUIT must not dump core)");
                }
            }
        } else {
            log::info!(target: "os", "SIGQUIT: the handler was replaced after rtvm installed its own; leaving it in place");
        }
        INSTALLED.store(false, Ordering::Release);
    }
}

impl Drop for QuitHandler {
    fn drop(&mut self) {
        self.restore_now();
    }
}

extern "C" fn on_quit(_sig: c_int, info: *mut libc::siginfo_t, _ucontext: *mut c_void) {
    if !info.is_null() && !LAST_INFO.busy.swap(true, Ordering::Acquire) {
        // SAFETY: `busy` was taken; the kernel's siginfo is valid for this call.
        unsafe { (*LAST_INFO.info.get()).write(*info) };
        LAST_INFO.valid.store(true, Ordering::Relaxed);
        LAST_INFO.busy.store(false, Ordering::Release);
    }
    QUITS.fetch_add(1, Ordering::AcqRel);
    EVENTS.fetch_add(1, Ordering::AcqRel);
    futex_wake();
}

fn futex_wake() {
    crate::futex::wake(&EVENTS, i32::MAX);
}

/// SIGQUITs received since the process started.
pub fn quit_count() -> u32 {
    QUITS.load(Ordering::Acquire)
}

/// The event count: compare with a later one, or wait for it to change ([`wait_for_event`]).
pub fn events() -> u32 {
    EVENTS.load(Ordering::Acquire)
}

/// Waits until the event count is no longer `seen` (a SIGQUIT or a [`kick`]) or `timeout`
/// passed; spurious returns are possible, so callers re-check.
pub fn wait_for_event(seen: u32, timeout: Option<Duration>) {
    crate::futex::wait(&EVENTS, seen, timeout);
}

/// Wakes every waiter (a dispatcher told to stop).
pub fn kick() {
    EVENTS.fetch_add(1, Ordering::AcqRel);
    futex_wake();
}

/// [`kick`] from a signal handler (async-signal-safe): another signal for the dispatcher
/// ([`crate::terminate`]'s).
pub(crate) fn post() {
    EVENTS.fetch_add(1, Ordering::AcqRel);
    futex_wake();
}

/// Calls the action rtvm's handler was installed over, if it is a handler (not `SIG_DFL`
/// or `SIG_IGN`), on the calling thread — not in signal context — with the last `SIGQUIT`'s
/// `siginfo` and a zeroed `ucontext`; `true` if one was called.
pub fn forward_to_previous() -> bool {
    let Some(Action(previous)) = *lock_previous() else {
        return false;
    };
    if is_default_or_ignore(&previous) || previous.sa_sigaction == our_handler() {
        return false;
    }
    // SAFETY: a zeroed siginfo is a valid value; filled from the last one if it was copied.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    while LAST_INFO.busy.swap(true, Ordering::Acquire) {
        std::hint::spin_loop();
    }
    if LAST_INFO.valid.load(Ordering::Relaxed) {
        // SAFETY: `busy` was taken and `valid` says the slot was written.
        info = unsafe { (*LAST_INFO.info.get()).assume_init() };
    }
    LAST_INFO.busy.store(false, Ordering::Release);
    // SAFETY: zeroed ucontext: a valid value of the type for a handler that reads it.
    let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
    // SAFETY: the handler is one the process installed for SIGQUIT with these flags; it is
    // called with the signature SA_SIGINFO selects, from a normal thread context (anything
    // async-signal-safe code may do is allowed here), with arguments that live for the call.
    unsafe {
        if previous.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                std::mem::transmute(previous.sa_sigaction);
            f(
                libc::SIGQUIT,
                &mut info,
                (&mut uc as *mut libc::ucontext_t).cast(),
            );
        } else {
            let f: extern "C" fn(c_int) = std::mem::transmute(previous.sa_sigaction);
            f(libc::SIGQUIT);
        }
    }
    true
}

/// Whether a handler (not `SIG_DFL`/`SIG_IGN`) was there before rtvm's.
pub fn has_previous_handler() -> bool {
    lock_previous()
        .is_some_and(|Action(a)| !is_default_or_ignore(&a) && a.sa_sigaction != our_handler())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_wakes() {
        let h = install().unwrap();
        assert!(handler_installed());
        assert_eq!(install().unwrap_err(), Errno::EBUSY);
        let before = quit_count();
        let seen = events();
        // SAFETY: raising SIGQUIT with rtvm's handler installed.
        unsafe { libc::raise(libc::SIGQUIT) };
        wait_for_event(seen, Some(Duration::from_secs(5)));
        assert_eq!(quit_count(), before + 1);
        assert_ne!(events(), seen);
        let was_default = !has_previous_handler()
            && lock_previous().is_some_and(|Action(a)| a.sa_sigaction == libc::SIG_DFL);
        h.restore();
        // Over SIG_DFL the handler stays, counting: a late SIGQUIT does not end the process.
        assert_eq!(handler_installed(), was_default);
        if was_default {
            // SAFETY: raising SIGQUIT with rtvm's handler still installed.
            unsafe { libc::raise(libc::SIGQUIT) };
            assert_eq!(quit_count(), before + 2);
            // The next install takes it over.
            let again = install().unwrap();
            assert!(handler_installed());
            again.restore();
        }
    }
}
