//! Stopping the embedder's threads for its collector: thread states, safe regions, the poll,
//! stops of the world and handshakes — HotSpot's safepoints and thread-local handshakes
//! (JEP 312) for threads that run the embedder's code.
//!
//! Every VM thread the embedder runs code on (started with [`VmHandle::spawn`] or attached) is
//! a *mutator* with a record ([`pool`]): running, in a safe region, stopped, or finished (the
//! states and the one check that makes them safe are the OS layer's,
//! [`rtvm_os_linux::safepoint`]). rtvm's own threads — the worker gang, the dispatcher, the
//! attach listener, the trimmer — run only rtvm's code, never touch the embedder's objects and
//! are not stopped.
//!
//! | file | what |
//! | --- | --- |
//! | `pool` | records, pooled for the life of the process |
//! | `stop` | [`WorldStopped`]: arm, wait, signal the stragglers, resume; `-Xlog:safepoint` |
//! | `handshake` | one thread at a time: run by it at its poll, or for it while it is safe |
//!
//! [`VmHandle::spawn`]: crate::VmHandle::spawn

mod handshake;
mod pool;
mod stop;

use std::cell::Cell;
use std::ffi::CString;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rtvm_os_linux::safepoint::{self as os, SAVED_REGISTERS};

pub(crate) use pool::Mutator;
pub use stop::WorldStopped;

/// Non-zero while a stop or a handshake is pending anywhere: the word `rtvm.h`'s inline
/// `rtvm_safepoint_poll()` reads before it takes the slow path.
pub(crate) static POLL_PENDING: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The calling thread's mutator record. Plain data, no destructor.
    static MUTATOR: Cell<Option<&'static Mutator>> = const { Cell::new(None) };
    /// The calling thread holds the world stopped, or runs a handshake for another thread.
    static IN_STOP: Cell<bool> = const { Cell::new(false) };
}

/// The poll, for loop back-edges and other places a mutator may stop: one thread-local load
/// and one load of the thread's poll word; it takes the slow path only while a stop or a
/// handshake for this thread is pending. Does nothing on a thread rtvm does not know.
#[inline]
pub fn safepoint_poll() {
    if let Some(m) = MUTATOR.with(Cell::get) {
        if m.record.poll_armed() {
            poll_slow(m);
        }
    }
}

#[cold]
#[inline(never)]
fn poll_slow(m: &'static Mutator) {
    handshake::run_if_claimed(m);
    if os::must_stop(&m.record) && !m.slot.taken_by_target() {
        os::stop_here(&m.record);
    }
}

/// How a thread was found stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopHow {
    /// At a poll ([`safepoint_poll`]); its registers are spilled in its scan range.
    Poll,
    /// In a safe region (entered by the embedder, or one of rtvm's own waits).
    SafeRegion,
    /// By the stop signal, in its handler; the kernel saved its context in its scan range.
    Signal,
}

impl StopHow {
    fn of(state: u32) -> StopHow {
        match state {
            os::STOPPED_POLL => StopHow::Poll,
            os::STOPPED_SIGNAL => StopHow::Signal,
            _ => StopHow::SafeRegion,
        }
    }

    /// The C code (`RTVM_STOPPED_POLL`, `_SAFE_REGION`, `_SIGNAL`).
    pub fn code(self) -> i32 {
        match self {
            StopHow::Poll => 1,
            StopHow::SafeRegion => 2,
            StopHow::Signal => 3,
        }
    }
}

/// A stopped (or safe) thread, as a collector needs it.
#[derive(Clone, Debug)]
pub struct StoppedThread<'a> {
    id: u64,
    tid: i32,
    name: &'a CString,
    how: StopHow,
    scan: Range<usize>,
    alt_stack: Option<Range<usize>>,
    registers: [usize; SAVED_REGISTERS],
    stack: Range<usize>,
}

impl StoppedThread<'_> {
    /// The VM thread id (`VmThread::info().id`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The kernel thread id.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// The thread's name.
    pub fn name(&self) -> &str {
        self.name.to_str().unwrap_or("?")
    }

    pub(crate) fn c_name(&self) -> &std::ffi::CStr {
        self.name
    }

    /// How it stopped.
    pub fn how(&self) -> StopHow {
        self.how
    }

    /// The conservative scan range `[sp, base)`: for a thread stopped at a poll or by the
    /// signal it holds every value the thread had in a register too; for a thread in a safe
    /// region it starts where the region was entered (the registers it had then are
    /// [`registers`](Self::registers)). Empty for a thread that has not begun its body. A
    /// thread found on its signal stack is scanned over its whole usable stack (where it was
    /// interrupted is not known) and [`alt_stack`](Self::alt_stack) says where it is.
    pub fn scan(&self) -> Range<usize> {
        self.scan.clone()
    }

    /// The part of the alternate signal stack in use, `[sp, end)`, if the thread was on it.
    pub fn alt_stack(&self) -> Option<Range<usize>> {
        self.alt_stack.clone()
    }

    /// The callee-saved registers as published (x86-64: rbx, rbp, r12–r15; aarch64:
    /// x19–x30): at the poll, at the safe region's entry, or from the signal's context.
    pub fn registers(&self) -> &[usize; SAVED_REGISTERS] {
        &self.registers
    }

    /// The thread's usable stack.
    pub fn stack(&self) -> Range<usize> {
        self.stack.clone()
    }
}

/// Why a stop or a handshake did not happen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SafepointError {
    /// Threads neither polled, nor entered a safe region, nor took the signal in time; the
    /// world was let go.
    #[error("Safepoint \"{reason}\": timed out after {waited_ms} ms while spinning to reach a safepoint; threads which did not reach the safepoint: {}{}", stragglers.join(", "), if *signals { "" } else { " (no signal fallback: -Xrs, or the stop signal could not be installed; only polls and safe regions stop threads)" })]
    Timeout {
        /// The stop's reason.
        reason: String,
        /// How long it waited.
        waited_ms: u64,
        /// `"name" (tid N)` of each thread that did not stop.
        stragglers: Vec<String>,
        /// Whether the signal fallback was available.
        signals: bool,
    },
    /// Called while this thread holds the world stopped (its callback, or before the
    /// `WorldStopped` is dropped), or from inside a handshake operation.
    #[error(
        "{what}: called while this thread holds the world stopped or runs a handshake operation"
    )]
    Nested {
        /// What was refused.
        what: String,
    },
    /// Called by a thread that is itself stopped: in a safe region while another thread
    /// holds the world stopped.
    #[error("{what}: the calling thread is stopped (in a safe region while the world is stopped)")]
    CallerStopped {
        /// What was refused.
        what: String,
    },
    /// No such thread (never was, or it ended).
    #[error("handshake: no VM or attached thread #{id}")]
    NoSuchThread {
        /// The id asked for.
        id: u64,
    },
}

/// A thread's facts, kept with its record while it is a member.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) mutator: &'static Mutator,
    pub(crate) name: CString,
    pub(crate) stack: Range<usize>,
}

impl Member {
    fn view(&self, how: StopHow) -> StoppedThread<'_> {
        let r = &self.mutator.record;
        view_of(
            self.mutator.id(),
            r.tid(),
            &self.name,
            &self.stack,
            how,
            r.sp(),
            r.alt_stack(),
            r.registers(),
        )
    }
}

#[allow(clippy::too_many_arguments)]
fn view_of<'a>(
    id: u64,
    tid: i32,
    name: &'a CString,
    stack: &Range<usize>,
    how: StopHow,
    sp: usize,
    alt: Option<(usize, usize)>,
    registers: [usize; SAVED_REGISTERS],
) -> StoppedThread<'a> {
    // A published address may be that of a byte: scan from the word it lies in.
    let sp = sp & !(std::mem::size_of::<usize>() - 1);
    let (scan, alt_stack) = match alt {
        Some((_, end)) => (stack.clone(), Some(sp..end)),
        None if sp == 0 => (stack.end..stack.end, None),
        None if stack.contains(&sp) => (sp..stack.end, None),
        // On a stack rtvm does not know (a fiber): the whole known stack, conservatively.
        None => (stack.clone(), None),
    };
    StoppedThread {
        id,
        tid,
        name,
        how,
        scan,
        alt_stack,
        registers,
        stack: stack.clone(),
    }
}

/// How stops behave, from the flags.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SafepointConfig {
    /// The stop signal is installed (not `-Xrs`): threads that neither poll nor are safe
    /// within the grace period get it.
    pub(crate) signals: bool,
    /// How long a stop waits for polls before it signals.
    pub(crate) grace: Duration,
    /// `-XX:+SafepointTimeout`: report the stragglers after this long.
    pub(crate) report_after: Option<Duration>,
}

/// A VM's mutators and its stops.
#[derive(Debug)]
pub(crate) struct Safepoints {
    /// The members. Held by a stopper (and a handshake) for the whole operation: no thread
    /// joins or leaves meanwhile, and one operation runs at a time.
    members: Mutex<Vec<Member>>,
    config: Mutex<SafepointConfig>,
    last_end: Mutex<Option<Instant>>,
}

impl Safepoints {
    pub(crate) fn new() -> Safepoints {
        Safepoints {
            members: Mutex::new(Vec::new()),
            config: Mutex::new(SafepointConfig {
                signals: false,
                grace: Duration::from_micros(200),
                report_after: None,
            }),
            last_end: Mutex::new(None),
        }
    }

    /// Sets how stops behave (at VM creation).
    pub(crate) fn configure(&self, config: SafepointConfig) {
        *self.config.lock().unwrap_or_else(|p| p.into_inner()) = config;
    }

    fn config(&self) -> SafepointConfig {
        *self.config.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_members(&self) -> MutexGuard<'_, Vec<Member>> {
        self.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes thread `id` a mutator (in a safe region until it leaves it). Waits while the
    /// world is stopped (in a safe region itself, if the caller is a mutator).
    pub(crate) fn register(
        &self,
        id: u64,
        name: &str,
        stack: Range<usize>,
    ) -> Result<&'static Mutator, SafepointError> {
        refuse_nested("starting or attaching a thread")?;
        let m = pool::take(id);
        let name = CString::new(name.replace('\0', "?")).unwrap_or_default();
        let _wait = SafeWait::enter();
        let mut members = self.lock_members();
        m.index.store(members.len(), Ordering::Relaxed);
        members.push(Member {
            mutator: m,
            name,
            stack,
        });
        Ok(m)
    }

    /// Forgets a mutator whose thread is gone (or detached, [`finish`]ed). Waits while the
    /// world is stopped.
    pub(crate) fn unregister(&self, m: &'static Mutator) {
        let _wait = SafeWait::enter();
        let mut members = self.lock_members();
        let i = m.index.load(Ordering::Relaxed);
        if members.get(i).is_some_and(|x| std::ptr::eq(x.mutator, m)) {
            members.swap_remove(i);
            if let Some(moved) = members.get(i) {
                moved.mutator.index.store(i, Ordering::Relaxed);
            }
            drop(members);
            pool::give_back(m);
        }
    }
}

fn refuse_nested(what: &str) -> Result<(), SafepointError> {
    if IN_STOP.with(Cell::get) {
        return Err(SafepointError::Nested { what: what.into() });
    }
    Ok(())
}

/// Whether the calling thread holds the world stopped (or runs a handshake operation).
pub(crate) fn in_stop() -> bool {
    IN_STOP.with(Cell::get)
}

/// Makes `m` the calling thread's record (it starts in a safe region).
pub(crate) fn bind(m: &'static Mutator) {
    m.record.set_tid(rtvm_os_linux::system::current_tid());
    os::set_current(Some(&m.record));
    MUTATOR.with(|c| c.set(Some(m)));
}

/// The calling thread's record.
pub(crate) fn current() -> Option<&'static Mutator> {
    MUTATOR.with(Cell::get)
}

/// The calling thread is a mutator no more.
pub(crate) fn unbind() {
    MUTATOR.with(|c| c.set(None));
    os::set_current(None);
}

/// The calling mutator begins (or goes back to) the embedder's code: leaves its safe
/// region, waiting while the world is stopped.
pub(crate) fn start_running(m: &'static Mutator) {
    m.depth.store(0, Ordering::Relaxed);
    os::leave_safe(&m.record);
}

/// The calling mutator is done with the embedder's code for good (its body returned, it
/// detaches): safe now, then finished once no stop holds it.
pub(crate) fn finish(m: &'static Mutator) {
    if m.record.state() == os::RUNNING {
        os::enter_safe(&m.record);
    }
    os::finish(&m.record);
}

/// Enters a safe region on the calling thread, if it is a mutator; nested regions count.
/// Returns whether it is a mutator. Inlined always: the registers and the stack pointer it
/// publishes are those of the function it is inlined into, whose frame stays while the thread
/// is in the region.
#[inline(always)]
pub(crate) fn enter_current() -> bool {
    let Some(m) = current() else { return false };
    if m.depth.fetch_add(1, Ordering::Relaxed) == 0 && m.record.state() == os::RUNNING {
        os::enter_safe(&m.record);
    }
    true
}

/// [`enter_current`] with the registers and stack pointer the C entry took at its caller.
/// (Not one generic helper with a closure for both: in a debug build the closure would be a
/// frame of its own, and `enter_current` would publish that frame's registers.)
pub(crate) fn enter_current_with(sp: usize, regs: &[usize; SAVED_REGISTERS]) -> bool {
    let Some(m) = current() else { return false };
    if m.depth.fetch_add(1, Ordering::Relaxed) == 0 && m.record.state() == os::RUNNING {
        os::enter_safe_with(&m.record, sp, regs);
    }
    true
}

/// Leaves the calling thread's innermost safe region (the outermost waits while the world is
/// stopped). `false` if it is not in one.
pub(crate) fn leave_current() -> bool {
    let Some(m) = current() else { return false };
    let depth = m.depth.load(Ordering::Relaxed);
    if depth == 0 {
        return false;
    }
    m.depth.store(depth - 1, Ordering::Relaxed);
    if depth == 1 {
        os::leave_safe(&m.record);
    }
    true
}

/// One of rtvm's own waits, made a safe region for a calling mutator (nothing for other
/// threads, or inside a region already).
#[must_use]
pub(crate) struct SafeWait {
    entered: bool,
}

impl SafeWait {
    #[inline(always)]
    pub(crate) fn enter() -> SafeWait {
        SafeWait {
            entered: enter_current(),
        }
    }
}

impl Drop for SafeWait {
    fn drop(&mut self) {
        if self.entered {
            leave_current();
        }
    }
}

/// A safe region of the calling thread ([`VmHandle::enter_safe_region`]): until it is
/// dropped the thread may block, call foreign code or sleep, and must not touch the
/// collector's objects; dropping it leaves the region, waiting while the world is stopped.
/// Not `Send`: the thread that entered leaves. Keep it on the stack.
///
/// [`VmHandle::enter_safe_region`]: crate::VmHandle::enter_safe_region
#[derive(Debug)]
#[must_use = "the region ends when the guard is dropped"]
pub struct SafeRegion {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl SafeRegion {
    /// Enters a safe region on the calling thread if it is a mutator of a VM (started by
    /// it or attached); `None` on any other thread. What
    /// [`VmHandle::enter_safe_region`](crate::VmHandle::enter_safe_region) does, for code
    /// that has no handle at hand (like [`safepoint_poll`]).
    #[inline(always)]
    pub fn enter() -> Option<SafeRegion> {
        enter_current().then_some(SafeRegion {
            _not_send: std::marker::PhantomData,
        })
    }
}

impl Drop for SafeRegion {
    fn drop(&mut self) {
        leave_current();
    }
}
