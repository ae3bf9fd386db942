//! The policy ergonomics decided, once, from flags and machine facts — read by everything
//! below it (the heap, embedder memories, threads, the pretouch engine), which never read a
//! flag themselves.
//!
//! One [`MemoryPolicy`] serves the heap and every embedder memory: the transparent-huge-page
//! decision (page size, alignment and `MADV_HUGEPAGE` advice) and the [`PretouchPlan`]
//! (`AlwaysPreTouch`, `BackgroundPreTouch`, `PreTouchParallelChunkSize`,
//! `UseMadvPopulateWrite`). The heap adds only what is its own ([`HeapPolicy`]: sizes, the
//! nursery, explicit huge pages).

use rtvm_flags::value::format_exact_size;
use rtvm_os_linux::PretouchRequest;

use crate::threads::StackPolicy;

/// The pages a mapping is backed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PagePolicy {
    /// The page size backing the mapping, and its alignment: the THP size under
    /// `-XX:+UseTransparentHugePages` (when the kernel has THP), else the base page size.
    pub page_size: usize,
    /// Whether the base page size is smaller than `page_size` because of THP.
    pub transparent: bool,
    /// Advise `MADV_HUGEPAGE` (THP mode `madvise`; in mode `always` the kernel needs none).
    pub advise_huge: bool,
}

impl PagePolicy {
    /// Base pages, no advice.
    pub fn base(base_page: usize) -> PagePolicy {
        PagePolicy {
            page_size: base_page,
            transparent: false,
            advise_huge: false,
        }
    }

    /// The pages in words: `2M transparent huge pages`, `4K pages`.
    pub fn description(&self) -> String {
        let size = format_exact_size(self.page_size as u64);
        if self.transparent {
            format!("{size} transparent huge pages")
        } else {
            format!("{size} pages")
        }
    }
}

/// How committed memory is made resident.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PretouchPlan {
    /// `AlwaysPreTouch`: pretouch what is committed, at reservation and at every growth.
    pub enabled: bool,
    /// `BackgroundPreTouch`: the initial part is pretouched while the memory is already used.
    pub background: bool,
    /// `PreTouchParallelChunkSize`, as given (a task aligns it to its page size).
    pub chunk_size: usize,
    /// The primitive and stride (`UseMadvPopulateWrite`; the stride is the base page size,
    /// because a THP fault that falls back to small pages would leave a huge-page stride
    /// untouched).
    pub request: PretouchRequest,
}

impl PretouchPlan {
    /// The chunk a task over pages of `page_size` claims: the chunk size aligned down to the
    /// page size, never below one page (HotSpot's `PretouchTask`).
    pub fn chunk_for(&self, page_size: usize) -> usize {
        (self.chunk_size & !(page_size - 1)).max(page_size)
    }
}

/// The policy of memory the VM maps for data: the heap and embedder memories.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemoryPolicy {
    /// Pages and advice.
    pub pages: PagePolicy,
    /// Pretouching.
    pub pretouch: PretouchPlan,
}

/// Explicit huge pages (hugetlbfs) for the heap: `UseLargePages` with a page size the kernel
/// has pages of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExplicitPages {
    /// The large page size.
    pub page_size: usize,
}

/// What is the heap's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeapPolicy {
    /// `MinHeapSize`.
    pub min: usize,
    /// `InitialHeapSize`.
    pub initial: usize,
    /// `MaxHeapSize`.
    pub max: usize,
    /// `NewSize`: the nursery at the low end (0 = none).
    pub nursery: usize,
    /// Explicit huge pages instead of [`MemoryPolicy::pages`].
    pub explicit: Option<ExplicitPages>,
    /// `HoldBackgroundPreTouch`: the background pretouch starts held.
    pub hold_background: bool,
}

/// Everything ergonomics decided, in one value the VM owns.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    /// `ParallelGCThreads`: the worker gang's size.
    pub gc_threads: usize,
    /// Pages and pretouch for the heap and embedder memories.
    pub memory: MemoryPolicy,
    /// The heap's sizes and explicit pages.
    pub heap: HeapPolicy,
    /// Thread stacks.
    pub stacks: StackPolicy,
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: usize = 1024;
    const M: usize = K * K;

    fn plan(chunk_size: usize) -> PretouchPlan {
        PretouchPlan {
            enabled: true,
            background: false,
            chunk_size,
            request: PretouchRequest {
                page_size: 4 * K,
                use_populate_write: true,
            },
        }
    }

    #[test]
    fn chunk_is_aligned_down_to_the_page_and_never_below_one() {
        assert_eq!(plan(4 * M).chunk_for(4 * K), 4 * M);
        assert_eq!(plan(4 * K).chunk_for(2 * M), 2 * M, "never below one page");
        assert_eq!(plan(5 * M).chunk_for(2 * M), 4 * M, "aligned down");
        assert_eq!(plan(4 * K + 1).chunk_for(4 * K), 4 * K);
    }

    #[test]
    fn page_descriptions() {
        assert_eq!(PagePolicy::base(4 * K).description(), "4K pages");
        let thp = PagePolicy {
            page_size: 2 * M,
            transparent: true,
            advise_huge: true,
        };
        assert_eq!(thp.description(), "2M transparent huge pages");
    }
}
