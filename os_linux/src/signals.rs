//! Signals: the `SIGSEGV`/`SIGBUS` handler that reports guard-zone hits, the alternate
//! signal stacks it runs on, and chaining to the handlers that were there before.
//!
//! **Ownership.** [`install`] puts rtvm's handler in the chain and returns a
//! [`SignalHandlers`] token; [`SignalHandlers::restore`] (or dropping the token) puts the
//! previous actions back — unless a handler was installed on top of rtvm's in the meantime:
//! that one is left alone, and rtvm's stays below it (the handler above may chain to it),
//! passing on what it does not report. The runtime holds the token for the life of a VM, so a
//! host that creates, destroys and unloads rtvm finds its own handlers as it left them.
//!
//! **Generations.** The chain survives any number of VMs and host handlers installed or
//! removed in any order: rtvm's handler has one "previous" action for as long as it is in the
//! chain. A VM created while rtvm's handler is installed (a host put it back) or below a
//! host's handler that chains to it keeps it there, chaining as before — it never saves a
//! handler that chains to rtvm's as its own previous (the two would call each other), and
//! never mistakes its own handler for `SIG_DFL`. A default or ignore action on top means
//! rtvm's handler is out of the chain: a new VM saves it and installs rtvm's on top.
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
//! call on top of the interrupted code's mask, `SA_SIGINFO` deciding the signature,
//! `SA_RESETHAND` turning it into `SIG_DFL` after one delivery, and on the stack the kernel
//! would have chosen: rtvm's handler runs on the alternate signal stack (`SA_ONSTACK`), but a
//! handler installed without `SA_ONSTACK` is called on the interrupted code's own stack, below
//! its stack pointer and red zone (x86-64) — a host handler that needs more than a signal
//! stack's few KiB gets the thread's stack, as it would without rtvm. A previous `SIG_DFL` kills the process with the signal: a hardware fault by
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

/// The usable stack of the calling thread, if it runs on a stack rtvm mapped (armed).
pub(crate) fn current_usable_stack() -> Option<(usize, usize)> {
    OVERFLOW.with(|c| c.get()).map(|i| i.stack)
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

/// The actions rtvm's handler chains to, per installation. Two slots alternate, so a
/// handler still running from the previous installation never reads a slot being written.
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
/// 0: nothing saved yet; k + 1: `SLOTS[k]` holds the actions rtvm's handler chains to.
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static INSTALLATIONS: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);
static DUMP_CORE: AtomicBool = AtomicBool::new(true);
/// Per signal: rtvm's handler is in the process's chain — installed, or below a handler
/// installed after it that may chain to it. Cleared only when a restore takes rtvm's handler
/// out (it was the installed action and the saved one is put back).
static IN_CHAIN: [AtomicBool; 2] = [const { AtomicBool::new(false) }; 2];

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

fn is_default_or_ignore(a: &libc::sigaction) -> bool {
    a.sa_sigaction == libc::SIG_DFL || a.sa_sigaction == libc::SIG_IGN
}

/// A `SIG_DFL` action with an empty mask.
fn default_action() -> libc::sigaction {
    // SAFETY: zeroed-then-filled sigaction; SIG_DFL needs nothing else.
    unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut a.sa_mask);
        a
    }
}

/// The action rtvm's handler chains to for signal `i` now: the published slot's, `SIG_DFL`
/// once a previous `SA_RESETHAND` action was delivered (the kernel would have reset it).
fn saved_action(i: usize) -> Option<libc::sigaction> {
    let slot = CURRENT.load(Ordering::Acquire).checked_sub(1)?;
    let s = &SLOTS[slot];
    // SAFETY: a published slot is fully written and not written again while published.
    let a = unsafe { (*s.actions.get())[i].assume_init() };
    let reset = a.sa_flags & libc::SA_RESETHAND != 0 && s.reset_done[i].load(Ordering::Relaxed);
    Some(if reset { default_action() } else { a })
}

/// What `install` does about one signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    /// Nothing of rtvm's in the chain: save the current action, install rtvm's on top.
    Install,
    /// rtvm's handler is the installed action already (left by an earlier VM, or put back
    /// by a host handler that chained to it): keep it and what it chains to.
    OnTop,
    /// A handler installed after rtvm's is on top and may chain to it: rtvm's handler stays
    /// below it, chaining to what it chained to before. Saving that handler as "previous"
    /// would make the two call each other.
    Below,
}

fn placement(i: usize, current: &libc::sigaction) -> Placement {
    if current.sa_sigaction == our_handler() {
        Placement::OnTop
    } else if IN_CHAIN[i].load(Ordering::Acquire) && !is_default_or_ignore(current) {
        // A default or ignore action chains to nobody: whoever put it there took rtvm's
        // handler out of the chain.
        Placement::Below
    } else {
        Placement::Install
    }
}

/// Installs rtvm's `SIGSEGV`/`SIGBUS` handler, keeping the chain a process has built, across
/// any number of VMs and host handlers installed or removed in any order:
///
/// * with no rtvm handler in the chain, the current action is saved and rtvm's goes on top;
/// * with rtvm's handler installed already, it stays, chaining to what it chained to;
/// * below a handler installed after an earlier VM's (one that chains to it), it stays there:
///   rtvm's handler keeps chaining to its own previous action, never to the handler above it.
///
/// `dump_core`: end with `abort()` after a report (else `_exit(1)`). Fails with `EBUSY`
/// while another [`SignalHandlers`] is alive.
pub fn install(dump_core: bool) -> Result<SignalHandlers, Errno> {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return Err(Errno::EBUSY);
    }
    DUMP_CORE.store(dump_core, Ordering::Relaxed);
    let current = [query(SIGNALS[0]), query(SIGNALS[1])];
    let places = [placement(0, &current[0]), placement(1, &current[1])];
    let mut previous = [default_action(); 2];
    for i in 0..2 {
        previous[i] = match places[i] {
            Placement::Install => current[i],
            Placement::OnTop | Placement::Below => saved_action(i).unwrap_or_else(default_action),
        };
    }
    let slot = INSTALLATIONS.fetch_add(1, Ordering::Relaxed) % 2;
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
        if places[i] != Placement::Install {
            continue;
        }
        if let Err(e) = set_action(sig, &ours) {
            for (j, &done) in SIGNALS.iter().enumerate().take(i) {
                if places[j] == Placement::Install {
                    let _ = set_action(done, &previous[j]);
                }
            }
            INSTALLED.store(false, Ordering::Release);
            return Err(e);
        }
    }
    for (i, flag) in IN_CHAIN.iter().enumerate() {
        flag.store(true, Ordering::Release);
        let what = match places[i] {
            Placement::Install => "installed",
            Placement::OnTop => "already installed",
            Placement::Below => "already in the chain, below a handler installed after it",
        };
        log::debug!(target: "os", "Signal {}: rtvm's handler {what}; it chains to {}", SIGNALS[i], describe(&previous[i]));
    }
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
    /// Puts the previous actions back where rtvm's handler is still installed. Where a
    /// handler installed after rtvm's is on top, rtvm's stays in the chain below it (that
    /// handler may chain to it), passing on what it does not report.
    pub fn restore(mut self) {
        self.restore_now();
    }

    fn restore_now(&mut self) {
        if std::mem::replace(&mut self.restored, true) {
            return;
        }
        for (i, &sig) in SIGNALS.iter().enumerate() {
            if query(sig).sa_sigaction != our_handler() {
                log::info!(target: "os", "Signal {sig}: the handler was replaced after rtvm installed its own; leaving it in place (rtvm's stays in the chain below it)");
                continue;
            }
            let previous = saved_action(i).unwrap_or_else(default_action);
            match set_action(sig, &previous) {
                Ok(()) => IN_CHAIN[i].store(false, Ordering::Release),
                Err(e) => {
                    log::warn!(target: "os", "Restoring the handler of signal {sig} failed: {}", crate::error::strerror(e))
                }
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
        libc::sigaction(sig, &default_action(), std::ptr::null_mut());
    }
}

/// A handler call, as the kernel makes it: on the stack it would choose.
struct Delivery {
    handler: usize,
    siginfo: bool,
    sig: c_int,
    info: *mut libc::siginfo_t,
    ucontext: *mut c_void,
}

/// Calls the handler a [`Delivery`] names, with the signature `SA_SIGINFO` selects.
extern "C" fn deliver(d: *mut c_void) {
    // SAFETY: `d` points to the Delivery `chain` keeps alive on its frame for this call; the
    // handler is the function its owner installed with these flags.
    unsafe {
        let d = &*d.cast::<Delivery>();
        if d.siginfo {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                std::mem::transmute(d.handler);
            f(d.sig, d.info, d.ucontext);
        } else {
            let f: extern "C" fn(c_int) = std::mem::transmute(d.handler);
            f(d.sig);
        }
    }
}

/// The stack pointer the interrupted code had, if `ucontext` says (x86-64).
fn interrupted_sp(ucontext: *mut c_void) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if !ucontext.is_null() {
        // SAFETY: the kernel's ucontext for this delivery.
        let uc = unsafe { &*ucontext.cast::<libc::ucontext_t>() };
        return Some(uc.uc_mcontext.gregs[libc::REG_RSP as usize] as usize);
    }
    let _ = ucontext;
    None
}

/// The calling thread's alternate signal stack, if one is set and it runs on it now.
fn running_on_alt_stack() -> Option<(usize, usize)> {
    // SAFETY: a NULL new stack only queries; `old` is a local out-parameter.
    unsafe {
        let mut old: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut old) != 0
            || old.ss_flags & libc::SS_ONSTACK == 0
        {
            return None;
        }
        Some((old.ss_sp as usize, old.ss_sp as usize + old.ss_size))
    }
}

/// Where the kernel would have run a handler installed without `SA_ONSTACK`, when rtvm's
/// handler (installed with it) runs on the alternate signal stack: on the stack the
/// interrupted code was using, below its stack pointer and the ABI's 128-byte red zone.
/// `None`: here is right (the handler asked for the alternate stack, or the interrupted code
/// was on it already, or there is none).
fn kernel_stack_for(flags: c_int, ucontext: *mut c_void) -> Option<usize> {
    if flags & libc::SA_ONSTACK != 0 {
        return None;
    }
    let (alt_lo, alt_hi) = running_on_alt_stack()?;
    let sp = interrupted_sp(ucontext)?;
    if (alt_lo..alt_hi).contains(&sp) {
        return None;
    }
    Some((sp - 128) & !15)
}

/// Runs `f(arg)` with the stack pointer at `sp` (16-byte aligned), back on this stack after.
///
/// # Safety
/// `sp` must be the top of stack memory that is free below it (the interrupted code's stack
/// below its red zone) and large enough for `f`; `f` must not unwind.
#[cfg(target_arch = "x86_64")]
unsafe fn call_on_stack(sp: usize, f: extern "C" fn(*mut c_void), arg: *mut c_void) {
    // SAFETY: forwarded to the caller. r12 is callee-saved, so it survives the call and
    // brings this stack back; every caller-saved register is declared clobbered.
    unsafe {
        std::arch::asm!(
            "mov r12, rsp",
            "mov rsp, {sp}",
            "call {f}",
            "mov rsp, r12",
            sp = in(reg) sp,
            f = in(reg) f,
            in("rdi") arg,
            out("r12") _,
            clobber_abi("C"),
        );
    }
}

/// Delivers `sig` to the previous action, as the kernel would have without rtvm: with its
/// mask, its flags and on the stack it would have chosen.
fn chain(sig: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let i = sig_index(sig);
    let previous = saved_action(i);
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
        if let Some(slot) = CURRENT.load(Ordering::Acquire).checked_sub(1) {
            SLOTS[slot].reset_done[i].store(true, Ordering::Relaxed);
        }
    }
    let mut delivery = Delivery {
        handler,
        siginfo: p.sa_flags & libc::SA_SIGINFO != 0,
        sig,
        info,
        ucontext,
    };
    let arg = (&mut delivery as *mut Delivery).cast::<c_void>();
    // SAFETY: the mask calls are async-signal-safe and work on locals; `ucontext` is the
    // kernel's for this delivery.
    let saved = unsafe {
        let mut mask: libc::sigset_t = if ucontext.is_null() {
            let mut m = std::mem::zeroed();
            libc::sigemptyset(&mut m);
            m
        } else {
            (*ucontext.cast::<libc::ucontext_t>()).uc_sigmask
        };
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
        saved
    };
    match kernel_stack_for(p.sa_flags, ucontext) {
        // SAFETY: `sp` is below the interrupted stack pointer and its red zone, on the stack
        // the interrupted code runs on: memory nobody uses, where the kernel would have put
        // the handler's frame. The handler is C (it does not unwind); it may leave with
        // siglongjmp, which restores a stack pointer above.
        #[cfg(target_arch = "x86_64")]
        Some(sp) => unsafe { call_on_stack(sp, deliver, arg) },
        _ => deliver(arg),
    }
    // SAFETY: restoring the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &saved, std::ptr::null_mut()) };
}

/// One signal's action as HotSpot's `VM.info` prints it: who handles it, its mask (the
/// first 32 signals, `1` blocked) and its flags —
/// `SIGSEGV: rtvm's fault handler, mask=00000000000000000000000000000000, flags=SA_ONSTACK|SA_SIGINFO`.
pub fn describe_action(sig: c_int, name: &str) -> String {
    let a = query(sig);
    let who = match a.sa_sigaction {
        libc::SIG_DFL => "SIG_DFL".to_owned(),
        libc::SIG_IGN => "SIG_IGN".to_owned(),
        h if h == our_handler() => "rtvm's fault handler".to_owned(),
        h if crate::quit::is_ours(h) => "rtvm's SIGQUIT handler".to_owned(),
        h if crate::terminate::is_ours(h) => "rtvm's termination handler".to_owned(),
        h => format!("{h:#018x}"),
    };
    let mut mask = String::with_capacity(32);
    for s in 1..=32 {
        // SAFETY: sigismember reads the local action's mask.
        let member = unsafe { libc::sigismember(&a.sa_mask, s) } == 1;
        mask.push(if member { '1' } else { '0' });
    }
    let names = [
        (libc::SA_ONSTACK, "SA_ONSTACK"),
        (libc::SA_RESTART, "SA_RESTART"),
        (libc::SA_SIGINFO, "SA_SIGINFO"),
        (libc::SA_NODEFER, "SA_NODEFER"),
        (libc::SA_RESETHAND, "SA_RESETHAND"),
    ];
    let flags: Vec<&str> = names
        .iter()
        .filter(|(f, _)| a.sa_flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    format!(
        "{name}: {who}, mask={mask}, flags={}",
        if flags.is_empty() {
            "none".to_owned()
        } else {
            flags.join("|")
        }
    )
}

/// [`describe_action`] for the signals HotSpot's `VM.info` lists.
pub fn describe_actions() -> Vec<String> {
    [
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
    ]
    .iter()
    .map(|&(sig, name)| describe_action(sig, name))
    .collect()
}
