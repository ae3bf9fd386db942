//! Stopping threads: rtvm's stops of the world against a signal-only stop as the Boehm GC
//! does it (`pthread_kill` of a suspend signal to every thread, whose handler records its
//! stack pointer, posts a semaphore and waits in `sigsuspend` for the restart signal; the
//! restart signals every thread again and waits for each to acknowledge).
//!
//! `cargo bench -p rtvm --bench safepoint [-- --rounds N] [--poll-only]` (`--poll-only`: only the
//! poll's cost in a loop, for a re-measure on a quiet machine)
//!
//! * Idle threads (100, 1,000, 10,000), blocked in a wait: rtvm's are VM threads parked in a
//!   safe region, the baseline's plain pthreads parked on a futex.
//! * Threads in tight loops (100, 1,000): rtvm's poll at every iteration
//!   (`rtvm::safepoint_poll`), the baseline's are signalled.
//! * 8 threads in loops that never poll: rtvm signals them after `-XX:SafepointSignalDelay`
//!   (the default 200 µs, and 0), the baseline at once.
//! * The poll's cost: a loop (an xorshift step and a sum per iteration) on a VM thread with and
//!   without `rtvm::safepoint_poll()` at its back-edge, 200 M iterations.
//!
//! Each variant of a scenario runs in a child process of its own (one VM per process; the
//! stop signal, the thread counts): a round runs every variant once, in a rotating order
//! (A B C, B C A, ...); the child makes 15 stops (3 discarded as warm-up; 5 and 1 for 1,000
//! spinning threads, whose every resume takes seconds) and reports the
//! medians of the time to stop (until `stop_the_world` returns / the last acknowledgement)
//! and to resume (until the stopper may go on: rtvm's resume is one futex wake, the
//! baseline's waits for every thread's restart acknowledgement, as the Boehm GC does). The
//! table gives the medians over the rounds and the ratio to the baseline. Threads are warm
//! (started and parked, or spinning, before the first stop). With more spinning threads than
//! CPUs both resume figures are mostly the stopper waiting for a CPU behind the threads it
//! woke.

use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rtvm::{InitArgs, Vm};
use rtvm_testkit::bench::{arg, listing, median};

const STOPS: usize = 15;
const WARMUP: usize = 3;

/// Stops (and warm-up stops) per child for `n` threads doing `what`: fewer for 1,000 spinning
/// threads, where every resume waits seconds for the stopper to get a CPU back.
fn stops_for(what: Body, n: usize) -> (usize, usize) {
    if what != Body::Idle && n >= 1000 {
        (5, 1)
    } else {
        (STOPS, WARMUP)
    }
}

// ---- the baseline: a signal-only stop, as the Boehm GC's pthread_stop_world.c ----

mod boehm {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn sig_suspend() -> libc::c_int {
        libc::SIGRTMIN() + 6
    }
    fn sig_restart() -> libc::c_int {
        libc::SIGRTMIN() + 7
    }

    static STOP_GEN: AtomicU64 = AtomicU64::new(0);
    static RESUMED_GEN: AtomicU64 = AtomicU64::new(0);
    static mut ACK: std::mem::MaybeUninit<libc::sem_t> = std::mem::MaybeUninit::uninit();

    thread_local! {
        /// Where the thread was stopped: what a collector would scan from.
        static STOPPED_SP: Cell<usize> = const { Cell::new(0) };
    }

    /// The semaphore (initialized by `install` before any signal is sent).
    fn ack() -> *mut libc::sem_t {
        (&raw mut ACK).cast()
    }

    extern "C" fn on_suspend(_: libc::c_int) {
        // SAFETY: errno is saved and restored around the handler.
        let errno = unsafe { *libc::__errno_location() };
        let generation = STOP_GEN.load(Ordering::SeqCst);
        let marker = 0u8;
        STOPPED_SP.with(|c| c.set(&marker as *const u8 as usize));
        // SAFETY: sem_post, sigfillset, sigdelset and sigsuspend are async-signal-safe; the
        // semaphore was initialized by `install`.
        unsafe {
            libc::sem_post(ack());
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut mask);
            libc::sigdelset(&mut mask, sig_restart());
            while RESUMED_GEN.load(Ordering::SeqCst) < generation {
                libc::sigsuspend(&mask);
            }
            libc::sem_post(ack());
            *libc::__errno_location() = errno;
        }
    }

    extern "C" fn on_restart(_: libc::c_int) {}

    /// Installs the two handlers (the restart signal is blocked while the suspend handler
    /// runs, so it stays pending until `sigsuspend`).
    pub fn install() {
        // SAFETY: initializes the process's semaphore once and installs two handlers of
        // this program; zeroed sigactions are valid before their fields are set.
        unsafe {
            assert_eq!(libc::sem_init(ack(), 0, 0), 0);
            let mut a: libc::sigaction = std::mem::zeroed();
            a.sa_sigaction = on_suspend as *const () as usize;
            a.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut a.sa_mask);
            libc::sigaddset(&mut a.sa_mask, sig_restart());
            assert_eq!(libc::sigaction(sig_suspend(), &a, std::ptr::null_mut()), 0);
            let mut r: libc::sigaction = std::mem::zeroed();
            r.sa_sigaction = on_restart as *const () as usize;
            r.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut r.sa_mask);
            assert_eq!(libc::sigaction(sig_restart(), &r, std::ptr::null_mut()), 0);
        }
    }

    fn wait_acks(n: usize) {
        for _ in 0..n {
            // SAFETY: the initialized semaphore; EINTR is retried.
            while unsafe { libc::sem_wait(ack()) } != 0 {}
        }
    }

    /// Stops every thread of `threads`: a signal to each, then one acknowledgement each.
    pub fn stop(threads: &[libc::pthread_t]) {
        STOP_GEN.fetch_add(1, Ordering::SeqCst);
        for &t in threads {
            // SAFETY: a live thread of this process, with a handler installed.
            assert_eq!(unsafe { libc::pthread_kill(t, sig_suspend()) }, 0);
        }
        wait_acks(threads.len());
    }

    /// Restarts them: the restart signal to each, then one acknowledgement each.
    pub fn restart(threads: &[libc::pthread_t]) {
        RESUMED_GEN.store(STOP_GEN.load(Ordering::SeqCst), Ordering::SeqCst);
        for &t in threads {
            // SAFETY: as in `stop`.
            assert_eq!(unsafe { libc::pthread_kill(t, sig_restart()) }, 0);
        }
        wait_acks(threads.len());
    }
}

// ---- the threads ----

/// Whether the threads keep going; parked threads wait for it on a futex (or a condvar).
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
    ready: AtomicUsize,
    done: AtomicBool,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate {
            open: Mutex::new(false),
            cv: Condvar::new(),
            ready: AtomicUsize::new(0),
            done: AtomicBool::new(false),
        })
    }

    fn park(&self) {
        let mut open = self.open.lock().unwrap();
        self.ready.fetch_add(1, Ordering::SeqCst);
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }

    fn release(&self) {
        self.done.store(true, Ordering::SeqCst);
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }

    fn wait_ready(&self, n: usize) {
        while self.ready.load(Ordering::SeqCst) < n {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Body {
    Idle,
    Polls,
    NeverPolls,
}

fn body(gate: &Gate, what: Body, counter: &AtomicU64) {
    match what {
        Body::Idle => gate.park(),
        Body::Polls => {
            gate.ready.fetch_add(1, Ordering::SeqCst);
            while !gate.done.load(Ordering::Relaxed) {
                counter.fetch_add(1, Ordering::Relaxed);
                rtvm::safepoint_poll();
            }
        }
        Body::NeverPolls => {
            gate.ready.fetch_add(1, Ordering::SeqCst);
            while !gate.done.load(Ordering::Relaxed) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

struct PthreadArg {
    gate: Arc<Gate>,
    what: Body,
    counter: AtomicU64,
}

extern "C" fn pthread_main(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `arg` is the PthreadArg the starter keeps alive until it joined this thread.
    let a = unsafe { &*arg.cast::<PthreadArg>() };
    body(&a.gate, a.what, &a.counter);
    std::ptr::null_mut()
}

/// (median time to stop, median time to resume) in µs over the stops after the warm-up.
type Figures = (f64, f64);

/// `count` stops (`stop`, then `resume` of what it returned), 5 ms apart, once the threads
/// settled; the medians after `warmup`.
fn measure<W>(
    count: usize,
    warmup: usize,
    mut stop: impl FnMut() -> W,
    mut resume: impl FnMut(W),
) -> Figures {
    std::thread::sleep(Duration::from_millis(20));
    let (mut stops, mut resumes) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let t0 = Instant::now();
        let stopped = stop();
        let t1 = Instant::now();
        resume(stopped);
        let t2 = Instant::now();
        stops.push(t1 - t0);
        resumes.push(t2 - t1);
        std::thread::sleep(Duration::from_millis(5));
    }
    let us = |v: Vec<Duration>| median(v[warmup..].to_vec()).as_secs_f64() * 1e6;
    (us(stops), us(resumes))
}

/// One child: `n` threads doing `what`, stopped STOPS times by rtvm (`delay_us`: the signal
/// delay) or by the baseline.
fn child(what: Body, n: usize, rtvm_delay_us: Option<u64>) -> Figures {
    let gate = Gate::new();
    let (count, warmup) = stops_for(what, n);
    let figures;
    match rtvm_delay_us {
        Some(delay) => {
            let delay = format!("-XX:SafepointSignalDelay={delay}");
            let vm = Vm::create(InitArgs::new([
                "-Xmx16m",
                "-Xss256k",
                "-XX:ParallelGCThreads=1",
                &delay,
            ]))
            .expect("create the VM");
            let counter = Arc::new(AtomicU64::new(0));
            let threads: Vec<_> = (0..n)
                .map(|i| {
                    let (g, c) = (gate.clone(), counter.clone());
                    vm.spawn(&format!("T{i}"), move || {
                        let _region = (what == Body::Idle).then(rtvm::SafeRegion::enter);
                        body(&g, what, &c)
                    })
                    .expect("spawn")
                })
                .collect();
            gate.wait_ready(n);
            figures = measure(
                count,
                warmup,
                || {
                    let world = vm
                        .stop_the_world("Bench", Duration::from_secs(60))
                        .expect("stop");
                    assert_eq!(world.len(), n);
                    world
                },
                drop,
            );
            gate.release();
            for t in threads {
                t.join().expect("join");
            }
            vm.shutdown().expect("shutdown");
        }
        None => {
            boehm::install();
            let args: Vec<Box<PthreadArg>> = (0..n)
                .map(|_| {
                    Box::new(PthreadArg {
                        gate: gate.clone(),
                        what,
                        counter: AtomicU64::new(0),
                    })
                })
                .collect();
            // SAFETY: a plain attribute with 256 KiB stacks; each thread gets a PthreadArg
            // that lives in `args` until every thread is joined below.
            let threads: Vec<libc::pthread_t> = unsafe {
                let mut attr: libc::pthread_attr_t = std::mem::zeroed();
                assert_eq!(libc::pthread_attr_init(&mut attr), 0);
                assert_eq!(libc::pthread_attr_setstacksize(&mut attr, 256 << 10), 0);
                let threads = args
                    .iter()
                    .map(|a| {
                        let mut t: libc::pthread_t = 0;
                        let p = (&**a as *const PthreadArg).cast_mut().cast();
                        assert_eq!(libc::pthread_create(&mut t, &attr, pthread_main, p), 0);
                        t
                    })
                    .collect();
                libc::pthread_attr_destroy(&mut attr);
                threads
            };
            gate.wait_ready(n);
            figures = measure(
                count,
                warmup,
                || boehm::stop(&threads),
                |()| boehm::restart(&threads),
            );
            gate.release();
            for t in threads {
                // SAFETY: joins each thread started above once.
                assert_eq!(unsafe { libc::pthread_join(t, std::ptr::null_mut()) }, 0);
            }
            drop(args);
        }
    }
    figures
}

// ---- the poll's cost ----

#[inline(never)]
fn spin(iterations: u64, poll: bool) -> u64 {
    let (mut x, mut sum) = (0x9e37_79b9_7f4a_7c15u64, 0u64);
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sum = sum.wrapping_add(x);
        if poll {
            rtvm::safepoint_poll();
        }
    }
    sum
}

/// Median ns per iteration (plain, polling), interleaved on one VM thread.
fn poll_cost(rounds: usize) -> (f64, f64) {
    let vm =
        Vm::create(InitArgs::new(["-Xmx16m", "-XX:ParallelGCThreads=1"])).expect("create the VM");
    let (tx, rx) = std::sync::mpsc::channel();
    let t = vm
        .spawn("PollCost", move || {
            const N: u64 = 200_000_000;
            let (mut plain, mut polling) = (Vec::new(), Vec::new());
            black_box(spin(N / 10, false));
            black_box(spin(N / 10, true));
            for r in 0..rounds.max(3) * 2 {
                let poll = r % 2 == 1;
                let t0 = Instant::now();
                black_box(spin(black_box(N), poll));
                let ns = t0.elapsed().as_nanos() as u64;
                if poll {
                    polling.push(ns)
                } else {
                    plain.push(ns)
                }
            }
            let _ = tx.send((
                median(plain) as f64 / N as f64,
                median(polling) as f64 / N as f64,
            ));
        })
        .expect("spawn");
    t.join().expect("join");
    let (plain, polling) = rx.recv().expect("the loop's figures");
    vm.shutdown().expect("shutdown");
    (plain, polling)
}

// ---- the parent ----

struct Scenario {
    label: &'static str,
    what: Body,
    n: usize,
    /// The variants: `Some(delay)` rtvm with that signal delay, `None` the baseline.
    variants: &'static [Option<u64>],
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        label: "idle (blocked)",
        what: Body::Idle,
        n: 100,
        variants: &[Some(200), None],
    },
    Scenario {
        label: "idle (blocked)",
        what: Body::Idle,
        n: 1000,
        variants: &[Some(200), None],
    },
    Scenario {
        label: "idle (blocked)",
        what: Body::Idle,
        n: 10000,
        variants: &[Some(200), None],
    },
    Scenario {
        label: "tight loops that poll",
        what: Body::Polls,
        n: 100,
        variants: &[Some(200), Some(1000), None],
    },
    Scenario {
        label: "tight loops that poll",
        what: Body::Polls,
        n: 1000,
        variants: &[Some(200), None],
    },
    Scenario {
        label: "loops that never poll",
        what: Body::NeverPolls,
        n: 8,
        variants: &[Some(200), Some(0), None],
    },
];

fn run_child(what: &str, n: usize, variant: &str) -> Figures {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--child", what, &n.to_string(), variant])
        .env_remove("RTVM_OPTIONS")
        .output()
        .expect("run the child");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child {what} {n} {variant}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("FIGURES "))
        .expect("the child's figures");
    let mut it = line.split_whitespace().map(|v| v.parse::<f64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

fn body_name(b: Body) -> &'static str {
    match b {
        Body::Idle => "idle",
        Body::Polls => "polls",
        Body::NeverPolls => "never",
    }
}

fn variant_name(v: Option<u64>) -> String {
    v.map_or("boehm".to_owned(), |d| format!("rtvm:{d}"))
}

fn fmed(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if listing() {
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let what = match args[i + 1].as_str() {
            "idle" => Body::Idle,
            "polls" => Body::Polls,
            _ => Body::NeverPolls,
        };
        let n: usize = args[i + 2].parse().unwrap();
        let variant = args[i + 3]
            .strip_prefix("rtvm:")
            .map(|d| d.parse().unwrap());
        let (stop, resume) = child(what, n, variant);
        println!("FIGURES {stop:.3} {resume:.3}");
        return;
    }
    let rounds: usize = arg("--rounds").unwrap_or(5);
    println!("stopping threads: {rounds} rounds, variants interleaved in a rotating order; medians of {} stops per child ({} warm-up), medians over the rounds; µs", STOPS - WARMUP, WARMUP);
    println!(
        "{:<24} {:>6}  {:<22} {:>12} {:>9} {:>12} {:>9}",
        "threads", "n", "variant", "stop µs", "× sig", "resume µs", "× sig"
    );
    let scenarios = if args.iter().any(|a| a == "--poll-only") {
        &[][..]
    } else {
        SCENARIOS
    };
    for s in scenarios {
        let k = s.variants.len();
        let mut got: Vec<Vec<Figures>> = vec![Vec::new(); k];
        for r in 0..rounds {
            for j in 0..k {
                let v = (r + j) % k;
                got[v].push(run_child(
                    body_name(s.what),
                    s.n,
                    &variant_name(s.variants[v]),
                ));
            }
        }
        let med: Vec<Figures> = got
            .into_iter()
            .map(|f| {
                (
                    fmed(f.iter().map(|x| x.0).collect()),
                    fmed(f.iter().map(|x| x.1).collect()),
                )
            })
            .collect();
        let base = med[k - 1];
        for (v, m) in s.variants.iter().zip(&med) {
            let name = match v {
                Some(200) => "rtvm (default)".to_owned(),
                Some(d) => format!("rtvm, signal delay {d} µs"),
                None => "signal-only (Boehm)".to_owned(),
            };
            println!(
                "{:<24} {:>6}  {:<22} {:>12.1} {:>9.3} {:>12.1} {:>9.3}",
                s.label,
                s.n,
                name,
                m.0,
                m.0 / base.0,
                m.1,
                m.1 / base.1
            );
        }
    }
    let (plain, polling) = poll_cost(rounds);
    println!(
        "the poll in a loop (xorshift step + sum, 200 M iterations, on a VM thread): {plain:.3} ns/iteration without, {polling:.3} with: {:+.1}%",
        (polling / plain - 1.0) * 100.0
    );
}
