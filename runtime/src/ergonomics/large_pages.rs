//! Large pages for the heap: transparent huge pages (`UseTransparentHugePages`) or explicit
//! huge pages from hugetlbfs (`UseLargePages`, `LargePageSizeInBytes`), decided in the order
//! of HotSpot 17's `large_page_init`, with its page-size choice, sanity check and messages.

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
    /// What deciding said, for `-Xlog:pagesize`, in order and at its level (HotSpot says it
    /// after the THP facts, before the large page decision).
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

const NO_LARGE_PAGES: &str =
    "UseLargePages disabled, no large pages configured and available on the system.";
const NO_THP: &str = "UseTransparentHugePages disabled, transparent huge pages are not supported by the operating system.";

/// HotSpot 17's order:
///
/// 1. neither `UseLargePages` nor `UseTransparentHugePages`: no large pages;
/// 2. `-XX:-UseLargePages` given: no large pages of any kind (THP switched off too);
/// 3. THP asked for but the kernel has none (mode `never`, or no THP size): off, warned
///    about only if the user asked;
/// 4. THP: `UseLargePages` on as well (still looking untouched, as in java);
/// 5. explicit pages: the default huge page size or `LargePageSizeInBytes` if the kernel has
///    that size, used only when the user named no page type (`UseTransparentHugePages` left
///    alone) and one page of it — or of a smaller size — can be mapped now; else off, warned
///    about if the user asked for large pages.
///
/// Flags switched off keep their origin (HotSpot's `FLAG_SET_DEFAULT`): a
/// `-XX:+UseLargePages` that found no pages still prints `{command line}`.
pub(super) fn decide(
    s: &mut Settings,
    pages: &PageInfo,
    machine: &Machine,
) -> Result<LargePages, CreateError> {
    let mut lp = LargePages::default();
    let (want_lp, want_thp) = (
        s.get(flag::UseLargePages),
        s.get(flag::UseTransparentHugePages),
    );
    let off = |s: &mut Settings| -> Result<(), CreateError> {
        s.set_default(flag::UseLargePages, false)
            .and_then(|()| s.set_default(flag::UseTransparentHugePages, false))
            .map_err(ergo_error)
    };
    if !want_lp && !want_thp {
        return Ok(lp);
    }
    if !want_lp && !s.is_default(flag::UseLargePages) {
        off(s)?;
        return Ok(lp);
    }
    let thp = &pages.thp;
    let thp_supported =
        matches!(thp.mode, ThpMode::Always | ThpMode::Madvise) && thp.pmd_size.is_some();
    if want_thp && !thp_supported {
        if !s.is_default(flag::UseTransparentHugePages) {
            lp.notes.push((log::Level::Warn, NO_THP.into()));
        }
        off(s)?;
        return Ok(lp);
    }
    if want_thp {
        s.set_default(flag::UseLargePages, true)
            .map_err(ergo_error)?;
        lp.thp = true;
        return Ok(lp);
    }
    let h = &pages.hugetlb;
    let Some(default) = h.default_size.filter(|_| h.consistent()) else {
        if !s.is_default(flag::UseLargePages) {
            lp.notes.push((log::Level::Warn, NO_LARGE_PAGES.into()));
        }
        off(s)?;
        return Ok(lp);
    };
    let fmt = |b: usize| format_exact_size(b as u64);
    let wanted = s.get(flag::LargePageSizeInBytes);
    let size = if wanted == 0 || wanted == default {
        lp.notes.push((
            log::Level::Info,
            format!("Using the default large page size: {}", fmt(default)),
        ));
        default
    } else if h.sizes.contains(&wanted) {
        lp.notes.push((
            log::Level::Info,
            format!(
                "Overriding default large page size ({}) using LargePageSizeInBytes: {}",
                fmt(default),
                fmt(wanted)
            ),
        ));
        wanted
    } else {
        lp.notes.push((log::Level::Info, format!("LargePageSizeInBytes is not a valid large page size ({}) using the default large page size: {}", fmt(wanted), fmt(default))));
        default
    };
    // HotSpot tries hugetlbfs only when the user chose no page type; naming THP (even to
    // switch it off) leaves none to try.
    let usable = s.is_default(flag::UseTransparentHugePages)
        && {
            if (machine.hugetlb_usable)(size) {
                true
            } else {
                lp.notes.push((log::Level::Info, format!("Large page size ({}) failed sanity check, checking if smaller large page sizes are usable", fmt(size))));
                let smaller = h
                    .sizes
                    .iter()
                    .rev()
                    .copied()
                    .filter(|&p| p < size)
                    .find(|&p| (machine.hugetlb_usable)(p));
                if let Some(p) = smaller {
                    lp.notes.push((
                        log::Level::Info,
                        format!("Large page size ({}) passed sanity check", fmt(p)),
                    ));
                }
                // As HotSpot: the large page size stays the one chosen.
                smaller.is_some()
            }
        };
    if usable {
        let up_to = h.sizes.iter().copied().filter(|&p| p <= size).collect();
        lp.explicit = Some((size, up_to));
    } else {
        if !s.is_default(flag::UseLargePages) {
            lp.notes.push((log::Level::Warn, NO_LARGE_PAGES.into()));
        }
        off(s)?;
    }
    Ok(lp)
}
