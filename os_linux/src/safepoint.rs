//! The low half of stopping threads for a collector: a per-thread [`StopRecord`] (a state
//! word, a poll word, a hold for handshakes, the published stack pointer and registers),
//! the process's world word, the waits, the register spill, and the stop signal.
//!
//! **States.** [`RUNNING`] (the thread may run the embedder's code), [`SAFE`] (in a safe
//! region: it published its stack pointer and registers and blocks before it runs the
//! embedder's code again), [`STOPPED_POLL`] and [`STOPPED_SIGNAL`] (stopped, published, and
//! waiting), [`FINISHED`] (gone for good: its stack may go away). Only the thread itself
//! changes its state, and every way back to [`RUNNING`] goes through one check (`resume`):
//! store `RUNNING`, then look at the world word and the hold; if either asks the thread to
//! stay, it goes back to its resting state and waits. A stopper does the mirror image: it
//! sets the world word (or the hold), then reads the state. Both sides use sequentially
//! consistent operations, so one of them always sees the other: a thread the stopper counted
//! as safe or stopped never runs the embedder's code before the stopper lets it.
//!
//! **The world word** ([`world`]): `(stop id << 1) | stopping`. Threads wait on it with a
//! futex; the end of a stop wakes them all with one call.
//!
//! **Registers.** [`enter_safe`] and [`stop_here`] publish the ABI's callee-saved registers
//! exactly as the code they are inlined into has them, and that code's stack pointer
//! ([`call_with_caller_registers`], a naked trampoline): the frames from there up stay live
//! while the thread is safe or stopped and hold every caller-saved register that was live (the
//! compiler saved them around the call). So `[sp, base)` plus the registers hold every value.
//! The stop signal's handler runs on the thread's own stack (it is installed without
//! `SA_ONSTACK`), so the kernel saved the whole register file on that stack, above the
//! handler's frame, whose address it publishes; it copies the callee-saved ones into the
//! record as well.
//!
//! **The signal handler** allocates nothing and takes no lock: thread-local reads of a
//! `Cell` set before the thread could receive the signal, atomics and `futex` calls.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use nix::errno::Errno;

/// The thread may run the embedder's code.
pub const RUNNING: u32 = 0;
/// In a safe region: published, and blocks before running the embedder's code again.
pub const SAFE: u32 = 1;
/// Stopped at a poll, published, waiting.
pub const STOPPED_POLL: u32 = 2;
/// Stopped by the stop signal, published, waiting in the handler.
pub const STOPPED_SIGNAL: u32 = 3;
/// Gone for good (exited or detached): its stack is no longer the collector's business.
pub const FINISHED: u32 = 4;

/// How many callee-saved registers a spill holds.
#[cfg(target_arch = "x86_64")]
pub const SAVED_REGISTERS: usize = 6; // rbx, rbp, r12, r13, r14, r15
/// How many callee-saved registers a spill holds.
#[cfg(target_arch = "aarch64")]
pub const SAVED_REGISTERS: usize = 12; // x19..x28, x29 (fp), x30 (lr)

/// One thread's part in stops and handshakes. Lives for the process (records are pooled and
/// reused by the runtime), so a thread-local reference to it is `'static`.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct StopRecord {
    state: AtomicU32,
    /// Non-zero: the thread's next poll takes the slow path.
    poll: AtomicU32,
    /// Non-zero: a handshake holds the thread (it may not run the embedder's code).
    hold: AtomicU32,
    /// The stopper itself: its own waits do not block on its stop.
    exempt: AtomicBool,
    /// The stop found the thread on its alternate signal stack.
    on_alt_stack: AtomicBool,
    tid: AtomicI32,
    sp: AtomicUsize,
    alt_start: AtomicUsize,
    alt_end: AtomicUsize,
    regs: [AtomicUsize; SAVED_REGISTERS],
}

impl StopRecord {
    /// A record in state [`SAFE`] with nothing published (a thread that has not started).
    pub const fn new() -> StopRecord {
        StopRecord {
            state: AtomicU32::new(SAFE),
            poll: AtomicU32::new(0),
            hold: AtomicU32::new(0),
            exempt: AtomicBool::new(false),
            on_alt_stack: AtomicBool::new(false),
            tid: AtomicI32::new(0),
            sp: AtomicUsize::new(0),
            alt_start: AtomicUsize::new(0),
            alt_end: AtomicUsize::new(0),
            regs: [const { AtomicUsize::new(0) }; SAVED_REGISTERS],
        }
    }

    /// Makes a pooled record fresh for a new thread: [`SAFE`], nothing published.
    pub fn reset(&self, tid: i32) {
        self.poll.store(0, Ordering::Relaxed);
        self.hold.store(0, Ordering::Relaxed);
        self.exempt.store(false, Ordering::Relaxed);
        self.on_alt_stack.store(false, Ordering::Relaxed);
        self.tid.store(tid, Ordering::Relaxed);
        self.sp.store(0, Ordering::Relaxed);
        self.alt_start.store(0, Ordering::Relaxed);
        self.alt_end.store(0, Ordering::Relaxed);
        for r in &self.regs {
            r.store(0, Ordering::Relaxed);
        }
        self.state.store(SAFE, Ordering::SeqCst);
    }

    /// The state (sequentially consistent: the stopper's side of the check).
    pub fn state(&self) -> u32 {
        self.state.load(Ordering::SeqCst)
    }

    /// Sets the kernel thread id (the thread reports it when it starts).
    pub fn set_tid(&self, tid: i32) {
        self.tid.store(tid, Ordering::Release);
    }

    /// The kernel thread id.
    pub fn tid(&self) -> i32 {
        self.tid.load(Ordering::Acquire)
    }

    /// The published stack pointer (0: nothing published yet).
    pub fn sp(&self) -> usize {
        self.sp.load(Ordering::Acquire)
    }

    /// The published callee-saved registers.
    pub fn registers(&self) -> [usize; SAVED_REGISTERS] {
        std::array::from_fn(|i| self.regs[i].load(Ordering::Acquire))
    }

    /// The alternate signal stack the stop found the thread on, if it was on one.
    pub fn alt_stack(&self) -> Option<(usize, usize)> {
        self.on_alt_stack.load(Ordering::Acquire).then(|| {
            (
                self.alt_start.load(Ordering::Acquire),
                self.alt_end.load(Ordering::Acquire),
            )
        })
    }

    /// Whether the thread's next poll takes the slow path.
    #[inline]
    pub fn poll_armed(&self) -> bool {
        self.poll.load(Ordering::Relaxed) != 0
    }

    /// Arms or disarms the thread's poll.
    pub fn arm_poll(&self, armed: bool) {
        self.poll.store(u32::from(armed), Ordering::Release);
    }

    /// Whether a handshake holds the thread.
    pub fn held(&self) -> bool {
        self.hold.load(Ordering::SeqCst) != 0
    }

    /// Holds the thread (a handshake), or lets it go (waking it if it waits).
    pub fn set_hold(&self, hold: bool) {
        self.hold.store(u32::from(hold), Ordering::SeqCst);
        if !hold {
            futex_wake(&self.hold, i32::MAX);
        }
    }

    /// Marks the record as the stopper's own (its waits do not block on its stop), or not.
    pub fn set_exempt(&self, exempt: bool) {
        self.exempt.store(exempt, Ordering::SeqCst);
    }

    fn exempt(&self) -> bool {
        self.exempt.load(Ordering::SeqCst)
    }

    fn publish(&self, sp: usize, regs: &[usize; SAVED_REGISTERS], alt: Option<(usize, usize)>) {
        for (slot, v) in self.regs.iter().zip(regs) {
            slot.store(*v, Ordering::Relaxed);
        }
        if let Some((start, end)) = alt {
            self.alt_start.store(start, Ordering::Relaxed);
            self.alt_end.store(end, Ordering::Relaxed);
        }
        self.on_alt_stack.store(alt.is_some(), Ordering::Relaxed);
        self.sp.store(sp, Ordering::Release);
    }

    /// Whether the thread must stay where it is (the world stops, or a hold).
    fn must_stay(&self) -> bool {
        (stopping(WORLD.load(Ordering::SeqCst)) && !self.exempt()) || self.held()
    }
}

impl Default for StopRecord {
    fn default() -> Self {
        Self::new()
    }
}

static WORLD: AtomicU32 = AtomicU32::new(0);
/// Bumped by every thread that reaches a stop; the stopper waits on it.
static ARRIVALS: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The calling thread's record. Plain data without a destructor: read in the handler.
    static CURRENT: Cell<Option<&'static StopRecord>> = const { Cell::new(None) };
}

/// The world word: `(stop id << 1) | stopping`.
pub fn world() -> u32 {
    WORLD.load(Ordering::SeqCst)
}

/// Whether a world word says the world is stopping (or stopped).
pub fn stopping(word: u32) -> bool {
    word & 1 == 1
}

/// Starts a stop: the world word becomes "stopping" with the next id. One stopper at a time
/// (the caller serializes). Returns the new word.
pub fn begin_stop() -> u32 {
    let w = WORLD.load(Ordering::SeqCst);
    let next = (((w >> 1).wrapping_add(1)) << 1) | 1;
    WORLD.store(next, Ordering::SeqCst);
    next
}

/// Ends the stop: every thread waiting for it is woken (one system call).
pub fn end_stop() {
    let w = WORLD.load(Ordering::SeqCst);
    WORLD.store(w & !1, Ordering::SeqCst);
    futex_wake(&WORLD, i32::MAX);
}

/// The arrivals counter: read it, check the threads, and wait for it to change.
pub fn arrivals() -> u32 {
    ARRIVALS.load(Ordering::SeqCst)
}

/// Waits until the arrivals counter is no longer `seen`, or `timeout` passed.
pub fn wait_for_arrivals(seen: u32, timeout: Duration) {
    futex_wait(&ARRIVALS, seen, Some(timeout));
}

fn arrive() {
    ARRIVALS.fetch_add(1, Ordering::SeqCst);
    futex_wake(&ARRIVALS, i32::MAX);
}

/// Wakes a stopper waiting for arrivals (a handshake operation the target ran is done).
pub fn notify_stopper() {
    arrive();
}

/// Makes `record` the calling thread's (or none).
pub fn set_current(record: Option<&'static StopRecord>) {
    CURRENT.with(|c| c.set(record));
}

/// The calling thread's record.
#[inline]
pub fn current() -> Option<&'static StopRecord> {
    CURRENT.with(Cell::get)
}

/// What [`call_with_caller_registers`] calls: `f(ctx, registers, caller_sp)`.
pub type RegistersFn = unsafe extern "C" fn(*mut c_void, *const usize, usize) -> usize;

/// Calls `f(ctx, registers, caller_sp)` where `registers` are the callee-saved registers
/// exactly as the caller had them at the call (x86-64: rbx, rbp, r12–r15; aarch64: x19–x30)
/// and `caller_sp` is the caller's stack pointer once the call returns: the lowest address of
/// the caller's live frames. Every caller-saved register the caller needs after the call is in
/// those frames (the compiler saved it there), so `[caller_sp, stack base)` plus `registers`
/// hold every value the caller had in a register. Returns what `f` returns.
///
/// # Safety
/// `f` must be safe to call with `ctx`, must not unwind, and may only read the six (twelve)
/// words `registers` points to, during the call.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
pub unsafe extern "C" fn call_with_caller_registers(ctx: *mut c_void, f: RegistersFn) -> usize {
    // At entry rsp = E (E % 16 == 8, the return address at [E]); the caller's sp after the
    // return is E + 8. Six pushes and eight bytes of padding align rsp for the call; the
    // pushes leave rbx, rbp, r12..r15 at [rsp + 8] .. [rsp + 56) in that order.
    std::arch::naked_asm!(
        "push r15",
        "push r14",
        "push r13",
        "push r12",
        "push rbp",
        "push rbx",
        "sub rsp, 8",
        "mov rax, rsi",
        "lea rsi, [rsp + 8]",
        "lea rdx, [rsp + 64]",
        "call rax",
        "add rsp, 8",
        "pop rbx",
        "pop rbp",
        "pop r12",
        "pop r13",
        "pop r14",
        "pop r15",
        "ret",
    )
}

/// Calls `f(ctx, registers, caller_sp)` where `registers` are the callee-saved registers
/// exactly as the caller had them at the call (x86-64: rbx, rbp, r12–r15; aarch64: x19–x30)
/// and `caller_sp` is the caller's stack pointer once the call returns: the lowest address of
/// the caller's live frames. Every caller-saved register the caller needs after the call is in
/// those frames (the compiler saved it there), so `[caller_sp, stack base)` plus `registers`
/// hold every value the caller had in a register. Returns what `f` returns.
///
/// # Safety
/// `f` must be safe to call with `ctx`, must not unwind, and may only read the six (twelve)
/// words `registers` points to, during the call.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
pub unsafe extern "C" fn call_with_caller_registers(ctx: *mut c_void, f: RegistersFn) -> usize {
    // x19..x28, x29 (fp), x30 (lr) stored at [sp, sp + 96); the caller's sp is sp + 96.
    std::arch::naked_asm!(
        "sub sp, sp, #96",
        "stp x19, x20, [sp]",
        "stp x21, x22, [sp, #16]",
        "stp x23, x24, [sp, #32]",
        "stp x25, x26, [sp, #48]",
        "stp x27, x28, [sp, #64]",
        "stp x29, x30, [sp, #80]",
        "mov x9, x1",
        "mov x1, sp",
        "add x2, sp, #96",
        "blr x9",
        "ldp x29, x30, [sp, #80]",
        "add sp, sp, #96",
        "ret",
    )
}

/// The callee-saved registers of the code [`with_registers_spilled`] is inlined into.
#[derive(Clone, Copy, Debug)]
pub struct Spill {
    /// Where the trampoline stored them: the lowest live address of the stack while the
    /// closure runs. A thread that waits inside the closure publishes this: its scan range
    /// then holds the registers themselves.
    pub at: usize,
    /// The caller's stack pointer: the lowest live address once the call returned. A thread
    /// that waits after the call (a safe region) publishes this and the registers.
    pub caller_sp: usize,
    /// The registers' values (x86-64: rbx, rbp, r12–r15; aarch64: x19–x30).
    pub regs: [usize; SAVED_REGISTERS],
}

/// Runs `f(spill)` with the callee-saved registers as the code this is inlined into had them
/// (see [`call_with_caller_registers`] and [`Spill`]). Inlined always, so "the caller" is the
/// function that calls this (or the first one up the chain that is not inlined itself).
#[inline(always)]
pub fn with_registers_spilled<R, F: FnOnce(&Spill) -> R>(f: F) -> R {
    unsafe extern "C" fn trampoline<R, F: FnOnce(&Spill) -> R>(
        ctx: *mut c_void,
        registers: *const usize,
        caller_sp: usize,
    ) -> usize {
        // SAFETY: `ctx` is the `(Option<F>, Option<R>)` of the frame below, alive for the
        // call; `registers` points to SAVED_REGISTERS words (call_with_caller_registers).
        let (slot, regs) = unsafe {
            (
                &mut *ctx.cast::<(Option<F>, Option<R>)>(),
                std::ptr::read(registers.cast::<[usize; SAVED_REGISTERS]>()),
            )
        };
        if let Some(f) = slot.0.take() {
            slot.1 = Some(f(&Spill {
                at: registers as usize,
                caller_sp,
                regs,
            }));
        }
        0
    }
    let mut slot: (Option<F>, Option<R>) = (Some(f), None);
    // SAFETY: the trampoline reads `slot` (alive in this frame for the call) and the spill;
    // the closures given here do not unwind (they publish, wait, or catch panics).
    unsafe {
        call_with_caller_registers(
            (&mut slot as *mut (Option<F>, Option<R>)).cast(),
            trampoline::<R, F>,
        )
    };
    slot.1.expect("the trampoline ran the closure")
}

/// Enters a safe region: publishes the registers and the stack pointer of the code this is
/// inlined into (its frames must stay until the region is left), then [`SAFE`].
#[inline(always)]
pub fn enter_safe(record: &StopRecord) {
    with_registers_spilled(|spill| enter_safe_with(record, spill.caller_sp, &spill.regs));
}

/// Enters a safe region with registers and a stack pointer taken by the caller (see
/// [`call_with_caller_registers`]), then [`SAFE`].
pub fn enter_safe_with(record: &StopRecord, sp: usize, regs: &[usize; SAVED_REGISTERS]) {
    record.publish(sp, regs, None);
    record.state.store(SAFE, Ordering::SeqCst);
    arrive_if_awaited();
}

/// Leaves a safe region: blocks while the world is stopped (or a handshake holds the thread),
/// then [`RUNNING`].
pub fn leave_safe(record: &StopRecord) {
    resume(record, SAFE);
}

/// The thread is gone for good (it exits, or detaches): blocks while the world is stopped
/// or a handshake holds it — its stack must stay until the stopper lets go — then
/// [`FINISHED`]. Call it from [`SAFE`].
pub fn finish(record: &StopRecord) {
    loop {
        wait_while_held(record);
        record.state.store(FINISHED, Ordering::SeqCst);
        if !record.must_stay() {
            return;
        }
        record.state.store(SAFE, Ordering::SeqCst);
        arrive();
    }
}

/// Stops the calling thread here (a poll found a stop or a hold): publishes its registers and
/// stack pointer, reports to the stopper, waits until let go, then [`RUNNING`].
pub fn stop_here(record: &StopRecord) {
    // It waits inside the closure: the spill itself lies in its scan range.
    with_registers_spilled(|spill| {
        record.publish(spill.at, &spill.regs, None);
        record.state.store(STOPPED_POLL, Ordering::SeqCst);
        arrive();
        resume(record, STOPPED_POLL);
    });
}

/// Whether the calling thread must stop at its poll: the world stops, or a hold is on it.
pub fn must_stop(record: &StopRecord) -> bool {
    record.must_stay()
}

fn arrive_if_awaited() {
    if stopping(WORLD.load(Ordering::SeqCst)) {
        arrive();
    }
}

fn wait_while_held(record: &StopRecord) {
    loop {
        let w = WORLD.load(Ordering::SeqCst);
        if stopping(w) && !record.exempt() {
            futex_wait(&WORLD, w, None);
            continue;
        }
        let h = record.hold.load(Ordering::SeqCst);
        if h != 0 {
            futex_wait(&record.hold, h, None);
            continue;
        }
        return;
    }
}

/// The one way back to [`RUNNING`]: wait, store `RUNNING`, check again; a stop or a hold
/// that came meanwhile sends the thread back to `resting` (where a stopper counts it).
fn resume(record: &StopRecord, resting: u32) {
    loop {
        wait_while_held(record);
        record.state.store(RUNNING, Ordering::SeqCst);
        if !record.must_stay() {
            return;
        }
        record.state.store(resting, Ordering::SeqCst);
        arrive();
    }
}

use crate::futex::{wait as futex_wait, wake as futex_wake};

// ---- the stop signal ----

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

/// Installs the stop signal's handler for `signo` (a real-time signal without a handler yet):
/// `SA_SIGINFO | SA_RESTART`, never `SA_ONSTACK` (the context must be saved on the thread's
/// own stack, inside its scan range).
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
        // SAFETY: puts back the action saved at install (SIG_DFL: the signal was unused).
        unsafe { libc::sigaction(self.signo, &self.previous.0, std::ptr::null_mut()) };
    }
}

/// Sends the stop signal to thread `tid` of this process. `ESRCH` if it is gone.
pub fn send_stop_signal(tid: i32) -> std::result::Result<(), Errno> {
    let signo = STOP_SIGNAL.load(Ordering::Acquire);
    if signo == 0 {
        return Err(Errno::ENOSYS);
    }
    // SAFETY: tgkill to a thread of this very process with the signal rtvm installed.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, signo) };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

extern "C" fn on_stop_signal(_sig: c_int, _info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let saved_errno = Errno::last_raw();
    if let Some(record) = current() {
        if record.state.load(Ordering::SeqCst) == RUNNING && record.must_stay() {
            let marker = 0u8;
            let sp = std::hint::black_box(&marker as *const u8 as usize);
            let regs = registers_of(ucontext);
            record.publish(sp, &regs, current_alt_stack(sp));
            record.state.store(STOPPED_SIGNAL, Ordering::SeqCst);
            arrive();
            resume(record, STOPPED_SIGNAL);
        }
    }
    Errno::set_raw(saved_errno);
}

/// The alternate signal stack, if `sp` lies on it.
fn current_alt_stack(sp: usize) -> Option<(usize, usize)> {
    // SAFETY: a zeroed stack_t is a valid out-parameter; a NULL new stack only queries
    // (sigaltstack is async-signal-safe).
    let mut ss: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut ss) } != 0
        || ss.ss_flags & libc::SS_ONSTACK == 0
    {
        return None;
    }
    let start = ss.ss_sp as usize;
    let end = start + ss.ss_size;
    (start..end).contains(&sp).then_some((start, end))
}

#[cfg(target_arch = "x86_64")]
fn registers_of(ucontext: *mut c_void) -> [usize; SAVED_REGISTERS] {
    if ucontext.is_null() {
        return [0; SAVED_REGISTERS];
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
fn registers_of(ucontext: *mut c_void) -> [usize; SAVED_REGISTERS] {
    if ucontext.is_null() {
        return [0; SAVED_REGISTERS];
    }
    // SAFETY: the kernel passes the interrupted context to an SA_SIGINFO handler.
    let r = unsafe { &(*ucontext.cast::<libc::ucontext_t>()).uc_mcontext.regs };
    std::array::from_fn(|i| r[19 + i] as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spill_lies_at_the_callers_frame() {
        let marker = 0u8;
        let here = std::hint::black_box(&marker as *const u8 as usize);
        let (at, sp, regs) = with_registers_spilled(|s| (s.at, s.caller_sp, s.regs));
        assert!(
            at < sp && sp <= here,
            "the spill lies below the caller's frame: {at:#x} {sp:#x} {here:#x}"
        );
        // rbp / x29 is the frame pointer or a saved value: never all registers zero.
        assert!(regs.iter().any(|&r| r != 0));
    }

    /// The value the caller has in r12 is what the trampoline hands over, untouched.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_trampoline_sees_the_callers_r12() {
        unsafe extern "C" fn take_r12(ctx: *mut c_void, regs: *const usize, _sp: usize) -> usize {
            // SAFETY: `ctx` is the test's usize; `regs` holds six words, r12 third.
            unsafe { *ctx.cast::<usize>() = *regs.add(2) };
            7
        }
        let value: usize = 0x1234_5678_9abc_def0;
        let mut got: usize = 0;
        let ret: usize;
        // SAFETY: saves rbp and r12 and restores them, aligns rsp for the call, and calls the
        // trampoline with the C ABI (clobber_abi declares what the call may change).
        unsafe {
            std::arch::asm!(
                "push rbp",
                "mov rbp, rsp",
                "and rsp, -16",
                "push r12",
                "push r12",
                "mov r12, {v}",
                "call {call}",
                "pop r12",
                "pop r12",
                "mov rsp, rbp",
                "pop rbp",
                v = in(reg) value,
                call = sym call_with_caller_registers,
                in("rdi") &mut got as *mut usize,
                in("rsi") take_r12 as RegistersFn,
                lateout("rax") ret,
                clobber_abi("C"),
            );
        }
        assert_eq!(ret, 7);
        assert_eq!(got, value);
    }

    #[test]
    fn a_held_thread_stays_until_released() {
        static R: StopRecord = StopRecord::new();
        R.reset(0);
        R.set_hold(true);
        let t = std::thread::spawn(|| {
            set_current(Some(&R));
            leave_safe(&R);
            R.state()
        });
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(R.state(), SAFE, "held: it stays safe");
        R.set_hold(false);
        assert_eq!(t.join().unwrap(), RUNNING);
    }
}
