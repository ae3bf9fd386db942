//! Thread start rate and per-thread RSS for 1000 threads with 2 MiB stacks: rtvm with the
//! THP stack mitigation, without it, `std::thread` with the same stack size, the OS-layer
//! cost of `MADV_NOHUGEPAGE` alone, and a 1000-thread Java program (`java -Xss2m`) run in the
//! same session as the reference.
//!
//! `cargo bench -p rtvm --bench threads [-- --rounds N]`
//!
//! A sample starts 1000 threads that each report in and then wait, and stops the clock when
//! all 1000 run; RSS is read from `/proc/self/status` at that point, against a reading taken
//! just before. Variants are interleaved in a rotating order; medians are reported.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rtvm::{InitArgs, Vm};
use rtvm_os_linux::procfs::read_status;
use rtvm_os_linux::stack::{recommended_alt_stack_size, StackMapping, StackSpec};
use rtvm_testkit::bench::median;

const THREADS: usize = 1000;
const STACK: usize = 2 << 20;

/// A variant's sampler: (time to all-running, RSS growth in kB).
type Sampler = fn() -> (Duration, u64);

fn rss_kb() -> u64 {
    read_status().unwrap().vm_rss_kb
}

/// Where a sample's threads report in (each report wakes only the sampler, so starting N
/// threads costs N wake-ups, not N²), and then park until the sampler has read the RSS: a
/// read lock on a lock the sampler holds for writing.
struct Gate {
    started: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
    released: Arc<RwLock<()>>,
}

impl Gate {
    fn parked_body(self: &Arc<Self>) -> impl FnOnce() + Send + 'static {
        let started = self.started.lock().unwrap().clone();
        let released = Arc::clone(&self.released);
        move || {
            let _ = started.send(());
            drop(released.read());
        }
    }
}

/// Starts `THREADS` parked threads with `spawn`, stops the clock when all run, reads the RSS
/// growth, then releases and joins them: (time to all-running, RSS growth in kB).
fn measure<T>(spawn: impl Fn(usize, &Arc<Gate>) -> T, join: impl Fn(T)) -> (Duration, u64) {
    let (tx, rx) = std::sync::mpsc::channel();
    let released = Arc::new(RwLock::new(()));
    let hold = released.write().unwrap();
    let g = Arc::new(Gate {
        started: std::sync::Mutex::new(tx),
        released: Arc::clone(&released),
    });
    let before = rss_kb();
    let start = Instant::now();
    let threads: Vec<T> = (0..THREADS).map(|i| spawn(i, &g)).collect();
    for _ in 0..THREADS {
        rx.recv().expect("every thread reports in");
    }
    let elapsed = start.elapsed();
    let grown = rss_kb().saturating_sub(before);
    drop(hold);
    threads.into_iter().for_each(join);
    (elapsed, grown)
}

fn rtvm_sample(mitigated: bool) -> (Duration, u64) {
    let mut opts = vec!["-Xms8m", "-Xmx8m", "-Xss2m", "-XX:ParallelGCThreads=1"];
    if !mitigated {
        opts.extend([
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:+DisableTHPStackMitigation",
        ]);
    }
    let vm = Vm::create(InitArgs::new(opts)).expect("create VM");
    let r = measure(
        |i, g| vm.spawn(&format!("T{i}"), g.parked_body()).expect("spawn"),
        |t| t.join().unwrap(),
    );
    vm.shutdown().unwrap();
    r
}

fn std_sample() -> (Duration, u64) {
    measure(
        |_, g| {
            std::thread::Builder::new()
                .stack_size(STACK)
                .spawn(g.parked_body())
                .expect("spawn")
        },
        |t| t.join().unwrap(),
    )
}

/// The OS layer alone: map + spawn, with or without MADV_NOHUGEPAGE and the separate signal
/// stack (guard placed early in all), to isolate what each costs per thread.
fn os_sample(no_huge: bool, alt_stack: bool) -> (Duration, u64) {
    measure(
        |i, g| {
            let spec = StackSpec {
                size: STACK + 4096,
                zones: rtvm_os_linux::GuardZones::hotspot_default(),
                alt_stack_size: if alt_stack {
                    recommended_alt_stack_size()
                } else {
                    0
                },
                no_huge_pages: no_huge,
                guard_early: true,
                name: format!("T{i}"),
            };
            let b = g.parked_body();
            rtvm_os_linux::thread::spawn(
                StackMapping::map(&spec).unwrap(),
                Box::new(move |_: &mut rtvm_os_linux::thread::ThreadContext| {
                    b();
                    None
                }),
                None::<rtvm_os_linux::thread::ExitHook>,
            )
            .unwrap()
        },
        |t| t.join(),
    )
}

const JAVA_SOURCE: &str = r#"
import java.nio.file.*;
import java.util.concurrent.*;
public class ThreadStart {
    static long rssKb() throws Exception {
        for (String l : Files.readAllLines(Paths.get("/proc/self/status")))
            if (l.startsWith("VmRSS:")) return Long.parseLong(l.replaceAll("[^0-9]", ""));
        return -1;
    }
    public static void main(String[] a) throws Exception {
        int n = Integer.parseInt(a[0]);
        for (int round = 0; round < Integer.parseInt(a[1]); round++) {
            CountDownLatch started = new CountDownLatch(n), stop = new CountDownLatch(1);
            Thread[] t = new Thread[n];
            long rss0 = rssKb();
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                t[i] = new Thread(() -> { started.countDown(); try { stop.await(); } catch (InterruptedException e) {} });
                t[i].start();
            }
            started.await();
            long ns = System.nanoTime() - t0;
            long rss1 = rssKb();
            stop.countDown();
            for (Thread x : t) x.join();
            System.out.println("sample " + ns + " " + (rss1 - rss0));
        }
    }
}
"#;

/// Compiles and runs the Java program; returns its samples, or why there are none.
fn java_samples(rounds: usize) -> Result<Vec<(Duration, u64)>, String> {
    let dir = std::env::temp_dir().join(format!("rtvm-thread-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("ThreadStart.java"), JAVA_SOURCE).map_err(|e| e.to_string())?;
    let javac = Command::new("javac")
        .arg("ThreadStart.java")
        .current_dir(&dir)
        .status()
        .map_err(|e| format!("javac: {e}"))?;
    if !javac.success() {
        return Err("javac failed".into());
    }
    let out = Command::new("java")
        .args([
            "-Xss2m",
            "-Xms64m",
            "-Xmx64m",
            "-XX:+UseSerialGC",
            "-cp",
            ".",
            "ThreadStart",
            &THREADS.to_string(),
            &(rounds + 1).to_string(),
        ])
        .current_dir(&dir)
        .output()
        .map_err(|e| format!("java: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    let samples: Vec<(Duration, u64)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("sample ")?.split_whitespace();
            Some((
                Duration::from_nanos(f.next()?.parse().ok()?),
                f.next()?.parse::<i64>().ok()?.max(0) as u64,
            ))
        })
        .skip(1) // the first round warms up the JIT
        .collect();
    if samples.is_empty() {
        return Err(format!(
            "no samples from java: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(samples)
}

fn main() {
    if rtvm_testkit::bench::listing() {
        return;
    }
    let rounds = rtvm_testkit::bench::arg("--rounds").unwrap_or(7usize);
    let pages = rtvm_os_linux::PageInfo::detect();
    println!(
        "thread bench: {THREADS} threads × 2 MiB stacks, {rounds} rounds interleaved, THP mode {}",
        pages.thp.mode
    );
    let variants: [(&str, Sampler); 6] = [
        (
            "rtvm, mitigation on (guard + MADV_NOHUGEPAGE before start)",
            || rtvm_sample(true),
        ),
        (
            "rtvm, mitigation off (-XX:+DisableTHPStackMitigation)",
            || rtvm_sample(false),
        ),
        ("std::thread, stack_size(2 MiB)", std_sample),
        (
            "os layer: map + spawn, guard early, MADV_NOHUGEPAGE, signal stack",
            || os_sample(true, true),
        ),
        (
            "os layer: map + spawn, guard early, no advice, signal stack",
            || os_sample(false, true),
        ),
        (
            "os layer: map + spawn, guard early, no advice, no signal stack (the old layout's cost)",
            || os_sample(false, false),
        ),
    ];
    let mut samples: BTreeMap<usize, Vec<(Duration, u64)>> = BTreeMap::new();
    for round in 0..rounds + 1 {
        for k in 0..variants.len() {
            let i = (k + round) % variants.len();
            let s = (variants[i].1)();
            if round > 0 {
                samples.entry(i).or_default().push(s);
            }
        }
    }
    let java = java_samples(rounds);
    println!();
    println!("| variant | start 1000 threads (median) | threads/s | RSS per thread |");
    println!("| --- | ---: | ---: | ---: |");
    let mut rate = BTreeMap::new();
    for (i, (name, _)) in variants.iter().enumerate() {
        let s = &samples[&i];
        let t = median(s.iter().map(|x| x.0).collect());
        let r = median(s.iter().map(|x| x.1).collect());
        let per_s = THREADS as f64 / t.as_secs_f64();
        rate.insert(i, per_s);
        println!(
            "| {name} | {:.1} ms | {:.0} | {:.1} KiB |",
            t.as_secs_f64() * 1e3,
            per_s,
            r as f64 / THREADS as f64
        );
    }
    match &java {
        Ok(s) => {
            let t = median(s.iter().map(|x| x.0).collect());
            let r = median(s.iter().map(|x| x.1).collect());
            println!(
                "| java -Xss2m, 1000 platform threads (OpenJDK) | {:.1} ms | {:.0} | {:.1} KiB |",
                t.as_secs_f64() * 1e3,
                THREADS as f64 / t.as_secs_f64(),
                r as f64 / THREADS as f64
            );
        }
        Err(e) => println!("java: no reference run ({e})"),
    }
    println!();
    println!(
        "mitigation cost: start rate with it on is {:.3}× the rate with it off (target: ≥ 0.90)",
        rate[&0] / rate[&1]
    );
    println!(
        "rtvm with mitigation vs std::thread: {:.3}×",
        rate[&0] / rate[&2]
    );
    println!(
        "MADV_NOHUGEPAGE per thread: {:.2} µs (os layer, with vs without the advice)",
        (1.0 / rate[&3] - 1.0 / rate[&4]) * 1e6
    );
    println!(
        "the separate signal stack per thread: {:.2} µs (os layer, with vs without)",
        (1.0 / rate[&4] - 1.0 / rate[&5]) * 1e6
    );
    println!(
        "mitigation + separate signal stack together: start rate {:.3}× the layout without both (os layer; target: ≥ 0.90)",
        rate[&3] / rate[&5]
    );
}
