//! The low half of stopping threads for a collector: a per-thread [`StopRecord`], the
//! process's world word, the waits, the register spill, the stop signal and where it may stop
//! a thread.
//!
//! | module | what |
//! | --- | --- |
//! | [`protocol`] | the state machine, over a small platform interface (model-checked with loom) |
//! | [`code`] | code the stop signal never stops a thread in (libc, the dynamic linker, ...) |
//! | `signal` | the stop signal: installed, sent at most one at a time, its handler |
//!
//! **States.** [`RUNNING`] (the thread may run the embedder's code), [`SAFE`] (in a safe
//! region: it published its stack pointer and registers and blocks before it runs the
//! embedder's code again), [`STOPPED_POLL`] and [`STOPPED_SIGNAL`] (stopped, published, and
//! waiting), [`FINISHED`] (gone for good: its stack may go away). See [`protocol`] for who
//! changes what and the one check that makes them safe.
//!
//! **Registers.** [`enter_safe`] and [`stop_here`] publish the ABI's callee-saved registers
//! exactly as the code they are inlined into has them, and that code's stack pointer
//! ([`call_with_caller_registers`], a naked trampoline): the frames from there up stay live
//! while the thread is safe or stopped and hold every caller-saved register that was live (the
//! compiler saved them around the call). So `[sp, base)` plus the registers hold every value.
//! The stop signal's handler runs on the thread's own stack (it is installed without
//! `SA_ONSTACK`), so the kernel saved the whole register file on that stack, above the
//! handler's frame, whose address it publishes; it copies the callee-saved ones into the
//! record as well. Every publication happens inside a no-stop section, so a signal arriving
//! meanwhile cannot publish its own frame over it.
//!
//! **Where a thread runs.** A thread publishes the stack it was found on when that is not its
//! registered stack: its alternate signal stack (it polled, or was signalled, inside an
//! `SA_ONSTACK` handler), a stack it declared ([`StopRecord::set_fiber`]: a fiber or a
//! coroutine), or an unknown one (the stopper looks it up).
//!
//! **The signal handler** allocates nothing and takes no lock: thread-local reads of a
//! `Cell` set before the thread could receive the signal, atomics, `futex` and `sigaltstack`.

pub mod code;
pub mod protocol;
mod signal;

use std::cell::Cell;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

pub use protocol::{Handled, FINISHED, RUNNING, SAFE, STOPPED_POLL, STOPPED_SIGNAL};
pub use signal::{
    install_stop_signal, send_stop_signal, stop_signal, unblock_vm_signals, SendOutcome,
    SignalMask, StopSignal, StopSignalError,
};

use crate::futex::{wait as futex_wait, wake as futex_wake};

/// The platform the protocol runs on here: `std` atomics (sequentially consistent, which on
/// x86-64 and aarch64 orders every Dekker pair without a separate fence) and futexes.
#[derive(Debug)]
pub struct Linux;

impl protocol::Word for AtomicU32 {
    #[inline]
    fn load(&self) -> u32 {
        AtomicU32::load(self, Ordering::SeqCst)
    }
    #[inline]
    fn store(&self, v: u32) {
        AtomicU32::store(self, v, Ordering::SeqCst)
    }
    #[inline]
    fn fetch_add(&self, v: u32) -> u32 {
        AtomicU32::fetch_add(self, v, Ordering::SeqCst)
    }
    #[inline]
    fn compare_exchange(&self, current: u32, new: u32) -> Result<u32, u32> {
        AtomicU32::compare_exchange(self, current, new, Ordering::SeqCst, Ordering::SeqCst)
    }
    #[inline]
    fn load_own(&self) -> u32 {
        let v = AtomicU32::load(self, Ordering::Relaxed);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        v
    }
    #[inline]
    fn store_own(&self, v: u32) {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        AtomicU32::store(self, v, Ordering::Relaxed);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    }
}

impl protocol::Platform for Linux {
    type Word = AtomicU32;
    fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        futex_wait(word, expected, timeout);
    }
    fn wake_all(word: &AtomicU32) {
        futex_wake(word, i32::MAX);
    }
    fn wake(word: &AtomicU32, n: u32) {
        futex_wake(word, n.min(i32::MAX as u32) as i32);
    }
    const PARK_SAFETY_NET: Option<Duration> = Some(Duration::from_millis(100));
}

type Core = protocol::Record<Linux>;

/// How many callee-saved registers a spill holds.
#[cfg(target_arch = "x86_64")]
pub const SAVED_REGISTERS: usize = 6; // rbx, rbp, r12, r13, r14, r15
/// How many callee-saved registers a spill holds.
#[cfg(target_arch = "aarch64")]
pub const SAVED_REGISTERS: usize = 12; // x19..x28, x29 (fp), x30 (lr)

/// The stack a thread was found on, when it is not its registered one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtherStack {
    /// Its alternate signal stack `[start, end)`.
    SignalStack(usize, usize),
    /// A stack it declared with [`StopRecord::set_fiber`], `[start, end)`.
    Fiber(usize, usize),
    /// A stack nobody declared: the one containing the published stack pointer.
    Unknown,
}

const OTHER_NONE: usize = 0;
const OTHER_ALT: usize = 1;
const OTHER_FIBER: usize = 2;
const OTHER_UNKNOWN: usize = 3;

/// One thread's part in stops and handshakes. Lives for the process (records are pooled and
/// reused by the runtime), so a thread-local reference to it is `'static`.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct StopRecord {
    core: Core,
    tid: AtomicI32,
    sp: AtomicUsize,
    regs: [AtomicUsize; SAVED_REGISTERS],
    /// [`OTHER_NONE`], [`OTHER_ALT`], [`OTHER_FIBER`] or [`OTHER_UNKNOWN`].
    other: AtomicUsize,
    other_start: AtomicUsize,
    other_end: AtomicUsize,
    /// The registered stack `[lo, hi)`.
    stack_lo: AtomicUsize,
    stack_hi: AtomicUsize,
    /// A declared fiber stack `[lo, hi)` the thread runs on now (0, 0: none).
    fiber_lo: AtomicUsize,
    fiber_hi: AtomicUsize,
    /// Stop signals that found the thread in no-stop code, and where the last one did.
    unsafe_hits: AtomicU32,
    unsafe_pc: AtomicUsize,
    /// The last such signal found it at a system call (blocked in the kernel).
    in_syscall: AtomicBool,
}

impl StopRecord {
    /// A record in state [`SAFE`] with nothing published (a thread that has not started).
    pub const fn new() -> StopRecord {
        StopRecord {
            core: protocol::Record {
                state: AtomicU32::new(SAFE),
                poll: AtomicU32::new(0),
                hold: AtomicU32::new(0),
                exempt: AtomicU32::new(0),
                critical: AtomicU32::new(0),
                deferred: AtomicU32::new(0),
                in_op: AtomicU32::new(0),
                claim: AtomicU32::new(0),
                op_done: AtomicU32::new(0),
                sig_sent: AtomicU32::new(0),
                sig_seen: AtomicU32::new(0),
            },
            tid: AtomicI32::new(0),
            sp: AtomicUsize::new(0),
            regs: [const { AtomicUsize::new(0) }; SAVED_REGISTERS],
            other: AtomicUsize::new(OTHER_NONE),
            other_start: AtomicUsize::new(0),
            other_end: AtomicUsize::new(0),
            stack_lo: AtomicUsize::new(0),
            stack_hi: AtomicUsize::new(0),
            fiber_lo: AtomicUsize::new(0),
            fiber_hi: AtomicUsize::new(0),
            unsafe_hits: AtomicU32::new(0),
            unsafe_pc: AtomicUsize::new(0),
            in_syscall: AtomicBool::new(false),
        }
    }

    /// Makes a pooled record fresh for a new thread on `stack`: [`SAFE`], nothing published.
    pub fn reset(&self, tid: i32, stack: Range<usize>) {
        let c = &self.core;
        for w in [
            &c.poll,
            &c.hold,
            &c.exempt,
            &c.critical,
            &c.deferred,
            &c.in_op,
            &c.claim,
            &c.op_done,
        ] {
            w.store(0, Ordering::Relaxed);
        }
        // A signal still pending from the record's last thread is that thread's: the counters
        // start even.
        let seen = c.sig_seen.load(Ordering::Relaxed);
        c.sig_sent.store(seen, Ordering::Relaxed);
        self.tid.store(tid, Ordering::Relaxed);
        self.sp.store(0, Ordering::Relaxed);
        for r in &self.regs {
            r.store(0, Ordering::Relaxed);
        }
        self.other.store(OTHER_NONE, Ordering::Relaxed);
        self.stack_lo.store(stack.start, Ordering::Relaxed);
        self.stack_hi.store(stack.end, Ordering::Relaxed);
        self.fiber_lo.store(0, Ordering::Relaxed);
        self.fiber_hi.store(0, Ordering::Relaxed);
        self.unsafe_hits.store(0, Ordering::Relaxed);
        self.unsafe_pc.store(0, Ordering::Relaxed);
        self.in_syscall.store(false, Ordering::Relaxed);
        c.state.store(SAFE, Ordering::SeqCst);
    }

    /// The protocol's part of the record.
    pub fn core(&self) -> &protocol::Record<Linux> {
        &self.core
    }

    /// The state (sequentially consistent: the stopper's side of the check).
    pub fn state(&self) -> u32 {
        self.core.state.load(Ordering::SeqCst)
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

    /// The stack the thread was found on at its last publication, if not its registered one.
    pub fn other_stack(&self) -> Option<OtherStack> {
        let (s, e) = (
            self.other_start.load(Ordering::Acquire),
            self.other_end.load(Ordering::Acquire),
        );
        match self.other.load(Ordering::Acquire) {
            OTHER_ALT => Some(OtherStack::SignalStack(s, e)),
            OTHER_FIBER => Some(OtherStack::Fiber(s, e)),
            OTHER_UNKNOWN => Some(OtherStack::Unknown),
            _ => None,
        }
    }

    /// The alternate signal stack the stop found the thread on, if it was on one.
    pub fn alt_stack(&self) -> Option<(usize, usize)> {
        match self.other_stack() {
            Some(OtherStack::SignalStack(s, e)) => Some((s, e)),
            _ => None,
        }
    }

    /// Declares that the thread now runs on the stack `[lo, hi)` (a fiber), or on its own
    /// again (`None`). Only the thread itself calls it.
    pub fn set_fiber(&self, stack: Option<Range<usize>>) {
        let r = stack.unwrap_or(0..0);
        self.fiber_lo.store(r.start, Ordering::Relaxed);
        self.fiber_hi.store(r.end, Ordering::Release);
    }

    /// Whether the thread's next poll takes the slow path.
    #[inline]
    pub fn poll_armed(&self) -> bool {
        self.core.poll.load(Ordering::Relaxed) != 0
    }

    /// Arms or disarms the thread's poll.
    pub fn arm_poll(&self, armed: bool) {
        self.core.poll.store(u32::from(armed), Ordering::Release);
    }

    /// Whether a handshake holds the thread.
    pub fn held(&self) -> bool {
        self.core.hold.load(Ordering::SeqCst) != 0
    }

    /// Marks the record as the stopper's own (its waits do not block on its stop), or not.
    pub fn set_exempt(&self, exempt: bool) {
        self.core.exempt.store(u32::from(exempt), Ordering::SeqCst);
    }

    /// How many stop signals found the thread in no-stop code since its record was reset,
    /// where the last one did, and whether it was at a system call there.
    pub fn unsafe_stops(&self) -> (u32, usize, bool) {
        (
            self.unsafe_hits.load(Ordering::Relaxed),
            self.unsafe_pc.load(Ordering::Relaxed),
            self.in_syscall.load(Ordering::Relaxed),
        )
    }

    /// Whether a stop signal sent to the thread is still unhandled (it blocks the signal, or
    /// has not run since).
    pub fn signal_outstanding(&self) -> bool {
        protocol::signal_outstanding(&self.core)
    }

    /// Publishes `sp` and `regs`, and the stack `sp` lies on if it is not the registered one.
    /// `alt` is the alternate signal stack if the caller knows it is on it.
    fn publish(&self, sp: usize, regs: &[usize; SAVED_REGISTERS], alt: Option<(usize, usize)>) {
        for (slot, v) in self.regs.iter().zip(regs) {
            slot.store(*v, Ordering::Relaxed);
        }
        let (lo, hi) = (
            self.stack_lo.load(Ordering::Relaxed),
            self.stack_hi.load(Ordering::Relaxed),
        );
        let (flo, fhi) = (
            self.fiber_lo.load(Ordering::Relaxed),
            self.fiber_hi.load(Ordering::Acquire),
        );
        let other = if let Some((s, e)) = alt {
            Some((OTHER_ALT, s, e))
        } else if (lo..hi).contains(&sp) || lo == hi {
            None
        } else if flo < fhi && (flo..fhi).contains(&sp) {
            Some((OTHER_FIBER, flo, fhi))
        } else if let Some((s, e)) = current_alt_stack(sp) {
            Some((OTHER_ALT, s, e))
        } else {
            Some((OTHER_UNKNOWN, 0, 0))
        };
        match other {
            Some((kind, s, e)) => {
                self.other_start.store(s, Ordering::Relaxed);
                self.other_end.store(e, Ordering::Relaxed);
                self.other.store(kind, Ordering::Relaxed);
            }
            None => self.other.store(OTHER_NONE, Ordering::Relaxed),
        }
        self.sp.store(sp, Ordering::Release);
    }
}

impl Default for StopRecord {
    fn default() -> Self {
        Self::new()
    }
}

static WORLD: protocol::World<Linux> = protocol::World {
    word: AtomicU32::new(0),
    arrivals: AtomicU32::new(0),
};

thread_local! {
    /// The calling thread's record. Plain data without a destructor: read in the handler.
    static CURRENT: Cell<Option<&'static StopRecord>> = const { Cell::new(None) };
}

/// The process's world.
pub fn the_world() -> &'static protocol::World<Linux> {
    &WORLD
}

/// The world word: `(stop id << 1) | stopping`.
pub fn world() -> u32 {
    WORLD.word.load(Ordering::SeqCst)
}

/// Whether a world word says the world is stopping (or stopped).
pub fn stopping(word: u32) -> bool {
    protocol::stopping(word)
}

/// Starts a stop: the world word becomes "stopping" with the next id. One stopper at a time
/// (the caller serializes). Returns the new word.
pub fn begin_stop() -> u32 {
    register_fork_handler();
    protocol::begin_stop(&WORLD)
}

/// Ends the stop: every thread waiting for it is woken (one system call).
pub fn end_stop() {
    protocol::end_stop(&WORLD);
}

/// The arrivals counter: read it, check the threads, and wait for it to change.
pub fn arrivals() -> u32 {
    protocol::arrivals(&WORLD)
}

/// Waits until the arrivals counter is no longer `seen`, or `timeout` passed.
pub fn wait_for_arrivals(seen: u32, timeout: Duration) {
    protocol::wait_for_arrivals(&WORLD, seen, timeout);
}

/// Wakes a stopper waiting for arrivals.
pub fn notify_stopper() {
    protocol::arrive(&WORLD);
}

/// Makes `record` the calling thread's (or none).
pub fn set_current(record: Option<&'static StopRecord>) {
    if record.is_some() {
        register_fork_handler();
    }
    CURRENT.with(|c| c.set(record));
}

/// The calling thread's record.
#[inline]
pub fn current() -> Option<&'static StopRecord> {
    CURRENT.with(Cell::get)
}

/// In the child of `fork()` only the forking thread exists: no stopper will ever end a stop
/// the parent had under way, nor a handshake hold on this thread. The child's world is let
/// go, so its first leave or poll does not wait for ever.
extern "C" fn forked_child() {
    let w = WORLD.word.load(Ordering::Relaxed);
    WORLD.word.store(w & !1, Ordering::Relaxed);
    if let Some(r) = CURRENT.with(Cell::get) {
        r.core.hold.store(0, Ordering::Relaxed);
        r.core.exempt.store(0, Ordering::Relaxed);
        r.core.poll.store(0, Ordering::Relaxed);
    }
}

fn register_fork_handler() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: a child handler that only stores atomics and reads a const thread-local
        // (async-signal-safe, allocation-free); the code is never unloaded (-z nodelete).
        let rc = unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
        if rc != 0 {
            log::warn!(target: "safepoint", "pthread_atfork failed ({}): a forked child's threads may wait for a stop of its parent", crate::error::strerror(nix::errno::Errno::from_raw(rc)));
        }
    });
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
    protocol::enter_safe(&WORLD, &record.core, || record.publish(sp, regs, None));
}

/// Leaves a safe region: blocks while the world is stopped (or a handshake holds the thread),
/// then [`RUNNING`]; stops at once if a stop came while it was leaving.
pub fn leave_safe(record: &StopRecord) {
    if protocol::leave_safe(&WORLD, &record.core) {
        stop_here(record);
    }
}

/// The thread is gone for good (it exits, or detaches): blocks while the world is stopped
/// or a handshake holds it — its stack must stay until the stopper lets go — then
/// [`FINISHED`]. Call it from [`SAFE`].
pub fn finish(record: &StopRecord) {
    protocol::finish(&WORLD, &record.core);
}

/// Stops the calling thread here (a poll found a stop or a hold): publishes its registers and
/// stack pointer, reports to the stopper, waits until let go, then [`RUNNING`].
#[inline(never)]
pub fn stop_here(record: &StopRecord) {
    // It waits inside the closure: the spill itself lies in its scan range.
    with_registers_spilled(|spill| {
        protocol::stop_here(&WORLD, &record.core, || {
            record.publish(spill.at, &spill.regs, None)
        });
    });
}

/// The poll's decision: whether the calling thread must stop here. A thread in a safe region
/// stays safe; inside a no-stop section the stop is taken at the section's end.
pub fn must_stop(record: &StopRecord) -> bool {
    protocol::poll(&WORLD, &record.core)
}

/// Whether the thread must stay where it is (the world stops, or a hold is on it).
pub fn must_stay(record: &StopRecord) -> bool {
    protocol::must_stay(&WORLD, &record.core)
}

/// Enters a no-stop section on `record` (the calling thread's): the stop signal does not
/// stop the thread until the matching [`no_stop_exit`]. Sections nest.
#[inline]
pub fn no_stop_enter(record: &StopRecord) {
    protocol::critical_enter(&record.core);
}

/// Leaves a no-stop section; the outermost one stops the thread now if the signal found a
/// stop inside it that is still on.
#[inline]
pub fn no_stop_exit(record: &StopRecord) {
    if protocol::critical_exit(&WORLD, &record.core) {
        stop_here(record);
    }
}

/// A no-stop section on the calling thread, if it has a record (nothing otherwise), left
/// when dropped — on the same thread (not `Send`).
#[derive(Debug)]
#[must_use = "the section ends when the guard is dropped"]
pub struct NoStop {
    record: Option<&'static StopRecord>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl NoStop {
    /// Enters a no-stop section ([`no_stop_enter`]) on the calling thread.
    #[inline]
    pub fn enter() -> NoStop {
        let record = current();
        if let Some(r) = record {
            no_stop_enter(r);
        }
        NoStop {
            record,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for NoStop {
    #[inline]
    fn drop(&mut self) {
        if let Some(r) = self.record {
            no_stop_exit(r);
        }
    }
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
        R.reset(0, 0..0);
        R.core.hold.store(1, Ordering::SeqCst);
        let t = std::thread::spawn(|| {
            set_current(Some(&R));
            leave_safe(&R);
            R.state()
        });
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(R.state(), SAFE, "held: it stays safe");
        protocol::end_handshake(&R.core);
        assert_eq!(t.join().unwrap(), RUNNING);
    }

    #[test]
    fn a_poll_inside_a_safe_region_leaves_it_safe() {
        static R: StopRecord = StopRecord::new();
        R.reset(0, 0..0);
        R.core.hold.store(1, Ordering::SeqCst);
        // In a safe region (the reset state) with a hold on: the poll does not stop.
        assert!(!must_stop(&R));
        assert_eq!(R.state(), SAFE);
        R.core.hold.store(0, Ordering::SeqCst);
    }
}
