//! The nursery: HotSpot's young-generation sizing rules and warnings (`gc+ergo`), with its
//! generation alignment. There is a nursery only when `NewSize` was given.

use rtvm_flags::value::K;
use rtvm_flags::{flag, Settings, Source};

use super::ergo_error;
use super::heap_size::is_cmdline;
use crate::error::CreateError;

/// HotSpot's generation alignment (64K).
const GEN_ALIGNMENT: usize = 64 * K as usize;

/// Settles `NewSize` and `MaxNewSize` against the heap's `initial` and `max` sizes and
/// returns the nursery: `NewSize` (when given) within the initial heap, in whole heap pages.
pub(super) fn decide(
    s: &mut Settings,
    initial: usize,
    max: usize,
    heap_page: usize,
) -> Result<usize, CreateError> {
    // A NewSize from the environment or a settings file still makes a nursery; the warnings
    // are for the command line (FLAG_IS_CMDLINE).
    let new_given = s.origin(flag::NewSize).source != Source::Default;
    let new_cmdline = is_cmdline(s.origin(flag::NewSize));
    let max_new_given = s.origin(flag::MaxNewSize).source != Source::Default;
    let max_new_cmdline = is_cmdline(s.origin(flag::MaxNewSize));
    let bound_minus_alignment =
        |desired: usize, maximum: usize| desired.min(maximum.saturating_sub(GEN_ALIGNMENT));
    let mut new_size = s.get(flag::NewSize);
    if new_cmdline && new_size >= initial {
        log::warn!(target: "gc+ergo", "NewSize was set larger than initial heap size, will use initial heap size.");
        new_size = bound_minus_alignment(new_size, initial);
        s.set_ergo(flag::NewSize, new_size).map_err(ergo_error)?;
    }
    if new_given {
        let aligned = (new_size & !(GEN_ALIGNMENT - 1)).max(GEN_ALIGNMENT);
        if aligned != new_size {
            new_size = aligned;
            s.set_ergo(flag::NewSize, new_size).map_err(ergo_error)?;
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
            s.set_ergo(flag::MaxNewSize, max_new).map_err(ergo_error)?;
            if new_size > max_new {
                new_size = max_new;
                s.set_ergo(flag::NewSize, new_size).map_err(ergo_error)?;
            }
        } else if max_new < new_size {
            max_new = new_size;
            s.set_ergo(flag::MaxNewSize, max_new).map_err(ergo_error)?;
        } else if !max_new.is_multiple_of(GEN_ALIGNMENT) {
            max_new &= !(GEN_ALIGNMENT - 1);
            s.set_ergo(flag::MaxNewSize, max_new).map_err(ergo_error)?;
        }
    }
    if new_size > max_new {
        if max_new_cmdline {
            log::warn!(target: "gc+ergo", "NewSize ({}k) is greater than the MaxNewSize ({}k). A new max generation size of {}k will be used.", new_size / 1024, max_new / 1024, new_size / 1024);
        }
        s.set_ergo(flag::MaxNewSize, new_size).map_err(ergo_error)?;
    }
    Ok(if new_given {
        new_size.min(initial) & !(heap_page - 1)
    } else {
        0
    })
}
