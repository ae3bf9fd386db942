//! Large pages for the heap: transparent huge pages (`UseTransparentHugePages`) or explicit
//! huge pages from hugetlbfs (`UseLargePages`, `LargePageSizeInBytes`), with HotSpot's
//! choice of page size, sanity check and messages.

use rtvm_flags::value::format_exact_size;
use rtvm_flags::{flag, Settings};
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::ThpMode;

use super::{ergo_error, Machine};
use crate::error::CreateError;

/// What was decided about large pages for the heap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LargePages {
    /// The heap (and embedder memories) use transparent huge pages.
    pub thp: bool,
    /// Explicit huge pages (hugetlbfs) for the heap: the large page size and every usable
    /// page size up to it (HotSpot's `UseHugeTLBFS`).
    pub explicit: Option<(usize, Vec<usize>)>,
    /// What choosing the large page size said, for `-Xlog:pagesize`, in order and at its
    /// level (HotSpot says it between the THP facts and the large page decision).
    pub notes: Vec<(log::Level, String)>,
}

impl LargePages {
    /// The page size backing the heap: the THP size, the large page size, or the base page.
    pub fn heap_page(&self, pages: &PageInfo, base_page: usize) -> usize {
        if self.thp {
            pages.thp.pmd_size.unwrap_or(base_page)
        } else if let Some((size, _)) = &self.explicit {
            *size
        } else {
            base_page
        }
    }
}

/// THP when asked for and the kernel has it; else explicit huge pages when asked for: the
/// default huge page size or `LargePageSizeInBytes` if the kernel has that size, which must
/// pass the sanity check (one page can be mapped now), or a smaller size must — else large
/// pages are off, with HotSpot's warning.
pub(super) fn decide(
    s: &mut Settings,
    pages: &PageInfo,
    machine: &Machine,
) -> Result<LargePages, CreateError> {
    let mut notes = Vec::new();
    let thp = &pages.thp;
    let mut use_thp = false;
    if s.get(flag::UseTransparentHugePages) {
        match (thp.mode, thp.pmd_size) {
            (ThpMode::Always | ThpMode::Madvise, Some(_)) => use_thp = true,
            _ => {
                notes.push((log::Level::Warn, "UseTransparentHugePages disabled, transparent huge pages are not supported by the operating system.".into()));
                s.set_ergo(flag::UseTransparentHugePages, false)
                    .map_err(ergo_error)?;
            }
        }
    }
    let mut explicit = None;
    if s.get(flag::UseLargePages) && !use_thp && !s.get(flag::UseTransparentHugePages) {
        let fmt = |b: usize| format_exact_size(b as u64);
        let h = &pages.hugetlb;
        let chosen = h.default_size.filter(|_| h.consistent()).map(|default| {
            let wanted = s.get(flag::LargePageSizeInBytes);
            if wanted == 0 || wanted == default {
                notes.push((log::Level::Info, format!("Using the default large page size: {}", fmt(default))));
                default
            } else if h.sizes.contains(&wanted) {
                notes.push((log::Level::Info, format!("Overriding default large page size ({}) using LargePageSizeInBytes: {}", fmt(default), fmt(wanted))));
                wanted
            } else {
                notes.push((log::Level::Info, format!("LargePageSizeInBytes is not a valid large page size ({}) using the default large page size: {}", fmt(wanted), fmt(default))));
                default
            }
        });
        let usable = chosen.and_then(|size| {
            if (machine.hugetlb_usable)(size) {
                return Some(size);
            }
            notes.push((log::Level::Info, format!("Large page size ({}) failed sanity check, checking if smaller large page sizes are usable", fmt(size))));
            let smaller = h
                .sizes
                .iter()
                .rev()
                .copied()
                .filter(|&p| p < size)
                .find(|&p| (machine.hugetlb_usable)(p))?;
            notes.push((log::Level::Info, format!("Large page size ({}) passed sanity check", fmt(smaller))));
            // As HotSpot: the default large page size stays the one chosen.
            Some(size)
        });
        match usable {
            Some(size) => {
                let up_to = h.sizes.iter().copied().filter(|&p| p <= size).collect();
                explicit = Some((size, up_to));
            }
            None => {
                notes.push((log::Level::Warn, "UseLargePages disabled, no large pages configured and available on the system.".into()));
                s.set_ergo(flag::UseLargePages, false).map_err(ergo_error)?;
            }
        }
    }
    Ok(LargePages {
        thp: use_thp,
        explicit,
        notes,
    })
}
