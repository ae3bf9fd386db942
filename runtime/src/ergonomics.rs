//! Ergonomics: what the VM decides beyond what the user set — processors and workers, heap
//! sizes, stack sizes and zones, THP for the heap and the stacks — with HotSpot's formulas,
//! checks and messages, and the `-Xlog:pagesize` lines that say what was decided.

use rtvm_flags::value::{format_exact_size, format_page_size, G, K, M};
use rtvm_flags::{flag, Settings};
use rtvm_os_linux::container::{self, ContainerInfo};
use rtvm_os_linux::pages::{PageInfo, SysRoots};
use rtvm_os_linux::stack::{kernel_marks_map_stack_nohugepage, recommended_alt_stack_size};
use rtvm_os_linux::{base_page_size, system, GuardZones, PretouchRequest, ThpMode};

use crate::error::{CreateError, ErrorCode};
use crate::heap::{HeapConfig, HeapError};
use crate::threads::{StackPolicy, ThreadError};

/// What ergonomics decided beyond flag values.
pub(crate) struct Ergo {
    pub gc_threads: usize,
    pub heap: HeapConfig,
    pub policy: StackPolicy,
    /// Why the stack policy is what it is, for `-Xlog:pagesize`.
    pub stack_reason: String,
    pub thp_heap: bool,
    /// Explicit huge pages (hugetlbfs) for the heap: the large page size and every usable
    /// page size up to it (HotSpot's `UseHugeTLBFS`).
    pub explicit_pages: Option<(usize, Vec<usize>)>,
    /// What choosing the large page size said, for `-Xlog:pagesize`, in order and at its
    /// level (HotSpot says it between the THP facts and the large page decision).
    pub large_page_notes: Vec<(log::Level, String)>,
}

pub(crate) fn init_error(message: impl Into<String>) -> CreateError {
    CreateError::init(ErrorCode::Inval, message)
}

/// A thread the VM needed could not start: `ENOMEM` for memory, `EAGAIN` for limits.
pub(crate) fn thread_create_error(e: ThreadError) -> CreateError {
    let code = match &e {
        ThreadError::Start { errno, .. } if *errno == rtvm_os_linux::Errno::ENOMEM => {
            ErrorCode::NoMem
        }
        ThreadError::Start { errno, .. } if *errno == rtvm_os_linux::Errno::EAGAIN => {
            ErrorCode::Again
        }
        _ => ErrorCode::Err,
    };
    CreateError::init(code, format!("{e}\n"))
}

pub(crate) fn heap_create_error(e: HeapError) -> CreateError {
    let code = match &e {
        HeapError::Reserve { os, .. } | HeapError::Commit(os) | HeapError::Pretouch(os)
            if os.is_out_of_memory() =>
        {
            ErrorCode::NoMem
        }
        _ => ErrorCode::Err,
    };
    CreateError::init(code, format!("{e}\n"))
}

/// HotSpot's `OldSize` default (4M scaled for 64-bit words): with `NewSize`, the smallest
/// heap it sizes for.
const OLD_SIZE: u64 = 5_452_592;

/// The largest heap compressed oops address (32G less the null page padded to G1's largest
/// region): HotSpot caps an ergonomic maximum there unless the user sized by percentage.
const MAX_COMPRESSED_OOPS_HEAP: u64 = 32 * G - 32 * M;

fn to_size(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// The memory and processors the VM sizes itself for: the host's, or its container's when
/// `UseContainerSupport` finds limits (HotSpot's `os::physical_memory` and
/// `os::active_processor_count`).
pub(crate) struct Machine {
    host_memory: u64,
    host_processors: usize,
    container: Option<ContainerInfo>,
}

impl Machine {
    /// Looks at the host and, with container support on, at the process's cgroups; says what
    /// it found under `os+container` and `os`, as HotSpot does.
    pub fn detect(container_support: bool) -> Machine {
        let host_memory = system::physical_memory().unwrap_or(1 << 30);
        let host_processors = system::affinity_processors();
        let container = if container_support {
            let c = container::detect(&SysRoots::default(), host_memory, host_processors);
            for (level, text) in &c.notes {
                log::log!(target: "os+container", *level, "{text}");
            }
            Some(c).filter(|c| c.version.is_some())
        } else {
            log::trace!(target: "os+container", "OSContainer::init: Initializing Container Support");
            log::trace!(target: "os+container", "Container Support not enabled");
            None
        };
        let machine = Machine {
            host_memory,
            host_processors,
            container,
        };
        match machine.container.as_ref().and_then(|c| c.memory_limit) {
            Some(limit) => log::trace!(target: "os", "total container memory: {limit}"),
            None => {
                if machine.container.is_some() {
                    log::debug!(target: "os+container", "container memory limit unlimited: -1, using host value {host_memory}");
                }
                log::trace!(target: "os", "total system memory: {host_memory}");
            }
        }
        machine
    }

    /// The memory to size the heap for: the container's limit, else the host's.
    pub fn memory(&self) -> u64 {
        self.container
            .as_ref()
            .and_then(|c| c.memory_limit)
            .unwrap_or(self.host_memory)
    }

    /// The processors to size thread pools for: the affinity mask, under a container's quota.
    pub fn processors(&self) -> usize {
        self.container
            .as_ref()
            .map_or(self.host_processors, |c| c.processors)
    }
}

/// Decides what the user left open. `heap_sized` sees the flags at the point where HotSpot
/// prints `-XX:+PrintCommandLineFlags`: heap sizes set from memory, before the heap checks and
/// the collector's alignment (so a failing check still follows the printed flags, as in java).
pub(crate) fn ergonomics(
    s: &mut Settings,
    pages: &PageInfo,
    machine: &Machine,
    heap_sized: &mut dyn FnMut(&Settings),
) -> Result<Ergo, CreateError> {
    let ergo_err = |m: String| init_error(format!("{m}\n"));
    let page = base_page_size();

    // Processors and workers.
    let cpus = match s.get(flag::ActiveProcessorCount) {
        n if n > 0 => n as usize,
        _ => machine.processors(),
    };
    if s.is_default(flag::ParallelGCThreads) {
        let n = if cpus <= 8 {
            cpus
        } else {
            8 + (cpus - 8) * 5 / 8
        };
        // HotSpot presents this derived value as {default}.
        s.set_default(flag::ParallelGCThreads, n.min(u32::MAX as usize) as u32)
            .map_err(ergo_err)?;
    }
    let gc_threads = s.get(flag::ParallelGCThreads) as usize;

    // THP for the heap.
    let mut large_page_notes = Vec::new();
    let thp = &pages.thp;
    let mut thp_heap = false;
    if s.get(flag::UseTransparentHugePages) {
        match (thp.mode, thp.pmd_size) {
            (ThpMode::Always | ThpMode::Madvise, Some(_)) => thp_heap = true,
            _ => {
                large_page_notes.push((log::Level::Warn, "UseTransparentHugePages disabled, transparent huge pages are not supported by the operating system.".into()));
                s.set_ergo(flag::UseTransparentHugePages, false)
                    .map_err(ergo_err)?;
            }
        }
    }
    // Explicit huge pages (HotSpot's UseLargePages with hugetlbfs): the size is the default
    // hugepage size or LargePageSizeInBytes, if that is one the kernel has; it must pass the
    // sanity check (one page can be mapped now), or a smaller size must, else large pages
    // are off.
    let mut explicit_pages = None;
    if s.get(flag::UseLargePages) && !thp_heap && !s.get(flag::UseTransparentHugePages) {
        let fmt = |b: usize| format_exact_size(b as u64);
        let sizes = &pages.hugetlb.sizes;
        let chosen = pages.hugetlb.default_size.filter(|_| pages.hugetlb.consistent()).map(|default| {
            let wanted = s.get(flag::LargePageSizeInBytes);
            if wanted == 0 || wanted == default {
                large_page_notes.push((log::Level::Info, format!("Using the default large page size: {}", fmt(default))));
                default
            } else if sizes.contains(&wanted) {
                large_page_notes.push((log::Level::Info, format!("Overriding default large page size ({}) using LargePageSizeInBytes: {}", fmt(default), fmt(wanted))));
                wanted
            } else {
                large_page_notes.push((log::Level::Info, format!("LargePageSizeInBytes is not a valid large page size ({}) using the default large page size: {}", fmt(wanted), fmt(default))));
                default
            }
        });
        let usable = chosen.and_then(|size| {
            if rtvm_os_linux::pages::HugetlbInfo::sanity_check(size) {
                return Some(size);
            }
            large_page_notes.push((log::Level::Info, format!("Large page size ({}) failed sanity check, checking if smaller large page sizes are usable", fmt(size))));
            let smaller = sizes.iter().rev().copied().filter(|&p| p < size).find(|&p| rtvm_os_linux::pages::HugetlbInfo::sanity_check(p))?;
            large_page_notes.push((log::Level::Info, format!("Large page size ({}) passed sanity check", fmt(smaller))));
            // As HotSpot: the default large page size stays the one chosen.
            Some(size)
        });
        match usable {
            Some(size) => {
                let up_to: Vec<usize> = sizes.iter().copied().filter(|&p| p <= size).collect();
                explicit_pages = Some((size, up_to));
            }
            None => {
                large_page_notes.push((log::Level::Warn, "UseLargePages disabled, no large pages configured and available on the system.".into()));
                s.set_ergo(flag::UseLargePages, false).map_err(ergo_err)?;
            }
        }
    }
    let heap_page = if thp_heap {
        thp.pmd_size.unwrap_or(page)
    } else if let Some((size, _)) = &explicit_pages {
        *size
    } else {
        page
    };
    let align_down = |v: usize| v & !(heap_page - 1);

    // Heap sizes: HotSpot 17's set_heap_size, from the memory of the machine or of the
    // container, then GCArguments' checks and the alignment of the three sizes.
    let is_cmdline = |o: rtvm_flags::Origin| o.source == rtvm_flags::Source::CommandLine;
    let percentages_given = !s.is_default(flag::MaxRAMPercentage)
        || !s.is_default(flag::MinRAMPercentage)
        || !s.is_default(flag::InitialRAMPercentage);
    // A user who sizes by percentage or MaxRAM means it: no compressed-oops cap, and the
    // machine's memory rather than the MaxRAM default.
    let override_coop_limit = percentages_given || !s.is_default(flag::MaxRAM);
    let phys_mem = if !s.is_default(flag::MaxRAM) {
        s.get(flag::MaxRAM)
    } else if override_coop_limit {
        s.set_ergo(flag::MaxRAM, machine.memory())
            .map_err(ergo_err)?;
        machine.memory()
    } else {
        machine.memory().min(s.get(flag::MaxRAM))
    };
    let percent_of_phys = |p: f64| (phys_mem as f64 * p / 100.0) as u64;
    // HotSpot's limit_by_allocatable_memory: half the address-space limit, if there is one.
    let allocatable_limit = system::soft_limit(system::Limit::AddressSpace);
    let by_allocatable = |v: u64| allocatable_limit.map_or(v, |l| v.min(l / 2));
    if s.is_default(flag::MaxHeapSize) {
        let default_max = s.get(flag::MaxHeapSize) as u64;
        let reasonable_min = percent_of_phys(s.get(flag::MinRAMPercentage));
        let mut reasonable_max = if reasonable_min < default_max {
            // Small memory: a larger fraction of it.
            reasonable_min
        } else {
            percent_of_phys(s.get(flag::MaxRAMPercentage)).max(default_max)
        };
        if !override_coop_limit {
            reasonable_max = reasonable_max.min(MAX_COMPRESSED_OOPS_HEAP);
        }
        reasonable_max = by_allocatable(reasonable_max);
        if !s.is_default(flag::InitialHeapSize) {
            reasonable_max = reasonable_max.max(s.get(flag::InitialHeapSize) as u64);
        } else if !s.is_default(flag::MinHeapSize) {
            reasonable_max = reasonable_max.max(s.get(flag::MinHeapSize) as u64);
        }
        log::trace!(target: "gc+heap", "  Maximum heap size {reasonable_max}");
        s.set_ergo(flag::MaxHeapSize, to_size(reasonable_max))
            .map_err(ergo_err)?;
    }
    if s.get(flag::InitialHeapSize) == 0 || s.get(flag::MinHeapSize) == 0 {
        let max = s.get(flag::MaxHeapSize) as u64;
        let reasonable_minimum = by_allocatable(
            OLD_SIZE
                .saturating_add(s.get(flag::NewSize) as u64)
                .min(max),
        );
        if s.get(flag::InitialHeapSize) == 0 {
            let initial = by_allocatable(percent_of_phys(s.get(flag::InitialRAMPercentage)))
                .max(reasonable_minimum)
                .max(s.get(flag::MinHeapSize) as u64)
                .min(max);
            s.set_ergo(flag::InitialHeapSize, to_size(initial))
                .map_err(ergo_err)?;
            log::trace!(target: "gc+heap", "  Initial heap size {initial}");
        }
        if s.get(flag::MinHeapSize) == 0 {
            let min = reasonable_minimum.min(s.get(flag::InitialHeapSize) as u64);
            s.set_ergo(flag::MinHeapSize, to_size(min))
                .map_err(ergo_err)?;
            log::trace!(target: "gc+heap", "  Minimum heap size {min}");
        }
    }
    heap_sized(s);
    if is_cmdline(s.origin(flag::MaxHeapSize)) {
        if is_cmdline(s.origin(flag::InitialHeapSize))
            && s.get(flag::InitialHeapSize) > s.get(flag::MaxHeapSize)
        {
            return Err(init_error(
                "Initial heap size set to a larger value than the maximum heap size\n",
            ));
        }
        if is_cmdline(s.origin(flag::MinHeapSize))
            && s.get(flag::MaxHeapSize) < s.get(flag::MinHeapSize)
        {
            return Err(init_error(
                "Incompatible minimum and maximum heap sizes specified\n",
            ));
        }
    }
    if s.get(flag::MaxHeapSize) < 2 * M as usize {
        return Err(init_error("Too small maximum heap\n"));
    }
    if s.get(flag::InitialHeapSize) < M as usize {
        return Err(init_error("Too small initial heap\n"));
    }
    if s.get(flag::MinHeapSize) < M as usize {
        return Err(init_error("Too small minimum heap\n"));
    }
    // G1's heap alignment: the region size (MaxHeapSize/2048 rounded up to a power of two,
    // 1M to 32M), the card table's page-granular constraint, the heap's page size.
    let region = (s.get(flag::MaxHeapSize) / 2048)
        .max(M as usize)
        .next_power_of_two()
        .clamp(M as usize, 32 * M as usize);
    let heap_alignment = region.max(512 * page).max(heap_page);
    let align_heap = |v: usize| {
        v.checked_next_multiple_of(heap_alignment)
            .ok_or_else(|| init_error("Too large maximum heap\n"))
    };
    for f in [flag::MinHeapSize, flag::InitialHeapSize, flag::MaxHeapSize] {
        let aligned = align_heap(s.get(f))?;
        if aligned != s.get(f) {
            s.set_ergo(f, aligned).map_err(ergo_err)?;
        }
    }
    if is_cmdline(s.origin(flag::InitialHeapSize))
        && is_cmdline(s.origin(flag::MinHeapSize))
        && s.get(flag::InitialHeapSize) < s.get(flag::MinHeapSize)
    {
        return Err(init_error(
            "Incompatible minimum and initial heap sizes specified\n",
        ));
    }
    if !s.is_default(flag::InitialHeapSize)
        && s.get(flag::InitialHeapSize) > s.get(flag::MaxHeapSize)
    {
        s.set_ergo(flag::MaxHeapSize, s.get(flag::InitialHeapSize))
            .map_err(ergo_err)?;
    } else if !s.is_default(flag::MaxHeapSize)
        && s.get(flag::InitialHeapSize) > s.get(flag::MaxHeapSize)
    {
        s.set_ergo(flag::InitialHeapSize, s.get(flag::MaxHeapSize))
            .map_err(ergo_err)?;
        if s.get(flag::InitialHeapSize) < s.get(flag::MinHeapSize) {
            s.set_ergo(flag::MinHeapSize, s.get(flag::InitialHeapSize))
                .map_err(ergo_err)?;
        }
    }
    let max = s.get(flag::MaxHeapSize);
    let initial = s.get(flag::InitialHeapSize);

    // The nursery: HotSpot's young-generation sizing rules and warnings (`gc+ergo`), with
    // its generation alignment. There is a nursery only when NewSize was given.
    const GEN_ALIGNMENT: usize = 64 * K as usize;
    // HotSpot's FLAG_IS_CMDLINE (the -X size options count as command line wherever they
    // came from); a NewSize from the environment or a settings file still makes a nursery.
    let on_command_line = is_cmdline;
    let new_given = s.origin(flag::NewSize).source != rtvm_flags::Source::Default;
    let new_cmdline = on_command_line(s.origin(flag::NewSize));
    let max_new_given = s.origin(flag::MaxNewSize).source != rtvm_flags::Source::Default;
    let max_new_cmdline = on_command_line(s.origin(flag::MaxNewSize));
    let bound_minus_alignment =
        |desired: usize, maximum: usize| desired.min(maximum.saturating_sub(GEN_ALIGNMENT));
    let mut new_size = s.get(flag::NewSize);
    if new_cmdline && new_size >= initial {
        log::warn!(target: "gc+ergo", "NewSize was set larger than initial heap size, will use initial heap size.");
        new_size = bound_minus_alignment(new_size, initial);
        s.set_ergo(flag::NewSize, new_size).map_err(ergo_err)?;
    }
    if new_given {
        let aligned = (new_size & !(GEN_ALIGNMENT - 1)).max(GEN_ALIGNMENT);
        if aligned != new_size {
            new_size = aligned;
            s.set_ergo(flag::NewSize, new_size).map_err(ergo_err)?;
        }
    }
    let mut max_new = s.get(flag::MaxNewSize);
    if max_new_given {
        if max_new >= max {
            let smaller = max - GEN_ALIGNMENT;
            if max_new_cmdline {
                log::warn!(target: "gc+ergo", "MaxNewSize ({}k) is equal to or greater than the entire heap ({}k).  A new max generation size of {}k will be used.", max_new / 1024, max / 1024, smaller / 1024);
            }
            max_new = smaller;
            s.set_ergo(flag::MaxNewSize, max_new).map_err(ergo_err)?;
            if new_size > max_new {
                new_size = max_new;
                s.set_ergo(flag::NewSize, new_size).map_err(ergo_err)?;
            }
        } else if max_new < new_size {
            max_new = new_size;
            s.set_ergo(flag::MaxNewSize, max_new).map_err(ergo_err)?;
        } else if !max_new.is_multiple_of(GEN_ALIGNMENT) {
            max_new &= !(GEN_ALIGNMENT - 1);
            s.set_ergo(flag::MaxNewSize, max_new).map_err(ergo_err)?;
        }
    }
    if new_size > max_new {
        if max_new_cmdline {
            log::warn!(target: "gc+ergo", "NewSize ({}k) is greater than the MaxNewSize ({}k). A new max generation size of {}k will be used.", new_size / 1024, max_new / 1024, new_size / 1024);
        }
        s.set_ergo(flag::MaxNewSize, new_size).map_err(ergo_err)?;
    }
    // The nursery itself lives in the committed heap, in whole heap pages.
    let nursery = if new_given {
        align_down(new_size.min(initial))
    } else {
        0
    };

    // Stacks: HotSpot's zones (in 4K pages), the alternate signal stack, the mitigation.
    let system_default = system::stack_rlimit().unwrap_or(8 * M).min(M * K) as usize;
    let k_to_bytes = |k: i64| {
        if k == 0 {
            system_default
        } else {
            k as usize * K as usize
        }
    };
    let pages_to_bytes = |n: i64| (n as usize * 4096).div_ceil(page) * page;
    let zones = GuardZones {
        red: pages_to_bytes(s.get(flag::StackRedPages)),
        yellow: pages_to_bytes(s.get(flag::StackYellowPages)),
        reserved: pages_to_bytes(s.get(flag::StackReservedPages)),
    };
    let (mitigated, stack_reason) =
        StackPolicy::decide(s.get(flag::DisableTHPStackMitigation), pages);
    let policy = StackPolicy {
        mitigated,
        thp_page_size: thp.pmd_size,
        delay_start: s.get(flag::DelayThreadStartALot),
        pretouch_stacks: s.get(flag::AlwaysPreTouchStacks),
        pretouch_request: PretouchRequest {
            page_size: page,
            use_populate_write: s.get(flag::UseMadvPopulateWrite),
        },
        java_stack_size: k_to_bytes(s.get(flag::ThreadStackSize)),
        vm_stack_size: k_to_bytes(s.get(flag::VMThreadStackSize)),
        zones,
        shadow_zone: pages_to_bytes(s.get(flag::StackShadowPages)),
        alt_stack_size: recommended_alt_stack_size(),
    };
    // HotSpot's checks and words; printed on stdout with a leading empty line.
    let java_min = policy.minimum_java_stack_size();
    if s.get(flag::ThreadStackSize) != 0 && policy.java_stack_size < java_min {
        return Err(CreateError::args_stdout(format!(
            "\nThe Java thread stack size specified is too small. Specify at least {}k\n",
            java_min / 1024
        )));
    }
    let vm_min = policy.minimum_vm_stack_size();
    if s.get(flag::VMThreadStackSize) != 0 && policy.vm_stack_size < vm_min {
        return Err(CreateError::args_stdout(format!(
            "\nThe VMThreadStackSize specified is too small. Specify at least {}k\n",
            vm_min / 1024
        )));
    }

    let heap = HeapConfig {
        min: s.get(flag::MinHeapSize),
        initial,
        max,
        nursery,
        advise_huge: thp_heap && thp.mode == ThpMode::Madvise,
        page_size: heap_page,
        explicit_huge_pages: explicit_pages.is_some(),
        default_huge_page: pages.hugetlb.default_size == Some(heap_page),
        pretouch: s.get(flag::AlwaysPreTouch),
        background: s.get(flag::BackgroundPreTouch),
        hold_background: s.get(flag::HoldBackgroundPreTouch),
        chunk_size: s.get(flag::PreTouchParallelChunkSize),
        request: PretouchRequest {
            page_size: page,
            use_populate_write: s.get(flag::UseMadvPopulateWrite),
        },
    };
    Ok(Ergo {
        gc_threads,
        heap,
        policy,
        stack_reason,
        thp_heap,
        explicit_pages,
        large_page_notes,
    })
}

/// `-Xlog:pagesize`: what the VM found and decided, in HotSpot's words where it has them.
pub(crate) fn log_page_sizes(pages: &PageInfo, ergo: &Ergo) {
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
    for (level, note) in &ergo.large_page_notes {
        log::log!(target: "pagesize", *level, "{note}");
    }
    log::info!(
        target: "pagesize",
        "Kernel marks MAP_STACK mappings MADV_NOHUGEPAGE (nh): {} (rtvm does not rely on it)",
        if kernel_marks_map_stack_nohugepage() { "yes" } else { "no" }
    );
    if ergo.policy.mitigated {
        log::info!(target: "pagesize", "JVM will attempt to prevent THPs in thread stacks.");
    } else {
        log::info!(target: "pagesize", "JVM will *not* prevent THPs in thread stacks. This may cause high RSS.");
    }
    log::info!(target: "pagesize", "THP stack mitigation: {}", ergo.stack_reason);
    let z = &ergo.policy.zones;
    log::info!(
        target: "pagesize",
        "Thread stacks: guard zone {}K (red {}K, yellow {}K, reserved {}K), shadow zone {}K, signal stack {}K behind a {}K guard page",
        z.total() / 1024,
        z.red / 1024,
        z.yellow / 1024,
        z.reserved / 1024,
        ergo.policy.shadow_zone / 1024,
        ergo.policy.alt_stack_size / 1024,
        base_page_size() / 1024
    );
    if ergo.thp_heap {
        log::info!(target: "pagesize", "UseLargePages=1, UseTransparentHugePages=1, UseHugeTLBFS=0, UseSHM=0");
        log::info!(
            target: "pagesize",
            "Large page support enabled. Usable page sizes: {}, {}. Default large page size: {}.",
            format_page_size(base_page_size() as u64),
            format_page_size(ergo.heap.page_size as u64),
            size(ergo.heap.page_size)
        );
    } else if let Some((size, usable)) = &ergo.explicit_pages {
        log::info!(target: "pagesize", "UseLargePages=1, UseTransparentHugePages=0, UseHugeTLBFS=1, UseSHM=0");
        let mut list = vec![format_page_size(base_page_size() as u64)];
        list.extend(usable.iter().map(|&p| format_page_size(p as u64)));
        log::info!(
            target: "pagesize",
            "Large page support enabled. Usable page sizes: {}. Default large page size: {}.",
            list.join(", "),
            size_of(*size)
        );
    } else {
        log::info!(target: "pagesize", "Large page support disabled.");
    }
}

fn size_of(b: usize) -> String {
    format_exact_size(b as u64)
}
