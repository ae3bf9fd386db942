//! Built-in mains, and the idle-thread gate they (and tests) use.

use std::io::Write as _;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rtvm_os_linux::procfs;

use rtvm::{Vm, VmThread};

use crate::MainResult;

/// A gate idle threads report to and park at until released. Two condition variables, so a
/// thread reporting in wakes only the waiter, never the other parked threads (one would make
/// starting N threads cost N² wake-ups).
#[derive(Debug, Default)]
pub struct IdleGate {
    state: Mutex<(usize, bool)>, // (started, released)
    started: Condvar,
    released: Condvar,
}

impl IdleGate {
    /// A new, closed gate.
    pub fn new() -> Arc<IdleGate> {
        Arc::new(IdleGate::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, bool)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A thread body that reports in and parks until [`release`](IdleGate::release), in a
    /// safe region: a stop of the world counts it at once.
    pub fn parked_body(self: &Arc<Self>) -> impl FnOnce() + Send + 'static {
        let gate = Arc::clone(self);
        move || {
            let _region = rtvm::SafeRegion::enter();
            let mut s = gate.lock();
            s.0 += 1;
            gate.started.notify_one();
            while !s.1 {
                s = gate.released.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    /// Waits until `n` threads have reported in.
    pub fn wait_started(&self, n: usize) {
        let mut s = self.lock();
        while s.0 < n {
            s = self.started.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Lets every parked thread (and any that reports in later) go.
    pub fn release(&self) {
        self.lock().1 = true;
        self.released.notify_all();
    }

    /// Releases the gate when the returned guard goes, on every path out of the caller —
    /// an early `?` return or a panic included — so no parked thread outlives it.
    pub fn release_on_drop(self: &Arc<Self>) -> ReleaseOnDrop {
        ReleaseOnDrop(Arc::clone(self))
    }
}

/// See [`IdleGate::release_on_drop`].
#[derive(Debug)]
pub struct ReleaseOnDrop(Arc<IdleGate>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Threads parked at a gate. Whatever ends their main — an error, a panic, a failed write —
/// the gate opens and every thread is joined before this goes: nothing is left running.
struct Parked {
    gate: Arc<IdleGate>,
    threads: Vec<VmThread>,
}

impl Parked {
    /// Opens the gate and joins the threads; the first thread error, if any.
    fn stop(mut self) -> MainResult {
        self.gate.release();
        let mut first = Ok(());
        for t in self.threads.drain(..) {
            if let Err(e) = t.join() {
                if first.is_ok() {
                    first = Err(e.into());
                }
            }
        }
        first
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.gate.release();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One line from the kernel's view: `VmRSS`, `Threads` and `AnonHugePages`.
pub fn memory_line(label: &str, threads: usize) -> Result<String, std::io::Error> {
    let status = procfs::read_status()?;
    let rollup = procfs::read_smaps_rollup()?;
    Ok(format!(
        "{label}: threads={threads} VmRSS={} kB VmSwap={} kB Threads={} AnonHugePages={} kB",
        status.vm_rss_kb, status.vm_swap_kb, status.threads, rollup.anon_huge_kb
    ))
}

/// `IdleThreads <count> [<hold-seconds>]`: starts `count` idle Java threads, waits until all
/// run, prints `IdleThreads: threads=<count> VmRSS=<kB> kB VmSwap=<kB> kB Threads=<n>
/// AnonHugePages=<kB> kB`,
/// holds for `hold-seconds` (default 0), stops and joins them. The seed experiment of
/// JDK-8312182, made repeatable.
///
/// A count the machine cannot start ends with the error of the thread that could not start
/// (every thread started so far stopped and joined first); an output that cannot be written
/// (a full disk, a closed pipe) ends the main with an error. No path leaves a thread parked.
pub fn idle_threads(vm: &Vm, args: &[String]) -> MainResult {
    let usage = "usage: IdleThreads <count> [<hold-seconds>]";
    let count: usize = args.first().and_then(|a| a.parse().ok()).ok_or(usage)?;
    let hold = match args.get(1) {
        Some(a) => a
            .parse::<f64>()
            .ok()
            .and_then(|h| Duration::try_from_secs_f64(h).ok())
            .ok_or(usage)?,
        None => Duration::ZERO,
    };
    let gate = IdleGate::new();
    let mut parked = Parked {
        gate: Arc::clone(&gate),
        threads: Vec::new(),
    };
    let mut failure: Option<Box<dyn std::error::Error + Send + Sync>> = None;
    for i in 0..count {
        // The count comes from the command line: never reserve for it up front.
        if parked.threads.try_reserve(1).is_err() {
            failure = Some("out of memory for the thread list".into());
            break;
        }
        match vm.spawn(&format!("Idle#{i}"), gate.parked_body()) {
            Ok(t) => parked.threads.push(t),
            Err(e) => {
                failure = Some(e.into());
                break;
            }
        }
    }
    let started = parked.threads.len();
    if let Some(e) = failure {
        // Stop and join first: what made the start fail (memory, mappings) is given back
        // before the message is made.
        parked.stop()?;
        return Err(format!("{e} ({started} of {count} threads had started; all stopped)").into());
    }
    gate.wait_started(started);
    let line = memory_line("IdleThreads", count)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())?;
    drop(out);
    if !hold.is_zero() {
        // A sleep inside the C library: in a safe region, or every stop would wait for it.
        let _safe = vm.enter_safe_region();
        std::thread::sleep(hold);
    }
    parked.stop()
}
