//! Signals: the `SIGSEGV`/`SIGBUS` handler that reports guard-zone hits, the alternate
//! signal stacks it runs on, and chaining to the handlers that were there before.
//!
//! **Ownership.** [`install`] puts rtvm's handler in place once per process and returns a
//! [`SignalHandlers`] token; [`SignalHandlers::restore`] (or dropping the token) puts the
//! previous actions back — unless someone replaced rtvm's handler in the meantime, whose
//! handler is then left alone. The runtime holds the token for the life of a VM, so a host
//! that creates, destroys and unloads rtvm finds its own handlers as it left them.
//!
//! **Reports.** A fault in a thread's guard zone prints one line on fd 2 — the thread, the
//! zone (red, yellow or reserved), the fault address, the guard and the stack — and ends the
//! process: `abort()` (a core dump, `-XX:+CreateCoredumpOnCrash`) or `_exit(1)` (no core).
//! A fault in the guard page below a signal stack is reported as a signal-stack overflow.
//! The report is written with `write(2)` from the handler: it does not go through the VM's
//! output hook, which is not async-signal-safe.
//!
//! **Chaining.** Every other fault goes to the previous action, delivered as the kernel
//! would have: its `sa_mask` (and the signal itself, unless `SA_NODEFER`) blocked for the
//! call, `SA_SIGINFO` deciding the signature, `SA_RESETHAND` turning it into `SIG_DFL` after
//! one delivery. A previous `SIG_DFL` kills the process with the signal: a hardware fault by
//! returning and faulting again with the default action, a signal sent by `kill`/`raise`
//! (`si_code <= 0`) by raising it again. A previous `SIG_IGN` ignores signals that were sent
//! and is `SIG_DFL` for hardware faults, which the kernel never lets a process ignore.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_int, c_void};
use std::fmt::Write as _;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use nix::errno::Errno;

use crate::stack::StackLayout;

/// The signals rtvm handles.
const SIGNALS: [c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// Which guard a fault hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zone {
    /// The red zone: the bottom of the guard zone.
    Red,
    /// The yellow zone.
    Yellow,
    /// The reserved zone: the top of the guard zone, hit first by an overflow.
    Reserved,
    /// The guard page below the alternate signal stack.
    SignalStackGuard,
}

impl Zone {
    fn word(self) -> &'static str {
        match self {
            Zone::Red => "red",
            Zone::Yellow => "yellow",
            Zone::Reserved => "reserved",
            Zone::SignalStackGuard => "signal stack guard",
        }
    }
}

/// What the handler needs to know about the current thread's stack. Plain data in a
/// const-initialised thread-local without a destructor, so reading it from a signal handler
/// is safe at any time.
#[derive(Clone, Copy)]
struct OverflowInfo {
    red: (usize, usize),
    yellow: (usize, usize),
    reserved: (usize, usize),
    alt_guard: (usize, usize),
    alt_stack: (usize, usize),
    stack: (usize, usize),
    name: [u8; 48],
    name_len: usize,
}

impl OverflowInfo {
    fn zone_of(&self, addr: usize) -> Option<(Zone, (usize, usize))> {
        let inside = |r: (usize, usize)| r.0 <= addr && addr < r.1;
        [
            (Zone::Red, self.red),
            (Zone::Yellow, self.yellow),
            (Zone::Reserved, self.reserved),
            (Zone::SignalStackGuard, self.alt_guard),
        ]
        .into_iter()
        .find(|(_, r)| inside(*r))
    }
}

thread_local! {
    static OVERFLOW: Cell<Option<OverflowInfo>> = const { Cell::new(None) };
}

fn pair(r: &Range<usize>) -> (usize, usize) {
    (r.start, r.end)
}

/// Arms overflow reporting for the calling thread, which runs on the stack `layout`
/// describes (with its guards in place).
pub(crate) fn arm(layout: &StackLayout, name: &str) {
    let mut info = OverflowInfo {
        red: pair(&layout.red),
        yellow: pair(&layout.yellow),
        reserved: pair(&layout.reserved),
        alt_guard: pair(&layout.alt_guard),
        alt_stack: pair(&layout.alt_stack),
        stack: pair(&layout.usable),
        name: [0; 48],
        name_len: 0,
    };
    // Cut at a character boundary so the handler can print it as UTF-8.
    let mut n = name.len().min(info.name.len());
    while !name.is_char_boundary(n) {
        n -= 1;
    }
    info.name[..n].copy_from_slice(&name.as_bytes()[..n]);
    info.name_len = n;
    OVERFLOW.with(|c| c.set(Some(info)));
}

/// Disarms overflow reporting for the calling thread.
pub(crate) fn disarm() {
    OVERFLOW.with(|c| c.set(None));
}

/// Sets (or, with `None`, disables) the calling thread's alternate signal stack.
pub(crate) fn set_alt_stack(range: Option<&Range<usize>>) {
    let range = range.filter(|r| !r.is_empty());
    let ss = libc::stack_t {
        ss_sp: range.map_or(std::ptr::null_mut(), |r| r.start as *mut c_void),
        ss_flags: if range.is_some() { 0 } else { libc::SS_DISABLE },
        ss_size: range.map_or(0, |r| r.len()),
    };
    // SAFETY: the alternate stack is this thread's own RW region inside its stack mapping,
    // which outlives the thread; disabling passes no memory.
    let rc = unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) };
    if rc != 0 {
        log::debug!(target: "os+thread", "sigaltstack failed ({})", crate::error::strerror(Errno::last()));
    }
}

/// The actions that were installed before rtvm's, per installation. Two slots alternate, so
/// a handler still running from the previous installation never reads a slot being written.
struct Saved {
    actions: UnsafeCell<[MaybeUninit<libc::sigaction>; 2]>,
    /// Set once a previous `SA_RESETHAND` action has been delivered.
    reset_done: [AtomicBool; 2],
}

// SAFETY: `actions` of a slot is written only by `install`, while `CURRENT` does not name the
// slot (so no handler reads it), and read only after `CURRENT` was published with Release.
unsafe impl Sync for Saved {}

static SLOTS: [Saved; 2] = [const {
    Saved {
        actions: UnsafeCell::new([const { MaybeUninit::uninit() }; 2]),
        reset_done: [const { AtomicBool::new(false) }; 2],
    }
}; 2];
/// 0: nothing saved yet; k + 1: `SLOTS[k]` holds the previous actions.
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static INSTALLATIONS: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);
static DUMP_CORE: AtomicBool = AtomicBool::new(true);

/// rtvm's fault handlers, installed. Restores the previous actions when dropped.
#[derive(Debug)]
pub struct SignalHandlers {
    restored: bool,
}

fn our_handler() -> usize {
    on_fault as *const () as usize
}

fn query(sig: c_int) -> libc::sigaction {
    // SAFETY: a zeroed sigaction is a valid out-parameter; a NULL new action only queries.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old);
        old
    }
}

fn set_action(sig: c_int, action: &libc::sigaction) -> Result<(), Errno> {
    // SAFETY: `action` is a fully initialised sigaction; the handler it names is either
    // rtvm's (which lives as long as the code) or one the process had installed.
    Errno::result(unsafe { libc::sigaction(sig, action, std::ptr::null_mut()) }).map(drop)
}

/// Installs rtvm's `SIGSEGV`/`SIGBUS` handler, saving the previous actions to chain to.
/// `dump_core`: end with `abort()` after a report (else `_exit(1)`). Fails with `EBUSY`
/// while another [`SignalHandlers`] is alive.
pub fn install(dump_core: bool) -> Result<SignalHandlers, Errno> {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return Err(Errno::EBUSY);
    }
    DUMP_CORE.store(dump_core, Ordering::Relaxed);
    let slot = INSTALLATIONS.fetch_add(1, Ordering::Relaxed) % 2;
    let mut previous = [query(SIGNALS[0]), query(SIGNALS[1])];
    for p in &mut previous {
        if p.sa_sigaction == our_handler() {
            // Never chain to ourselves (a handler left by an earlier copy of this code).
            p.sa_sigaction = libc::SIG_DFL;
            p.sa_flags = 0;
        }
    }
    // SAFETY: CURRENT does not name `slot` (installations alternate and the previous one
    // published the other slot), so no handler reads it while it is written.
    unsafe {
        let actions = &mut *SLOTS[slot].actions.get();
        for (dst, src) in actions.iter_mut().zip(previous) {
            dst.write(src);
        }
    }
    for flag in &SLOTS[slot].reset_done {
        flag.store(false, Ordering::Relaxed);
    }
    CURRENT.store(slot + 1, Ordering::Release);
    // SAFETY: zeroed-then-filled sigaction naming our handler.
    let ours = unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = our_handler();
        a.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut a.sa_mask);
        a
    };
    for (i, &sig) in SIGNALS.iter().enumerate() {
        if let Err(e) = set_action(sig, &ours) {
            for (j, &done) in SIGNALS.iter().enumerate().take(i) {
                let _ = set_action(done, &previous[j]);
            }
            INSTALLED.store(false, Ordering::Release);
            return Err(e);
        }
    }
    log::debug!(target: "os", "Installed the SIGSEGV and SIGBUS handlers (previous: {} and {})", describe(&previous[0]), describe(&previous[1]));
    Ok(SignalHandlers { restored: false })
}

fn describe(a: &libc::sigaction) -> &'static str {
    match a.sa_sigaction {
        libc::SIG_DFL => "SIG_DFL",
        libc::SIG_IGN => "SIG_IGN",
        _ => "a handler",
    }
}

/// Whether rtvm's handler is installed for `SIGSEGV` right now.
pub fn handler_installed() -> bool {
    query(libc::SIGSEGV).sa_sigaction == our_handler()
}

impl SignalHandlers {
    /// Puts the previous actions back where rtvm's handler is still installed.
    pub fn restore(mut self) {
        self.restore_now();
    }

    fn restore_now(&mut self) {
        if std::mem::replace(&mut self.restored, true) {
            return;
        }
        let slot = CURRENT.load(Ordering::Acquire).wrapping_sub(1);
        for (i, &sig) in SIGNALS.iter().enumerate() {
            if query(sig).sa_sigaction != our_handler() {
                log::info!(target: "os", "Signal {sig}: the handler was replaced after rtvm installed its own; leaving it in place");
                continue;
            }
            // SAFETY: `slot` was written by `install` before CURRENT published it and is not
            // written again while INSTALLED is set.
            let previous = unsafe { (*SLOTS[slot].actions.get())[i].assume_init() };
            if let Err(e) = set_action(sig, &previous) {
                log::warn!(target: "os", "Restoring the handler of signal {sig} failed: {}", crate::error::strerror(e));
            }
        }
        INSTALLED.store(false, Ordering::Release);
        log::debug!(target: "os", "Restored the SIGSEGV and SIGBUS handlers");
    }
}

impl Drop for SignalHandlers {
    fn drop(&mut self) {
        self.restore_now();
    }
}

/// A fixed buffer that `core::fmt` can write into without allocating (signal-safe).
struct SignalBuf {
    buf: [u8; 512],
    len: usize,
}

impl std::fmt::Write for SignalBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

fn report(info: &OverflowInfo, zone: Zone, range: (usize, usize), addr: usize) -> ! {
    let mut out = SignalBuf {
        buf: [0; 512],
        len: 0,
    };
    let name = std::str::from_utf8(&info.name[..info.name_len]).unwrap_or("?");
    let _ = if zone == Zone::SignalStackGuard {
        writeln!(
            out,
            "signal stack overflow in thread \"{name}\": fault address {addr:#018x}, signal stack guard [{:#018x} - {:#018x}), signal stack [{:#018x} - {:#018x})",
            range.0, range.1, info.alt_stack.0, info.alt_stack.1
        )
    } else {
        writeln!(
            out,
            "stack overflow in thread \"{name}\": fault address {addr:#018x}, {} zone [{:#018x} - {:#018x}) of the guard zone [{:#018x} - {:#018x}), stack [{:#018x} - {:#018x})",
            zone.word(),
            range.0,
            range.1,
            info.red.0,
            info.reserved.1,
            info.stack.0,
            info.stack.1
        )
    };
    // SAFETY: write(2), abort(3) and _exit(2) are async-signal-safe; the buffer is a local.
    unsafe {
        libc::write(2, out.buf.as_ptr().cast(), out.len);
        if DUMP_CORE.load(Ordering::Relaxed) {
            libc::abort();
        }
        libc::_exit(1);
    }
}

extern "C" fn on_fault(sig: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(i) = OVERFLOW.with(|c| c.get()) {
        if let Some((zone, range)) = i.zone_of(addr) {
            report(&i, zone, range, addr);
        }
    }
    chain(sig, info, ucontext);
}

fn sig_index(sig: c_int) -> usize {
    usize::from(sig == libc::SIGBUS)
}

fn set_default(sig: c_int) {
    // SAFETY: installing SIG_DFL with an empty mask is async-signal-safe.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
    }
}

/// Delivers `sig` to the previous action, as the kernel would have without rtvm.
fn chain(sig: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let slot = CURRENT.load(Ordering::Acquire);
    let i = sig_index(sig);
    let previous = if slot == 0 {
        None
    } else {
        let s = &SLOTS[slot - 1];
        // SAFETY: a published slot is fully written and not written again while published.
        let a = unsafe { (*s.actions.get())[i].assume_init() };
        let reset = a.sa_flags & libc::SA_RESETHAND != 0 && s.reset_done[i].load(Ordering::Relaxed);
        (!reset).then_some(a)
    };
    // SAFETY: the kernel passes a valid siginfo.
    let sent = unsafe { (*info).si_code } <= 0;
    let handler = previous.map_or(libc::SIG_DFL, |p| p.sa_sigaction);
    if handler == libc::SIG_IGN && sent {
        return;
    }
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        set_default(sig);
        if sent {
            // A signal sent by kill/raise does not come back by itself: send it again, now
            // unblocked and with the default action, which ends the process.
            // SAFETY: sigprocmask/raise are async-signal-safe; the set is a local.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::raise(sig);
            }
        }
        // A hardware fault: returning re-runs the instruction, which faults again and ends
        // the process with the default action, as it would have without us.
        return;
    }
    let Some(p) = previous else { return };
    if p.sa_flags & libc::SA_RESETHAND != 0 {
        SLOTS[slot - 1].reset_done[i].store(true, Ordering::Relaxed);
    }
    // SAFETY: the mask calls are async-signal-safe and work on locals; `ucontext` is the
    // kernel's for this delivery. `handler` is the function the previous owner installed with
    // these flags, called with the signature SA_SIGINFO selects, as the kernel would.
    unsafe {
        let mut mask: libc::sigset_t = if ucontext.is_null() {
            std::mem::zeroed()
        } else {
            (*ucontext.cast::<libc::ucontext_t>()).uc_sigmask
        };
        if ucontext.is_null() {
            libc::sigemptyset(&mut mask);
        }
        for s in 1..libc::SIGRTMAX() {
            if libc::sigismember(&p.sa_mask, s) == 1 {
                libc::sigaddset(&mut mask, s);
            }
        }
        if p.sa_flags & libc::SA_NODEFER != 0 {
            libc::sigdelset(&mut mask, sig);
        } else {
            libc::sigaddset(&mut mask, sig);
        }
        let mut saved: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, &mask, &mut saved);
        if p.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                std::mem::transmute(handler);
            f(sig, info, ucontext);
        } else {
            let f: extern "C" fn(c_int) = std::mem::transmute(handler);
            f(sig);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &saved, std::ptr::null_mut());
    }
}
