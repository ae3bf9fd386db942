//! Every ergonomic decision on fake machines and page facts. Expected heap sizes are HotSpot
//! 17's (`set_heap_size`, G1's alignment): the 512 MB container's were measured with java
//! 17.0.15 in a real memory cgroup (`../shared/reference/README.md`), the `MaxRAM` cases and
//! the heap-size errors with `java -XX:MaxRAM=… -XX:+PrintFlagsFinal` here; the side-by-side
//! tests (`TestMemoryAwareness`, `TestMessagesAsJava`) compare with `java` itself on every
//! run. The nursery follows HotSpot's generational rules (`GenArguments`), not G1's.

use rtvm_flags::{flag, ParseOptions, Settings};
use rtvm_os_linux::pages::{
    DefragMode, HugetlbInfo, MthpSetting, MthpSize, PageInfo, ShmemMode, ThpInfo, ThpMode,
};

use super::*;

const K: usize = 1 << 10;
const M: usize = 1 << 20;
const G: usize = 1 << 30;

fn settings(options: &[&str]) -> Settings {
    let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
    rtvm_flags::parse(&options, &ParseOptions::default(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{options:?}: {}", e.message))
        .settings
}

fn pages(mode: ThpMode) -> PageInfo {
    PageInfo {
        base_page_size: 4 * K,
        thp: ThpInfo {
            mode,
            defrag: DefragMode::Madvise,
            pmd_size: Some(2 * M),
            mthp: vec![],
            shmem: ShmemMode::Never,
            max_ptes_none: Some(511),
        },
        hugetlb: HugetlbInfo {
            default_size: Some(2 * M),
            sizes: vec![2 * M, G],
        },
        problems: vec![],
    }
}

fn run(
    options: &[&str],
    machine: &Machine,
    p: &PageInfo,
) -> Result<(Settings, Decisions), CreateError> {
    let mut s = settings(options);
    let d = decide(&mut s, p, machine, &mut |_| {})?;
    Ok((s, d))
}

fn ok(options: &[&str], machine: &Machine) -> (Settings, Decisions) {
    run(options, machine, &pages(ThpMode::Madvise))
        .unwrap_or_else(|e| panic!("{options:?}: {}", e.message))
}

fn err(options: &[&str], machine: &Machine) -> CreateError {
    match run(options, machine, &pages(ThpMode::Madvise)) {
        Ok(_) => panic!("{options:?} should fail"),
        Err(e) => e,
    }
}

#[test]
fn heap_sizes() {
    // (memory, options, (min, initial, max))
    type Case = (usize, &'static [&'static str], (usize, usize, usize));
    let cases: &[Case] = &[
        // java 17.0.15 in a 512 MB container: 128M max, 8M initial.
        (512 * M, &[], (8 * M, 8 * M, 128 * M)),
        (
            512 * M,
            &["-XX:MaxRAMPercentage=50"],
            (8 * M, 8 * M, 256 * M),
        ),
        (16 * G, &[], (8 * M, 256 * M, 4 * G)),
        // -Xms sets MinHeapSize too (java 17: MinHeapSize 64M {command line}).
        (16 * G, &["-Xms64m"], (64 * M, 64 * M, 4 * G)),
        (16 * G, &["-Xmx1g"], (8 * M, 256 * M, G)),
        (16 * G, &["-Xms2g", "-Xmx2g"], (2 * G, 2 * G, 2 * G)),
        (
            16 * G,
            &["-XX:InitialRAMPercentage=50"],
            (8 * M, 4 * G, 4 * G),
        ),
        // A max that is not a region multiple is aligned up (1M regions below 2G).
        (16 * G, &["-Xmx100m"], (8 * M, 100 * M, 100 * M)),
        // Large memory: sized for MaxRAM (128G) and capped for compressed oops (32G - 32M)
        // unless sized by percentage.
        (256 * G, &[], (16 * M, 2 * G, 32 * G - 32 * M)),
        (
            256 * G,
            &["-XX:MaxRAMPercentage=50"],
            (32 * M, 4 * G, 128 * G),
        ),
        // java 17 with MaxRAM: (8M, 16M, 256M) and (32M, 4G, 64G) — MaxRAM given lifts the
        // compressed-oops cap too.
        (16 * G, &["-XX:MaxRAM=1g"], (8 * M, 16 * M, 256 * M)),
        (16 * G, &["-XX:MaxRAM=256g"], (32 * M, 4 * G, 64 * G)),
    ];
    for &(memory, options, want) in cases {
        let (_, d) = ok(options, &Machine::fake(memory as u64, 2));
        let h = &d.policy.heap;
        assert_eq!(
            (h.min, h.initial, h.max),
            want,
            "{} MiB {options:?}",
            memory / M
        );
    }
}

#[test]
fn heap_size_limits_and_errors() {
    let mut limited = Machine::fake(16 * G as u64, 2);
    limited.address_space_limit = Some(4 * G as u64);
    let (_, d) = ok(&[], &limited);
    assert_eq!(d.policy.heap.max, 2 * G, "half of RLIMIT_AS");
    let machine = Machine::fake(16 * G as u64, 2);
    let cases: &[(&[&str], &str)] = &[
        (&["-Xmx1m"], "Too small maximum heap\n"),
        (
            &["-Xms2g", "-Xmx1g"],
            "Initial heap size set to a larger value than the maximum heap size\n",
        ),
        (
            &["-XX:MinHeapSize=2g", "-Xmx1g"],
            "Incompatible minimum and maximum heap sizes specified\n",
        ),
        (
            &["-XX:MinHeapSize=512m", "-XX:InitialHeapSize=256m"],
            "Incompatible minimum and initial heap sizes specified\n",
        ),
        (&["-XX:InitialHeapSize=512k"], "Too small initial heap\n"),
    ];
    for (options, message) in cases {
        let e = err(options, &machine);
        assert_eq!(e.message, *message, "{options:?}");
        assert_eq!(e.kind, crate::ErrorKind::Initialization, "{options:?}");
    }
}

#[test]
fn workers() {
    let cases: &[(usize, &[&str], usize)] = &[
        (1, &[], 1),
        (2, &[], 2),
        (8, &[], 8),
        (16, &[], 13),
        (64, &[], 43),
        (16, &["-XX:ActiveProcessorCount=1"], 1),
        (2, &["-XX:ParallelGCThreads=5"], 5),
        (2, &["-XX:ParallelGCThreads=0"], 0),
    ];
    for &(cpus, options, want) in cases {
        let (s, d) = ok(options, &Machine::fake(16 * G as u64, cpus));
        assert_eq!(d.policy.gc_threads, want, "{cpus} CPUs {options:?}");
        assert_eq!(s.get(flag::ParallelGCThreads) as usize, want);
    }
}

#[test]
fn nursery() {
    let machine = Machine::fake(16 * G as u64, 2);
    let cases: &[(&[&str], usize, usize)] = &[
        // (options, nursery, NewSize)
        (&["-Xms16m"], 0, 1_363_144 / (64 * K) * (64 * K)),
        (&["-Xms16m", "-Xmn8m"], 8 * M, 8 * M),
        // NewSize of the whole initial heap: the initial heap less one generation alignment.
        (&["-Xms16m", "-Xmn16m"], 16 * M - 64 * K, 16 * M - 64 * K),
        // Aligned down to the generation alignment.
        (&["-Xms64m", "-Xmn1000k"], 960 * K, 960 * K),
    ];
    for &(options, want, new_size) in cases {
        let (s, d) = ok(options, &machine);
        assert_eq!(d.policy.heap.nursery, want, "{options:?}");
        if want > 0 {
            assert_eq!(s.get(flag::NewSize), new_size, "{options:?}");
        }
    }
    // MaxNewSize beyond the heap: one alignment below it, and NewSize follows.
    let (s, _) = ok(
        &["-Xms16m", "-Xmx16m", "-Xmn16m", "-XX:MaxNewSize=32m"],
        &machine,
    );
    assert_eq!(s.get(flag::MaxNewSize), 16 * M - 64 * K);
}

#[test]
fn stacks() {
    let machine = Machine::fake(16 * G as u64, 2);
    let (_, d) = ok(&[], &machine);
    let st = &d.policy.stacks;
    assert!(st.mitigated, "the mitigation is on by default");
    assert_eq!(st.java_stack_size, M, "ThreadStackSize 1M");
    assert_eq!(
        (st.zones.red, st.zones.yellow, st.zones.reserved),
        (4 * K, 8 * K, 4 * K)
    );
    assert_eq!(st.shadow_zone, 80 * K, "StackShadowPages 20");
    assert_eq!(st.alt_stack_size, 16 * K);
    assert_eq!(st.minimum_java_stack_size(), 136 * K, "HotSpot's 136k");
    let (_, d) = ok(&["-Xss0"], &machine);
    assert_eq!(
        d.policy.stacks.java_stack_size,
        8 * M,
        "the system default (RLIMIT_STACK)"
    );
    let (_, d) = ok(&["-Xss2m"], &machine);
    assert_eq!(d.policy.stacks.java_stack_size, 2 * M);
    let (_, d) = ok(
        &[
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:+DisableTHPStackMitigation",
        ],
        &machine,
    );
    assert!(!d.policy.stacks.mitigated);
    assert!(
        d.stack_reason.contains("-XX:+DisableTHPStackMitigation"),
        "{}",
        d.stack_reason
    );
    let e = err(&["-Xss100k"], &machine);
    assert_eq!(
        e.message,
        "\nThe Java thread stack size specified is too small. Specify at least 136k\n"
    );
    assert_eq!(e.kind, crate::ErrorKind::ArgumentsStdout);
    let e = err(&["-XX:VMThreadStackSize=10"], &machine);
    assert_eq!(
        e.message,
        "\nThe VMThreadStackSize specified is too small. Specify at least 64k\n"
    );
    // Mitigated stacks never make a mapping that is a multiple of the THP size.
    let (_, d) = ok(&["-Xss2m"], &machine);
    let st = &d.policy.stacks;
    let size = st.stack_size(crate::ThreadKind::Java, None);
    assert_ne!(st.mapping_size(size) % (2 * M), 0);
}

#[test]
fn stack_mitigation_reason_names_mthp_sizes() {
    let mut p = pages(ThpMode::Never);
    p.thp.mthp = vec![MthpSize {
        size: 64 * K,
        setting: MthpSetting::Always,
        effective: ThpMode::Always,
    }];
    let (_, d) = run(&[], &Machine::fake(16 * G as u64, 2), &p).unwrap();
    assert!(d.policy.stacks.mitigated, "on whatever the mode");
    assert!(
        d.stack_reason
            .starts_with("THP mode: never; mTHP sizes effectively always: 64k"),
        "{}",
        d.stack_reason
    );
}

#[test]
fn transparent_huge_pages() {
    let machine = Machine::fake(16 * G as u64, 2);
    // (mode, options, THP used, advised, page size, UseTransparentHugePages after, warned)
    type Case = (
        ThpMode,
        &'static [&'static str],
        bool,
        bool,
        usize,
        bool,
        bool,
    );
    let cases: &[Case] = &[
        (ThpMode::Madvise, &[], false, false, 4 * K, false, false),
        (
            ThpMode::Madvise,
            &["-XX:+UseTransparentHugePages"],
            true,
            true,
            2 * M,
            true,
            false,
        ),
        (
            ThpMode::Always,
            &["-XX:+UseTransparentHugePages"],
            true,
            false,
            2 * M,
            true,
            false,
        ),
        (
            ThpMode::Never,
            &["-XX:+UseTransparentHugePages"],
            false,
            false,
            4 * K,
            false,
            true,
        ),
        (
            ThpMode::Unknown,
            &["-XX:+UseTransparentHugePages"],
            false,
            false,
            4 * K,
            false,
            true,
        ),
    ];
    for &(mode, options, thp, advised, page, flag_after, warned) in cases {
        let (s, d) = run(options, &machine, &pages(mode)).unwrap();
        let m = &d.policy.memory;
        let what = format!("{mode} {options:?}");
        assert_eq!(d.large_pages.thp, thp, "{what}");
        assert_eq!(m.pages.advise_huge, advised, "{what}");
        assert_eq!(
            m.pages.page_size, page,
            "{what}: the heap and memories share it"
        );
        assert_eq!(s.get(flag::UseTransparentHugePages), flag_after, "{what}");
        let warning = d.large_pages.notes.iter().any(|(l, n)| {
            *l == log::Level::Warn && n.starts_with("UseTransparentHugePages disabled")
        });
        assert_eq!(warning, warned, "{what}: {:?}", d.large_pages.notes);
    }
    // The heap is aligned to the THP size: a 2M multiple.
    let (_, d) = run(
        &["-XX:+UseTransparentHugePages", "-Xmx3m"],
        &machine,
        &pages(ThpMode::Madvise),
    )
    .unwrap();
    assert_eq!(d.policy.heap.max % (2 * M), 0);
}

#[test]
fn explicit_huge_pages() {
    let p = pages(ThpMode::Madvise);
    let mut machine = Machine::fake(16 * G as u64, 2);
    // No usable huge page: off, with HotSpot's warning.
    let (s, d) = run(&["-XX:+UseLargePages"], &machine, &p).unwrap();
    assert_eq!(d.large_pages.explicit, None);
    assert!(!s.get(flag::UseLargePages));
    assert_eq!(
        d.large_pages.notes.last().map(|n| n.1.as_str()),
        Some("UseLargePages disabled, no large pages configured and available on the system.")
    );
    assert_eq!(d.policy.heap.explicit, None);
    // Usable 2M pages: the default size.
    machine.hugetlb_usable = |size| size == 2 << 20;
    let (_, d) = run(&["-XX:+UseLargePages"], &machine, &p).unwrap();
    assert_eq!(d.large_pages.explicit, Some((2 * M, vec![2 * M])));
    assert_eq!(
        d.large_pages.notes[0].1,
        "Using the default large page size: 2M"
    );
    assert_eq!(d.policy.heap.explicit.unwrap().page_size, 2 * M);
    assert_eq!(
        d.policy.memory.pages.page_size,
        4 * K,
        "memories stay on base pages"
    );
    // LargePageSizeInBytes: a size the kernel has overrides; one it lacks is refused.
    machine.hugetlb_usable = |_| true;
    let (_, d) = run(
        &["-XX:+UseLargePages", "-XX:LargePageSizeInBytes=1g"],
        &machine,
        &p,
    )
    .unwrap();
    assert_eq!(d.large_pages.explicit, Some((G, vec![2 * M, G])));
    assert_eq!(
        d.large_pages.notes[0].1,
        "Overriding default large page size (2M) using LargePageSizeInBytes: 1G"
    );
    assert_eq!(d.policy.heap.explicit.unwrap().page_size, G);
    let (_, d) = run(
        &["-XX:+UseLargePages", "-XX:LargePageSizeInBytes=4m"],
        &machine,
        &p,
    )
    .unwrap();
    assert_eq!(d.large_pages.notes[0].1, "LargePageSizeInBytes is not a valid large page size (4M) using the default large page size: 2M");
    // The chosen size fails the sanity check but a smaller one passes.
    machine.hugetlb_usable = |size| size == 2 << 20;
    let (_, d) = run(
        &["-XX:+UseLargePages", "-XX:LargePageSizeInBytes=1g"],
        &machine,
        &p,
    )
    .unwrap();
    let notes: Vec<&str> = d.large_pages.notes.iter().map(|n| n.1.as_str()).collect();
    assert_eq!(&notes[1..], ["Large page size (1G) failed sanity check, checking if smaller large page sizes are usable", "Large page size (2M) passed sanity check"]);
    // THP wins over explicit pages.
    let (_, d) = run(
        &["-XX:+UseLargePages", "-XX:+UseTransparentHugePages"],
        &machine,
        &p,
    )
    .unwrap();
    assert!(d.large_pages.thp);
    assert_eq!(d.large_pages.explicit, None);
}

/// HotSpot 17's `large_page_init` order, and the origins it leaves (`FLAG_SET_DEFAULT`).
#[test]
fn large_page_switches_in_hotspot_order() {
    use rtvm_flags::Origin;
    let p = pages(ThpMode::Madvise);
    let mut machine = Machine::fake(16 * G as u64, 2);
    machine.hugetlb_usable = |_| true;
    let warned = |d: &Decisions| -> Vec<String> {
        d.large_pages
            .notes
            .iter()
            .filter(|(l, _)| *l == log::Level::Warn)
            .map(|(_, n)| n.clone())
            .collect()
    };
    // THP on: UseLargePages follows, still looking untouched.
    let (s, d) = run(&["-XX:+UseTransparentHugePages"], &machine, &p).unwrap();
    assert!(d.large_pages.thp && s.get(flag::UseLargePages));
    assert_eq!(s.origin(flag::UseLargePages), Origin::DEFAULT);
    // -XX:-UseLargePages switches every kind off, whatever else was asked.
    let (s, d) = run(
        &["-XX:+UseTransparentHugePages", "-XX:-UseLargePages"],
        &machine,
        &p,
    )
    .unwrap();
    assert!(!d.large_pages.thp && d.large_pages.explicit.is_none());
    assert!(!s.get(flag::UseTransparentHugePages));
    assert_eq!(
        s.origin(flag::UseTransparentHugePages),
        Origin::from(rtvm_flags::Source::CommandLine)
    );
    assert!(warned(&d).is_empty());
    // Naming THP (even to switch it off) leaves hugetlbfs untried: no large pages, warned.
    let (s, d) = run(
        &["-XX:-UseTransparentHugePages", "-XX:+UseLargePages"],
        &machine,
        &p,
    )
    .unwrap();
    assert_eq!(d.large_pages.explicit, None);
    assert!(!s.get(flag::UseLargePages));
    assert_eq!(
        s.origin(flag::UseLargePages),
        Origin::from(rtvm_flags::Source::CommandLine)
    );
    assert_eq!(
        warned(&d),
        ["UseLargePages disabled, no large pages configured and available on the system."]
    );
    // THP asked for where the kernel has none: all off, one warning, origins kept.
    let (s, d) = run(
        &["-XX:+UseLargePages", "-XX:+UseTransparentHugePages"],
        &machine,
        &pages(ThpMode::Never),
    )
    .unwrap();
    assert!(!d.large_pages.thp && d.large_pages.explicit.is_none());
    assert!(!s.get(flag::UseLargePages) && !s.get(flag::UseTransparentHugePages));
    assert_eq!(
        s.origin(flag::UseLargePages),
        Origin::from(rtvm_flags::Source::CommandLine)
    );
    assert_eq!(
        warned(&d),
        ["UseTransparentHugePages disabled, transparent huge pages are not supported by the operating system."]
    );
    // Explicit pages that fail: UseLargePages off, still {command line}.
    machine.hugetlb_usable = |_| false;
    let (s, _) = run(&["-XX:+UseLargePages"], &machine, &p).unwrap();
    assert_eq!(
        s.origin(flag::UseLargePages),
        Origin::from(rtvm_flags::Source::CommandLine)
    );
    // Nothing asked: nothing said.
    let (_, d) = run(&[], &machine, &p).unwrap();
    assert!(d.large_pages.notes.is_empty());
}

#[test]
fn one_pretouch_plan_for_heap_and_memories() {
    let machine = Machine::fake(16 * G as u64, 2);
    let (_, d) = ok(
        &[
            "-XX:+AlwaysPreTouch",
            "-XX:PreTouchParallelChunkSize=8m",
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:-UseMadvPopulateWrite",
        ],
        &machine,
    );
    let plan = d.policy.memory.pretouch;
    assert!(plan.enabled && !plan.background);
    assert_eq!(plan.chunk_size, 8 * M);
    assert!(!plan.request.use_populate_write);
    assert_eq!(
        plan.request.page_size,
        4 * K,
        "the stride is the base page, also under THP"
    );
    let (_, d) = ok(
        &[
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+BackgroundPreTouch",
            "-XX:+HoldBackgroundPreTouch",
        ],
        &machine,
    );
    assert!(d.policy.memory.pretouch.background);
    assert!(d.policy.heap.hold_background);
    let (_, d) = ok(&[], &machine);
    assert!(!d.policy.memory.pretouch.enabled);
    assert_eq!(
        d.policy.memory.pretouch.chunk_size,
        4 * M,
        "PreTouchParallelChunkSize's default"
    );
}
