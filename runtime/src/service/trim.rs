//! Trimming the C heap: glibc's `malloc_trim(0)` gives the free parts of every arena back to
//! the kernel — the holes below live blocks included, which `free` never returns — measured
//! as HotSpot measures it, RSS plus swap before and after.

use std::time::{Duration, Instant};

/// What one trim did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Trimmed {
    /// RSS + swap before, bytes.
    pub(crate) before: u64,
    /// RSS + swap after, bytes.
    pub(crate) after: u64,
    /// How long it took.
    pub(crate) took: Duration,
}

fn rss_and_swap() -> Option<u64> {
    let s = rtvm_os_linux::procfs::read_status().ok()?;
    Some((s.vm_rss_kb + s.vm_swap_kb) * 1024)
}

/// Trims the C heap once; `None` where glibc is not the allocator (or `/proc` cannot say).
pub(crate) fn trim_native_heap() -> Option<Trimmed> {
    let before = rss_and_swap()?;
    let start = Instant::now();
    if !rtvm_os_linux::system::malloc_trim() {
        return None;
    }
    let took = start.elapsed();
    let after = rss_and_swap()?;
    Some(Trimmed {
        before,
        after,
        took,
    })
}

impl Trimmed {
    /// `554M->83716K (-472M)`, as HotSpot prints a trim.
    pub(crate) fn change(&self) -> String {
        let (sign, delta) = if self.after > self.before {
            ('+', self.after - self.before)
        } else if self.after < self.before {
            ('-', self.before - self.after)
        } else {
            ('+', 0)
        };
        format!(
            "{}->{} ({sign}{})",
            rtvm_flags::value::format_proper_size(self.before),
            rtvm_flags::value::format_proper_size(self.after),
            rtvm_flags::value::format_proper_size(delta)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotspot_units() {
        let t = Trimmed {
            before: 554 << 20,
            after: 83716 << 10,
            took: Duration::ZERO,
        };
        assert_eq!(t.change(), "554M->83716K (-472M)");
        let same = Trimmed {
            before: 84060 << 10,
            after: 84060 << 10,
            took: Duration::ZERO,
        };
        assert_eq!(same.change(), "84060K->84060K (+0B)");
        let t = Trimmed {
            before: 37732 << 10,
            after: 37504 << 10,
            took: Duration::ZERO,
        };
        assert_eq!(t.change(), "37732K->37504K (-228K)");
    }
}
