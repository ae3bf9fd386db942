//! Garbage-collected workloads side by side: rtvm + MMTk (plans Immix, StickyImmix,
//! MarkSweep) against `java` 17 (`-XX:+UseSerialGC`, `-XX:+UseParallelGC`, `-XX:+UseG1GC`)
//! and the Boehm collector (`libgc`), on binary-trees (the Benchmarks Game's, depth 21) and
//! GCBench (Ellis, Kovac, Boehm), every variant with the same heap limit, the same number of
//! mutator threads and the same number of GC threads.
//!
//! `cargo bench -p rtvm-launcher --bench gc [-- --rounds N] [--quick] [--depth N]
//! [--heap-binarytrees SIZE] [--heap-gcbench SIZE] [--mutators N] [--gc-threads N]`
//!
//! `--quick` (a smoke run): binary-trees of depth 16 in a 64 MiB heap, 1 round.
//!
//! * The programs: rtvm's built-in mains `BinaryTrees <depth> <mutators>` and
//!   `GCBench <mutators>`; the same programs in Java (`benches/gc/*.java`, compiled here with
//!   `javac` into the target directory) and in C on the Boehm collector (`benches/gc/*.c`,
//!   `GC_MALLOC`, threads registered through `GC_THREADS`' `GC_pthread_create`, compiled here
//!   with `cc ... -lgc -lpthread`). Each splits the iterations of a depth over its mutator
//!   threads. Nothing is installed here: a variant whose tool (`java`/`javac`, `cc` with
//!   Debian's `libgc-dev`, an `rtvm` with the mains) is missing is skipped with the reason.
//! * Defaults for a 2-CPU machine: 2 mutators and 2 GC threads (one each per CPU; more
//!   would only measure the scheduler), a fixed heap (`-Xms` = `-Xmx`) of about 4× the largest
//!   live set java reports after a collection: 768 MiB for binary-trees 21 (its stretch tree
//!   of depth 22 alone is 8 M nodes, ~190 MiB in java), 64 MiB for GCBench (~16 MiB live at
//!   most: the depth-18 stretch tree).
//!   rtvm: `-Xmx -Xms -XX:ParallelGCThreads -XX:MMTkPlan`; java: `-Xmx -Xms
//!   -XX:ParallelGCThreads` (G1's concurrent marking keeps its default `ConcGCThreads`, 1);
//!   Boehm: `GC_MAXIMUM_HEAP_SIZE`, `GC_INITIAL_HEAP_SIZE`, `GC_MARKERS`.
//! * A warm-up run of every variant first, then `--rounds` rounds (default 3), each running
//!   every variant once in the same order (A B C ..., A B C ...). Every run's output is
//!   checked against the answer computed here (binary-trees' check lines; GCBench's lines
//!   with its timings masked; the programs check their long-lived data themselves): a wrong
//!   answer panics. A run that fails (non-zero exit) is reported and its variant dropped;
//!   the bench then exits with status 1.
//! * Measured per run: wall time (spawn to `wait4`), peak RSS (`wait4`'s `ru_maxrss` of the
//!   child), and from the collector's own reports: java and rtvm log `-Xlog:gc,safepoint` to
//!   a file, parsed by one parser. A pause is a `GC(n) Pause ... <t>ms` line (G1's `Pause
//!   Remark` and `Pause Cleanup` included; G1's `Concurrent ...` lines are not pauses); a
//!   collection is a distinct `GC(n)` id (so G1's concurrent cycle, whose Remark and
//!   Cleanup pauses carry its id, is one collection, and ParallelGC's young collection that
//!   turns into a full one is two). The time to reach the stop is the `Reaching safepoint`
//!   of the safepoints of GC operations: those whose name contains `GC` or `Collect` or starts
//!   with `G1` (`ParallelGCFailedAllocation`, `GenCollectForAllocation`,
//!   `G1CollectForAllocation`, `G1PauseRemark`, `G1PauseCleanup`, `MMTkCollectForAllocation`,
//!   ...). Boehm: the C programs time the world's stops from the collector's events (see
//!   `gc/boehm_events.h`) and print them.
//! * Reported per variant: medians over the rounds with the spread (min–max), wall time less
//!   the pauses among them (the mutators' time with start-up, exit and any concurrent GC
//!   work); the time to reach the stop as p50/p99/max (nearest rank) over every GC stop of
//!   every measured run, with their number; ratios to `java -XX:+UseParallelGC`.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rtvm_testkit::bench::{arg, have_java, listing};

const JAVA_SOURCES: [&str; 2] = ["BinaryTrees.java", "GCBench.java"];
const C_PROGRAMS: [(&str, &str); 2] = [("binarytrees", "binarytrees.c"), ("gcbench", "gcbench.c")];

/// GCBench's shape (fixed by the program).
const STRETCH_TREE_DEPTH: u32 = 18;
const LONG_LIVED_TREE_DEPTH: u32 = 16;
const ARRAY_SIZE: u32 = 500_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Workload {
    BinaryTrees,
    GcBench,
}

impl Workload {
    fn title(self, o: &Options) -> String {
        match self {
            Workload::BinaryTrees => format!("binary-trees, depth {}", o.depth),
            Workload::GcBench => "GCBench".to_owned(),
        }
    }

    fn heap(self, o: &Options) -> &str {
        match self {
            Workload::BinaryTrees => &o.heap_binarytrees,
            Workload::GcBench => &o.heap_gcbench,
        }
    }

    /// The main's name (rtvm's built-in main and the Java class).
    fn main_name(self) -> &'static str {
        match self {
            Workload::BinaryTrees => "BinaryTrees",
            Workload::GcBench => "GCBench",
        }
    }

    fn args(self, o: &Options) -> Vec<String> {
        match self {
            Workload::BinaryTrees => vec![o.depth.to_string(), o.mutators.to_string()],
            Workload::GcBench => vec![o.mutators.to_string()],
        }
    }

    /// What a correct run prints (GCBench's timings as `<ms>`).
    fn expected(self, o: &Options) -> Vec<String> {
        match self {
            Workload::BinaryTrees => {
                let (min, max) = (4u32, o.depth.max(6));
                let nodes = |d: u32| (1u64 << (d + 1)) - 1;
                let mut v = vec![format!(
                    "stretch tree of depth {}\t check: {}",
                    max + 1,
                    nodes(max + 1)
                )];
                for d in (min..=max).step_by(2) {
                    let iterations = 1u64 << (max - d + min);
                    v.push(format!(
                        "{iterations}\t trees of depth {d}\t check: {}",
                        iterations * nodes(d)
                    ));
                }
                v.push(format!(
                    "long lived tree of depth {max}\t check: {}",
                    nodes(max)
                ));
                v
            }
            Workload::GcBench => {
                let size = |d: u32| (1u32 << (d + 1)) - 1;
                let mut v = vec![
                    "Garbage Collector Test".to_owned(),
                    format!(" Stretching memory with a binary tree of depth {STRETCH_TREE_DEPTH}"),
                    format!(" Creating a long-lived binary tree of depth {LONG_LIVED_TREE_DEPTH}"),
                    format!(" Creating a long-lived array of {ARRAY_SIZE} doubles"),
                ];
                for d in (4..=16).step_by(2) {
                    v.push(format!(
                        "Creating {} trees of depth {d}",
                        2 * size(STRETCH_TREE_DEPTH) / size(d)
                    ));
                    v.push("\tTop down construction took <ms> msec".to_owned());
                    v.push("\tBottom up construction took <ms> msec".to_owned());
                }
                v.push("Completed in <ms> ms.".to_owned());
                v
            }
        }
    }
}

/// GCBench's timing lines with the number replaced by `<ms>` (other lines as they are); a
/// timing that is not a number stays as printed, so the comparison fails.
fn mask_timing(line: &str) -> String {
    for (head, tail) in [
        ("\tTop down construction took ", " msec"),
        ("\tBottom up construction took ", " msec"),
        ("Completed in ", " ms."),
    ] {
        if let Some(n) = line.strip_prefix(head).and_then(|r| r.strip_suffix(tail)) {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                return format!("{head}<ms>{tail}");
            }
        }
    }
    line.to_owned()
}

#[derive(Clone, Debug)]
enum Kind {
    Rtvm(&'static str),
    Java(&'static str),
    Boehm,
}

#[derive(Clone, Debug)]
struct Variant {
    name: String,
    kind: Kind,
}

struct Options {
    rounds: usize,
    depth: u32,
    heap_binarytrees: String,
    heap_gcbench: String,
    mutators: usize,
    gc_threads: usize,
}

/// `768m`, `1g`, `65536k`, `1048576`: bytes.
fn size_bytes(s: &str) -> u64 {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: u64 = digits
        .parse()
        .unwrap_or_else(|_| panic!("bad size {s:?} (e.g. 768m)"));
    n * match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => panic!("bad size {s:?} (e.g. 768m)"),
    }
}

/// Where programs are built and runs write their output.
fn work_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gc-bench");
    std::fs::create_dir_all(&d).expect("create the bench's directory");
    d
}

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/gc")
}

/// Compiles the Java programs; the classes' directory or why not.
fn build_java(dir: &Path) -> Result<PathBuf, String> {
    if !have_java() {
        return Err("`java` does not run here".into());
    }
    let classes = dir.join("classes");
    let src = sources();
    let out = Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .args(JAVA_SOURCES.iter().map(|f| src.join(f)))
        .output()
        .map_err(|e| format!("`javac` does not run here: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "javac failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(classes)
}

/// Compiles the C programs against the Boehm collector; their directory or why not.
fn build_boehm(dir: &Path) -> Result<PathBuf, String> {
    let src = sources();
    for (exe, file) in C_PROGRAMS {
        let out = Command::new("cc")
            .args(["-O2", "-Wall", "-Werror", "-o"])
            .arg(dir.join(exe))
            .arg(src.join(file))
            .args(["-lgc", "-lpthread"])
            .output()
            .map_err(|e| format!("`cc` does not run here: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "cc {file} -lgc failed (the Boehm collector is Debian's libgc-dev: \
                 apt-get install libgc-dev): {}",
                err.lines().take(3).collect::<Vec<_>>().join(" / ")
            ));
        }
    }
    Ok(dir.to_owned())
}

/// `/proc/loadavg`'s three averages: the machine's state around the measurements.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|e| format!("? ({e})"))
}

/// The first line a tool prints about its version, or why none.
fn version(program: &str, arg: &str) -> String {
    match Command::new(program).arg(arg).output() {
        Ok(o) => String::from_utf8_lossy(if o.stdout.is_empty() {
            &o.stderr
        } else {
            &o.stdout
        })
        .lines()
        .next()
        .unwrap_or("")
        .to_owned(),
        Err(e) => format!("not available ({e})"),
    }
}

/// The mains this rtvm has, from `rtvm --help`.
fn rtvm_mains(rtvm: &str) -> String {
    Command::new(rtvm)
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// What one run measured.
#[derive(Clone, Debug, Default)]
struct Run {
    wall: Duration,
    rss_kib: u64,
    collections: usize,
    /// Pause times, ms.
    pauses: Vec<f64>,
    /// Times to reach the GC stops, ns.
    reaching: Vec<u64>,
}

/// One `-Xlog:gc,safepoint` file: (distinct GC ids, pauses in ms, GC stops' times to reach
/// the safepoint in ns).
fn parse_xlog(text: &str) -> (usize, Vec<f64>, Vec<u64>) {
    let mut ids = BTreeSet::new();
    let mut pauses = Vec::new();
    let mut reaching = Vec::new();
    for line in text.lines() {
        // The decorations: `[1.234s][info][gc       ] `.
        let mut msg = line;
        while let Some(rest) = msg.strip_prefix('[') {
            match rest.find(']') {
                Some(i) => msg = rest[i + 1..].trim_start(),
                None => break,
            }
        }
        if let Some(rest) = msg.strip_prefix("GC(") {
            let Some((id, what)) = rest.split_once(") ") else {
                continue;
            };
            let Ok(id) = id.parse::<u64>() else { continue };
            ids.insert(id);
            if what.starts_with("Pause ") {
                let t = what
                    .rsplit(' ')
                    .next()
                    .and_then(|t| t.strip_suffix("ms"))
                    .and_then(|t| t.parse::<f64>().ok());
                match t {
                    Some(t) => pauses.push(t),
                    // A pause's start line (`-Xlog:gc*` levels print one): not a pause.
                    None => continue,
                }
            }
        } else if let Some(rest) = msg.strip_prefix("Safepoint \"") {
            let Some((op, fields)) = rest.split_once('"') else {
                continue;
            };
            if !(op.contains("GC") || op.contains("Collect") || op.starts_with("G1")) {
                continue;
            }
            let ns = fields
                .split(", ")
                .find_map(|f| f.trim().strip_prefix("Reaching safepoint: "))
                .and_then(|f| f.strip_suffix(" ns"))
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("a safepoint line without its reaching time: {line}"));
            reaching.push(ns);
        }
    }
    (ids.len(), pauses, reaching)
}

/// The C programs' report on stderr (see `gc/boehm_events.h`).
fn parse_boehm(text: &str) -> (usize, Vec<f64>, Vec<u64>) {
    let mut collections = None;
    let mut pauses = Vec::new();
    let mut reaching = Vec::new();
    let field = |line: &str, name: &str| -> u64 {
        line.split(' ')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
    };
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("boehm-gc: ") else {
            continue;
        };
        if rest.starts_with("collections=") {
            let (n, gc_no) = (field(rest, "collections"), field(rest, "gc_no_since_init"));
            assert_eq!(
                n, gc_no,
                "Boehm: GC_EVENT_START counted {n} collections, GC_get_gc_no() {gc_no}"
            );
            collections = Some(n as usize);
        } else if rest.starts_with("stop ") {
            reaching.push(field(rest, "reaching_ns"));
            pauses.push(field(rest, "pause_ns") as f64 / 1e6);
        }
    }
    let collections = collections.expect("the Boehm program printed no boehm-gc: report");
    (collections, pauses, reaching)
}

/// Runs `cmd` with its output in files, to its end; wall time, `ru_maxrss` (KiB) and its exit
/// status.
fn run_measured(mut cmd: Command, out: &Path, err: &Path) -> (Duration, u64, i32) {
    cmd.stdin(Stdio::null())
        .stdout(File::create(out).expect("create the stdout file"))
        .stderr(File::create(err).expect("create the stderr file"))
        .env_remove("RTVM_OPTIONS")
        .env_remove("JAVA_TOOL_OPTIONS")
        .env_remove("_JAVA_OPTIONS");
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: all-zero is a valid `rusage` (integers and timevals).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are live, writable and of the types wait4 fills; `pid`
        // is our child, not yet reaped (the `Child` is never waited for).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.raw_os_error(), Some(libc::EINTR), "wait4({pid}): {e}");
    }
    let wall = start.elapsed();
    drop(child);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    (wall, usage.ru_maxrss as u64, code)
}

struct Bench {
    o: Options,
    dir: PathBuf,
    rtvm: &'static str,
    classes: Option<PathBuf>,
    boehm: Option<PathBuf>,
}

impl Bench {
    fn command(&self, v: &Variant, w: Workload, log: &Path) -> Command {
        let heap = w.heap(&self.o);
        // The default decorations; no rotation (a long run's log must stay whole).
        let xlog = format!(
            "-Xlog:gc,safepoint:file={}:uptime,level,tags:filecount=0",
            log.display()
        );
        let common = [
            format!("-Xmx{heap}"),
            format!("-Xms{heap}"),
            format!("-XX:ParallelGCThreads={}", self.o.gc_threads),
            xlog,
        ];
        match &v.kind {
            Kind::Rtvm(plan) => {
                let mut c = Command::new(self.rtvm);
                c.args(&common)
                    .arg(format!("-XX:MMTkPlan={plan}"))
                    .arg(w.main_name())
                    .args(w.args(&self.o));
                c
            }
            Kind::Java(gc) => {
                let mut c = Command::new("java");
                c.arg(format!("-XX:+{gc}"))
                    .args(&common)
                    .arg("-cp")
                    .arg(
                        self.classes
                            .as_ref()
                            .expect("java variants only when built"),
                    )
                    .arg(w.main_name())
                    .args(w.args(&self.o));
                c
            }
            Kind::Boehm => {
                let exe = match w {
                    Workload::BinaryTrees => "binarytrees",
                    Workload::GcBench => "gcbench",
                };
                let bytes = size_bytes(heap).to_string();
                let mut c = Command::new(self.boehm.as_ref().expect("built").join(exe));
                c.env("GC_MAXIMUM_HEAP_SIZE", &bytes)
                    .env("GC_INITIAL_HEAP_SIZE", &bytes)
                    .env("GC_MARKERS", self.o.gc_threads.to_string())
                    .args(w.args(&self.o));
                c
            }
        }
    }

    /// One run, its output checked; `Err` with the failure's report if it failed.
    fn run(&self, v: &Variant, w: Workload) -> Result<Run, String> {
        let (out, err, log) = (
            self.dir.join("run.out"),
            self.dir.join("run.err"),
            self.dir.join("run.log"),
        );
        let _ = std::fs::remove_file(&log);
        let cmd = self.command(v, w, &log);
        let shown = format!("{cmd:?}");
        let (wall, rss_kib, code) = run_measured(cmd, &out, &err);
        let stdout = std::fs::read_to_string(&out).unwrap_or_default();
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        if code != 0 {
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
            return Err(format!(
                "{}: exit status {code}: {shown}\n  stderr (last lines): {}",
                v.name,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
            ));
        }
        let got: Vec<String> = stdout.lines().map(mask_timing).collect();
        let want = w.expected(&self.o);
        assert!(
            got == want,
            "WRONG ANSWER from {} on {}: {shown}\nexpected:\n{}\ngot:\n{}",
            v.name,
            w.title(&self.o),
            want.join("\n"),
            got.join("\n")
        );
        let (collections, pauses, reaching) = match v.kind {
            Kind::Boehm => parse_boehm(&stderr),
            _ => parse_xlog(
                &std::fs::read_to_string(&log)
                    .unwrap_or_else(|e| panic!("{}: no -Xlog file {}: {e}", v.name, log.display())),
            ),
        };
        Ok(Run {
            wall,
            rss_kib,
            collections,
            pauses,
            reaching,
        })
    }
}

/// Median, min and max.
fn spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// One variant's figures over its measured runs.
struct Summary {
    name: String,
    wall: (f64, f64, f64),
    collections: (f64, f64, f64),
    pauses: (f64, f64, f64),
    total_pause: (f64, f64, f64),
    /// Wall time less the pauses (s): the mutators, start-up and exit, concurrent GC work.
    between: (f64, f64, f64),
    max_pause: (f64, f64, f64),
    /// p50, p99, max (µs) and the number of stops.
    reaching: Option<(f64, f64, f64, usize)>,
    rss: (f64, f64, f64),
}

fn summarize(name: &str, runs: &[Run]) -> Summary {
    let of = |f: &dyn Fn(&Run) -> f64| spread(runs.iter().map(f).collect());
    let mut all: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.reaching.iter().copied())
        .collect();
    all.sort_unstable();
    Summary {
        name: name.to_owned(),
        wall: of(&|r| r.wall.as_secs_f64()),
        collections: of(&|r| r.collections as f64),
        pauses: of(&|r| r.pauses.len() as f64),
        total_pause: of(&|r| r.pauses.iter().fold(0.0, |a, b| a + b)),
        between: of(&|r| r.wall.as_secs_f64() - r.pauses.iter().fold(0.0, |a, b| a + b) / 1e3),
        max_pause: of(&|r| r.pauses.iter().copied().fold(0.0, f64::max)),
        reaching: (!all.is_empty()).then(|| {
            (
                percentile(&all, 0.50) as f64 / 1e3,
                percentile(&all, 0.99) as f64 / 1e3,
                all[all.len() - 1] as f64 / 1e3,
                all.len(),
            )
        }),
        rss: of(&|r| r.rss_kib as f64 / 1024.0),
    }
}

/// `median (min–max)` with `digits` decimals.
fn fmt3((m, lo, hi): (f64, f64, f64), digits: usize) -> String {
    format!("{m:.digits$} ({lo:.digits$}–{hi:.digits$})")
}

fn print_tables(title: &str, header: &str, rows: &[Summary]) {
    println!();
    println!("{title}");
    println!("{header}");
    println!(
        "{:<22} {:>24} {:>24} {:>16} {:>14} {:>26} {:>26} {:>26} {:>22}",
        "variant",
        "wall s",
        "wall - pauses s",
        "collections",
        "pauses",
        "total pause ms",
        "max pause ms",
        "reach stop µs p50/p99/max",
        "peak RSS MiB"
    );
    for s in rows {
        let reach = s.reaching.map_or("-".to_owned(), |(p50, p99, max, n)| {
            format!("{p50:.1}/{p99:.1}/{max:.1} ({n})")
        });
        println!(
            "{:<22} {:>24} {:>24} {:>16} {:>14} {:>26} {:>26} {:>26} {:>22}",
            s.name,
            fmt3(s.wall, 2),
            fmt3(s.between, 2),
            fmt3(s.collections, 0),
            fmt3(s.pauses, 0),
            fmt3(s.total_pause, 1),
            fmt3(s.max_pause, 1),
            reach,
            fmt3(s.rss, 0)
        );
    }
    let parallel = rows.iter().find(|s| s.name == "java ParallelGC");
    println!();
    println!("markdown:");
    println!();
    println!(
        "| variant | wall s | wall − pauses s | collections | pauses | total pause ms | \
         max pause ms | reach stop µs p50 / p99 / max (stops) | peak RSS MiB | \
         × Parallel: wall / max pause / RSS |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for s in rows {
        let reach = s.reaching.map_or("-".to_owned(), |(p50, p99, max, n)| {
            format!("{p50:.1} / {p99:.1} / {max:.1} ({n})")
        });
        let ratio = parallel.map_or("-".to_owned(), |p| {
            let r = |a: f64, b: f64| {
                if b > 0.0 {
                    format!("{:.2}", a / b)
                } else {
                    "-".to_owned()
                }
            };
            format!(
                "{} / {} / {}",
                r(s.wall.0, p.wall.0),
                r(s.max_pause.0, p.max_pause.0),
                r(s.rss.0, p.rss.0)
            )
        });
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.name,
            fmt3(s.wall, 2),
            fmt3(s.between, 2),
            fmt3(s.collections, 0),
            fmt3(s.pauses, 0),
            fmt3(s.total_pause, 1),
            fmt3(s.max_pause, 1),
            reach,
            fmt3(s.rss, 0),
            ratio
        );
    }
}

fn main() {
    if listing() {
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let o = Options {
        rounds: arg("--rounds").unwrap_or(if quick { 1 } else { 3 }),
        depth: arg("--depth").unwrap_or(if quick { 16 } else { 21 }),
        heap_binarytrees: arg("--heap-binarytrees")
            .unwrap_or_else(|| if quick { "64m" } else { "768m" }.to_owned()),
        heap_gcbench: arg("--heap-gcbench").unwrap_or_else(|| "64m".to_owned()),
        mutators: arg("--mutators").unwrap_or(2),
        gc_threads: arg("--gc-threads").unwrap_or(2),
    };
    assert!(o.rounds >= 1, "--rounds must be at least 1");
    for h in [&o.heap_binarytrees, &o.heap_gcbench] {
        size_bytes(h);
    }
    let dir = work_dir();
    let rtvm = env!("CARGO_BIN_EXE_rtvm");
    let classes = build_java(&dir)
        .inspect_err(|why| println!("java variants skipped: {why}"))
        .ok();
    let boehm = build_boehm(&dir)
        .inspect_err(|why| println!("Boehm variant skipped: {why}"))
        .ok();
    let mains = rtvm_mains(rtvm);
    let bench = Bench {
        o,
        dir,
        rtvm,
        classes,
        boehm,
    };
    let o = &bench.o;

    let mut variants = Vec::new();
    for plan in ["Immix", "StickyImmix", "MarkSweep"] {
        variants.push(Variant {
            name: format!("rtvm+MMTk {plan}"),
            kind: Kind::Rtvm(plan),
        });
    }
    if bench.classes.is_some() {
        for (name, gc) in [
            ("java SerialGC", "UseSerialGC"),
            ("java ParallelGC", "UseParallelGC"),
            ("java G1GC", "UseG1GC"),
        ] {
            variants.push(Variant {
                name: name.to_owned(),
                kind: Kind::Java(gc),
            });
        }
    }
    if bench.boehm.is_some() {
        variants.push(Variant {
            name: "Boehm (libgc)".to_owned(),
            kind: Kind::Boehm,
        });
    }

    println!(
        "GC workloads: {} mutator threads, {} GC threads, fixed heap (-Xms = -Xmx): {} for \
         binary-trees, {} for GCBench; a warm-up run of every variant, then {} rounds \
         (A B C ..., A B C ...); medians (min–max) over the rounds; the time to reach the stop \
         over every GC stop of every measured run",
        o.mutators, o.gc_threads, o.heap_binarytrees, o.heap_gcbench, o.rounds
    );
    println!(
        "{} CPUs; rtvm: {}; java: {}; cc: {}; load average at start: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        version(rtvm, "-version"),
        version("java", "-version"),
        version("cc", "--version"),
        load()
    );
    let mut failed = false;
    for w in [Workload::BinaryTrees, Workload::GcBench] {
        let mut active: Vec<Variant> = variants
            .iter()
            .filter(|v| match v.kind {
                Kind::Rtvm(_) if !mains.contains(w.main_name()) => {
                    println!(
                        "{}: skipped on {}: this rtvm has no {} main (`rtvm --help` lists none)",
                        v.name,
                        w.title(o),
                        w.main_name()
                    );
                    false
                }
                _ => true,
            })
            .cloned()
            .collect();
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); active.len()];
        for round in 0..=o.rounds {
            let mut i = 0;
            while i < active.len() {
                match bench.run(&active[i], w) {
                    Ok(r) => {
                        if round > 0 {
                            runs[i].push(r);
                        }
                        i += 1;
                    }
                    Err(report) => {
                        println!("FAILED: {report}");
                        failed = true;
                        active.remove(i);
                        runs.remove(i);
                    }
                }
            }
            if round > 0 {
                eprintln!("{}: round {round}/{} done", w.title(o), o.rounds);
            }
        }
        let rows: Vec<Summary> = active
            .iter()
            .zip(&runs)
            .map(|(v, r)| summarize(&v.name, r))
            .collect();
        if !rows.is_empty() {
            print_tables(
                &format!(
                    "{} ({} mutators, {} GC threads, heap {})",
                    w.title(o),
                    o.mutators,
                    o.gc_threads,
                    w.heap(o)
                ),
                &format!(
                    "{} runs each after a warm-up; medians (min–max); reach: over all GC stops \
                     (count); load average after: {}",
                    o.rounds,
                    load()
                ),
                &rows,
            );
        }
    }
    if failed {
        println!("some variants FAILED (see above)");
        std::process::exit(1);
    }
}
