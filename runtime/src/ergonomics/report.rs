//! What the VM says about its decisions: `-Xlog:pagesize` (page sizes, THP, large pages,
//! stack layout and the mitigation) and `-Xlog:gc+init` (HotSpot's `GCInitLogger` lines).

use rtvm_flags::value::{format_exact_size, format_page_size};
use rtvm_flags::{flag, Flags};
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::stack::kernel_marks_map_stack_nohugepage;

use super::{Decisions, LargePages, Machine};

/// `-Xlog:pagesize`, at HotSpot's point (its `large_page_init`, before the heap is sized and
/// `-XX:+PrintCommandLineFlags` prints): the page sizes and THP modes the kernel reports,
/// what deciding large pages said, and the decision.
pub(super) fn log_large_pages(pages: &PageInfo, lp: &LargePages, base_page: usize) {
    let size = |b: usize| format_exact_size(b as u64);
    let h = &pages.hugetlb;
    log::info!(target: "pagesize", "Static hugepage support:");
    for s in &h.sizes {
        log::info!(target: "pagesize", "  hugepage size: {}", size(*s));
    }
    match h.default_size {
        Some(d) => log::info!(target: "pagesize", "  default hugepage size: {}", size(d)),
        None => log::info!(target: "pagesize", "  default hugepage size: unknown"),
    }
    if !h.consistent() {
        log::info!(target: "pagesize", "  Support inconsistent. JVM will not use explicit hugepages.");
    }
    let t = &pages.thp;
    log::info!(target: "pagesize", "Transparent hugepage (THP) support:");
    log::info!(target: "pagesize", "  THP mode: {}", t.mode);
    match t.pmd_size {
        Some(p) => log::info!(target: "pagesize", "  THP pagesize: {}", size(p)),
        None => log::info!(target: "pagesize", "  THP pagesize: unknown"),
    }
    log::info!(target: "pagesize", "  THP defrag: {}", t.defrag);
    if let Some(n) = t.max_ptes_none {
        log::info!(target: "pagesize", "  khugepaged max_ptes_none: {n}");
    }
    if !t.mthp.is_empty() {
        let list: Vec<String> = t
            .mthp
            .iter()
            .map(|m| {
                format!(
                    "{} {} ({})",
                    format_page_size(m.size as u64),
                    m.setting,
                    m.effective
                )
            })
            .collect();
        log::info!(target: "pagesize", "  mTHP sizes: {}", list.join(", "));
    }
    log::info!(target: "pagesize", "Shared memory transparent hugepage (THP) support:");
    log::info!(target: "pagesize", "  Shared memory THP mode: {}", t.shmem);
    for (level, note) in &lp.notes {
        log::log!(target: "pagesize", *level, "{note}");
    }
    let heap_page = lp.heap_page(pages, base_page);
    if lp.thp {
        log::info!(target: "pagesize", "UseLargePages=1, UseTransparentHugePages=1, UseHugeTLBFS=0, UseSHM=0");
        log::info!(
            target: "pagesize",
            "Large page support enabled. Usable page sizes: {}, {}. Default large page size: {}.",
            format_page_size(base_page as u64),
            format_page_size(heap_page as u64),
            size(heap_page)
        );
    } else if let Some((large, usable)) = &lp.explicit {
        log::info!(target: "pagesize", "UseLargePages=1, UseTransparentHugePages=0, UseHugeTLBFS=1, UseSHM=0");
        let mut list = vec![format_page_size(base_page as u64)];
        list.extend(usable.iter().map(|&p| format_page_size(p as u64)));
        log::info!(
            target: "pagesize",
            "Large page support enabled. Usable page sizes: {}. Default large page size: {}.",
            list.join(", "),
            size(*large)
        );
    } else {
        log::info!(target: "pagesize", "Large page support disabled.");
    }
}

/// `-Xlog:pagesize`, rtvm's own lines once the VM is set up: the thread stacks' layout and
/// the THP stack mitigation.
pub(crate) fn log_page_sizes(d: &Decisions) {
    log::info!(
        target: "pagesize",
        "Kernel marks MAP_STACK mappings MADV_NOHUGEPAGE (nh): {} (rtvm does not rely on it)",
        if kernel_marks_map_stack_nohugepage() { "yes" } else { "no" }
    );
    if d.policy.stacks.mitigated {
        log::info!(target: "pagesize", "JVM will attempt to prevent THPs in thread stacks.");
    } else {
        log::info!(target: "pagesize", "JVM will *not* prevent THPs in thread stacks. This may cause high RSS.");
    }
    log::info!(target: "pagesize", "THP stack mitigation: {}", d.stack_reason);
    let stacks = &d.policy.stacks;
    let z = &stacks.zones;
    log::info!(
        target: "pagesize",
        "Thread stacks: guard zone {}K (red {}K, yellow {}K, reserved {}K), shadow zone {}K, signal stack {}K behind a {}K guard page",
        z.total() / 1024,
        z.red / 1024,
        z.yellow / 1024,
        z.reserved / 1024,
        stacks.shadow_zone / 1024,
        stacks.alt_stack_size / 1024,
        stacks.page / 1024
    );
}

/// `-Xlog:gc+init`: HotSpot's start-up summary (its `GCInitLogger` lines, those rtvm has a
/// meaning for), plus the heap's page size.
pub(crate) fn log_gc_init(flags: &Flags, machine: &Machine, heap_pages: &str, workers: usize) {
    if !log::log_enabled!(target: "gc+init", log::Level::Info) {
        return;
    }
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let info = |text: String| log::info!(target: "gc+init", "{text}");
    info(format!(
        "Version: {} ({profile})",
        env!("CARGO_PKG_VERSION")
    ));
    info(format!(
        "CPUs: {} total, {} available",
        rtvm_os_linux::system::configured_processors(),
        machine.processors()
    ));
    info(format!(
        "Memory: {}",
        rtvm_flags::value::format_proper_size(machine.memory())
    ));
    let large_pages = if flags.get(flag::UseTransparentHugePages) {
        "Enabled (Transparent)"
    } else if flags.get(flag::UseLargePages) {
        "Enabled (Explicit)"
    } else {
        "Disabled"
    };
    info(format!("Large Page Support: {large_pages}"));
    info("NUMA Support: Disabled".into());
    info(format!("Heap Page Size: {heap_pages}"));
    let size = |f| rtvm_flags::value::format_exact_size(flags.get(f) as u64);
    info(format!("Heap Min Capacity: {}", size(flag::MinHeapSize)));
    info(format!(
        "Heap Initial Capacity: {}",
        size(flag::InitialHeapSize)
    ));
    info(format!("Heap Max Capacity: {}", size(flag::MaxHeapSize)));
    let enabled = |b: bool| if b { "Enabled" } else { "Disabled" };
    info(format!(
        "Pre-touch: {}",
        enabled(flags.get(flag::AlwaysPreTouch))
    ));
    info(format!("Parallel Workers: {workers}"));
}
