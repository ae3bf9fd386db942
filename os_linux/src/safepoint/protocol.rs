//! The stop protocol itself: thread states, the world word, arrivals, holds, no-stop
//! sections, the stop signal's decision and the handshake claim — as a state machine over a
//! small [`Platform`] (atomic words, a futex-like wait and wake, a fence), free of futexes,
//! signals and register spills. The real platform is [`Linux`](super::Linux); the model check
//! (`os_linux/tests/safepoint_model.rs`) runs the very same functions over loom's atomics,
//! with the stop signal's handler run at every [`Platform::interrupt_point`].
//!
//! **Who writes what.** A thread changes only its own [`Record::state`], [`Record::critical`]
//! and [`Record::in_op`]; its stop signal's handler (on the same thread) sets
//! [`Record::deferred`] and counts [`Record::sig_seen`]; a stopper writes the world word, the
//! poll words and [`Record::sig_sent`]; a handshake's requester writes [`Record::hold`].
//!
//! **The one check.** Every way back to [`RUNNING`] goes through [`resume`]: store `RUNNING`,
//! then look at the world word and the hold; if either asks the thread to stay, it goes back
//! to its resting state, tells the stopper, and waits. A stopper does the mirror image: it
//! stores the world word (or the hold), then reads the state. Both pairs are sequentially
//! consistent ([`Platform::fence`] where the platform's accesses alone are not), so one side
//! always sees the other: a thread the stopper counted as not running never runs the
//! embedder's code before the stopper lets it.
//!
//! **No-stop sections.** [`critical_enter`]/[`critical_exit`] bracket code during which the
//! stop signal must not stop the thread: the thread's own transitions (it is publishing its
//! stack pointer and registers: a stop there would publish the handler's frame instead), code
//! holding a lock a stopper or a collector may need, code between an allocation and the
//! metadata that makes it visible to a conservative scan. The handler only notes a stop it
//! found there ([`Record::deferred`]); the section's end then takes it like a poll.
//!
//! **The model check.** `cargo test -p rtvm-os-linux --test safepoint_model` (about 5 s of
//! CPU in a debug build; `RTVM_LOOM_PREEMPTIONS=4` searches deeper, in about 80 s of CPU in
//! a release build) explores with loom every interleaving, up to a preemption bound, of a
//! stopper against mutators that poll, run through libc, enter and leave safe regions and
//! finish, with and without the signal; of a handshake whose operation the target or the
//! requester runs (entering and leaving a safe region inside it, a stray signal landing in
//! it); of polls and signals inside safe regions and during `enter_safe`'s and
//! `leave_safe`'s publication. It checks that no mutator runs the embedder's code during the
//! callback (or an operation the requester runs), that every stop and handshake ends (no
//! deadlock, no livelock), that no wake-up is lost, that an operation runs exactly once, that
//! a thread counted safe has its own frame published and stays safe through a poll or a
//! signal. Each of [`Faults`] is planted in turn, and the check must fail. The model runs the
//! stop signal's handler at [`Platform::interrupt_point`]s only: a new window between two
//! steps of a thread needs one there to be checked.

use std::time::Duration;

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

/// Handshake claims ([`Record::claim`]).
pub mod claim {
    /// No handshake.
    pub const NONE: u32 = 0;
    /// An operation waits for whoever claims it first.
    pub const PENDING: u32 = 1;
    /// The target claimed it: it runs (or ran) the operation at its poll.
    pub const TARGET: u32 = 2;
    /// The requester claimed it: it runs the operation while the target is held.
    pub const REQUESTER: u32 = 3;
}

/// An atomic 32-bit word. Every operation is sequentially consistent except the `own_`
/// ones, which only the owning thread (and its signal handler) uses: they need only be
/// ordered with that thread's other accesses, as a signal fence orders them.
pub trait Word: Send + Sync {
    /// Loads (sequentially consistent).
    fn load(&self) -> u32;
    /// Stores (sequentially consistent).
    fn store(&self, v: u32);
    /// Adds, returning the previous value.
    fn fetch_add(&self, v: u32) -> u32;
    /// Compares and exchanges.
    fn compare_exchange(&self, current: u32, new: u32) -> Result<u32, u32>;
    /// Loads a word only this thread writes, ordered with its own other accesses.
    fn load_own(&self) -> u32 {
        self.load()
    }
    /// Stores a word only this thread writes, ordered with its own other accesses (and so
    /// seen by its own signal handler).
    fn store_own(&self, v: u32) {
        self.store(v)
    }
}

/// Deliberately broken variants of the protocol, each one a bug the model check must catch.
/// A real platform has [`Faults::NONE`]: the branches compile away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Faults {
    /// [`resume`] does not look again after storing `RUNNING` (the lost Dekker re-check).
    pub skip_recheck: bool,
    /// No no-stop sections: the handler may stop a thread in the middle of a transition.
    pub no_critical: bool,
    /// [`end_stop`] forgets to wake the waiters (a lost wake-up).
    pub forget_wake: bool,
    /// A handshake operation run by the target is held by its own hold.
    pub hold_in_op: bool,
    /// A poll inside a safe region stops and returns the thread to `RUNNING`.
    pub poll_in_region: bool,
    /// A thread woken by the end of a stop does not pass the wake-up on (the tree of
    /// [`end_stop`] breaks: threads beyond the first are never woken).
    pub no_wake_tree: bool,
}

impl Faults {
    /// The protocol as it is.
    pub const NONE: Faults = Faults {
        skip_recheck: false,
        no_critical: false,
        forget_wake: false,
        hold_in_op: false,
        poll_in_region: false,
        no_wake_tree: false,
    };
}

/// What the protocol needs from the machine.
pub trait Platform: Sized + 'static {
    /// The atomic word.
    type Word: Word;
    /// Blocks while `word` holds `expected`, at most `timeout` (none: until woken). May
    /// return early for no reason; callers look again.
    fn wait(word: &Self::Word, expected: u32, timeout: Option<Duration>);
    /// Wakes every thread waiting on `word`.
    fn wake_all(word: &Self::Word);
    /// Wakes up to `n` threads waiting on `word` (a platform without a counted wake wakes
    /// them all).
    fn wake(word: &Self::Word, n: u32) {
        let _ = n;
        Self::wake_all(word);
    }
    /// How long a thread stopped at the world word sleeps at most before it looks again:
    /// a safety net should a wake-up of the resume's tree (see [`end_stop`]) reach a thread
    /// that cannot pass it on (a debugger stopped it). `None`: until woken (the model, where
    /// a lost wake-up must show as a deadlock).
    const PARK_SAFETY_NET: Option<Duration> = None;
    /// How many threads waiting at the world word the end of a stop wakes, and each of them
    /// in turn (see [`end_stop`]).
    const WAKE_FANOUT: u32 = 4;
    /// A sequentially consistent fence between a store of one word and a load of another
    /// (the Dekker pairs above). Nothing where sequentially consistent accesses already
    /// order them (Linux: x86-64 and aarch64).
    fn fence() {}
    /// A point where the calling thread's asynchronous interrupt may run: the model runs the
    /// stop signal's handler here when it was sent one. Nothing on a real platform, whose
    /// kernel interrupts anywhere.
    fn interrupt_point(_world: &World<Self>, _record: &Record<Self>) {}
    /// Bugs to plant (the model check's own negative tests).
    const FAULTS: Faults = Faults::NONE;
}

/// The process's stop state: the world word `(stop id << 1) | stopping` and the arrivals
/// counter a stopper waits on.
#[derive(Debug)]
pub struct World<P: Platform> {
    /// `(stop id << 1) | stopping`.
    pub word: P::Word,
    /// Bumped by every thread that reaches a stop (or ends a handshake operation).
    pub arrivals: P::Word,
}

/// One thread's part in stops and handshakes.
#[derive(Debug)]
pub struct Record<P: Platform> {
    /// [`RUNNING`], [`SAFE`], [`STOPPED_POLL`], [`STOPPED_SIGNAL`] or [`FINISHED`].
    pub state: P::Word,
    /// Non-zero: the thread's next poll takes the slow path.
    pub poll: P::Word,
    /// Non-zero: a handshake holds the thread (it may not run the embedder's code).
    pub hold: P::Word,
    /// Non-zero: the stopper itself (its own waits do not block on its stop).
    pub exempt: P::Word,
    /// No-stop sections entered and not left (only the thread writes it).
    pub critical: P::Word,
    /// The handler found a stop inside a no-stop section: its end takes it.
    pub deferred: P::Word,
    /// The thread runs a handshake operation for itself (its own hold does not hold it).
    pub in_op: P::Word,
    /// The handshake claim ([`claim`]).
    pub claim: P::Word,
    /// The target finished the operation it claimed.
    pub op_done: P::Word,
    /// Stop signals sent (the stopper counts before it sends).
    pub sig_sent: P::Word,
    /// Stop signals handled (the handler counts as it begins).
    pub sig_seen: P::Word,
}

/// Whether a world word says the world is stopping (or stopped).
pub fn stopping(word: u32) -> bool {
    word & 1 == 1
}

// ---- the stopper's side ----

/// Starts a stop: the world word becomes "stopping" with the next id. One stopper at a
/// time (the caller serializes). Returns the new word.
pub fn begin_stop<P: Platform>(w: &World<P>) -> u32 {
    let cur = w.word.load();
    let next = (((cur >> 1).wrapping_add(1)) << 1) | 1;
    w.word.store(next);
    P::fence();
    next
}

/// Ends the stop: the threads waiting for it are woken as a tree — the stopper wakes
/// [`Platform::WAKE_FANOUT`] of them and every thread that wakes wakes as many more before it goes on
/// (in the wait of [`resume`]) — so the stopper is not left waiting for a CPU behind a herd of
/// threads it woke all at once (with 1,000 spinning threads on 2 CPUs that was seconds).
pub fn end_stop<P: Platform>(w: &World<P>) {
    let cur = w.word.load();
    w.word.store(cur & !1);
    if !P::FAULTS.forget_wake {
        P::wake(&w.word, P::WAKE_FANOUT);
    }
}

/// Whether the thread counts as stopped (or gone): anything but [`RUNNING`].
pub fn not_running<P: Platform>(r: &Record<P>) -> bool {
    r.state.load() != RUNNING
}

/// The arrivals counter: read it, check the threads, then wait for it to change.
pub fn arrivals<P: Platform>(w: &World<P>) -> u32 {
    w.arrivals.load()
}

/// Waits until the arrivals counter is no longer `seen`, or `timeout` passed.
pub fn wait_for_arrivals<P: Platform>(w: &World<P>, seen: u32, timeout: Duration) {
    P::wait(&w.arrivals, seen, Some(timeout));
}

/// Tells a stopper waiting for arrivals that something changed.
pub fn arrive<P: Platform>(w: &World<P>) {
    w.arrivals.fetch_add(1);
    P::wake_all(&w.arrivals);
}

/// Whether the stopper may send the thread a stop signal now: none it sent is still
/// unhandled (a thread that blocks the signal has at most one pending, however many stops
/// come). Counts the signal as sent if so; [`unsend`] takes it back if sending failed.
pub fn may_signal<P: Platform>(r: &Record<P>) -> bool {
    let sent = r.sig_sent.load();
    if r.sig_seen.load() != sent {
        return false;
    }
    r.sig_sent
        .compare_exchange(sent, sent.wrapping_add(1))
        .is_ok()
}

/// Takes back a signal counted by [`may_signal`] that was not sent.
pub fn unsend<P: Platform>(r: &Record<P>) {
    let sent = r.sig_sent.load();
    let _ = r.sig_sent.compare_exchange(sent, sent.wrapping_sub(1));
}

/// The signal counted as unhandled is gone (the thread's own `sigwait` took it): the counts
/// start even again.
pub fn resync<P: Platform>(r: &Record<P>) {
    r.sig_sent.store(r.sig_seen.load());
}

/// Whether a signal sent to the thread is still unhandled.
pub fn signal_outstanding<P: Platform>(r: &Record<P>) -> bool {
    r.sig_seen.load() != r.sig_sent.load()
}

// ---- the thread's side ----

/// Whether the thread must stay where it is: the world stops (and it is not the stopper),
/// or a handshake holds it (and it is not running that handshake's operation itself).
pub fn must_stay<P: Platform>(w: &World<P>, r: &Record<P>) -> bool {
    (stopping(w.word.load()) && r.exempt.load() == 0)
        || (r.hold.load() != 0 && (r.in_op.load() == 0 || P::FAULTS.hold_in_op))
}

fn wait_while_held<P: Platform>(w: &World<P>, r: &Record<P>) {
    loop {
        let word = w.word.load();
        if stopping(word) && r.exempt.load() == 0 {
            P::wait(&w.word, word, P::PARK_SAFETY_NET);
            if !stopping(w.word.load()) && !P::FAULTS.forget_wake && !P::FAULTS.no_wake_tree {
                // Woken by the end of the stop: pass the wake-up on (see `end_stop`).
                P::wake(&w.word, P::WAKE_FANOUT);
            }
            continue;
        }
        if r.in_op.load() == 0 || P::FAULTS.hold_in_op {
            let h = r.hold.load();
            if h != 0 {
                P::wait(&r.hold, h, None);
                continue;
            }
        }
        return;
    }
}

/// The one way back to [`RUNNING`] (see the module).
pub fn resume<P: Platform>(w: &World<P>, r: &Record<P>, resting: u32) {
    loop {
        wait_while_held(w, r);
        r.state.store(RUNNING);
        P::fence();
        P::interrupt_point(w, r);
        if P::FAULTS.skip_recheck || !must_stay(w, r) {
            return;
        }
        r.state.store(resting);
        arrive(w);
    }
}

/// Enters a no-stop section (they nest).
#[inline]
pub fn critical_enter<P: Platform>(r: &Record<P>) {
    r.critical.store_own(r.critical.load_own().wrapping_add(1));
}

/// Leaves a no-stop section. Returns whether the thread must stop now: this was the
/// outermost section, the stop signal found a stop inside it, and the stop is still on (the
/// caller then stops as at a poll, [`stop_here`]).
#[inline]
pub fn critical_exit<P: Platform>(w: &World<P>, r: &Record<P>) -> bool {
    let c = r.critical.load_own().wrapping_sub(1);
    r.critical.store_own(c);
    P::interrupt_point(w, r);
    if c != 0 || r.deferred.load_own() == 0 {
        return false;
    }
    r.deferred.store_own(0);
    r.state.load() == RUNNING && must_stay(w, r)
}

fn in_critical<P: Platform>(r: &Record<P>) -> bool {
    !P::FAULTS.no_critical && r.critical.load_own() != 0
}

/// Enters a safe region: `publish` (the stack pointer and registers), then [`SAFE`]. Inside
/// a no-stop section: the signal cannot publish its own frame over them meanwhile.
pub fn enter_safe<P: Platform>(w: &World<P>, r: &Record<P>, publish: impl FnOnce()) {
    critical_enter(r);
    P::interrupt_point(w, r);
    publish();
    P::interrupt_point(w, r);
    r.state.store(SAFE);
    P::fence();
    // A stopper, or a handshake's requester, waiting for this thread learns of it at once.
    if stopping(w.word.load()) || r.hold.load() != 0 {
        arrive(w);
    }
    P::interrupt_point(w, r);
    // Safe now: a stop the signal deferred meanwhile has counted the thread already.
    r.deferred.store_own(0);
    r.critical.store_own(r.critical.load_own().wrapping_sub(1));
}

/// Leaves a safe region: waits while the world is stopped (or a hold is on), then
/// [`RUNNING`]. Returns whether the thread must stop now (see [`critical_exit`]).
pub fn leave_safe<P: Platform>(w: &World<P>, r: &Record<P>) -> bool {
    critical_enter(r);
    resume(w, r, SAFE);
    P::interrupt_point(w, r);
    critical_exit(w, r)
}

/// The poll's decision: whether the thread must stop here. A thread that is not running
/// (a poll inside a safe region) stays as it is; inside a no-stop section the stop is noted
/// and taken at the section's end.
pub fn poll<P: Platform>(w: &World<P>, r: &Record<P>) -> bool {
    if r.state.load() != RUNNING && !P::FAULTS.poll_in_region {
        return false;
    }
    if !must_stay(w, r) {
        return false;
    }
    if in_critical(r) {
        r.deferred.store_own(1);
        return false;
    }
    true
}

/// Stops the calling thread here (a poll or a section's end found a stop): `publish`, then
/// [`STOPPED_POLL`], tell the stopper, wait until let go, [`RUNNING`] again.
pub fn stop_here<P: Platform>(w: &World<P>, r: &Record<P>, mut publish: impl FnMut()) {
    loop {
        critical_enter(r);
        P::interrupt_point(w, r);
        publish();
        r.state.store(STOPPED_POLL);
        P::fence();
        arrive(w);
        resume(w, r, STOPPED_POLL);
        if !critical_exit(w, r) {
            return;
        }
    }
}

/// What the stop signal's handler decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handled {
    /// No stop (or hold) wants the thread, or it is not running: nothing done.
    NotNeeded,
    /// Inside a no-stop section: noted, its end stops the thread.
    Deferred,
    /// At an instruction where a stop could leave a process-wide lock held: the stopper
    /// asks again later.
    UnsafeCode,
    /// Stopped, and let go again.
    Stopped,
}

/// The stop signal's handler: counts the signal, and stops the thread — `publish`, then
/// [`STOPPED_SIGNAL`], wait until let go — only if it runs, a stop or a hold wants it, it is
/// outside every no-stop section and `at_safe_code` (the interrupted instruction lies in
/// code that holds no process-wide lock).
pub fn on_signal<P: Platform>(
    w: &World<P>,
    r: &Record<P>,
    at_safe_code: bool,
    publish: impl FnOnce(),
) -> Handled {
    r.sig_seen.fetch_add(1);
    if r.state.load() != RUNNING || !must_stay(w, r) {
        return Handled::NotNeeded;
    }
    if in_critical(r) {
        r.deferred.store_own(1);
        return Handled::Deferred;
    }
    if !at_safe_code {
        return Handled::UnsafeCode;
    }
    publish();
    r.state.store(STOPPED_SIGNAL);
    P::fence();
    arrive(w);
    resume(w, r, STOPPED_SIGNAL);
    Handled::Stopped
}

/// The thread is gone for good (it exits, or detaches): waits while the world is stopped or
/// a handshake holds it — its stack must stay until the stopper lets go — then
/// [`FINISHED`]. Called from [`SAFE`].
pub fn finish<P: Platform>(w: &World<P>, r: &Record<P>) {
    critical_enter(r);
    loop {
        wait_while_held(w, r);
        r.state.store(FINISHED);
        P::fence();
        if !must_stay(w, r) {
            return;
        }
        r.state.store(SAFE);
        arrive(w);
    }
}

// ---- handshakes ----

/// The requester offers an operation to thread `r`: pending, held, its poll armed.
pub fn offer_handshake<P: Platform>(r: &Record<P>) {
    r.op_done.store(0);
    r.claim.store(claim::PENDING);
    r.hold.store(1);
    P::fence();
    r.poll.store(1);
}

/// The target, at its poll: whether it claims the pending operation (it then runs it with
/// [`run_own_handshake`]). It counts as running the operation ([`Record::in_op`]) from before
/// the claim: were there an instant between the claim and that mark, the stop signal (or the
/// end of a no-stop section it was deferred to) could hold the thread there for the very
/// operation it claimed, and the requester would wait for ever for it to be done.
pub fn target_claims<P: Platform>(r: &Record<P>) -> bool {
    // Running one already (a poll inside it): no other is pending.
    if r.hold.load() == 0 || r.in_op.load() != 0 {
        return false;
    }
    r.in_op.store(1);
    if r.claim
        .compare_exchange(claim::PENDING, claim::TARGET)
        .is_ok()
    {
        return true;
    }
    r.in_op.store(0);
    false
}

/// The target runs the operation it claimed ([`target_claims`]): its own hold does not hold
/// it meanwhile (the operation may enter and leave safe regions), and the requester learns
/// when it is done — before the hold applies to the thread again, for the same reason.
pub fn run_own_handshake<P: Platform>(w: &World<P>, r: &Record<P>, op: impl FnOnce()) {
    op();
    P::interrupt_point(w, r);
    r.op_done.store(1);
    P::interrupt_point(w, r);
    r.in_op.store(0);
    arrive(w);
}

/// The requester: whether it may run the operation itself (it claimed it now or before).
pub fn requester_claims<P: Platform>(r: &Record<P>) -> bool {
    match r.claim.compare_exchange(claim::PENDING, claim::REQUESTER) {
        Ok(_) => true,
        Err(c) => c == claim::REQUESTER,
    }
}

/// Whether the target claimed the operation, and whether it finished it.
pub fn target_progress<P: Platform>(r: &Record<P>) -> (bool, bool) {
    (r.claim.load() == claim::TARGET, r.op_done.load() != 0)
}

/// The requester lets the target go.
pub fn end_handshake<P: Platform>(r: &Record<P>) {
    r.poll.store(0);
    r.hold.store(0);
    P::wake_all(&r.hold);
    r.claim.store(claim::NONE);
}

/// The stopper found the thread gone while it was [`RUNNING`] (it ended without finishing:
/// no exit hook ran). Marks it [`FINISHED`] for it; `false` if it changed state meanwhile.
pub fn mark_vanished<P: Platform>(r: &Record<P>) -> bool {
    r.state.compare_exchange(RUNNING, FINISHED).is_ok()
}
