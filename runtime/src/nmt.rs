//! Native Memory Tracking: where the VM's memory went, by category, in HotSpot's layout.
//!
//! * **Heap** — the heap's reservation; committed is what the VM committed.
//! * **Thread** — thread count, and stacks: reserved is the mapped size, committed is what
//!   `mincore` finds resident, as HotSpot measures stacks. This is where a THP blow-up of
//!   thread stacks (JDK-8312182) shows.
//! * **Other** — the C allocator's memory (glibc `mallinfo2`, process-wide).
//!
//! `detail` adds one line per thread stack.

use std::fmt::Write as _;

use crate::heap::HeapStats;
use crate::threads::ThreadInfo;

/// Reserved and committed bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Reserved bytes.
    pub reserved: u64,
    /// Committed bytes.
    pub committed: u64,
}

/// One thread stack, for `detail`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackDetail {
    /// Thread name.
    pub name: String,
    /// Mapping start.
    pub start: usize,
    /// Mapping end.
    pub end: usize,
    /// Resident bytes.
    pub committed: u64,
}

/// The summary, as data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NmtSummary {
    /// The heap.
    pub heap: Usage,
    /// Live VM threads.
    pub thread_count: usize,
    /// Their stacks.
    pub stacks: Usage,
    /// The C allocator (`None` if it cannot say).
    pub malloc: Option<Usage>,
    /// Per-stack lines (`detail` only).
    pub stack_details: Vec<StackDetail>,
}

impl NmtSummary {
    pub(crate) fn collect(
        heap: HeapStats,
        threads: &[std::sync::Arc<ThreadInfo>],
        detail: bool,
    ) -> NmtSummary {
        let mut stacks = Usage::default();
        let mut stack_details = Vec::new();
        for t in threads {
            let resident = t.stack_resident_bytes() as u64;
            stacks.reserved += t.layout.mapping.len() as u64;
            stacks.committed += resident;
            if detail {
                stack_details.push(StackDetail {
                    name: t.name.clone(),
                    start: t.layout.mapping.start,
                    end: t.layout.mapping.end,
                    committed: resident,
                });
            }
        }
        let malloc = rtvm_os_linux::system::malloc_stats().map(|m| Usage {
            reserved: m.reserved,
            committed: m.in_use,
        });
        NmtSummary {
            heap: Usage {
                reserved: heap.reserved as u64,
                committed: heap.committed as u64,
            },
            thread_count: threads.len(),
            stacks,
            malloc,
            stack_details,
        }
    }

    /// Mapped memory: heap and stacks.
    pub fn mmap(&self) -> Usage {
        Usage {
            reserved: self.heap.reserved + self.stacks.reserved,
            committed: self.heap.committed + self.stacks.committed,
        }
    }

    /// Everything.
    pub fn total(&self) -> Usage {
        let m = self.mmap();
        let c = self.malloc.unwrap_or_default();
        Usage {
            reserved: m.reserved + c.reserved,
            committed: m.committed + c.committed,
        }
    }

    /// The report in HotSpot's layout (`-XX:+PrintNMTStatistics`): bytes, category names
    /// right-justified to column 26, sub-lines from column 28, a one-space line after each
    /// block.
    pub fn report(&self) -> String {
        let mut s = String::new();
        let total = self.total();
        let mmap = self.mmap();
        let _ = writeln!(s, "Native Memory Tracking:");
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Total: reserved={}, committed={}",
            total.reserved, total.committed
        );
        if let Some(m) = self.malloc {
            let _ = writeln!(s, "       malloc: {} (process-wide)", m.committed);
        }
        let _ = writeln!(
            s,
            "       mmap:   reserved={}, committed={}",
            mmap.reserved, mmap.committed
        );
        let _ = writeln!(s);
        let category = |s: &mut String, name: &str, u: Usage| {
            let _ = writeln!(
                s,
                "-{name:>26} (reserved={}, committed={})",
                u.reserved, u.committed
            );
        };
        let sub = |s: &mut String, text: &str| {
            let _ = writeln!(s, "{:28}{text}", "");
        };
        category(&mut s, "Heap", self.heap);
        sub(
            &mut s,
            &format!(
                "(mmap: reserved={}, committed={}) ",
                self.heap.reserved, self.heap.committed
            ),
        );
        let _ = writeln!(s, " ");
        category(&mut s, "Thread", self.stacks);
        sub(&mut s, &format!("(thread #{})", self.thread_count));
        sub(
            &mut s,
            &format!(
                "(stack: reserved={}, committed={})",
                self.stacks.reserved, self.stacks.committed
            ),
        );
        for d in &self.stack_details {
            sub(
                &mut s,
                &format!(
                    "[{:#018x} - {:#018x}] \"{}\" committed={}",
                    d.start, d.end, d.name, d.committed
                ),
            );
        }
        let _ = writeln!(s, " ");
        if let Some(m) = self.malloc {
            category(&mut s, "Other", m);
            sub(&mut s, &format!("(malloc={})", m.committed));
            let _ = writeln!(s, " ");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let n = NmtSummary {
            heap: Usage {
                reserved: 6320816128,
                committed: 406847488,
            },
            thread_count: 13,
            stacks: Usage {
                reserved: 13631488,
                committed: 589824,
            },
            malloc: Some(Usage {
                reserved: 9000000,
                committed: 7262639,
            }),
            stack_details: vec![],
        };
        let r = n.report();
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines[0], "Native Memory Tracking:");
        assert_eq!(lines[2], "Total: reserved=6343447616, committed=414699951");
        assert!(r.contains(
            "\n-                      Heap (reserved=6320816128, committed=406847488)\n"
        ));
        assert!(r.contains(
            "\n                            (mmap: reserved=6320816128, committed=406847488) \n \n"
        ));
        assert!(r.contains("\n-                    Thread (reserved=13631488, committed=589824)\n"));
        assert!(r.contains("\n                            (thread #13)\n"));
        assert!(r.contains(
            "\n                            (stack: reserved=13631488, committed=589824)\n"
        ));
        let heap_line = lines.iter().find(|l| l.contains("Heap (")).unwrap();
        assert_eq!(
            heap_line.find("Heap").unwrap() + "Heap".len(),
            27,
            "name ends at column 26 after '-'"
        );
    }
}
