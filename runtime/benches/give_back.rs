//! Giving memory back, and thread churn.
//!
//! `cargo bench -p rtvm --bench give_back [-- --rounds N] [--threads N]`
//!
//! * Churn: a sample starts and joins `--threads` (20,000) threads one after another, each
//!   running an empty body, with 1 MiB stacks: rtvm with its stack cache (the default
//!   `ThreadStackCacheSize`), `pthread_create` + `pthread_join` (glibc's stack cache), the
//!   same through `std::thread`, rtvm with `-XX:ThreadStackCacheSize=0`, and the OS layer
//!   alone on one recycled stack (rtvm's floor: its stack layout, signal stack and thread
//!   name without the VM's registry). Variants are interleaved in a rotating order, one
//!   warm-up round first; medians.
//! * Giving back, interleaved in each round: the C allocator's peak (16 VM threads malloc 32
//!   MiB each in 16 KiB blocks, touch them and free 15 of 16; then `Vm::trim_native_heap`)
//!   against java 17 running the same scenario with `-XX:TrimNativeHeapInterval=1000` (its
//!   `Periodic Trim (1)` line gives what it returned and how long it took); a heap shrink from
//!   512 MiB (pretouched) to 64 MiB; 1,000 threads (2 MiB stacks) that each recursed 1 MiB and
//!   then trim their own stacks. RSS is `/proc/self/status` VmRSS around the operation; the
//!   memory given back was touched just before (warm).
//!
//! `-- --variant N` runs churn variant N (0-4, in the order above) once and nothing else,
//! for `perf record` or `strace -c`.

use std::hint::black_box;
use std::process::Command;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use rtvm::{InitArgs, Vm};
use rtvm_os_linux::procfs::read_status;
use rtvm_testkit::bench::{arg, have_java, listing, median};
use rtvm_testkit::java::TRIM_DEMO;
use rtvm_testkit::stack::use_stack;

const MB: usize = 1 << 20;

fn rss() -> u64 {
    read_status().unwrap().vm_rss_kb * 1024
}

fn vm(options: &[&str]) -> Vm {
    Vm::create(InitArgs::new(options.iter().copied())).expect("create the VM")
}

// ---- churn ----

fn churn_rtvm(n: usize, cache: bool) -> Duration {
    let mut options = vec!["-Xmx16m", "-Xss1m", "-XX:ParallelGCThreads=1"];
    if !cache {
        options.push("-XX:ThreadStackCacheSize=0");
    }
    let vm = vm(&options);
    let start = Instant::now();
    for _ in 0..n {
        vm.spawn("Churn", || {})
            .expect("spawn")
            .join()
            .expect("join");
    }
    let took = start.elapsed();
    vm.shutdown().expect("shutdown");
    took
}

extern "C" fn empty(_: *mut libc::c_void) -> *mut libc::c_void {
    std::ptr::null_mut()
}

fn churn_pthread(n: usize) -> Duration {
    let start = Instant::now();
    // SAFETY: a plain pthread attribute set up, used and destroyed here; each thread runs
    // `empty`, which touches nothing, and is joined before the next starts.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_attr_init(&mut attr), 0);
        assert_eq!(libc::pthread_attr_setstacksize(&mut attr, MB), 0);
        for _ in 0..n {
            let mut t: libc::pthread_t = 0;
            assert_eq!(
                libc::pthread_create(&mut t, &attr, empty, std::ptr::null_mut()),
                0
            );
            assert_eq!(libc::pthread_join(t, std::ptr::null_mut()), 0);
        }
        libc::pthread_attr_destroy(&mut attr);
    }
    start.elapsed()
}

fn churn_std(n: usize) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        std::thread::Builder::new()
            .stack_size(MB)
            .spawn(|| {})
            .expect("spawn")
            .join()
            .expect("join");
    }
    start.elapsed()
}

fn churn_os(n: usize) -> Duration {
    use rtvm_os_linux::stack::{recommended_alt_stack_size, StackMapping, StackSpec};
    let spec = StackSpec {
        size: MB,
        zones: rtvm_os_linux::GuardZones::hotspot_default(),
        alt_stack_size: recommended_alt_stack_size(),
        no_huge_pages: true,
        guard_early: true,
        name: "Churn".into(),
    };
    let mut stack = Some(StackMapping::map(&spec).unwrap());
    let start = Instant::now();
    for _ in 0..n {
        let t = rtvm_os_linux::thread::spawn(stack.take().unwrap(), |_: &mut _| None, None::<fn()>)
            .unwrap();
        let mut s = t.join_keeping_stack().unwrap();
        s.recycle(s.layout().usable.end - 16384).unwrap();
        stack = Some(s);
    }
    start.elapsed()
}

// ---- giving back ----

/// One sample's figures: bytes given back and how long it took.
#[derive(Clone, Copy)]
struct Returned {
    bytes: u64,
    took: Duration,
}

fn malloc_scenario(vm: &Vm) {
    let threads: Vec<_> = (0..16)
        .map(|t| {
            vm.spawn(&format!("Malloc#{t}"), || {
                let blocks: Vec<Vec<u8>> = (0..2048).map(|_| vec![1u8; 16 << 10]).collect();
                let kept: Vec<Vec<u8>> = blocks.into_iter().step_by(16).collect();
                // Kept until the trim is over: the live sixteenth pins the arenas' tops.
                std::mem::forget(black_box(kept));
            })
            .expect("spawn")
        })
        .collect();
    for t in threads {
        t.join().expect("join");
    }
}

fn trim_rtvm() -> Returned {
    let vm = vm(&["-Xmx16m"]);
    malloc_scenario(&vm);
    let r = vm.trim_native_heap().expect("glibc's malloc");
    vm.shutdown().expect("shutdown");
    Returned {
        bytes: r.rss_before.saturating_sub(r.rss_after),
        took: r.took,
    }
}

/// `554M`, `83716K`, `12B` as HotSpot prints them (its "proper unit").
fn hotspot_size(s: &str) -> Option<u64> {
    let (digits, unit) = s.split_at(s.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "B" => n,
        "K" => n << 10,
        "M" => n << 20,
        "G" => n << 30,
        _ => return None,
    })
}

/// java's `Periodic Trim (1): A->B (±C) T ms` line, as what it returned and took.
fn parse_periodic_trim(text: &str) -> Option<Returned> {
    let line = text.lines().find(|l| l.contains("Periodic Trim (1): "))?;
    let rest = line.split("Periodic Trim (1): ").nth(1)?;
    let (change, time) = rest.split_once(' ')?;
    let (a, b) = change.split_once("->")?;
    let ms: f64 = time
        .split_whitespace()
        .find_map(|w| w.strip_suffix("ms"))?
        .parse()
        .ok()?;
    Some(Returned {
        bytes: hotspot_size(a)?.saturating_sub(hotspot_size(b)?),
        took: Duration::from_secs_f64(ms / 1e3),
    })
}

struct Java {
    dir: std::path::PathBuf,
}

impl Java {
    fn compile() -> Result<Java, String> {
        if !have_java() {
            return Err("java is not installed".into());
        }
        let dir = std::env::temp_dir().join(format!("rtvm-give-back-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("TrimDemo.java"), TRIM_DEMO).map_err(|e| e.to_string())?;
        // javac warns about sun.misc.Unsafe, which the scenario needs for malloc and free.
        let ok = Command::new("javac")
            .arg("TrimDemo.java")
            .current_dir(&dir)
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("javac: {e}"))?
            .success();
        if ok {
            Ok(Java { dir })
        } else {
            Err("javac failed".into())
        }
    }

    fn trim(&self) -> Result<Returned, String> {
        let out = Command::new("java")
            .args([
                "-Xmx64m",
                "-XX:+UseSerialGC",
                "-XX:TrimNativeHeapInterval=1000",
                "-Xlog:trimnative",
                "-cp",
                ".",
                "TrimDemo",
                "1600",
            ])
            .env_remove("JAVA_TOOL_OPTIONS")
            .current_dir(&self.dir)
            .output()
            .map_err(|e| format!("java: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        parse_periodic_trim(&text).ok_or_else(|| format!("no Periodic Trim line in: {text}"))
    }
}

impl Drop for Java {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn heap_shrink() -> Returned {
    let vm = vm(&["-Xms8m", "-Xmx512m", "-XX:+AlwaysPreTouch"]);
    vm.expand_heap(504 * MB).expect("expand to 512 MiB");
    let before = rss();
    let start = Instant::now();
    let committed = vm.shrink_heap(64 * MB).expect("shrink");
    let took = start.elapsed();
    let after = rss();
    assert_eq!(committed, 64 * MB);
    vm.shutdown().expect("shutdown");
    Returned {
        bytes: before.saturating_sub(after),
        took,
    }
}

/// 1,000 threads each recurse 1 MiB and wait; the RSS is read; each trims its stack (the
/// per-call time is the median of the 1,000 calls) and waits; the RSS is read again.
fn stack_trim() -> Returned {
    let n = 1000;
    let vm = vm(&["-Xmx16m", "-Xss2m", "-XX:ThreadStackCacheSize=0"]);
    let deep = Arc::new(Barrier::new(n + 1));
    let go = Arc::new(Barrier::new(n + 1));
    let trimmed = Arc::new(Barrier::new(n + 1));
    let times = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let (deep, go, trimmed, times) = (
                Arc::clone(&deep),
                Arc::clone(&go),
                Arc::clone(&trimmed),
                Arc::clone(&times),
            );
            let h = vm.handle();
            vm.spawn(&format!("Deep#{i}"), move || {
                black_box(use_stack(MB));
                deep.wait();
                go.wait();
                let start = Instant::now();
                h.trim_current_stack().expect("trim");
                times.lock().unwrap().push(start.elapsed());
                trimmed.wait();
            })
            .expect("spawn")
        })
        .collect();
    deep.wait();
    let before = rss();
    go.wait();
    trimmed.wait();
    let after = rss();
    for t in threads {
        t.join().expect("join");
    }
    vm.shutdown().expect("shutdown");
    let took = median(std::mem::take(&mut *times.lock().unwrap()));
    Returned {
        bytes: before.saturating_sub(after),
        took,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    if listing() {
        return;
    }
    let rounds = arg("--rounds").unwrap_or(5usize);
    let n = arg("--threads").unwrap_or(20_000usize);
    println!("churn: {n} threads started and joined one after another, 1 MiB stacks, {rounds} rounds interleaved (one warm-up round first)");
    type Churn = Box<dyn Fn() -> Duration>;
    let variants: Vec<(&str, Churn)> = vec![
        (
            "rtvm, stack cache on (ThreadStackCacheSize=40M)",
            Box::new(move || churn_rtvm(n, true)),
        ),
        (
            "pthread_create + pthread_join (glibc's stack cache)",
            Box::new(move || churn_pthread(n)),
        ),
        (
            "std::thread (glibc's stack cache)",
            Box::new(move || churn_std(n)),
        ),
        (
            "rtvm, -XX:ThreadStackCacheSize=0",
            Box::new(move || churn_rtvm(n, false)),
        ),
        (
            "os layer: one recycled StackMapping, spawn + join",
            Box::new(move || churn_os(n)),
        ),
    ];
    if let Some(i) = arg::<usize>("--variant") {
        // One variant once, nothing else: for `perf record` or `strace -c`.
        let d = (variants[i].1)();
        println!("{}: {:.1} ms", variants[i].0, d.as_secs_f64() * 1e3);
        return;
    }
    let mut samples = vec![Vec::new(); variants.len()];
    for round in 0..=rounds {
        for k in 0..variants.len() {
            let i = (k + round) % variants.len();
            let d = (variants[i].1)();
            if round > 0 {
                samples[i].push(d);
            }
        }
    }
    let medians: Vec<Duration> = samples.into_iter().map(median).collect();
    println!();
    println!("| variant | {n} start+join (median) | per thread | time / pthread's |");
    println!("| --- | ---: | ---: | ---: |");
    for (i, (name, _)) in variants.iter().enumerate() {
        println!(
            "| {name} | {:.1} ms | {:.2} µs | {:.2} |",
            medians[i].as_secs_f64() * 1e3,
            medians[i].as_secs_f64() * 1e6 / n as f64,
            medians[i].as_secs_f64() / medians[1].as_secs_f64()
        );
    }
    println!();
    println!(
        "rtvm with the cache: {:.2}× pthread's time (target ≤ 1.00), {:.2}× rtvm's without it",
        medians[0].as_secs_f64() / medians[1].as_secs_f64(),
        medians[0].as_secs_f64() / medians[3].as_secs_f64()
    );

    let java = Java::compile();
    let (mut rtvm_trim, mut java_trim, mut shrink, mut stacks) = (vec![], vec![], vec![], vec![]);
    let mut java_error = None;
    for _ in 0..rounds {
        rtvm_trim.push(trim_rtvm());
        match java.as_ref().map_err(Clone::clone).and_then(Java::trim) {
            Ok(r) => java_trim.push(r),
            Err(e) => java_error = Some(e),
        }
        shrink.push(heap_shrink());
        stacks.push(stack_trim());
    }
    println!();
    println!("| giving back ({rounds} rounds interleaved, medians) | RSS returned | time |");
    println!("| --- | ---: | ---: |");
    let row = |name: &str, v: &[Returned]| {
        let bytes = median(v.iter().map(|r| r.bytes).collect());
        let took = median(v.iter().map(|r| r.took).collect());
        println!("| {name} | {} MB | {} |", bytes / 1_000_000, ms(took));
        (bytes, took)
    };
    let r = row(
        "rtvm `Vm::trim_native_heap` (malloc_trim), 16 threads × 32 MiB, 15/16 freed",
        &rtvm_trim,
    );
    let j = if java_trim.is_empty() {
        None
    } else {
        Some(row(
            "java 17 `-XX:TrimNativeHeapInterval=1000`, the same scenario (its Periodic Trim line)",
            &java_trim,
        ))
    };
    row(
        "rtvm `Vm::shrink_heap`, 512 MiB pretouched → 64 MiB",
        &shrink,
    );
    let s = row(
        "rtvm `trim_current_stack`, 1,000 threads × 1 MiB deep (time: per call)",
        &stacks,
    );
    println!();
    match (j, java_error) {
        (Some(j), _) => println!(
            "trim against java: {:.2}× the memory returned in {:.2}× the time",
            r.0 as f64 / j.0 as f64,
            r.1.as_secs_f64() / j.1.as_secs_f64()
        ),
        (None, Some(e)) => println!("java: no reference run ({e})"),
        (None, None) => println!("java: no reference run"),
    }
    println!(
        "stack trim: {:.0} KiB returned per thread",
        s.0 as f64 / 1000.0 / 1024.0
    );
}
