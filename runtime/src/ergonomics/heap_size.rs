//! Heap sizes: HotSpot 17's `set_heap_size`, from the memory of the machine or of the
//! container, then `GCArguments`' checks and G1's alignment of the three sizes.

use rtvm_flags::value::{G, M};
use rtvm_flags::{flag, Origin, Settings, Source};

use super::{ergo_error, init_error, Machine};
use crate::error::{CreateError, ErrorCode};

/// HotSpot's `OldSize` default (4M scaled for 64-bit words): with `NewSize`, the smallest
/// heap it sizes for.
const OLD_SIZE: u64 = 5_452_592;

/// The largest heap compressed oops address (32G less the null page padded to G1's largest
/// region): HotSpot caps an ergonomic maximum there unless the user sized by percentage.
const MAX_COMPRESSED_OOPS_HEAP: u64 = 32 * G - 32 * M;

/// HotSpot 17's conservative maximum heap alignment on Linux x86-64, which bounds the heap
/// sizes' constraint (the sizes must stay alignable).
const MAX_HEAP_ALIGNMENT: u64 = 64 * M;

fn to_size(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// HotSpot's FLAG_IS_CMDLINE (the -X size options count as command line wherever they
/// came from).
pub(super) fn is_cmdline(o: Origin) -> bool {
    o.source == Source::CommandLine
}

/// `MaxHeapSize`, `InitialHeapSize` and `MinHeapSize` where the user left them open, from
/// the machine's memory (`MaxRAM`, the `*RAMPercentage` flags, the compressed-oops cap,
/// half of `RLIMIT_AS`): the sizes `-XX:+PrintCommandLineFlags` shows.
pub(super) fn set_heap_size(s: &mut Settings, machine: &Machine) -> Result<(), CreateError> {
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
            .map_err(ergo_error)?;
        machine.memory()
    } else {
        machine.memory().min(s.get(flag::MaxRAM))
    };
    let percent_of_phys = |p: f64| (phys_mem as f64 * p / 100.0) as u64;
    // HotSpot's limit_by_allocatable_memory: half the address-space limit, if there is one.
    let by_allocatable = |v: u64| machine.address_space_limit.map_or(v, |l| v.min(l / 2));
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
            .map_err(ergo_error)?;
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
                .map_err(ergo_error)?;
            log::trace!(target: "gc+heap", "  Initial heap size {initial}");
        }
        if s.get(flag::MinHeapSize) == 0 {
            let min = reasonable_minimum.min(s.get(flag::InitialHeapSize) as u64);
            s.set_ergo(flag::MinHeapSize, to_size(min))
                .map_err(ergo_error)?;
            log::trace!(target: "gc+heap", "  Minimum heap size {min}");
        }
    }
    Ok(())
}

/// `GCArguments`' checks on the three sizes, then G1's heap alignment (the region size —
/// `MaxHeapSize/2048` rounded up to a power of two, 1M to 32M —, the card table's
/// page-granular constraint, the heap's page size) and the last consistency fixes.
/// Returns `(min, initial, max)`.
pub(super) fn check_and_align(
    s: &mut Settings,
    heap_page: usize,
    base_page: usize,
) -> Result<(usize, usize, usize), CreateError> {
    // HotSpot's constraint on the three sizes: at most the largest size its most
    // conservative heap alignment (64M on Linux x86-64) can align, one line per violation,
    // reported as an argument error (java -XX:MaxHeapSize=18446744073642442753).
    let aligned_max = !(MAX_HEAP_ALIGNMENT - 1);
    let mut violations = String::new();
    for f in [flag::MinHeapSize, flag::InitialHeapSize, flag::MaxHeapSize] {
        let v = s.get(f) as u64;
        if v > aligned_max {
            violations.push_str(&format!(
                "{} ({v}) must be less than or equal to aligned maximum value ({aligned_max})\n",
                f.info().name
            ));
        }
    }
    if !violations.is_empty() {
        return Err(CreateError::args(ErrorCode::Inval, violations));
    }
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
    let region = (s.get(flag::MaxHeapSize) / 2048)
        .max(M as usize)
        .next_power_of_two()
        .clamp(M as usize, 32 * M as usize);
    let heap_alignment = region.max(512 * base_page).max(heap_page);
    for f in [flag::MinHeapSize, flag::InitialHeapSize, flag::MaxHeapSize] {
        let aligned = s
            .get(f)
            .checked_next_multiple_of(heap_alignment)
            .ok_or_else(|| init_error("Too large maximum heap\n"))?;
        if aligned != s.get(f) {
            s.set_ergo(f, aligned).map_err(ergo_error)?;
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
            .map_err(ergo_error)?;
    } else if !s.is_default(flag::MaxHeapSize)
        && s.get(flag::InitialHeapSize) > s.get(flag::MaxHeapSize)
    {
        s.set_ergo(flag::InitialHeapSize, s.get(flag::MaxHeapSize))
            .map_err(ergo_error)?;
        if s.get(flag::InitialHeapSize) < s.get(flag::MinHeapSize) {
            s.set_ergo(flag::MinHeapSize, s.get(flag::InitialHeapSize))
                .map_err(ergo_error)?;
        }
    }
    Ok((
        s.get(flag::MinHeapSize),
        s.get(flag::InitialHeapSize),
        s.get(flag::MaxHeapSize),
    ))
}
