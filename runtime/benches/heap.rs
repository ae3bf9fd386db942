//! Heap pretouch benchmarks — the numbers rtvm is judged by.
//!
//! `cargo bench -p rtvm --bench heap [-- --rounds N] [-- --only throughput|java|background|expansion|access|pages] [-- --reserve-huge-pages]`
//!
//! 1. **throughput**: `-XX:+AlwaysPreTouch` of a 4 GiB heap, small pages and THP,
//!    `ParallelGCThreads` 1 and 2, chunk sizes 64K/4M/64M/1G, against the limit: the best raw
//!    primitive measured in the same run (`MADV_POPULATE_WRITE` by the same number of threads,
//!    one call per thread over its share, no chunking). Writes `target/bench/pretouch.csv`
//!    for `tools/plot_pretouch.py`.
//! 2. **java**: the pretouch cost of a whole process that creates a VM with `-Xms4g -Xmx4g
//!    -XX:+AlwaysPreTouch -version` (this bench re-run as a VM process: what `rtvm` does for
//!    those options) minus the same without pretouch, against the same difference for `java`,
//!    small pages and `-XX:+UseTransparentHugePages`, both with 2 workers.
//! 3. **background**: time to a usable VM with background versus synchronous pretouch.
//! 4. **expansion**: a 4 MiB `expand_heap` with `-XX:+AlwaysPreTouch` while a background
//!    pretouch of a 2 GiB initial heap runs, against the same expansion on an idle VM
//!    (target: under 50 ms; before the fix it waited for the whole background pretouch).
//! 5. **access**: what huge pages buy — a sequential and a random pass over a 4 GiB heap
//!    allocated through the heap API, with and without `-XX:+UseTransparentHugePages`.
//! 6. **pages**: pretouch of the same 1 GiB heap on 4 KiB pages, THP, hugetlbfs 2 MiB and
//!    1 GiB pages (`-XX:+UseLargePages -XX:LargePageSizeInBytes=…`), each against the raw
//!    `MADV_POPULATE_WRITE` limit of that page kind. hugetlbfs pages are used where they are
//!    reserved already; `--reserve-huge-pages` reserves the missing ones for the run
//!    (`nr_hugepages` changed, restored on every exit path, a kill included).
//!
//! Every sample is taken on warm memory: an area 1.25× the heap, of the same page kind, is
//! touched and freed right before it. Variants are interleaved (A B A B ...) in rotating
//! order; figures are medians.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rtvm::{InitArgs, Vm};
use rtvm_os_linux::{HugePageAdvice, PageInfo, PretouchRequest, Reservation, ThpMode};
use rtvm_testkit::bench::{have_java, median, time_process};

const GIB: usize = 1 << 30;
const HEAP: usize = 4 * GIB;

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

/// Touches and frees an area 1.25× `size` of the given page kind.
fn warm(size: usize, thp: bool) {
    let area = size + size / 4;
    let r = Reservation::reserve(area, 2 << 20).expect("warm-up reservation");
    r.commit(0, area).expect("warm-up commit");
    if thp {
        r.advise(0, area, HugePageAdvice::HugePage).expect("advise");
    }
    // Two threads, so the warm-up itself is quick.
    std::thread::scope(|s| {
        for half in 0..2 {
            let r = &r;
            s.spawn(move || {
                r.pretouch(half * area / 2, area / 2, &PretouchRequest::default())
                    .expect("warm")
            });
        }
    });
}

/// How the raw primitive is driven for the limit.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Raw {
    /// One `MADV_POPULATE_WRITE` per thread over its share.
    OneCallPerThread,
    /// Threads claim chunks of this many MiB from a shared cursor.
    Chunked(usize),
}

/// The raw primitive, no VM: `threads` plain threads `MADV_POPULATE_WRITE` the range. The
/// limit is the fastest way of driving it found in the same run.
fn raw_limit(threads: usize, thp: bool, how: Raw) -> Duration {
    warm(HEAP, thp);
    let r = Reservation::reserve(HEAP, 2 << 20).unwrap();
    r.commit(0, HEAP).unwrap();
    if thp {
        r.advise(0, HEAP, HugePageAdvice::HugePage).unwrap();
    }
    drive(&r, HEAP, threads, how, &PretouchRequest::default())
}

/// `threads` plain threads pretouch `[0, len)` of `r` the way `how` says; the time taken.
fn drive(
    r: &Reservation,
    len: usize,
    threads: usize,
    how: Raw,
    request: &PretouchRequest,
) -> Duration {
    let cursor = std::sync::atomic::AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let cursor = &cursor;
            s.spawn(move || match how {
                Raw::OneCallPerThread => {
                    let share = len / threads;
                    r.pretouch(t * share, share, request).expect("pretouch");
                }
                Raw::Chunked(mib) => loop {
                    let at = cursor.fetch_add(mib << 20, Ordering::Relaxed);
                    if at >= len {
                        break;
                    }
                    r.pretouch(at, (mib << 20).min(len - at), request)
                        .expect("pretouch");
                },
            });
        }
    });
    start.elapsed()
}

fn vm_pretouch(threads: usize, chunk: &str, thp: bool) -> Duration {
    warm(HEAP, thp);
    let mut opts = vec![
        "-Xms4g".to_string(),
        "-Xmx4g".into(),
        "-XX:+AlwaysPreTouch".into(),
        format!("-XX:ParallelGCThreads={threads}"),
        format!("-XX:PreTouchParallelChunkSize={chunk}"),
    ];
    if thp {
        opts.push("-XX:+UseTransparentHugePages".into());
    }
    let vm = Vm::create(InitArgs::new(opts)).expect("VM");
    let report = vm.heap().initial_pretouch().expect("pretouch report");
    assert_eq!(report.bytes, HEAP);
    let elapsed = report.elapsed;
    vm.shutdown().unwrap();
    elapsed
}

fn throughput(rounds: usize, thp_ok: bool) {
    let chunks = ["64k", "4m", "64m", "1g"];
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
    enum V {
        Vm(bool, usize, usize),
        Limit(bool, usize, Raw),
    }
    let raws = [Raw::OneCallPerThread, Raw::Chunked(4), Raw::Chunked(64)];
    let mut variants = Vec::new();
    for thp in [false, true] {
        if thp && !thp_ok {
            continue;
        }
        for threads in [1, 2] {
            for how in raws {
                variants.push(V::Limit(thp, threads, how));
            }
            for c in 0..chunks.len() {
                variants.push(V::Vm(thp, threads, c));
            }
        }
    }
    let mut samples: BTreeMap<V, Vec<Duration>> = BTreeMap::new();
    for round in 0..rounds {
        for i in 0..variants.len() {
            let v = variants[(i + round * 3) % variants.len()];
            let d = match v {
                V::Vm(thp, threads, c) => vm_pretouch(threads, chunks[c], thp),
                V::Limit(thp, threads, how) => raw_limit(threads, thp, how),
            };
            samples.entry(v).or_default().push(d);
        }
    }
    println!("## Pretouch throughput, 4 GiB heap ({rounds} rounds, warm memory)");
    println!();
    println!(
        "| pages | ParallelGCThreads | chunk | median (min … max) | GB/s | limit GB/s | of limit |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut csv = String::from("pages,threads,chunk,gbps,limit_gbps,ratio\n");
    for thp in [false, true] {
        if thp && !thp_ok {
            continue;
        }
        for threads in [1, 2] {
            let (how, limit) = raws
                .iter()
                .map(|&h| (h, median(samples[&V::Limit(thp, threads, h)].clone())))
                .min_by_key(|x| x.1)
                .expect("limits measured");
            println!(
                "| {} | {threads} | raw: {how:?} (the limit) | {:.0} ms | {:.2} | | |",
                if thp { "THP" } else { "4K" },
                limit.as_secs_f64() * 1e3,
                gbps(HEAP, limit)
            );
            for (c, chunk) in chunks.iter().enumerate() {
                let all = samples[&V::Vm(thp, threads, c)].clone();
                let (lo, hi) = (*all.iter().min().unwrap(), *all.iter().max().unwrap());
                let d = median(all);
                let pages = if thp { "THP" } else { "4K" };
                let ratio = limit.as_secs_f64() / d.as_secs_f64();
                println!(
                    "| {pages} | {threads} | {chunk} | {:.0} ms ({:.0} … {:.0}) | {:.2} | {:.2} | {:.3} |",
                    d.as_secs_f64() * 1e3,
                    lo.as_secs_f64() * 1e3,
                    hi.as_secs_f64() * 1e3,
                    gbps(HEAP, d),
                    gbps(HEAP, limit),
                    ratio
                );
                csv.push_str(&format!(
                    "{pages},{threads},{chunk},{:.3},{:.3},{ratio:.4}\n",
                    gbps(HEAP, d),
                    gbps(HEAP, limit)
                ));
            }
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pretouch.csv"), csv).unwrap();
    println!();
    println!("CSV: target/bench/pretouch.csv (plot: python3 tools/plot_pretouch.py target/bench/pretouch.csv BENCHMARKS-pretouch.svg)");
    println!();
}

fn java_side_by_side(rounds: usize, thp_ok: bool) {
    if !have_java() {
        println!("## Side by side with java: skipped, `java` is not installed");
        return;
    }
    let me = std::env::current_exe().expect("the bench's own path");
    let me = me.to_str().expect("a UTF-8 path");
    let rtvm = |args: &[&str]| {
        let mut all = vec![VM_CHILD];
        all.extend_from_slice(args);
        time_process(me, &all)
    };
    println!(
        "## Pretouch cost against java ({rounds} rounds, warm memory, 2 workers, whole processes)"
    );
    println!();
    println!("| pages | rtvm with − without | java with − without | java / rtvm |");
    println!("| --- | ---: | ---: | ---: |");
    for thp in [false, true] {
        if thp && !thp_ok {
            continue;
        }
        let mut base = vec!["-Xms4g", "-Xmx4g", "-XX:ParallelGCThreads=2"];
        if thp {
            base.push("-XX:+UseTransparentHugePages");
        }
        let with: Vec<&str> = base
            .iter()
            .copied()
            .chain(["-XX:+AlwaysPreTouch", "-version"])
            .collect();
        let without: Vec<&str> = base.iter().copied().chain(["-version"]).collect();
        let (mut rw, mut ro, mut jw, mut jo) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            warm(HEAP, thp);
            rw.push(rtvm(&with));
            ro.push(rtvm(&without));
            warm(HEAP, thp);
            jw.push(time_process("java", &with));
            jo.push(time_process("java", &without));
        }
        let r = median(rw).saturating_sub(median(ro));
        let j = median(jw).saturating_sub(median(jo));
        println!(
            "| {} | {:.0} ms ({:.2} GB/s) | {:.0} ms ({:.2} GB/s) | {:.2}× |",
            if thp {
                "THP (-XX:+UseTransparentHugePages)"
            } else {
                "4K"
            },
            r.as_secs_f64() * 1e3,
            gbps(HEAP, r),
            j.as_secs_f64() * 1e3,
            gbps(HEAP, j),
            j.as_secs_f64() / r.as_secs_f64()
        );
    }
    println!();
}

fn background(rounds: usize) {
    println!("## Time to a usable VM, 4 GiB heap, 2 workers ({rounds} rounds, warm memory)");
    println!();
    let (mut sync_create, mut bg_create, mut bg_done) = (vec![], vec![], vec![]);
    for _ in 0..rounds {
        warm(HEAP, false);
        let t = Instant::now();
        let vm = Vm::create(InitArgs::new([
            "-Xms4g",
            "-Xmx4g",
            "-XX:+AlwaysPreTouch",
            "-XX:ParallelGCThreads=2",
        ]))
        .unwrap();
        sync_create.push(t.elapsed());
        vm.shutdown().unwrap();
        warm(HEAP, false);
        let t = Instant::now();
        let vm = Vm::create(InitArgs::new([
            "-Xms4g",
            "-Xmx4g",
            "-XX:+AlwaysPreTouch",
            "-XX:ParallelGCThreads=2",
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+BackgroundPreTouch",
        ]))
        .unwrap();
        bg_create.push(t.elapsed());
        vm.wait_for_pretouch().unwrap();
        bg_done.push(t.elapsed());
        vm.shutdown().unwrap();
    }
    println!("| mode | Vm::create returns | heap fully resident |");
    println!("| --- | ---: | ---: |");
    let s = median(sync_create);
    println!(
        "| synchronous pretouch | {:.1} ms | {:.1} ms |",
        s.as_secs_f64() * 1e3,
        s.as_secs_f64() * 1e3
    );
    let (c, d) = (median(bg_create), median(bg_done));
    println!(
        "| -XX:+BackgroundPreTouch | {:.2} ms | {:.1} ms |",
        c.as_secs_f64() * 1e3,
        d.as_secs_f64() * 1e3
    );
    println!();
    println!("The application can start {:.0}× sooner; the pretouch itself takes {:.2}× as long in the background.", s.as_secs_f64() / c.as_secs_f64(), d.as_secs_f64() / s.as_secs_f64());
    println!();
}

fn expansion(rounds: usize) {
    println!("## 4 MiB expansion with -XX:+AlwaysPreTouch, 2 GiB initial heap, 2 workers ({rounds} rounds, warm memory)");
    println!();
    let args = |background: bool| {
        let mut a = vec![
            "-Xms2g",
            "-Xmx3g",
            "-XX:+AlwaysPreTouch",
            "-XX:ParallelGCThreads=2",
        ];
        if background {
            a.extend([
                "-XX:+UnlockExperimentalVMOptions",
                "-XX:+BackgroundPreTouch",
            ]);
        }
        a
    };
    let (mut during, mut idle, mut bg_total, mut overlapped) = (vec![], vec![], vec![], 0);
    for round in 0..rounds {
        // Interleaved: idle first on even rounds, during on odd ones.
        for k in 0..2 {
            let background = (k + round) % 2 == 0;
            warm(3 * GIB, false);
            let created = Instant::now();
            let vm = Vm::create(InitArgs::new(args(background))).unwrap();
            let t = Instant::now();
            vm.expand_heap(4 << 20).unwrap();
            let d = t.elapsed();
            if background {
                if vm.heap().background_pretouch_running() {
                    overlapped += 1;
                }
                during.push(d);
                vm.wait_for_pretouch().unwrap();
                bg_total.push(created.elapsed());
            } else {
                idle.push(d);
            }
            vm.shutdown().unwrap();
        }
    }
    let (d, i, b) = (median(during), median(idle), median(bg_total));
    println!("| expansion | median | vs idle |");
    println!("| --- | ---: | ---: |");
    println!(
        "| on an idle VM (gang free) | {:.2} ms | 1.00× |",
        i.as_secs_f64() * 1e3
    );
    println!(
        "| during the background pretouch (pretouched by the calling thread) | {:.2} ms | {:.2}× |",
        d.as_secs_f64() * 1e3,
        d.as_secs_f64() / i.as_secs_f64()
    );
    println!();
    println!(
        "The background pretouch of 2 GiB took {:.0} ms from Vm::create; {overlapped} of {rounds} expansions returned while it still ran.",
        b.as_secs_f64() * 1e3
    );
    println!();
}

fn access(rounds: usize, thp_ok: bool) {
    if !thp_ok {
        println!("## Access passes: skipped, THP is not available");
        return;
    }
    println!("## What huge pages buy: passes over a 4 GiB heap allocated through the heap API ({rounds} rounds)");
    println!();
    let mut seq: BTreeMap<bool, Vec<Duration>> = BTreeMap::new();
    let mut rnd: BTreeMap<bool, Vec<Duration>> = BTreeMap::new();
    const RANDOM: usize = 32 << 20;
    for round in 0..rounds {
        for k in 0..2 {
            let thp = (k + round) % 2 == 1;
            warm(HEAP, thp);
            let mut opts = vec![
                "-Xms4g",
                "-Xmx4g",
                "-XX:+AlwaysPreTouch",
                "-XX:ParallelGCThreads=2",
            ];
            if thp {
                opts.push("-XX:+UseTransparentHugePages");
            }
            let vm = Vm::create(InitArgs::new(opts)).unwrap();
            let block = vm.allocate(HEAP - 4096).unwrap();
            let words = block.words();
            let t = Instant::now();
            let mut sum = 0u64;
            for w in words {
                sum = sum.wrapping_add(w.load(Ordering::Relaxed));
            }
            seq.entry(thp).or_default().push(t.elapsed());
            let mut x = 0x9E37_79B9_7F4A_7C15u64 | 1;
            let n = words.len() as u64;
            let t = Instant::now();
            for _ in 0..RANDOM {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                sum = sum.wrapping_add(words[(x % n) as usize].load(Ordering::Relaxed));
            }
            rnd.entry(thp).or_default().push(t.elapsed());
            std::hint::black_box(sum);
            vm.shutdown().unwrap();
        }
    }
    println!("| pages | sequential read | random 8-byte reads |");
    println!("| --- | ---: | ---: |");
    let mut figures = BTreeMap::new();
    for thp in [false, true] {
        let s = median(seq[&thp].clone());
        let r = median(rnd[&thp].clone());
        figures.insert(thp, (s, r));
        println!(
            "| {} | {:.2} GB/s | {:.1} ns/access |",
            if thp { "THP" } else { "4K" },
            gbps(HEAP, s),
            r.as_secs_f64() * 1e9 / RANDOM as f64
        );
    }
    let (s4, r4) = figures[&false];
    let (sh, rh) = figures[&true];
    println!();
    println!(
        "THP: sequential {:.2}×, random {:.2}× the small-page speed.",
        s4.as_secs_f64() / sh.as_secs_f64(),
        r4.as_secs_f64() / rh.as_secs_f64()
    );
    println!();
}

/// The page kinds of the `pages` section.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Small,
    Thp,
    Huge2M,
    Huge1G,
}

impl Kind {
    fn page(self) -> usize {
        match self {
            Kind::Small => rtvm_os_linux::base_page_size(),
            Kind::Thp | Kind::Huge2M => 2 << 20,
            Kind::Huge1G => GIB,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Small => "4 KiB",
            Kind::Thp => "THP 2 MiB",
            Kind::Huge2M => "hugetlbfs 2 MiB",
            Kind::Huge1G => "hugetlbfs 1 GiB",
        }
    }

    fn vm_flags(self) -> &'static [&'static str] {
        match self {
            Kind::Small => &[],
            Kind::Thp => &["-XX:+UseTransparentHugePages"],
            Kind::Huge2M => &["-XX:+UseLargePages", "-XX:LargePageSizeInBytes=2m"],
            Kind::Huge1G => &["-XX:+UseLargePages", "-XX:LargePageSizeInBytes=1g"],
        }
    }
}

/// The heap of the `pages` section: one 1 GiB page, or 512 of 2 MiB.
const PAGES_HEAP: usize = GIB;

fn hugetlb_count(page: usize, file: &str) -> usize {
    std::fs::read_to_string(format!(
        "/sys/kernel/mm/hugepages/hugepages-{}kB/{file}",
        page >> 10
    ))
    .ok()
    .and_then(|v| v.trim().parse().ok())
    .unwrap_or(0)
}

/// hugetlbfs pages of `page` free for a new mapping.
fn hugetlb_available(page: usize) -> usize {
    hugetlb_count(page, "free_hugepages").saturating_sub(hugetlb_count(page, "resv_hugepages"))
}

/// Warm memory of a kind: for hugetlbfs, every free page of the pool touched once (the pool
/// keeps them; the host keeps backing them), for the others an area 1.25× the heap.
fn warm_kind(kind: Kind) {
    match kind {
        Kind::Small => warm(PAGES_HEAP, false),
        Kind::Thp => warm(PAGES_HEAP, true),
        Kind::Huge2M | Kind::Huge1G => {
            let n = hugetlb_available(kind.page());
            let r = Reservation::reserve_huge_pages(n * kind.page(), kind.page())
                .expect("warm-up of the huge page pool");
            r.pretouch(
                0,
                n * kind.page(),
                &PretouchRequest {
                    page_size: kind.page(),
                    use_populate_write: true,
                },
            )
            .expect("warm");
        }
    }
}

/// The raw primitive on a kind: two threads `MADV_POPULATE_WRITE` the range as `how` says.
fn raw_kind(kind: Kind, how: Raw) -> Duration {
    warm_kind(kind);
    let r = match kind {
        Kind::Small | Kind::Thp => {
            let r = Reservation::reserve(PAGES_HEAP, 2 << 20).unwrap();
            r.commit(0, PAGES_HEAP).unwrap();
            if kind == Kind::Thp {
                r.advise(0, PAGES_HEAP, HugePageAdvice::HugePage).unwrap();
            }
            r
        }
        Kind::Huge2M | Kind::Huge1G => {
            Reservation::reserve_huge_pages(PAGES_HEAP, kind.page()).expect("hugetlbfs mapping")
        }
    };
    let request = PretouchRequest {
        page_size: kind.page().min(2 << 20),
        use_populate_write: true,
    };
    drive(&r, PAGES_HEAP, 2, how, &request)
}

/// The VM's pretouch of a 1 GiB heap of a kind, two workers.
fn vm_kind(kind: Kind) -> Duration {
    warm_kind(kind);
    let mut opts: Vec<String> = [
        "-Xms1g",
        "-Xmx1g",
        "-XX:+AlwaysPreTouch",
        "-XX:ParallelGCThreads=2",
    ]
    .map(String::from)
    .to_vec();
    opts.extend(kind.vm_flags().iter().map(|f| f.to_string()));
    let vm = Vm::create(InitArgs::new(opts)).expect("VM");
    assert_eq!(
        vm.heap().page_size(),
        kind.page(),
        "{}: the heap fell back to {}",
        kind.name(),
        vm.heap().page_description()
    );
    let report = vm.heap().initial_pretouch().expect("pretouch report");
    assert_eq!(report.bytes, PAGES_HEAP);
    let elapsed = report.elapsed;
    vm.shutdown().unwrap();
    elapsed
}

/// The `pages` section: the same 1 GiB heap pretouched on each page kind, against that
/// kind's raw limit. hugetlbfs pages are used where they are reserved already; `--reserve-huge-pages`
/// reserves them for the run (changing `nr_hugepages`, restored on every exit path).
fn page_kinds(rounds: usize, thp_ok: bool) {
    use rtvm_os_linux::setting::TemporarySetting;
    let mut guards = Vec::new();
    let mut kinds = vec![Kind::Small];
    if thp_ok {
        kinds.push(Kind::Thp);
    }
    let reserve = std::env::args().any(|a| a == "--reserve-huge-pages");
    let mut notes = Vec::new();
    for kind in [Kind::Huge2M, Kind::Huge1G] {
        let (page, needed) = (kind.page(), PAGES_HEAP / kind.page());
        let sysfs = format!(
            "/sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages",
            page >> 10
        );
        if !std::path::Path::new(&sysfs).exists() {
            notes.push(format!("{}: the kernel has no such pages", kind.name()));
            continue;
        }
        let missing = needed.saturating_sub(hugetlb_available(page));
        if missing > 0 && reserve {
            let total = hugetlb_count(page, "nr_hugepages");
            match TemporarySetting::set(
                std::path::Path::new(&sysfs),
                &(total + missing).to_string(),
            ) {
                Ok(g) => guards.push(g),
                Err(e) => notes.push(format!("{}: {e}", kind.name())),
            }
        }
        let available = hugetlb_available(page);
        if available >= needed {
            kinds.push(kind);
        } else if reserve {
            notes.push(format!(
                "{}: the kernel reserved only {available} of {needed} pages (memory fragmented)",
                kind.name()
            ));
        } else {
            notes.push(format!("{}: {available} of {needed} pages free; not measured (rerun with `-- --reserve-huge-pages` to reserve them for the run: nr_hugepages changed, restored on exit)", kind.name()));
        }
    }
    // The limit is the fastest way of driving the primitive found in the run, as in the
    // throughput section; `None` is the VM.
    let raws = [Raw::OneCallPerThread, Raw::Chunked(4), Raw::Chunked(64)];
    let mut samples: BTreeMap<(Kind, Option<Raw>), Vec<Duration>> = BTreeMap::new();
    let variants: Vec<(Kind, Option<Raw>)> = kinds
        .iter()
        .flat_map(|&k| std::iter::once((k, None)).chain(raws.map(|h| (k, Some(h)))))
        .collect();
    for round in 0..rounds {
        for i in 0..variants.len() {
            let (kind, how) = variants[(i + round * 3) % variants.len()];
            let d = match how {
                Some(how) => raw_kind(kind, how),
                None => vm_kind(kind),
            };
            samples.entry((kind, how)).or_default().push(d);
        }
    }
    drop(guards);
    println!("## Pretouch by page kind, 1 GiB heap, 2 threads ({rounds} rounds, warm memory)");
    println!();
    println!("| pages | raw MADV_POPULATE_WRITE, best way (the limit) | GB/s | rtvm -XX:+AlwaysPreTouch (min … max) | GB/s | of limit |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for &kind in &kinds {
        let (how, limit) = raws
            .iter()
            .map(|&h| (h, median(samples[&(kind, Some(h))].clone())))
            .min_by_key(|x| x.1)
            .expect("limits measured");
        let all = samples[&(kind, None)].clone();
        let (lo, hi) = (*all.iter().min().unwrap(), *all.iter().max().unwrap());
        let vm = median(all);
        println!(
            "| {} | {:.1} ms ({how:?}) | {:.2} | {:.1} ms ({:.1} … {:.1}) | {:.2} | {:.3} |",
            kind.name(),
            limit.as_secs_f64() * 1e3,
            gbps(PAGES_HEAP, limit),
            vm.as_secs_f64() * 1e3,
            lo.as_secs_f64() * 1e3,
            hi.as_secs_f64() * 1e3,
            gbps(PAGES_HEAP, vm),
            limit.as_secs_f64() / vm.as_secs_f64()
        );
    }
    for n in notes {
        println!();
        println!("{n}");
    }
    println!();
}

/// The argument that makes this bench a VM process: `Vm::create` with the options after it
/// (which end in `-version`: the VM prints its version and stops), as the `rtvm` program does.
const VM_CHILD: &str = "--vm-child";

fn vm_child(options: &[String]) -> ! {
    let code = match Vm::create(InitArgs::new(options.iter().cloned())) {
        Ok(vm) => vm.shutdown().map_or(1, |()| 0),
        Err(e) if e.code == rtvm::ErrorCode::Exited => 0,
        Err(_) => 1,
    };
    std::process::exit(code)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == VM_CHILD) {
        vm_child(&args[i + 1..]);
    }
    if rtvm_testkit::bench::listing() {
        return;
    }
    let rounds = rtvm_testkit::bench::arg("--rounds").unwrap_or(3usize);
    let only: Option<String> = rtvm_testkit::bench::arg("--only");
    let pages = PageInfo::detect();
    let thp_ok = !matches!(pages.thp.mode, ThpMode::Never | ThpMode::Unknown);
    println!(
        "heap bench: 4 GiB, THP mode {}, {} CPUs, MADV_POPULATE_WRITE {}",
        pages.thp.mode,
        rtvm_os_linux::system::available_processors(),
        if rtvm_os_linux::pretouch::populate_write_supported() {
            "available"
        } else {
            "unavailable"
        }
    );
    println!();
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if run("throughput") {
        throughput(rounds, thp_ok);
    }
    if run("java") {
        java_side_by_side(rounds.max(3), thp_ok);
    }
    if run("background") {
        background(rounds);
    }
    if run("expansion") {
        expansion(rounds.max(5));
    }
    if run("access") {
        access(rounds, thp_ok);
    }
    if run("pages") {
        page_kinds(rounds.max(5), thp_ok);
    }
}
