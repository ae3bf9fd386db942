//! Pretouch throughput of each primitive, small pages and THP, 256 MiB and 1 GiB,
//! single-threaded, next to a user-space `memset` of the same range as a yardstick.
//!
//! `cargo bench -p rtvm-os-linux` (add `-- --rounds N` for more rounds).
//!
//! Method: every measurement gets a fresh committed range. Right before it, an area 1.5×
//! as large is touched and freed, so the pages the kernel hands out are warm in the host
//! (on this VM the first touch of memory freed seconds earlier can be ~20× slower; a warm
//! state is the repeatable one). Variants are interleaved — one of each per round, in a
//! rotating order — and medians are reported, with ratios to `memset` and to the fastest
//! primitive of the same page size and range.
//!
//! A custom harness rather than divan: divan runs each benchmark to completion before the
//! next, which cannot interleave variants or control the memory state between samples.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rtvm_os_linux::pages::{PageInfo, ThpMode};
use rtvm_os_linux::{base_page_size, HugePageAdvice, PretouchRequest, Reservation};

const MIB: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    PopulateWrite,
    AtomicAdd,
    Memset,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Variant {
    size: usize,
    thp: bool,
    op: Op,
}

/// Touches and frees an area 1.5× the size, with the same page size as the variant (THP
/// variants need warm *huge* pages: the buddy allocator hands them out from other blocks than
/// small ones).
fn warm(size: usize, thp: bool, pmd: usize) {
    let area = size + size / 2;
    let r = Reservation::reserve(area, pmd).expect("warm-up reservation");
    r.commit(0, area).expect("warm-up commit");
    if thp {
        r.advise(0, area, HugePageAdvice::HugePage)
            .expect("MADV_HUGEPAGE");
    }
    r.pretouch(0, area, &PretouchRequest::default())
        .expect("warm-up pretouch");
}

fn measure(v: Variant, pmd: usize) -> Duration {
    warm(v.size, v.thp, pmd);
    let r = Reservation::reserve(v.size, pmd).expect("reserve");
    r.commit(0, v.size).expect("commit");
    if v.thp {
        r.advise(0, v.size, HugePageAdvice::HugePage)
            .expect("MADV_HUGEPAGE");
    }
    let request = |populate| PretouchRequest {
        page_size: base_page_size(),
        use_populate_write: populate,
    };
    let start = Instant::now();
    match v.op {
        Op::PopulateWrite => {
            let done = r.pretouch(0, v.size, &request(true)).expect("pretouch");
            assert_eq!(done.primitive, rtvm_os_linux::Primitive::PopulateWrite);
        }
        Op::AtomicAdd => {
            r.pretouch(0, v.size, &request(false)).expect("pretouch");
        }
        Op::Memset => {
            let words = r.atomic_words(0, v.size).expect("committed");
            for w in words {
                w.store(0, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(
        r.resident_bytes(0, v.size).unwrap(),
        v.size,
        "{v:?} left pages non-resident"
    );
    elapsed
}

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(5usize);
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list` / `cargo test --benches` compatibility
    }
    let info = PageInfo::detect();
    let thp_available = !matches!(info.thp.mode, ThpMode::Never | ThpMode::Unknown);
    let pmd = info.thp.pmd_size.unwrap_or(2 * MIB);
    let mut variants = Vec::new();
    for size in [256 * MIB, 1024 * MIB] {
        for thp in [false, true] {
            if thp && !thp_available {
                continue;
            }
            for op in [Op::PopulateWrite, Op::AtomicAdd, Op::Memset] {
                variants.push(Variant { size, thp, op });
            }
        }
    }
    println!(
        "pretouch bench: {rounds} rounds, {} variants interleaved, warm memory, THP mode {}, MADV_POPULATE_WRITE {}",
        variants.len(),
        info.thp.mode,
        if rtvm_os_linux::pretouch::populate_write_supported() { "available" } else { "unavailable" }
    );
    let mut samples: BTreeMap<Variant, Vec<Duration>> = BTreeMap::new();
    for round in 0..rounds {
        let n = variants.len();
        for i in 0..n {
            let v = variants[(i + round) % n];
            samples.entry(v).or_default().push(measure(v, pmd));
        }
    }
    println!();
    println!("| range | pages | primitive | median | GB/s | vs memset | vs best primitive |");
    println!("| --- | --- | --- | ---: | ---: | ---: | ---: |");
    for size in [256 * MIB, 1024 * MIB] {
        for thp in [false, true] {
            let get = |op| {
                samples
                    .get(&Variant { size, thp, op })
                    .map(|s| median(s.clone()))
            };
            let (Some(pw), Some(aa), Some(ms)) =
                (get(Op::PopulateWrite), get(Op::AtomicAdd), get(Op::Memset))
            else {
                continue;
            };
            let best = pw.min(aa);
            for (name, d) in [
                ("MADV_POPULATE_WRITE", pw),
                ("atomic add", aa),
                ("memset (yardstick)", ms),
            ] {
                println!(
                    "| {} MiB | {} | {name} | {:.1} ms | {:.2} | {:.2} | {:.2} |",
                    size / MIB,
                    if thp { "THP" } else { "4K" },
                    d.as_secs_f64() * 1e3,
                    gbps(size, d),
                    ms.as_secs_f64() / d.as_secs_f64(),
                    best.as_secs_f64() / d.as_secs_f64(),
                );
            }
            println!(
                "| {} MiB | {} | **MADV_POPULATE_WRITE / atomic add** | | **{:.2}×** | | |",
                size / MIB,
                if thp { "THP" } else { "4K" },
                aa.as_secs_f64() / pw.as_secs_f64()
            );
        }
    }
}
