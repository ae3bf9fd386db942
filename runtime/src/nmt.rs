//! Native Memory Tracking: where the VM's memory went, by category, in HotSpot 17's layout.
//!
//! * **Java Heap** — the heap's reservation; committed is what the VM committed.
//! * **Thread** — thread count, and stacks: reserved is the mapped size, committed is what
//!   is resident, as HotSpot measures stacks. This is where a THP blow-up of thread stacks
//!   (JDK-8312182) shows.
//! * **Other** — the C allocator's memory (glibc `mallinfo2`, process-wide).
//!
//! `detail` adds HotSpot's `Virtual memory map:` (every reservation with its committed part)
//! and `Details:` (the sites that reserved memory) sections.
//!
//! Every byte counted appears in every report that breaks it down, as in java: a category is
//! the sum of its sub-lines (the Thread category's stacks of ended threads kept for reuse
//! have a `stack cache` line of their own, in `summary` and `summary.diff` alike), the
//! virtual memory map lists every reservation the `mmap:` total counts (cached stacks
//! included), and the `Details:` sites add up to it. Figures print in bytes, as
//! `-XX:+PrintNMTStatistics` prints them at exit, or in a scale ([`NmtScale`]) as `jcmd
//! VM.native_memory summary scale=KB` does: rounded to the nearest unit, suffixed `KB`, `MB`
//! or `GB`.

mod diff;

use std::fmt::Write as _;

/// The `Details:` site of the cached stacks.
const CACHE_SITE: &str = "rtvm thread stack cache: stacks of ended threads kept for reuse";

/// A collector's heap, as NMT reports it ([`VmHandle::report_heap`](crate::VmHandle::report_heap)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectorHeap {
    /// Bytes the heap may grow to (`-Xmx`).
    pub reserved: usize,
    /// Bytes the collector holds mapped for objects now.
    pub committed: usize,
    /// The address range the heap lies in.
    pub range: std::ops::Range<usize>,
    /// Its pages, in words (`4K pages`), for `detail`'s site line.
    pub pages: String,
}

/// Reserved and committed bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Reserved bytes.
    pub reserved: u64,
    /// Committed bytes.
    pub committed: u64,
}

/// One memory an embedder mapped through the VM ([`VmMemory`](crate::VmMemory)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryDetail {
    /// The NMT category the embedder named.
    pub category: String,
    /// Mapping start.
    pub start: usize,
    /// Mapping end (guard included).
    pub end: usize,
    /// Committed (usable) bytes.
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

/// The unit a report is printed in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum NmtScale {
    /// Bytes, no suffix (`-XX:+PrintNMTStatistics`).
    #[default]
    Bytes,
    /// Kilobytes, `KB` (jcmd's default).
    Kilobytes,
    /// Megabytes, `MB`.
    Megabytes,
    /// Gigabytes, `GB`.
    Gigabytes,
}

impl NmtScale {
    fn divisor(self) -> u64 {
        match self {
            NmtScale::Bytes => 1,
            NmtScale::Kilobytes => 1 << 10,
            NmtScale::Megabytes => 1 << 20,
            NmtScale::Gigabytes => 1 << 30,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            NmtScale::Bytes => "",
            NmtScale::Kilobytes => "KB",
            NmtScale::Megabytes => "MB",
            NmtScale::Gigabytes => "GB",
        }
    }

    /// `amount` in this scale, rounded to the nearest unit, with the suffix.
    fn show(self, amount: u64) -> String {
        let d = self.divisor();
        format!("{}{}", amount.saturating_add(d / 2) / d, self.suffix())
    }

    /// A change in this scale, rounded away from zero at the half unit as HotSpot rounds
    /// it: ` +51520KB`, ` -8KB`, or nothing when it rounds to zero.
    fn delta(self, change: i128) -> String {
        let d = self.divisor() as i128;
        let rounded = if change > 0 {
            (change + d / 2) / d
        } else {
            (change - d / 2) / d
        };
        if rounded == 0 {
            String::new()
        } else {
            format!(" {rounded:+}{}", self.suffix())
        }
    }

    /// The unit's name in `(Omitting categories weighting less than 1KB)`.
    fn unit_name(self) -> &'static str {
        match self {
            NmtScale::Bytes => "B",
            other => other.suffix(),
        }
    }

    /// The scale a `jcmd` `scale=` names (`KB`, `m`, `gb`, ... as HotSpot accepts them),
    /// `None` for anything else.
    pub fn from_name(name: &str) -> Option<NmtScale> {
        match name.to_ascii_lowercase().as_str() {
            "1" | "b" => Some(NmtScale::Bytes),
            "kb" | "k" => Some(NmtScale::Kilobytes),
            "mb" | "m" => Some(NmtScale::Megabytes),
            "gb" | "g" => Some(NmtScale::Gigabytes),
            _ => None,
        }
    }
}

/// The summary, as data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NmtSummary {
    /// The heap.
    pub heap: Usage,
    /// The heap's reserved range `[start, end)`.
    pub heap_range: (usize, usize),
    /// The heap's pages in words (`2M hugetlbfs pages`), named in `detail`'s site.
    pub heap_pages: String,
    /// Live VM threads (attached ones included).
    pub thread_count: usize,
    /// Their stacks.
    pub stacks: Usage,
    /// Stacks of ended threads kept for reuse (`ThreadStackCacheSize`): how many, and their
    /// mapped and resident sizes (counted in the Thread category).
    pub stack_cache: (usize, Usage),
    /// The C allocator (`None` if it cannot say).
    pub malloc: Option<Usage>,
    /// Whether this is a `detail` summary (the virtual memory map and the sites follow).
    pub detail: bool,
    /// Per-stack lines (`detail` only).
    pub stack_details: Vec<StackDetail>,
    /// The cached stacks, one line each (`detail` only; their names are empty).
    pub stack_cache_details: Vec<StackDetail>,
    /// Embedder memories, each counted in its category.
    pub memories: Vec<MemoryDetail>,
}

impl NmtSummary {
    /// The summary of what the VM measured: the heap's figures, every live thread's stack
    /// (name, mapping, resident bytes), every stack in the cache and every embedder memory,
    /// plus the C allocator's figures read now. `detail` keeps the per-stack lines.
    pub(crate) fn collect(
        heap: Usage,
        heap_range: std::ops::Range<usize>,
        heap_pages: &str,
        stacks: Vec<StackDetail>,
        cached: Vec<StackDetail>,
        memories: Vec<MemoryDetail>,
        detail: bool,
    ) -> NmtSummary {
        let usage = |list: &[StackDetail]| {
            list.iter().fold(Usage::default(), |u, d| Usage {
                reserved: u.reserved + (d.end - d.start) as u64,
                committed: u.committed + d.committed,
            })
        };
        let stack_usage = usage(&stacks);
        let stack_cache = (cached.len(), usage(&cached));
        let malloc = rtvm_os_linux::system::malloc_stats().map(|m| Usage {
            reserved: m.reserved,
            committed: m.in_use,
        });
        NmtSummary {
            heap,
            heap_range: (heap_range.start, heap_range.end),
            heap_pages: heap_pages.to_owned(),
            thread_count: stacks.len(),
            stacks: stack_usage,
            stack_cache,
            malloc,
            detail,
            stack_details: if detail { stacks } else { Vec::new() },
            stack_cache_details: if detail { cached } else { Vec::new() },
            memories,
        }
    }

    /// The embedder memories by category, in the order the categories first appear.
    pub fn memory_categories(&self) -> Vec<(String, Usage)> {
        let mut out: Vec<(String, Usage)> = Vec::new();
        for m in &self.memories {
            let reserved = (m.end - m.start) as u64;
            match out.iter_mut().find(|(c, _)| *c == m.category) {
                Some((_, u)) => {
                    u.reserved += reserved;
                    u.committed += m.committed;
                }
                None => out.push((
                    m.category.clone(),
                    Usage {
                        reserved,
                        committed: m.committed,
                    },
                )),
            }
        }
        out
    }

    /// Mapped memory: heap, stacks and embedder memories.
    pub fn mmap(&self) -> Usage {
        let (reserved, committed) = self.memories.iter().fold((0, 0), |(r, c), m| {
            (r + (m.end - m.start) as u64, c + m.committed)
        });
        let threads = self.thread_usage();
        Usage {
            reserved: self.heap.reserved + threads.reserved + reserved,
            committed: self.heap.committed + threads.committed + committed,
        }
    }

    /// The Thread category: live stacks and the stack cache.
    pub fn thread_usage(&self) -> Usage {
        let c = self.stack_cache.1;
        Usage {
            reserved: self.stacks.reserved + c.reserved,
            committed: self.stacks.committed + c.committed,
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

    /// The report in bytes, as `-XX:+PrintNMTStatistics` prints it.
    pub fn report(&self) -> String {
        self.report_in(NmtScale::Bytes)
    }

    /// The report in HotSpot's layout and the given scale: a blank line and the title, the
    /// totals, then one block per category — its name right-justified to column 26 after
    /// `-`, sub-lines from column 28, a line with one space after each block; with `detail`,
    /// the virtual memory map and the reserving sites.
    pub fn report_in(&self, scale: NmtScale) -> String {
        let amount = |v: u64| scale.show(v);
        let mut s = String::new();
        let total = self.total();
        let mmap = self.mmap();
        let _ = writeln!(s);
        let _ = writeln!(s, "Native Memory Tracking:");
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Total: reserved={}, committed={}",
            amount(total.reserved),
            amount(total.committed)
        );
        if let Some(m) = self.malloc {
            let _ = writeln!(s, "       malloc: {} (process-wide)", amount(m.committed));
        }
        let _ = writeln!(
            s,
            "       mmap:   reserved={}, committed={}",
            amount(mmap.reserved),
            amount(mmap.committed)
        );
        let _ = writeln!(s);
        let category = |s: &mut String, name: &str, u: Usage| {
            let _ = writeln!(
                s,
                "-{name:>26} (reserved={}, committed={})",
                amount(u.reserved),
                amount(u.committed)
            );
        };
        let sub = |s: &mut String, text: &str| {
            let _ = writeln!(s, "{:28}{text}", "");
        };
        category(&mut s, "Java Heap", self.heap);
        sub(
            &mut s,
            &format!(
                "(mmap: reserved={}, committed={}) ",
                amount(self.heap.reserved),
                amount(self.heap.committed)
            ),
        );
        let _ = writeln!(s, " ");
        category(&mut s, "Thread", self.thread_usage());
        sub(&mut s, &format!("(thread #{})", self.thread_count));
        sub(
            &mut s,
            &format!(
                "(stack: reserved={}, committed={})",
                amount(self.stacks.reserved),
                amount(self.stacks.committed)
            ),
        );
        let (cached, c) = self.stack_cache;
        if cached > 0 {
            sub(
                &mut s,
                &format!(
                    "(stack cache: #{cached}, reserved={}, committed={})",
                    amount(c.reserved),
                    amount(c.committed)
                ),
            );
        }
        let _ = writeln!(s, " ");
        for (name, u) in self.memory_categories() {
            category(&mut s, &name, u);
            sub(
                &mut s,
                &format!(
                    "(mmap: reserved={}, committed={}) ",
                    amount(u.reserved),
                    amount(u.committed)
                ),
            );
            let _ = writeln!(s, " ");
        }
        if let Some(m) = self.malloc {
            category(&mut s, "Other", m);
            sub(&mut s, &format!("(malloc={})", amount(m.committed)));
            let _ = writeln!(s, " ");
        }
        if self.detail {
            self.write_detail(&mut s, scale);
        }
        s
    }

    /// The report as `jcmd VM.native_memory summary` (or `detail`) prints it: the layout of
    /// [`NmtSummary::report_in`] with HotSpot's `(Omitting categories weighting less than
    /// 1KB)` note, categories under one unit left out.
    pub fn report_for_jcmd(&self, scale: NmtScale) -> String {
        let full = self.report_in(scale);
        let unit = scale.unit_name();
        let title = "\nNative Memory Tracking:\n\n";
        let body = full.strip_prefix(title).unwrap_or(&full);
        format!("{title}(Omitting categories weighting less than 1{unit})\n\n{body}")
    }

    /// HotSpot's `detail` sections. rtvm records no call stacks: a site is named by the
    /// operation that reserved the memory. A stack's committed part is shown from its top,
    /// where a stack's resident pages are.
    fn write_detail(&self, s: &mut String, scale: NmtScale) {
        let amount = |v: u64| scale.show(v);
        let _ = writeln!(s, "Virtual memory map:");
        let _ = writeln!(s, " ");
        let (hs, he) = self.heap_range;
        let _ = writeln!(
            s,
            "[{hs:#018x} - {he:#018x}] reserved {} for Java Heap",
            amount(self.heap.reserved)
        );
        if self.heap.committed > 0 {
            let end = hs + self.heap.committed as usize;
            let _ = writeln!(
                s,
                "\t[{hs:#018x} - {end:#018x}] committed {}",
                amount(self.heap.committed)
            );
        }
        let _ = writeln!(s);
        // One reserved region of the virtual memory map and its committed part.
        let region = |s: &mut String,
                      (start, end): (usize, usize),
                      what: &str,
                      committed: (usize, usize)| {
            let _ = writeln!(
                s,
                "[{start:#018x} - {end:#018x}] reserved {} for {what}",
                amount((end - start) as u64)
            );
            let (lo, hi) = committed;
            if hi > lo {
                let _ = writeln!(
                    s,
                    "\t[{lo:#018x} - {hi:#018x}] committed {}",
                    amount((hi - lo) as u64)
                );
            }
            let _ = writeln!(s);
        };
        for d in &self.stack_details {
            // A stack commits from its top down.
            let lo = d.end.saturating_sub(d.committed as usize).max(d.start);
            let what = format!("Thread Stack \"{}\"", d.name);
            region(s, (d.start, d.end), &what, (lo, d.end));
        }
        for d in &self.stack_cache_details {
            // What a cached stack keeps resident is at its top, where the next thread starts.
            let lo = d.end.saturating_sub(d.committed as usize).max(d.start);
            region(s, (d.start, d.end), "Thread Stack (cached)", (lo, d.end));
        }
        for m in &self.memories {
            // An embedder memory commits from its base up.
            let hi = m.start + m.committed as usize;
            region(s, (m.start, m.end), &m.category, (m.start, hi));
        }
        let _ = writeln!(s, "Details:");
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "[rtvm heap reservation: Heap::reserve_and_commit, {}]",
            self.heap_pages
        );
        let _ = writeln!(
            s,
            "{:29}(reserved={}, committed={} Type=Java Heap)",
            "",
            amount(self.heap.reserved),
            amount(self.heap.committed)
        );
        let _ = writeln!(s);
        let _ = writeln!(s, "[rtvm thread stacks: StackMapping::map, attach]");
        let _ = writeln!(
            s,
            "{:29}(reserved={}, committed={} Type=Thread Stack)",
            "",
            amount(self.stacks.reserved),
            amount(self.stacks.committed)
        );
        let _ = writeln!(s);
        let (cached, c) = self.stack_cache;
        if cached > 0 {
            let _ = writeln!(s, "[{CACHE_SITE}]");
            let _ = writeln!(
                s,
                "{:29}(reserved={}, committed={} Type=Thread Stack)",
                "",
                amount(c.reserved),
                amount(c.committed)
            );
            let _ = writeln!(s);
        }
        for (name, u) in self.memory_categories() {
            let _ = writeln!(s, "[rtvm embedder memory: VmHandle::reserve_memory]");
            let _ = writeln!(
                s,
                "{:29}(reserved={}, committed={} Type={name})",
                "",
                amount(u.reserved),
                amount(u.committed)
            );
            let _ = writeln!(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> NmtSummary {
        NmtSummary {
            heap: Usage {
                reserved: 6320816128,
                committed: 406847488,
            },
            heap_range: (0x7f00_0000_0000, 0x7f00_0000_0000 + 6320816128),
            heap_pages: "4K pages".into(),
            memories: vec![],
            thread_count: 13,
            stacks: Usage {
                reserved: 13631488,
                committed: 589824,
            },
            stack_cache: (0, Usage::default()),
            malloc: Some(Usage {
                reserved: 9000000,
                committed: 7262639,
            }),
            detail: false,
            stack_details: vec![],
            stack_cache_details: vec![],
        }
    }

    #[test]
    fn layout_in_bytes() {
        let r = sample().report();
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines[0], "");
        assert_eq!(lines[1], "Native Memory Tracking:");
        assert_eq!(lines[3], "Total: reserved=6343447616, committed=414699951");
        assert!(r.contains(
            "\n-                 Java Heap (reserved=6320816128, committed=406847488)\n"
        ));
        assert!(r.contains(
            "\n                            (mmap: reserved=6320816128, committed=406847488) \n \n"
        ));
        assert!(r.contains("\n-                    Thread (reserved=13631488, committed=589824)\n"));
        assert!(r.contains("\n                            (thread #13)\n"));
        assert!(r.contains(
            "\n                            (stack: reserved=13631488, committed=589824)\n"
        ));
        let heap_line = lines.iter().find(|l| l.contains("Java Heap (")).unwrap();
        assert_eq!(
            heap_line.find("Java Heap").unwrap() + "Java Heap".len(),
            27,
            "name ends at column 26 after '-'"
        );
    }

    #[test]
    fn kilobytes_round_to_the_nearest_unit() {
        let r = sample().report_in(NmtScale::Kilobytes);
        // 6343447616 B = 6194773.06 KB; 414699951 B = 404980.42 KB.
        assert!(
            r.contains("\nTotal: reserved=6194773KB, committed=404980KB\n"),
            "{r}"
        );
        assert!(
            r.contains("Java Heap (reserved=6172672KB, committed=397312KB)"),
            "{r}"
        );
        assert!(
            r.contains("(stack: reserved=13312KB, committed=576KB)"),
            "{r}"
        );
    }

    #[test]
    fn diff_as_hotspot() {
        let base = sample();
        let mut now = sample();
        now.thread_count += 50;
        now.stacks.reserved += 50 << 20;
        now.stacks.committed += 5 << 20;
        let r = now.diff_report(&base, NmtScale::Kilobytes);
        assert!(r.starts_with("\nNative Memory Tracking:\n\n(Omitting categories weighting less than 1KB)\n\nTotal: reserved=6245973KB +51200KB, committed=410100KB +5120KB\n\n"), "{r}");
        assert!(
            r.contains("\n                            (thread #63 +50)\n"),
            "{r}"
        );
        assert!(
            r.contains("(stack: reserved=64512KB +51200KB, committed=5696KB +5120KB)\n"),
            "{r}"
        );
        assert!(
            r.contains("(mmap: reserved=6172672KB, committed=397312KB)\n"),
            "unchanged: no delta, no trailing space: {r}"
        );
        assert_eq!(NmtScale::Kilobytes.delta(-1536), " -2KB");
        assert_eq!(NmtScale::Kilobytes.delta(511), "");
        assert_eq!(NmtScale::from_name("mb"), Some(NmtScale::Megabytes));
        assert_eq!(NmtScale::from_name("XB"), None);
        let j = sample().report_for_jcmd(NmtScale::Megabytes);
        assert!(j.starts_with("\nNative Memory Tracking:\n\n(Omitting categories weighting less than 1MB)\n\nTotal: "), "{j}");
    }

    #[test]
    fn detail_sections() {
        let mut n = sample();
        n.detail = true;
        n.stack_details.push(StackDetail {
            name: "main".into(),
            start: 0x1000_0000,
            end: 0x1010_0000,
            committed: 8192,
        });
        let r = n.report();
        assert!(
            r.contains("\nVirtual memory map:\n \n[0x00007f0000000000 - "),
            "{r}"
        );
        assert!(
            r.contains("] reserved 6320816128 for Java Heap\n\t[0x00007f0000000000 - "),
            "{r}"
        );
        assert!(r.contains("[0x0000000010000000 - 0x0000000010100000] reserved 1048576 for Thread Stack \"main\"\n\t[0x00000000100fe000 - 0x0000000010100000] committed 8192\n"), "{r}");
        assert!(r.contains("\nDetails:\n"), "{r}");
        assert!(
            r.contains("(reserved=6320816128, committed=406847488 Type=Java Heap)"),
            "{r}"
        );
    }

    /// A summary with two cached stacks of 1 MiB, 8 KiB resident each.
    fn with_cache() -> NmtSummary {
        let cached: Vec<StackDetail> = (0..2)
            .map(|i| StackDetail {
                name: String::new(),
                start: 0x2000_0000 + i * 0x10_0000,
                end: 0x2010_0000 + i * 0x10_0000,
                committed: 8192,
            })
            .collect();
        let mut n = sample();
        n.detail = true;
        n.stack_cache = (
            2,
            Usage {
                reserved: 2 << 20,
                committed: 16384,
            },
        );
        n.stack_cache_details = cached;
        n
    }

    #[test]
    fn the_stack_cache_in_every_breakdown() {
        let base = sample();
        let now = with_cache();
        let thread = now.thread_usage();
        assert_eq!(
            thread.reserved,
            now.stacks.reserved + (2 << 20),
            "Thread = stack + cache"
        );
        let d = now.diff_report(&base, NmtScale::Bytes);
        assert!(
            d.contains(&format!(
                "Thread (reserved={} +2097152, committed={} +16384)\n",
                thread.reserved, thread.committed
            )),
            "{d}"
        );
        assert!(
            d.contains("\n                            (stack cache: #2 +2, reserved=2097152 +2097152, committed=16384 +16384)\n"),
            "{d}"
        );
        // Unchanged: no deltas; emptied: the line stays, with the change.
        let same = now.diff_report(&now, NmtScale::Bytes);
        assert!(
            same.contains("(stack cache: #2, reserved=2097152, committed=16384)\n"),
            "{same}"
        );
        let emptied = base.diff_report(&now, NmtScale::Bytes);
        assert!(
            emptied.contains("(stack cache: #0 -2, reserved=0 -2097152, committed=0 -16384)\n"),
            "{emptied}"
        );
        assert!(!base
            .diff_report(&base, NmtScale::Bytes)
            .contains("stack cache"));
        // detail: each cached stack in the map, its resident part at the top; its own site.
        let r = now.report();
        assert!(r.contains("[0x0000000020100000 - 0x0000000020200000] reserved 1048576 for Thread Stack (cached)\n\t[0x00000000201fe000 - 0x0000000020200000] committed 8192\n"), "{r}");
        assert!(
            r.contains(&format!(
                "[{CACHE_SITE}]\n{:29}(reserved=2097152, committed=16384 Type=Thread Stack)\n",
                ""
            )),
            "{r}"
        );
        let dd = now.detail_diff_report(&base, NmtScale::Bytes);
        assert!(dd.contains(&format!("[{CACHE_SITE}]\n{:29}(mmap: reserved=2097152 +2097152, committed=16384 +16384 Type=Thread Stack)\n", "")), "{dd}");
    }
}
