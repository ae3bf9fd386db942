//! Built-in mains.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rtvm_os_linux::procfs;

use crate::launcher::MainResult;
use crate::vm::Vm;

/// A latch the idle threads report to and wait on. Two condition variables, so that a
/// thread reporting in wakes only the waiting main, never the other idle threads (a single
/// one would make starting N threads cost N² wake-ups).
#[derive(Default)]
struct Idle {
    state: Mutex<(usize, bool)>, // (started, stop)
    started: Condvar,
    stop: Condvar,
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
    let idle = Arc::new(Idle::default());
    let mut threads = Vec::with_capacity(count);
    let mut failure = None;
    for i in 0..count {
        let idle_c = Arc::clone(&idle);
        let spawned = vm.spawn(&format!("Idle#{i}"), move || {
            let mut s = idle_c.state.lock().unwrap_or_else(|p| p.into_inner());
            s.0 += 1;
            idle_c.started.notify_one();
            while !s.1 {
                s = idle_c.stop.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let started = threads.len();
    if failure.is_none() {
        let mut s = idle.state.lock().unwrap_or_else(|p| p.into_inner());
        while s.0 < started {
            s = idle.started.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        drop(s);
        println!("{}", memory_line("IdleThreads", count)?);
        if hold > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(hold));
        }
    }
    {
        let mut s = idle.state.lock().unwrap_or_else(|p| p.into_inner());
        s.1 = true;
        idle.stop.notify_all();
    }
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
