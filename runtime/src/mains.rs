//! Built-in mains, and the idle-thread gate they (and tests) use.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rtvm_os_linux::procfs;

use crate::launcher::MainResult;
use crate::vm::Vm;

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

    /// A thread body that reports in and parks until [`release`](IdleGate::release).
    pub fn parked_body(self: &Arc<Self>) -> impl FnOnce() + Send + 'static {
        let gate = Arc::clone(self);
        move || {
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
}

/// One line from the kernel's view: `VmRSS`, `Threads` and `AnonHugePages`.
pub fn memory_line(label: &str, threads: usize) -> Result<String, std::io::Error> {
    let status = procfs::read_status()?;
    let rollup = procfs::read_smaps_rollup()?;
    Ok(format!(
        "{label}: threads={threads} VmRSS={} kB Threads={} AnonHugePages={} kB",
        status.vm_rss_kb, status.threads, rollup.anon_huge_kb
    ))
}

/// `IdleThreads <count> [<hold-seconds>]`: starts `count` idle Java threads, waits until all
/// run, prints `IdleThreads: threads=<count> VmRSS=<kB> kB Threads=<n> AnonHugePages=<kB> kB`,
/// holds for `hold-seconds` (default 0), stops and joins them. The seed experiment of
/// JDK-8312182, made repeatable.
pub fn idle_threads(vm: &Vm, args: &[String]) -> MainResult {
    let usage = "usage: IdleThreads <count> [<hold-seconds>]";
    let count: usize = args.first().and_then(|a| a.parse().ok()).ok_or(usage)?;
    let hold: f64 = match args.get(1) {
        Some(a) => a
            .parse()
            .ok()
            .filter(|h: &f64| h.is_finite() && *h >= 0.0)
            .ok_or(usage)?,
        None => 0.0,
    };
    let gate = IdleGate::new();
    let mut threads = Vec::with_capacity(count);
    let mut failure = None;
    for i in 0..count {
        match vm.spawn(&format!("Idle#{i}"), gate.parked_body()) {
            Ok(t) => threads.push(t),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let started = threads.len();
    if failure.is_none() {
        gate.wait_started(started);
        println!("{}", memory_line("IdleThreads", count)?);
        if hold > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(hold));
        }
    }
    gate.release();
    for t in threads {
        t.join()?;
    }
    match failure {
        Some(e) => {
            Err(format!("{e} ({started} of {count} threads had started; all stopped)").into())
        }
        None => Ok(()),
    }
}
