//! A model check of the stop protocol (`os_linux/src/safepoint/protocol.rs`) with loom: the
//! very functions the Linux platform runs, over loom's atomics, a futex modelled as a
//! wait-if-equal on a loom `Mutex` + `Condvar` (a lost wake-up is a deadlock loom reports), a
//! timed wait modelled as a spurious return (`yield_now`: a spin that never ends is a livelock
//! loom reports when the execution exceeds its branch limit), and the stop signal modelled as
//! its handler ([`protocol::on_signal`]) run at a [`Platform::interrupt_point`] of a thread
//! the stopper "sent" one to (the next one, or a later one: the thread may run on a while
//! before it takes the signal). Whether the handler finds the thread in code it may stop it
//! in comes from the thread's own model state (a step "in libc" is not).
//!
//! Scenarios (each one explored exhaustively up to a preemption bound):
//! * (a) a stop of the world against mutators that run the embedder's code with polls
//!   between, go through libc (code the signal may not stop them in), enter and leave a safe
//!   region and finish — with and without the signal; two such mutators; a loop without
//!   polls that only the signal stops;
//! * (b) a handshake against a target that claims it at a poll and runs it (entering and
//!   leaving a safe region inside it), or that the requester claims while the target is
//!   safe, stopped or gone — with and without the signal (a stray one lands in the operation);
//! * (c) a poll and a signal inside a safe region;
//! * (d) a signal during `enter_safe`'s and `leave_safe`'s publication (two stops in a row).
//!
//! Properties: while the stop's callback (or an operation the requester runs) runs, no mutator
//! runs the embedder's code; every stop and handshake ends (no deadlock, no livelock); no
//! wake-up is lost (the stopper and the requester wait without a timeout unless they must
//! send the signal again); a handshake operation runs exactly once; a thread counted `SAFE`
//! has published its own frame (a token naming the publisher), never the handler's; a poll or
//! a signal inside a safe region leaves it safe; at most one stop signal is pending per
//! thread. Each scenario also asserts that it explored what it is about (the signal stopped
//! the thread, found it in libc, in a no-stop section, ...).
//!
//! Each planted fault ([`Faults`]) makes one of these fail: the `fault_*` tests prove it (in
//! a child process: loom cannot unwind cleanly from a deadlock it found), and print the
//! interleaving loom found. A failure prints the failing interleaving as the model's events
//! in the order loom ran them (a load may return a value older than the lines before it
//! suggest: that is the memory model). `RTVM_LOOM_PREEMPTIONS=N` sets every bound.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize as StdCounter, Ordering::Relaxed as Counted};
use std::sync::Mutex as StdMutex;
use std::time::{Duration, Instant};

use loom::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering::Relaxed, Ordering::SeqCst};
use loom::sync::{Arc, Condvar, Mutex};
use rtvm_os_linux::safepoint::protocol::{
    self, Faults, Handled, Platform, Record, World, FINISHED, RUNNING, SAFE,
};

// ---- the platform ----

/// A word, and for the words the protocol waits on (the world word, the arrivals counter, the
/// hold) a futex: a wait-if-equal on a loom mutex and condition variable.
#[derive(Debug)]
struct LWord {
    v: AtomicU32,
    futex: Option<(Mutex<()>, Condvar)>,
}

impl LWord {
    fn new(v: u32) -> LWord {
        LWord {
            v: AtomicU32::new(v),
            futex: None,
        }
    }

    fn waitable(v: u32) -> LWord {
        LWord {
            v: AtomicU32::new(v),
            futex: Some((Mutex::new(()), Condvar::new())),
        }
    }

    fn futex(&self) -> &(Mutex<()>, Condvar) {
        self.futex
            .as_ref()
            .expect("the protocol waits only on the world word, the arrivals and the hold")
    }
}

impl protocol::Word for LWord {
    fn load(&self) -> u32 {
        self.v.load(SeqCst)
    }
    fn store(&self, v: u32) {
        self.v.store(v, SeqCst)
    }
    fn fetch_add(&self, v: u32) -> u32 {
        self.v.fetch_add(v, SeqCst)
    }
    fn compare_exchange(&self, current: u32, new: u32) -> Result<u32, u32> {
        self.v.compare_exchange(current, new, SeqCst, SeqCst)
    }
}

const SKIP_RECHECK: u8 = 1;
const NO_CRITICAL: u8 = 2;
const FORGET_WAKE: u8 = 4;
const HOLD_IN_OP: u8 = 8;
const POLL_IN_REGION: u8 = 16;
const NO_WAKE_TREE: u8 = 32;

const fn faults(f: u8) -> Faults {
    Faults {
        skip_recheck: f & SKIP_RECHECK != 0,
        no_critical: f & NO_CRITICAL != 0,
        forget_wake: f & FORGET_WAKE != 0,
        hold_in_op: f & HOLD_IN_OP != 0,
        poll_in_region: f & POLL_IN_REGION != 0,
        no_wake_tree: f & NO_WAKE_TREE != 0,
    }
}

/// The protocol over loom, with the faults `F` planted.
struct LoomPlatform<const F: u8>;

type Sound = LoomPlatform<0>;

impl<const F: u8> Platform for LoomPlatform<F> {
    type Word = LWord;

    fn wait(word: &LWord, expected: u32, timeout: Option<Duration>) {
        match timeout {
            // A timed wait returns, at the latest, when it times out: a spurious return.
            Some(_) => loom::thread::yield_now(),
            None => {
                let (lock, queue) = word.futex();
                let g = lock.lock().unwrap();
                if word.v.load(SeqCst) == expected {
                    drop(queue.wait(g).unwrap());
                }
            }
        }
    }

    fn wake_all(word: &LWord) {
        let (lock, queue) = word.futex();
        let _g = lock.lock().unwrap();
        queue.notify_all();
    }

    /// A counted wake: `n` waiters at most, as `FUTEX_WAKE`.
    fn wake(word: &LWord, n: u32) {
        let (lock, queue) = word.futex();
        let _g = lock.lock().unwrap();
        for _ in 0..n {
            queue.notify_one();
        }
    }

    /// One: with two threads waiting at the world word, the second is woken only by the
    /// first passing the wake-up on — the tree end_stop relies on is checked here.
    const WAKE_FANOUT: u32 = 1;

    fn fence() {
        fence(SeqCst);
    }

    fn interrupt_point(world: &World<Self>, record: &Record<Self>) {
        deliver(world, record);
    }

    const FAULTS: Faults = faults(F);
}

// ---- the stop signal ----

/// What a mutator published last.
const NOTHING: u32 = 0;
/// `enter_safe`'s own frame.
const ENTER: u32 = 1;
/// `stop_here`'s frame.
const POLL: u32 = 2;
/// The signal handler's frame (gone once the handler returns).
const HANDLER: u32 = 3;

/// Counts over every execution of one test: what it explored.
#[derive(Debug, Default)]
struct Stats {
    executions: StdCounter,
    not_needed: StdCounter,
    deferred: StdCounter,
    unsafe_code: StdCounter,
    stopped: StdCounter,
    by_target: StdCounter,
    by_requester: StdCounter,
    gone: StdCounter,
    /// The events of the execution running now (the failing one, after a failure).
    trace: StdMutex<Vec<String>>,
    /// The panic hook printed `trace` already.
    printed: std::sync::atomic::AtomicBool,
}

impl Stats {
    fn event(&self, who: &str, what: &str) {
        self.trace.lock().unwrap().push(format!("{who}: {what}"));
    }
}

/// A mutator's model state besides its record.
#[derive(Debug)]
struct Mutator {
    name: &'static str,
    /// The stopper "sent" a stop signal the thread has not taken yet (the model's tgkill).
    pending: AtomicBool,
    /// A token for the frame the thread published last.
    published: AtomicU32,
    stats: std::sync::Arc<Stats>,
}

/// The calling mutator's context, for its signal handler.
struct Local {
    m: Arc<Mutator>,
    signals: bool,
    in_handler: Cell<bool>,
    /// The thread runs code the signal may not stop it in (libc's `malloc`, say).
    unsafe_code: Cell<bool>,
}

loom::thread_local! {
    static LOCAL: RefCell<Option<Local>> = RefCell::new(None);
}

/// The handler, if a stop signal is pending for the calling thread and it is not in the
/// handler already (the signal is blocked there).
fn deliver<P: Platform>(world: &World<P>, record: &Record<P>) {
    LOCAL.with(|l| {
        let l = l.borrow();
        let Some(l) = l.as_ref() else { return };
        // Relaxed: the thread may run on a while before it takes a signal sent to it (the
        // kernel delivers it later, or the thread had it blocked): loom explores both.
        if !l.signals || l.in_handler.get() || !l.m.pending.load(Relaxed) {
            return;
        }
        l.m.pending.store(false, Relaxed);
        l.in_handler.set(true);
        let at_safe_code = !l.unsafe_code.get();
        l.m.stats.event(
            l.m.name,
            if at_safe_code {
                "the stop signal's handler runs"
            } else {
                "the stop signal's handler runs (it interrupted libc)"
            },
        );
        let h = protocol::on_signal(world, record, at_safe_code, || {
            l.m.published.store(HANDLER, SeqCst)
        });
        l.in_handler.set(false);
        let s = &l.m.stats;
        match h {
            Handled::NotNeeded => &s.not_needed,
            Handled::Deferred => &s.deferred,
            Handled::UnsafeCode => &s.unsafe_code,
            Handled::Stopped => &s.stopped,
        }
        .fetch_add(1, Counted);
        s.event(l.m.name, &format!("the handler returns: {h:?}"));
    })
}

// ---- the model ----

struct Model<P: Platform<Word = LWord>> {
    world: World<P>,
    records: Vec<Record<P>>,
    mutators: Vec<Arc<Mutator>>,
    /// Bit 0: the stop's callback (or an operation the requester runs) is running; the rest
    /// counts the embedder's steps (+2 each).
    activity: AtomicU32,
    /// Handshake operations run.
    op_runs: AtomicU32,
    /// The stopper is done: a mutator in a loop without polls may leave it.
    released: AtomicBool,
    stats: std::sync::Arc<Stats>,
}

fn record<P: Platform<Word = LWord>>() -> Record<P> {
    let w = LWord::new;
    Record {
        // A thread that has not started is in a safe region.
        state: w(SAFE),
        poll: w(0),
        hold: LWord::waitable(0),
        exempt: w(0),
        critical: w(0),
        deferred: w(0),
        in_op: w(0),
        claim: w(0),
        op_done: w(0),
        sig_sent: w(0),
        sig_seen: w(0),
    }
}

impl<P: Platform<Word = LWord>> Model<P> {
    fn new(names: &[&'static str], stats: &std::sync::Arc<Stats>) -> Arc<Model<P>> {
        stats.executions.fetch_add(1, Counted);
        stats.trace.lock().unwrap().clear();
        Arc::new(Model {
            world: World {
                word: LWord::waitable(0),
                arrivals: LWord::waitable(0),
            },
            records: names.iter().map(|_| record()).collect(),
            mutators: names
                .iter()
                .map(|&name| {
                    Arc::new(Mutator {
                        name,
                        pending: AtomicBool::new(false),
                        published: AtomicU32::new(NOTHING),
                        stats: stats.clone(),
                    })
                })
                .collect(),
            activity: AtomicU32::new(0),
            op_runs: AtomicU32::new(0),
            released: AtomicBool::new(false),
            stats: stats.clone(),
        })
    }

    fn event(&self, who: &str, what: &str) {
        self.stats.event(who, what);
    }

    /// The model's `tgkill`: at most one stop signal pending per thread.
    fn send_signal(&self, who: &str, i: usize) {
        if protocol::may_signal(&self.records[i]) {
            let was = self.mutators[i].pending.swap(true, Relaxed);
            assert!(
                !was,
                "a second stop signal queued behind an unhandled one{}",
                self.trace()
            );
            self.event(
                who,
                &format!("sends the stop signal to {}", self.mutators[i].name),
            );
        }
    }

    /// Waits for an arrival: without a timeout unless the caller must send the signal again
    /// (then a timed wait, a spurious return in the model).
    fn wait_arrivals(&self, seen: u32, timed: bool) {
        if timed {
            protocol::wait_for_arrivals(&self.world, seen, Duration::from_millis(1));
        } else {
            P::wait(&self.world.arrivals, seen, None);
        }
    }

    /// Marks the start of code during which no mutator may run the embedder's code.
    fn exclusive_begin(&self, who: &str) -> u32 {
        let a = self.activity.fetch_or(1, SeqCst);
        assert_eq!(a & 1, 0, "two exclusive sections at once");
        self.event(who, "exclusive section begins");
        a
    }

    fn exclusive_end(&self, who: &str, begun: u32) {
        let a = self.activity.fetch_and(!1, SeqCst);
        assert_eq!(
            a,
            begun | 1,
            "{who}: a mutator ran the embedder's code during the exclusive section{}",
            self.trace()
        );
        self.event(who, "exclusive section ends");
    }

    /// What a collector would scan: a thread counted safe has its own frame published, not
    /// the signal handler's (gone once the handler returned).
    fn check_published(&self, i: usize) {
        let m = &self.mutators[i];
        if self.records[i].state.v.load(SeqCst) == SAFE {
            assert_ne!(
                m.published.load(SeqCst),
                HANDLER,
                "{} is counted SAFE with the signal handler's frame published{}",
                m.name,
                self.trace()
            );
        }
    }

    /// The stopper: stops the world (signalling mutators that neither poll nor are safe),
    /// runs the callback, lets the world go.
    fn stop_world(&self, signals: bool) {
        let w = &self.world;
        let word = protocol::begin_stop(w);
        self.event("stopper", &format!("begin_stop ({word:#x})"));
        for r in &self.records {
            r.poll.v.store(1, Relaxed);
        }
        loop {
            let seen = protocol::arrivals(w);
            let mut running = false;
            for (i, r) in self.records.iter().enumerate() {
                if !protocol::not_running(r) {
                    running = true;
                    if signals {
                        self.send_signal("stopper", i);
                    }
                }
            }
            if !running {
                break;
            }
            self.wait_arrivals(seen, signals);
        }
        self.event("stopper", "every mutator is stopped, safe or gone");
        // The callback: no mutator runs the embedder's code meanwhile, and a thread counted
        // safe has its own frame published.
        let begun = self.exclusive_begin("stopper");
        for i in 0..self.records.len() {
            self.check_published(i);
        }
        self.exclusive_end("stopper", begun);
        for r in &self.records {
            r.poll.v.store(0, Relaxed);
        }
        protocol::end_stop(w);
        self.event("stopper", "end_stop");
    }

    /// The requester of a handshake with mutator `i` (as `runtime/src/safepoint/handshake.rs`
    /// runs it). `Some(by_requester)` when the operation ran, `None` when the thread was gone.
    fn handshake(&self, i: usize, signals: bool) -> Option<bool> {
        let r = &self.records[i];
        protocol::offer_handshake(r);
        self.event("requester", "offer_handshake");
        let result = loop {
            let seen = protocol::arrivals(&self.world);
            let (claimed, done) = protocol::target_progress(r);
            if claimed {
                if done {
                    self.event("requester", "the target ran it");
                    break Some(false);
                }
            } else {
                let state = r.state.v.load(SeqCst);
                if state == FINISHED {
                    if protocol::requester_claims(r) {
                        self.event("requester", "the target is gone");
                        break None;
                    }
                    continue;
                }
                if state != RUNNING {
                    if protocol::requester_claims(r) {
                        self.event("requester", "claimed: runs the operation");
                        let begun = self.exclusive_begin("requester");
                        self.check_published(i);
                        self.op_runs.fetch_add(1, SeqCst);
                        self.exclusive_end("requester", begun);
                        break Some(true);
                    }
                    continue;
                }
                if signals {
                    self.send_signal("requester", i);
                }
            }
            self.wait_arrivals(seen, signals && !claimed);
        };
        protocol::end_handshake(r);
        self.event("requester", "end_handshake");
        result
    }

    fn trace(&self) -> String {
        trace_of(&self.stats)
    }
}

fn trace_of(stats: &Stats) -> String {
    let t = stats.trace.lock().unwrap();
    let mut s = String::from("\n-- the interleaving --\n");
    for e in t.iter() {
        s.push_str("  ");
        s.push_str(e);
        s.push('\n');
    }
    s
}

/// A mutator thread of the model.
struct Me<'a, P: Platform<Word = LWord>> {
    model: &'a Model<P>,
    i: usize,
}

impl<P: Platform<Word = LWord>> Drop for Me<'_, P> {
    fn drop(&mut self) {
        LOCAL.with(|l| l.borrow_mut().take());
    }
}

impl<'a, P: Platform<Word = LWord>> Me<'a, P> {
    fn bind(model: &'a Model<P>, i: usize, signals: bool) -> Me<'a, P> {
        LOCAL.with(|l| {
            *l.borrow_mut() = Some(Local {
                m: model.mutators[i].clone(),
                signals,
                in_handler: Cell::new(false),
                unsafe_code: Cell::new(false),
            })
        });
        Me { model, i }
    }

    fn w(&self) -> &World<P> {
        &self.model.world
    }

    fn r(&self) -> &Record<P> {
        &self.model.records[self.i]
    }

    fn name(&self) -> &'static str {
        self.model.mutators[self.i].name
    }

    fn event(&self, what: &str) {
        self.model.event(self.name(), what);
    }

    fn state(&self) -> u32 {
        self.r().state.v.load(SeqCst)
    }

    fn published(&self) -> u32 {
        self.model.mutators[self.i].published.load(SeqCst)
    }

    fn publish(&self, token: u32) {
        self.model.mutators[self.i].published.store(token, SeqCst);
    }

    /// Where the signal may land between two steps.
    fn interrupt(&self) {
        P::interrupt_point(self.w(), self.r());
    }

    /// One step of the embedder's code, then a point where the signal may land.
    fn step(&self) {
        let a = self.model.activity.fetch_add(2, SeqCst);
        assert_eq!(
            a & 1,
            0,
            "{} ran the embedder's code while the stop's callback (or the requester's \
             operation) ran{}",
            self.name(),
            self.model.trace()
        );
        self.event("embedder step");
        self.interrupt();
    }

    /// A step inside libc: the signal may not stop the thread there.
    fn libc_step(&self) {
        LOCAL.with(|l| l.borrow().as_ref().unwrap().unsafe_code.set(true));
        self.step();
        LOCAL.with(|l| l.borrow().as_ref().unwrap().unsafe_code.set(false));
    }

    fn stop_here(&self) {
        self.event("stop_here");
        protocol::stop_here(self.w(), self.r(), || self.publish(POLL));
        self.event("stop_here: let go");
    }

    /// Leaves a safe region (begins running, for a new thread).
    fn leave(&self) {
        self.event("leave_safe");
        if protocol::leave_safe(self.w(), self.r()) {
            self.stop_here();
        }
        self.event("running");
        self.interrupt();
    }

    /// Enters a safe region: then it is counted safe with its own frame published.
    fn enter(&self) {
        self.event("enter_safe");
        protocol::enter_safe(self.w(), self.r(), || self.publish(ENTER));
        self.event("safe");
        self.check_safe("enter_safe");
        self.interrupt();
        self.check_safe("a signal inside the safe region");
    }

    fn check_safe(&self, after: &str) {
        let (state, published) = (self.state(), self.published());
        assert!(
            state == SAFE && published == ENTER,
            "{}: after {after}, state {state} (SAFE is {SAFE}), published frame {published} \
             (enter_safe's is {ENTER}, the handler's {HANDLER}){}",
            self.name(),
            self.model.trace()
        );
    }

    /// The poll (`safepoint_poll` and `poll_slow`): runs a handshake operation it claims
    /// (`op`), stops if a stop or a hold wants it.
    fn poll(&self, op: impl FnOnce(&Self)) {
        if self.r().poll.v.load(Relaxed) == 0 {
            return;
        }
        self.event("poll: armed");
        if protocol::target_claims(self.r()) {
            self.event("poll: claimed the handshake");
            self.interrupt();
            // Taking the operation from its slot: a lock, inside a no-stop section.
            protocol::critical_enter(self.r());
            self.interrupt();
            if protocol::critical_exit(self.w(), self.r()) {
                self.stop_here();
            }
            protocol::run_own_handshake(self.w(), self.r(), || {
                self.model.op_runs.fetch_add(1, SeqCst);
                self.event("runs the handshake operation");
                op(self);
                self.event("the operation returns");
            });
            self.event("poll: handshake done");
        }
        if protocol::poll(self.w(), self.r()) {
            self.interrupt();
            self.stop_here();
        }
    }

    /// The thread's end: safe, then gone.
    fn finish(&self) {
        if self.state() == RUNNING {
            self.enter();
        }
        protocol::finish(self.w(), self.r());
        self.event("finished");
    }
}

// ---- running a model ----

std::thread_local! {
    /// The stats of the model the calling test thread explores (loom runs every model thread
    /// on it): the panic hook prints the interleaving that failed.
    static EXPLORING: RefCell<Option<std::sync::Arc<Stats>>> = const { RefCell::new(None) };
}

/// A panic hook that adds the failing interleaving to loom's own failures (a deadlock, a
/// livelock past the branch limit), which the model's assertions cannot word themselves.
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default(info);
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if msg.contains("-- the interleaving --") {
                return;
            }
            let stats = EXPLORING.try_with(|e| e.borrow().clone()).ok().flatten();
            if let Some(stats) = stats.filter(|s| !s.printed.swap(true, Counted)) {
                if let Ok(t) = stats.trace.try_lock() {
                    let lines: Vec<&str> = t.iter().map(String::as_str).collect();
                    eprintln!("\n-- the interleaving --\n  {}", lines.join("\n  "));
                }
            }
        }));
    });
}

fn builder(preemptions: usize) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b
}

/// The preemption bound: `RTVM_LOOM_PREEMPTIONS` sets every scenario's (a deeper search).
fn bound(default: usize) -> usize {
    match std::env::var("RTVM_LOOM_PREEMPTIONS") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("RTVM_LOOM_PREEMPTIONS={v:?}: not a number")),
        Err(_) => default,
    }
}

type Body = fn(&std::sync::Arc<Stats>);

/// Explores `body` under loom (a failure panics with the interleaving); returns what it
/// explored, and prints the count and the time.
fn explore(name: &str, preemptions: usize, body: Body) -> std::sync::Arc<Stats> {
    install_hook();
    let preemptions = bound(preemptions);
    let stats = std::sync::Arc::new(Stats::default());
    EXPLORING.with(|e| *e.borrow_mut() = Some(stats.clone()));
    let s = stats.clone();
    let t = Instant::now();
    builder(preemptions).check(move || body(&s));
    eprintln!(
        "{name}: {} interleavings in {:.2?} (preemption bound {preemptions})",
        stats.executions.load(Counted),
        t.elapsed()
    );
    EXPLORING.with(|e| e.borrow_mut().take());
    stats
}

const CHILD: &str = "RTVM_LOOM_PLANTED";

/// A planted fault must make loom fail, with a message containing one of `expected`. The
/// model runs in a child process (this test alone, `CHILD` set): loom cannot unwind from a
/// deadlock it found (its objects panic again when dropped), so the child may abort.
fn planted(test: &str, expected: &[&str], preemptions: usize, body: Body) {
    if std::env::var(CHILD).as_deref() == Ok(test) {
        explore(test, preemptions, body);
        eprintln!("no failure found");
        return;
    }
    let t = Instant::now();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .env("RUST_BACKTRACE", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the test binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{test}: loom found no failure with the fault planted:\n{stderr}"
    );
    assert!(
        expected.iter().any(|e| stderr.contains(e)),
        "{test}: loom failed, but not as expected (one of {expected:?}):\n{stderr}"
    );
    let found = stderr
        .lines()
        .skip_while(|l| !l.starts_with("thread '"))
        .nth(1)
        .unwrap_or("");
    let interleaving: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("-- the interleaving --"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    eprintln!(
        "{test}: loom failed in {:.2?}: {found}\n  {}",
        t.elapsed(),
        interleaving.join("\n  ")
    );
    if std::env::var_os("RTVM_LOOM_VERBOSE").is_some() {
        eprintln!("{stderr}");
    }
}

fn spawn_mutator<P: Platform<Word = LWord>>(
    model: &Arc<Model<P>>,
    i: usize,
    signals: bool,
    program: fn(&Me<'_, P>),
) -> loom::thread::JoinHandle<()> {
    let model = model.clone();
    loom::thread::spawn(move || {
        let me = Me::bind(&model, i, signals);
        program(&me);
    })
}

// ---- (a) a stop of the world ----

/// A thread that starts, runs the embedder's code with polls between, goes through libc,
/// enters and leaves a safe region, and finishes.
fn busy<P: Platform<Word = LWord>>(me: &Me<'_, P>) {
    me.leave();
    me.step();
    me.poll(|_| {});
    me.libc_step();
    me.enter();
    me.leave();
    me.step();
    me.finish();
}

/// A thread in libc for a while, then in a loop of its own without polls until the stopper
/// is done: only the signal stops it, and only outside libc (were the signal never sent
/// again after it found the thread in libc, the stop would never end: a livelock).
fn spinner<P: Platform<Word = LWord>>(me: &Me<'_, P>) {
    me.leave();
    me.libc_step();
    me.libc_step();
    while !me.model.released.load(SeqCst) {
        me.step();
        loom::thread::yield_now();
    }
    me.finish();
}

/// A shorter one, for two at once.
fn brief<P: Platform<Word = LWord>>(me: &Me<'_, P>) {
    me.leave();
    me.step();
    me.poll(|_| {});
    me.finish();
}

fn stop_vs<P: Platform<Word = LWord>, const SIGNALS: bool>(
    stats: &std::sync::Arc<Stats>,
    programs: &[fn(&Me<'_, P>)],
    stops: usize,
) {
    let names = ["mutator 1", "mutator 2"];
    let model = Model::<P>::new(&names[..programs.len()], stats);
    let threads: Vec<_> = programs
        .iter()
        .enumerate()
        .map(|(i, &p)| spawn_mutator(&model, i, SIGNALS, p))
        .collect();
    for _ in 0..stops {
        model.stop_world(SIGNALS);
    }
    model.released.store(true, SeqCst);
    for t in threads {
        t.join().unwrap();
    }
}

fn stop_vs_busy<P: Platform<Word = LWord>, const SIGNALS: bool>(s: &std::sync::Arc<Stats>) {
    stop_vs::<P, SIGNALS>(s, &[busy::<P>], 1);
}

#[test]
fn a_stop_without_the_signal() {
    explore(
        "(a) stop vs a busy mutator",
        4,
        stop_vs_busy::<Sound, false>,
    );
}

#[test]
fn a_stop_with_the_signal() {
    let s = explore(
        "(a) stop vs a busy mutator, signal",
        3,
        stop_vs_busy::<Sound, true>,
    );
    assert!(s.stopped.load(Counted) > 0, "the signal stopped the thread");
    assert!(
        s.unsafe_code.load(Counted) > 0,
        "the signal found it in libc"
    );
    assert!(
        s.deferred.load(Counted) > 0,
        "the signal found it in a no-stop section"
    );
    assert!(s.not_needed.load(Counted) > 0, "the signal found it safe");
}

#[test]
fn a_stop_of_two_mutators() {
    explore("(a) stop vs two mutators", 2, |s| {
        stop_vs::<Sound, false>(s, &[brief::<Sound>, brief::<Sound>], 1)
    });
}

#[test]
fn a_stop_of_a_loop_without_polls() {
    let s = explore("(a) stop vs a loop without polls, signal", 3, |s| {
        stop_vs::<Sound, true>(s, &[spinner::<Sound>], 1)
    });
    assert!(s.stopped.load(Counted) > 0, "the signal stopped the thread");
    assert!(
        s.unsafe_code.load(Counted) > 0,
        "the signal found it in libc"
    );
}

// ---- (b) handshakes ----

/// A target that polls once; the operation it claims there enters and leaves a safe region.
fn target<P: Platform<Word = LWord>>(me: &Me<'_, P>) {
    me.leave();
    me.step();
    me.poll(|me| {
        me.enter();
        me.leave();
    });
    me.step();
    me.finish();
}

/// A target whose operation only runs (where a stray signal may land).
fn plain_target<P: Platform<Word = LWord>>(me: &Me<'_, P>) {
    me.leave();
    me.step();
    me.poll(|me| me.interrupt());
    me.step();
    me.finish();
}

fn handshake_vs<P: Platform<Word = LWord>, const SIGNALS: bool>(
    stats: &std::sync::Arc<Stats>,
    program: fn(&Me<'_, P>),
) {
    let model = Model::<P>::new(&["target"], stats);
    let t = spawn_mutator(&model, 0, SIGNALS, program);
    let result = model.handshake(0, SIGNALS);
    t.join().unwrap();
    let runs = model.op_runs.load(SeqCst);
    assert_eq!(
        runs,
        u32::from(result.is_some()),
        "the operation ran {runs} times (handshake: {result:?}){}",
        model.trace()
    );
    match result {
        Some(true) => &stats.by_requester,
        Some(false) => &stats.by_target,
        None => &stats.gone,
    }
    .fetch_add(1, Counted);
}

fn handshake_vs_target<P: Platform<Word = LWord>, const SIGNALS: bool>(s: &std::sync::Arc<Stats>) {
    handshake_vs::<P, SIGNALS>(s, target::<P>);
}

fn handshake_vs_plain_target<P: Platform<Word = LWord>, const SIGNALS: bool>(
    s: &std::sync::Arc<Stats>,
) {
    handshake_vs::<P, SIGNALS>(s, plain_target::<P>);
}

fn check_both_claims(s: &Stats) {
    assert!(
        s.by_target.load(Counted) > 0,
        "the target ran the operation"
    );
    assert!(s.by_requester.load(Counted) > 0, "the requester ran it");
    assert!(s.gone.load(Counted) > 0, "the target was gone");
}

#[test]
fn b_handshake_without_the_signal() {
    let s = explore(
        "(b) handshake vs a target",
        4,
        handshake_vs_target::<Sound, false>,
    );
    check_both_claims(&s);
}

#[test]
fn b_handshake_with_the_signal() {
    let s = explore(
        "(b) handshake vs a target, signal",
        3,
        handshake_vs_target::<Sound, true>,
    );
    check_both_claims(&s);
    assert!(s.stopped.load(Counted) > 0, "the signal stopped the target");
    assert!(
        s.not_needed.load(Counted) > 0,
        "a stray signal in the operation"
    );
}

#[test]
fn b_handshake_stray_signal() {
    let s = explore(
        "(b) handshake vs a plain target, signal",
        3,
        handshake_vs_plain_target::<Sound, true>,
    );
    check_both_claims(&s);
}

// ---- (c) a poll and a signal inside a safe region ----

fn polls_in_region<P: Platform<Word = LWord>>(me: &Me<'_, P>) {
    me.leave();
    me.step();
    me.enter();
    me.poll(|_| {});
    me.check_safe("a poll inside the safe region");
    me.leave();
    me.step();
    me.finish();
}

fn stop_vs_region<P: Platform<Word = LWord>>(s: &std::sync::Arc<Stats>) {
    stop_vs::<P, true>(s, &[polls_in_region::<P>], 1);
}

#[test]
fn c_poll_and_signal_inside_a_safe_region() {
    let s = explore(
        "(c) stop vs a poll in a safe region, signal",
        3,
        stop_vs_region::<Sound>,
    );
    assert!(
        s.not_needed.load(Counted) > 0,
        "a signal found the thread safe"
    );
}

// ---- (d) a signal during enter_safe's and leave_safe's publication ----

fn in_and_out<P: Platform<Word = LWord>>(me: &Me<'_, P>) {
    me.leave();
    me.enter();
    me.leave();
    me.finish();
}

fn two_stops_vs_in_and_out<P: Platform<Word = LWord>>(s: &std::sync::Arc<Stats>) {
    stop_vs::<P, true>(s, &[in_and_out::<P>], 2);
}

#[test]
fn d_signal_during_publication() {
    let s = explore(
        "(d) two stops vs enter/leave, signal",
        2,
        two_stops_vs_in_and_out::<Sound>,
    );
    assert!(s.deferred.load(Counted) > 0, "a signal found a transition");
}

// ---- planted faults: each one makes the check fail ----

#[test]
fn fault_skip_recheck() {
    planted(
        "fault_skip_recheck",
        &["ran the embedder's code while the stop's callback"],
        4,
        stop_vs_busy::<LoomPlatform<SKIP_RECHECK>, false>,
    );
}

#[test]
fn fault_forget_wake() {
    planted(
        "fault_forget_wake",
        &["deadlock"],
        4,
        stop_vs_busy::<LoomPlatform<FORGET_WAKE>, false>,
    );
}

#[test]
fn fault_no_wake_tree() {
    planted("fault_no_wake_tree", &["deadlock"], 2, |s| {
        stop_vs::<LoomPlatform<NO_WAKE_TREE>, false>(
            s,
            &[
                brief::<LoomPlatform<NO_WAKE_TREE>>,
                brief::<LoomPlatform<NO_WAKE_TREE>>,
            ],
            1,
        )
    });
}

#[test]
fn fault_no_critical() {
    planted(
        "fault_no_critical",
        &[
            "published frame 3",
            "with the signal handler's frame published",
        ],
        2,
        two_stops_vs_in_and_out::<LoomPlatform<NO_CRITICAL>>,
    );
}

#[test]
fn fault_hold_in_op_region() {
    planted(
        "fault_hold_in_op_region",
        &["deadlock"],
        4,
        handshake_vs_target::<LoomPlatform<HOLD_IN_OP>, false>,
    );
}

#[test]
fn fault_hold_in_op_stray_signal() {
    planted(
        "fault_hold_in_op_stray_signal",
        &["deadlock"],
        3,
        handshake_vs_plain_target::<LoomPlatform<HOLD_IN_OP>, true>,
    );
}

/// Without the signal, nothing stops a loop without polls: the stop never ends, and loom
/// says so (the model's search for livelocks works).
#[test]
fn livelock_without_the_signal() {
    planted(
        "livelock_without_the_signal",
        &["Model exceeded maximum number of branches"],
        3,
        |s| stop_vs::<Sound, false>(s, &[spinner::<Sound>], 1),
    );
}

#[test]
fn fault_poll_in_region() {
    planted(
        "fault_poll_in_region",
        &["after a poll inside the safe region"],
        3,
        stop_vs_region::<LoomPlatform<POLL_IN_REGION>>,
    );
}
