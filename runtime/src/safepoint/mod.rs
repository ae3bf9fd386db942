//! Stopping the embedder's threads for its collector: thread states, safe regions, the poll,
//! stops of the world and handshakes — HotSpot's safepoints and thread-local handshakes
//! (JEP 312) for threads that run the embedder's code.
//!
//! Every VM thread the embedder runs code on (started with [`VmHandle::spawn`] or attached) is
//! a *mutator* with a record ([`pool`]): running, in a safe region, stopped, or finished (the
//! states and the one check that makes them safe are the OS layer's,
//! [`rtvm_os_linux::safepoint::protocol`]). rtvm's own threads — the worker gang, the
//! dispatcher, the attach listener, the trimmer — and the collector's threads
//! ([`ThreadKind::Collector`](crate::ThreadKind::Collector)) are not mutators: they are never
//! stopped and may run, and allocate, while the world is stopped.
//!
//! **Where the signal stops a thread.** A thread that neither polls nor is in a safe region
//! is stopped by the stop signal, but only where it holds no process-wide lock: not inside the
//! C library, the dynamic linker or the other system objects the OS layer lists
//! ([`rtvm_os_linux::safepoint::code`]), nor inside a no-stop section ([`NoAsyncStop`]) — every
//! lock rtvm itself takes on a mutator is held inside one. Elsewhere the handler returns and
//! the stopper asks again a little later, as Go's asynchronous preemption does. So a thread is
//! never stopped holding `malloc`'s arena lock, stdio's or the loader's: a stopper, a callback
//! and the collector's threads may allocate while the world is stopped.
//!
//! | file | what |
//! | --- | --- |
//! | `pool` | records, pooled for the life of the process |
//! | `ops` | the one-at-a-time lock of stops and handshakes, which any thread may release |
//! | `stop` | [`WorldStopped`]: arm, wait, signal the stragglers (again), resume; `-Xlog:safepoint` |
//! | `report` | the stragglers as the kernel sees them (`/proc`): state, system call, signals |
//! | `handshake` | one thread at a time: run by it at its poll, or for it while it is safe |
//! | `view` | [`StoppedThread`]: how it stopped, its scan ranges, its registers |
//! | `nostop` | [`NoAsyncStop`], and rtvm's own locks held inside one |
//!
//! `-XX:+SafepointALot` and `-XX:+HandshakeALot` (stops and handshakes that verify) are the
//! VM's stress thread (`vm/stress.rs`), built on this module.
//!
//! [`VmHandle::spawn`]: crate::VmHandle::spawn

mod handshake;
mod nostop;
mod ops;
mod pool;
pub(crate) mod report;
mod stop;
mod view;

use std::cell::Cell;
use std::ffi::CStr;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtvm_os_linux::safepoint::{self as os, SAVED_REGISTERS};

pub use nostop::{declare_code, forget_code, CodeError, CodeKind, NoAsyncStop};
pub(crate) use nostop::{lock, Locked};
pub(crate) use pool::Mutator;
pub use stop::WorldStopped;
pub(crate) use view::view_again;
use view::view_of;
pub use view::{StackKind, StopHow, StoppedThread};

/// Non-zero while a stop or a handshake is pending anywhere: the word `rtvm.h`'s inline
/// `rtvm_safepoint_poll()` reads before it takes the slow path.
pub(crate) static POLL_PENDING: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The calling thread's mutator record. Plain data, no destructor.
    static MUTATOR: Cell<Option<&'static Mutator>> = const { Cell::new(None) };
    /// The calling thread runs a handshake operation.
    static IN_OP: Cell<bool> = const { Cell::new(false) };
}

/// The poll, for loop back-edges and other places a mutator may stop: one thread-local load
/// and one load of the thread's poll word; it takes the slow path only while a stop or a
/// handshake for this thread is pending. Does nothing on a thread rtvm does not know; inside
/// a safe region it leaves the thread safe.
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
    if os::must_stop(&m.record) {
        os::stop_here(&m.record);
    }
}

/// Why a stop or a handshake did not happen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SafepointError {
    /// Threads neither polled, nor entered a safe region, nor took the signal where it may
    /// stop them, in time; the world was let go.
    #[error("Safepoint \"{reason}\": timed out after {waited_ms} ms while spinning to reach a safepoint; threads which did not reach the safepoint: {}{}", stragglers.join("; "), if *signals { "" } else { " (no signal fallback: -Xrs, or the stop signal could not be installed; only polls and safe regions stop threads)" })]
    Timeout {
        /// The stop's reason.
        reason: String,
        /// How long it waited.
        waited_ms: u64,
        /// Each thread that did not stop: `"name" (tid N): ` and what the kernel says of it.
        stragglers: Vec<String>,
        /// Whether the signal fallback was available.
        signals: bool,
    },
    /// Another stop of the world or handshake held the VM for the whole timeout.
    #[error("Safepoint \"{reason}\": another stop of the world or handshake (\"{holder}\") held the VM for {waited_ms} ms")]
    Busy {
        /// The refused stop's reason.
        reason: String,
        /// The reason of the stop or handshake that held it.
        holder: String,
        /// How long it waited.
        waited_ms: u64,
    },
    /// Called while this thread holds the world stopped (it began a stop not yet ended), or
    /// from inside a handshake operation.
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
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub(crate) mutator: &'static Mutator,
    pub(crate) name: Arc<CStr>,
    pub(crate) stack: Range<usize>,
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
    /// `-XX:+AbortVMOnSafepointTimeout`: a reported straggler aborts the process.
    pub(crate) abort_on_timeout: bool,
    /// `-XX:HandshakeTimeout`: a handshake not done after this long is a fatal error.
    pub(crate) handshake_timeout: Option<Duration>,
}

/// A VM's mutators and its stops.
#[derive(Debug)]
pub(crate) struct Safepoints {
    /// One stop or handshake at a time; the members change only under it.
    ops: ops::OpLock,
    /// The members (changed and read only by the holder of `ops`).
    members: Mutex<Vec<Member>>,
    /// A copy of `members` for stops, made by the first stop after a change (10,000 idle
    /// threads are stopped without copying them each time).
    snapshot: Mutex<Option<Arc<Vec<Member>>>>,
    config: Mutex<SafepointConfig>,
    last_end: Mutex<Option<Instant>>,
    /// Ids of threads a stop found gone without finishing (`ESRCH`): the registry forgets them.
    vanished: Mutex<Vec<u64>>,
    /// Whether `vanished` may hold any (one load on the registry's every lock).
    any_vanished: std::sync::atomic::AtomicBool,
}

impl Safepoints {
    pub(crate) fn new() -> Safepoints {
        Safepoints {
            ops: ops::OpLock::new(),
            members: Mutex::new(Vec::new()),
            snapshot: Mutex::new(None),
            config: Mutex::new(SafepointConfig {
                signals: false,
                grace: Duration::from_micros(200),
                report_after: None,
                abort_on_timeout: false,
                handshake_timeout: None,
            }),
            last_end: Mutex::new(None),
            vanished: Mutex::new(Vec::new()),
            any_vanished: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Sets how stops behave (at VM creation).
    pub(crate) fn configure(&self, config: SafepointConfig) {
        *lock(&self.config) = config;
    }

    fn config(&self) -> SafepointConfig {
        *lock(&self.config)
    }

    /// Makes thread `id` a mutator (in a safe region until it leaves it) on `stack`. Waits
    /// while a stop or a handshake is under way (in a safe region itself, if the caller is a
    /// mutator).
    pub(crate) fn register(
        &self,
        id: u64,
        name: &str,
        stack: Range<usize>,
    ) -> Result<&'static Mutator, SafepointError> {
        refuse_nested("starting or attaching a thread")?;
        let m = pool::take(id, stack.clone());
        // A C string of the name (a NUL in it shown as '?'), made in one buffer.
        let mut bytes: Vec<u8> = Vec::with_capacity(name.len() + 1);
        bytes.extend(name.bytes().map(|b| if b == 0 { b'?' } else { b }));
        bytes.push(0);
        let name: Arc<CStr> = CStr::from_bytes_with_nul(&bytes)
            .map(Arc::from)
            .unwrap_or_else(|_| Arc::from(c""));
        let _wait = SafeWait::enter();
        let _op = self.ops.acquire_forever("register");
        let mut members = lock(&self.members);
        m.index.store(members.len(), Ordering::Relaxed);
        members.push(Member {
            mutator: m,
            name,
            stack,
        });
        drop(members);
        *lock(&self.snapshot) = None;
        Ok(m)
    }

    /// Forgets a mutator whose thread is gone (or detached, [`finish`]ed). Waits while a
    /// stop or a handshake is under way.
    pub(crate) fn unregister(&self, m: &'static Mutator) {
        let _wait = SafeWait::enter();
        let _op = self.ops.acquire_forever("unregister");
        self.remove_member(m);
    }

    /// Takes the lock of stops and handshakes for `what` (asked at `asked`), waiting until
    /// `deadline` at most — in a safe region, if the caller is a mutator.
    fn take_ops(
        &self,
        what: &str,
        asked: Instant,
        deadline: Instant,
    ) -> Result<ops::OpGuard<'_>, SafepointError> {
        let _wait = SafeWait::enter();
        self.ops
            .acquire_scoped(what, deadline)
            .map_err(|holder| SafepointError::Busy {
                reason: what.to_owned(),
                holder,
                waited_ms: asked.elapsed().as_millis() as u64,
            })
    }

    /// Removes `m` from the members (the caller holds the op lock).
    fn remove_member(&self, m: &'static Mutator) {
        let mut members = lock(&self.members);
        let i = m.index.load(Ordering::Relaxed);
        if members.get(i).is_some_and(|x| std::ptr::eq(x.mutator, m)) {
            let gone = members.swap_remove(i);
            if let Some(moved) = members.get(i) {
                moved.mutator.index.store(i, Ordering::Relaxed);
            }
            drop(members);
            *lock(&self.snapshot) = None;
            drop(gone);
            pool::give_back(m);
        }
    }

    /// The members, as a stop sees them (the caller holds the op lock: they do not change).
    fn snapshot(&self) -> Arc<Vec<Member>> {
        let mut snapshot = lock(&self.snapshot);
        Arc::clone(snapshot.get_or_insert_with(|| Arc::new(lock(&self.members).clone())))
    }

    /// The ids of threads stops found gone without finishing, taken once.
    pub(crate) fn take_vanished(&self) -> Vec<u64> {
        if !self.any_vanished.load(Ordering::Acquire)
            || !self.any_vanished.swap(false, Ordering::AcqRel)
        {
            return Vec::new();
        }
        std::mem::take(&mut *lock(&self.vanished))
    }

    /// The VM thread ids of the mutators now.
    pub(crate) fn member_ids(&self) -> Vec<u64> {
        lock(&self.members).iter().map(|m| m.mutator.id()).collect()
    }
}

fn refuse_nested(what: &str) -> Result<(), SafepointError> {
    if in_stop() {
        return Err(SafepointError::Nested { what: what.into() });
    }
    Ok(())
}

/// Whether the calling thread holds the world stopped (it began a stop that has not ended)
/// or runs a handshake operation.
pub(crate) fn in_stop() -> bool {
    IN_OP.with(Cell::get) || ops::held_by_caller()
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

/// Declares that the calling mutator now runs on the stack `[lo, hi)` (a fiber or coroutine
/// of the embedder's), or on its own again (`None`): a stop then reports that stack's part in
/// use besides the thread's own. `false` on a thread that is not a mutator.
pub(crate) fn set_current_fiber(stack: Option<Range<usize>>) -> bool {
    match current() {
        Some(m) => {
            m.record.set_fiber(stack);
            true
        }
        None => false,
    }
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
