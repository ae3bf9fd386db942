//! The stop signal: installed for the life of a VM, sent to a thread at most one at a time,
//! and a handler that stops the thread only where that is safe (see [`super::code`] and
//! [`super::protocol::on_signal`]).
//!
//! **At most one pending.** A real-time signal queues: sent to a thread that blocks it, each
//! stop would queue one more, until `RLIMIT_SIGPENDING` is reached and `tgkill` fails with
//! `EAGAIN` for every thread of the user. The stopper counts what it sent and the handler what
//! it saw ([`super::protocol::may_signal`]): a thread with a signal still unhandled gets no
//! other.
//!
//! **Nothing outlives the VM.** Uninstalling sets the action to `SIG_IGN` first, which makes
//! the kernel discard the signal wherever it is pending (POSIX, and Linux's
//! `flush_sigqueue_mask`), then puts back the action found at install: a thread that blocked
//! the signal and unblocks it after the VM is gone does not die of `SIG_DFL`.
//!
//! **Masks.** [`unblock_vm_signals`] unblocks, on the calling thread, the signals rtvm needs
//! delivered there (the synchronous faults its guard-zone reporter handles, and the stop
//! signal): a VM thread started from a thread that blocks everything (the `signalfd` or
//! `sigwait` idiom) inherits that mask.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;

use super::{code, current, protocol, Handled, StopRecord, WORLD};

static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The stop signal installed; the previous action is put back on drop.
#[derive(Debug)]
pub struct StopSignal {
    signo: c_int,
    previous: SavedAction,
}

#[derive(Clone, Copy)]
struct SavedAction(libc::sigaction);

impl std::fmt::Debug for SavedAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("sigaction")
    }
}

/// Why the stop signal was not installed.
#[derive(Debug, thiserror::Error)]
pub enum StopSignalError {
    /// Not a real-time signal of this system.
    #[error("signal {0} is not a real-time signal (SIGRTMIN {min} .. SIGRTMAX {max})", min = libc::SIGRTMIN(), max = libc::SIGRTMAX())]
    NotRealTime(c_int),
    /// The process has a handler for it already.
    #[error("signal {0} already has a handler in this process")]
    InUse(c_int),
    /// `sigaction` failed.
    #[error("sigaction({0}) failed: {1}")]
    Sigaction(c_int, Errno),
}

/// The stop signal installed now (0: none).
pub fn stop_signal() -> c_int {
    STOP_SIGNAL.load(Ordering::Acquire)
}

/// Installs the stop signal's handler for `signo` (a real-time signal without a handler yet):
/// `SA_SIGINFO | SA_RESTART`, never `SA_ONSTACK` (the context must be saved on the stack the
/// thread runs on, inside its scan range). Reads the code the signal must not stop threads
/// in ([`code::refresh`]).
pub fn install_stop_signal(signo: c_int) -> std::result::Result<StopSignal, StopSignalError> {
    if !(libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&signo) {
        return Err(StopSignalError::NotRealTime(signo));
    }
    // SAFETY: zeroed sigactions are valid out-parameters; a NULL new action only queries.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `old` is a valid out-parameter.
    if unsafe { libc::sigaction(signo, std::ptr::null(), &mut old) } != 0 {
        return Err(StopSignalError::Sigaction(signo, Errno::last()));
    }
    if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != on_stop_signal as *const () as usize
    {
        return Err(StopSignalError::InUse(signo));
    }
    if old.sa_sigaction == on_stop_signal as *const () as usize {
        // Left behind by nobody we know: what is restored at the end is the default.
        old.sa_sigaction = libc::SIG_DFL;
    }
    code::refresh();
    // SAFETY: a zeroed sigaction is valid; the fields are filled in below.
    let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
    a.sa_sigaction = on_stop_signal as *const () as usize;
    a.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: `a.sa_mask` is a valid sigset_t to empty.
    unsafe { libc::sigemptyset(&mut a.sa_mask) };
    // SAFETY: installs a handler of this library (linked -z nodelete: it stays loaded).
    if unsafe { libc::sigaction(signo, &a, std::ptr::null_mut()) } != 0 {
        return Err(StopSignalError::Sigaction(signo, Errno::last()));
    }
    STOP_SIGNAL.store(signo, Ordering::Release);
    Ok(StopSignal {
        signo,
        previous: SavedAction(old),
    })
}

impl StopSignal {
    /// The signal.
    pub fn signo(&self) -> c_int {
        self.signo
    }
}

impl Drop for StopSignal {
    fn drop(&mut self) {
        STOP_SIGNAL.store(0, Ordering::Release);
        // SAFETY: a zeroed sigaction with SIG_IGN is a valid action; setting it discards the
        // signal wherever it is pending in the process.
        unsafe {
            let mut ign: libc::sigaction = std::mem::zeroed();
            ign.sa_sigaction = libc::SIG_IGN;
            libc::sigemptyset(&mut ign.sa_mask);
            libc::sigaction(self.signo, &ign, std::ptr::null_mut());
        }
        // SAFETY: puts back the action saved at install (SIG_DFL: the signal was unused).
        unsafe { libc::sigaction(self.signo, &self.previous.0, std::ptr::null_mut()) };
    }
}

/// What sending the stop signal to a thread did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// Sent.
    Sent,
    /// Not sent: the last one is still unhandled (the thread blocks the signal, or has not
    /// run since).
    Outstanding,
    /// `tgkill` failed: `ESRCH` (no such thread: it vanished without finishing), `EAGAIN`
    /// (the user's queue of pending signals is full), `ENOSYS` (no stop signal installed).
    Failed(Errno),
}

/// Sends the stop signal to the thread of `record`, unless one it was sent is still
/// unhandled.
pub fn send_stop_signal(record: &StopRecord) -> SendOutcome {
    let signo = STOP_SIGNAL.load(Ordering::Acquire);
    let tid = record.tid();
    if signo == 0 || tid <= 0 {
        return SendOutcome::Failed(if signo == 0 {
            Errno::ENOSYS
        } else {
            Errno::ESRCH
        });
    }
    if !protocol::may_signal(&record.core) {
        return SendOutcome::Outstanding;
    }
    match crate::sys::tgkill(tid, signo) {
        Ok(()) => SendOutcome::Sent,
        Err(e) => {
            protocol::unsend(&record.core);
            SendOutcome::Failed(e)
        }
    }
}

/// A thread's signal mask, as it was before [`unblock_vm_signals`].
#[derive(Clone, Copy)]
pub struct SignalMask(libc::sigset_t);

impl std::fmt::Debug for SignalMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignalMask")
    }
}

impl SignalMask {
    /// Makes it the calling thread's mask again.
    pub fn restore(&self) {
        // SAFETY: sets the calling thread's mask to a set read from it before.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }

    /// Whether `signo` is blocked in this mask.
    pub fn blocks(&self, signo: c_int) -> bool {
        // SAFETY: a query of a valid set.
        unsafe { libc::sigismember(&self.0, signo) == 1 }
    }
}

/// Unblocks, on the calling thread, the synchronous faults rtvm reports (`SIGSEGV`,
/// `SIGBUS`, `SIGILL`, `SIGFPE`) and the stop signal if one is installed (and `extra`, if
/// non-zero); returns the mask as it was. Async-signal-safe.
pub fn unblock_vm_signals(extra: c_int) -> SignalMask {
    // SAFETY: zeroed sigset_t values are valid for sigemptyset / as out-parameters.
    let (mut set, mut old): (libc::sigset_t, libc::sigset_t) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    // SAFETY: filling and applying valid sets to the calling thread's mask.
    unsafe {
        libc::sigemptyset(&mut set);
        for s in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE] {
            libc::sigaddset(&mut set, s);
        }
        let stop = STOP_SIGNAL.load(Ordering::Acquire);
        if stop != 0 {
            libc::sigaddset(&mut set, stop);
        }
        if extra > 0 {
            libc::sigaddset(&mut set, extra);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut old);
    }
    SignalMask(old)
}

extern "C" fn on_stop_signal(_sig: c_int, _info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let saved_errno = Errno::last_raw();
    if let Some(record) = current() {
        let pc = pc_of(ucontext);
        let safe = code::stoppable(pc);
        let marker = 0u8;
        let sp = std::hint::black_box(&marker as *const u8 as usize);
        let handled = protocol::on_signal(&WORLD, &record.core, safe, || {
            record.publish(sp, &registers_of(ucontext), None)
        });
        if handled == Handled::UnsafeCode {
            record.unsafe_hits.fetch_add(1, Ordering::Relaxed);
            record.unsafe_pc.store(pc, Ordering::Relaxed);
            record
                .in_syscall
                .store(at_system_call(pc, ucontext), Ordering::Relaxed);
        }
    }
    Errno::set_raw(saved_errno);
}

#[cfg(target_arch = "x86_64")]
fn pc_of(ucontext: *mut c_void) -> usize {
    if ucontext.is_null() {
        return 0;
    }
    // SAFETY: the kernel passes the interrupted context to an SA_SIGINFO handler.
    unsafe {
        (*ucontext.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    }
}

#[cfg(target_arch = "aarch64")]
fn pc_of(ucontext: *mut c_void) -> usize {
    if ucontext.is_null() {
        return 0;
    }
    // SAFETY: the kernel passes the interrupted context to an SA_SIGINFO handler.
    unsafe { (*ucontext.cast::<libc::ucontext_t>()).uc_mcontext.pc as usize }
}

/// Whether the thread was interrupted at a system call: the instruction at `pc` (a restart
/// the kernel set up) or just before it (a call that returned `EINTR`, or is returning) is
/// `syscall` / `svc #0`. Only read inside a system object's text (readable code).
fn at_system_call(pc: usize, _ucontext: *mut c_void) -> bool {
    if !code::in_system_text(pc) || pc < 4096 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        const SYSCALL: [u8; 2] = [0x0f, 0x05];
        // SAFETY: `pc` lies in a system object's executable segment, mapped readable (r-x);
        // the two bytes before it lie in the same segment unless `pc` is its first byte,
        // which the page check excludes (segments start page-aligned).
        unsafe {
            let at = std::ptr::read_unaligned(pc as *const [u8; 2]);
            let before = if pc & 0xfff >= 2 {
                std::ptr::read_unaligned((pc - 2) as *const [u8; 2])
            } else {
                [0, 0]
            };
            at == SYSCALL || before == SYSCALL
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        const SVC0: u32 = 0xd400_0001;
        // SAFETY: as above, with 4-byte instructions.
        unsafe {
            let at = std::ptr::read_unaligned(pc as *const u32);
            let before = if pc & 0xfff >= 4 {
                std::ptr::read_unaligned((pc - 4) as *const u32)
            } else {
                0
            };
            at == SVC0 || before == SVC0
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn registers_of(ucontext: *mut c_void) -> [usize; super::SAVED_REGISTERS] {
    if ucontext.is_null() {
        return [0; super::SAVED_REGISTERS];
    }
    // SAFETY: the kernel passes the interrupted context to an SA_SIGINFO handler.
    let g = unsafe { &(*ucontext.cast::<libc::ucontext_t>()).uc_mcontext.gregs };
    [
        g[libc::REG_RBX as usize] as usize,
        g[libc::REG_RBP as usize] as usize,
        g[libc::REG_R12 as usize] as usize,
        g[libc::REG_R13 as usize] as usize,
        g[libc::REG_R14 as usize] as usize,
        g[libc::REG_R15 as usize] as usize,
    ]
}

#[cfg(target_arch = "aarch64")]
fn registers_of(ucontext: *mut c_void) -> [usize; super::SAVED_REGISTERS] {
    if ucontext.is_null() {
        return [0; super::SAVED_REGISTERS];
    }
    // SAFETY: the kernel passes the interrupted context to an SA_SIGINFO handler.
    let r = unsafe { &(*ucontext.cast::<libc::ucontext_t>()).uc_mcontext.regs };
    std::array::from_fn(|i| r[19 + i] as usize)
}
