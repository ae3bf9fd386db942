//! Ergonomics: what the VM decides beyond what the user set — with HotSpot's formulas,
//! checks and messages — as ordered steps, each a function of the settings and of the
//! machine's facts ([`Machine`], [`PageInfo`]), so each is tested on fake machines:
//!
//! 1. `processors`: the worker gang (`ParallelGCThreads`, `ActiveProcessorCount`);
//! 2. `large_pages`: THP or explicit huge pages for the heap and embedder memories;
//! 3. `heap_size`: `MaxHeapSize`, `InitialHeapSize`, `MinHeapSize` from memory — the point
//!    where `-XX:+PrintCommandLineFlags` prints — then HotSpot's checks and G1's alignment;
//! 4. `nursery`: `NewSize`/`MaxNewSize`;
//! 5. `stacks`: stack sizes, zones, the THP mitigation;
//! 6. the [`Policy`] everything below reads, and `report`: the `-Xlog:pagesize` and
//!    `-Xlog:gc+init` lines that say what was decided.
//!
//! `PreTouchParallelChunkSize`, the pretouch switches and the THP decision are read here and
//! nowhere else: the heap and embedder memories get them as one [`MemoryPolicy`].

mod heap_size;
mod large_pages;
mod machine;
mod nursery;
mod report;
mod stacks;
#[cfg(test)]
mod tests;

use rtvm_flags::{flag, Settings};
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::{PretouchRequest, ThpMode};

use crate::error::{CreateError, ErrorCode};
use crate::policy::{ExplicitPages, HeapPolicy, MemoryPolicy, PagePolicy, Policy, PretouchPlan};

pub(crate) use large_pages::LargePages;
pub(crate) use machine::Machine;
pub(crate) use report::{log_gc_init, log_page_sizes};

/// What ergonomics decided, and what it says about it.
#[derive(Clone, Debug)]
pub(crate) struct Decisions {
    /// The policy the VM runs with.
    pub policy: Policy,
    /// Large pages, with the notes `-Xlog:pagesize` printed (logged while deciding; the
    /// ergonomics tests read them here).
    #[cfg_attr(not(test), allow(dead_code))]
    pub large_pages: LargePages,
    /// Why the stack policy is what it is, for `-Xlog:pagesize`.
    pub stack_reason: String,
}

pub(crate) fn init_error(message: impl Into<String>) -> CreateError {
    CreateError::init(ErrorCode::Inval, message)
}

/// A flag ergonomics set was refused (a value outside its range): an initialization error.
fn ergo_error(message: String) -> CreateError {
    init_error(format!("{message}\n"))
}

/// The worker gang's size: `ParallelGCThreads` if set, else HotSpot's formula over the
/// processors (`ActiveProcessorCount`, else the machine's): all of them up to 8, then 5/8 of
/// the rest — presented as `{default}`, as HotSpot does.
fn processors(s: &mut Settings, machine: &Machine) -> Result<usize, CreateError> {
    let cpus = match s.get(flag::ActiveProcessorCount) {
        n if n > 0 => n as usize,
        _ => machine.processors(),
    };
    debug_assert!(machine.active_processor_count.is_none_or(|n| n == cpus));
    if s.is_default(flag::ParallelGCThreads) {
        let n = if cpus <= 8 {
            cpus
        } else {
            8 + (cpus - 8) * 5 / 8
        };
        s.set_default(flag::ParallelGCThreads, n.min(u32::MAX as usize) as u32)
            .map_err(ergo_error)?;
    }
    Ok(s.get(flag::ParallelGCThreads) as usize)
}

/// Decides what the user left open, in HotSpot's order. `heap_sized` sees the flags at the
/// point where HotSpot prints `-XX:+PrintCommandLineFlags`: heap sizes set from memory,
/// before the heap checks and the collector's alignment (so a failing check still follows
/// the printed flags, as in java).
pub(crate) fn decide(
    s: &mut Settings,
    pages: &PageInfo,
    machine: &Machine,
    heap_sized: &mut dyn FnMut(&Settings),
) -> Result<Decisions, CreateError> {
    let base_page = machine.base_page;
    let gc_threads = processors(s, machine)?;
    let large_pages = large_pages::decide(s, pages, machine)?;
    report::log_large_pages(pages, &large_pages, base_page);
    let heap_page = large_pages.heap_page(pages, base_page);
    heap_size::set_heap_size(s, machine)?;
    heap_sized(s);
    let (min, initial, max) = heap_size::check_and_align(s, heap_page, base_page)?;
    let nursery = nursery::decide(s, initial, max, heap_page)?;
    let (stacks, stack_reason) = stacks::decide(s, pages, machine)?;
    let memory = MemoryPolicy {
        pages: if large_pages.thp {
            PagePolicy {
                page_size: heap_page,
                transparent: heap_page > base_page,
                advise_huge: pages.thp.mode == ThpMode::Madvise,
            }
        } else {
            PagePolicy::base(base_page)
        },
        pretouch: PretouchPlan {
            enabled: s.get(flag::AlwaysPreTouch),
            background: s.get(flag::BackgroundPreTouch),
            chunk_size: s.get(flag::PreTouchParallelChunkSize),
            request: PretouchRequest {
                page_size: base_page,
                use_populate_write: s.get(flag::UseMadvPopulateWrite),
            },
        },
    };
    let heap = HeapPolicy {
        min,
        initial,
        max,
        nursery,
        explicit: large_pages
            .explicit
            .as_ref()
            .map(|&(page_size, _)| ExplicitPages { page_size }),
        hold_background: s.get(flag::HoldBackgroundPreTouch),
    };
    Ok(Decisions {
        policy: Policy {
            gc_threads,
            memory,
            heap,
            stacks,
        },
        large_pages,
        stack_reason,
    })
}
