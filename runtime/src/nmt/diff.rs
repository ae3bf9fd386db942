//! `summary.diff` and `detail.diff`: a summary against a baseline, as HotSpot 17 compares
//! them.

use std::fmt::Write as _;

use super::{NmtScale, NmtSummary, Usage, CACHE_SITE};

impl NmtSummary {
    /// `jcmd VM.native_memory summary.diff`: this summary against `base`, as HotSpot 17
    /// prints the comparison — each figure followed by its change (`+51520KB`, `-8KB`;
    /// nothing when unchanged), the thread count with its change (`(thread #69 +50)`), no
    /// malloc/mmap lines under the total, and no trailing space on sub-lines.
    pub fn diff_report(&self, base: &NmtSummary, scale: NmtScale) -> String {
        let amount = |v: u64| scale.show(v);
        let delta = |now: u64, then: u64| scale.delta(now as i128 - then as i128);
        let mut s = String::new();
        let _ = writeln!(s);
        let _ = writeln!(s, "Native Memory Tracking:");
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "(Omitting categories weighting less than 1{})",
            scale.unit_name()
        );
        let _ = writeln!(s);
        let (now, then) = (self.total(), base.total());
        let _ = writeln!(
            s,
            "Total: reserved={}{}, committed={}{}",
            amount(now.reserved),
            delta(now.reserved, then.reserved),
            amount(now.committed),
            delta(now.committed, then.committed)
        );
        let _ = writeln!(s);
        let usage = |u: Usage, b: Usage| {
            format!(
                "reserved={}{}, committed={}{}",
                amount(u.reserved),
                delta(u.reserved, b.reserved),
                amount(u.committed),
                delta(u.committed, b.committed)
            )
        };
        let category = |s: &mut String, name: &str, u: Usage, b: Usage| {
            let _ = writeln!(s, "-{name:>26} ({})", usage(u, b));
        };
        let sub = |s: &mut String, text: &str| {
            let _ = writeln!(s, "{:28}{text}", "");
        };
        category(&mut s, "Java Heap", self.heap, base.heap);
        sub(&mut s, &format!("(mmap: {})", usage(self.heap, base.heap)));
        let _ = writeln!(s, " ");
        category(&mut s, "Thread", self.thread_usage(), base.thread_usage());
        let threads = self.thread_count as i64 - base.thread_count as i64;
        if threads == 0 {
            sub(&mut s, &format!("(thread #{})", self.thread_count));
        } else {
            sub(
                &mut s,
                &format!("(thread #{} {threads:+})", self.thread_count),
            );
        }
        sub(
            &mut s,
            &format!("(stack: {})", usage(self.stacks, base.stacks)),
        );
        let ((cached, c), (cached_then, c_then)) = (self.stack_cache, base.stack_cache);
        if cached > 0 || cached_then > 0 {
            let count = cached as i64 - cached_then as i64;
            let count = if count == 0 {
                String::new()
            } else {
                format!(" {count:+}")
            };
            sub(
                &mut s,
                &format!("(stack cache: #{cached}{count}, {})", usage(c, c_then)),
            );
        }
        let _ = writeln!(s, " ");
        let then_memories = base.memory_categories();
        let mut names: Vec<String> = self
            .memory_categories()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        for (n, _) in &then_memories {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
        let now_memories = self.memory_categories();
        let find = |list: &[(String, Usage)], n: &str| {
            list.iter()
                .find(|(c, _)| c == n)
                .map(|(_, u)| *u)
                .unwrap_or_default()
        };
        for n in names {
            let (u, b) = (find(&now_memories, &n), find(&then_memories, &n));
            category(&mut s, &n, u, b);
            sub(&mut s, &format!("(mmap: {})", usage(u, b)));
            let _ = writeln!(s, " ");
        }
        if let Some(m) = self.malloc {
            let b = base.malloc.unwrap_or_default();
            category(&mut s, "Other", m, b);
            sub(
                &mut s,
                &format!(
                    "(malloc={}{})",
                    amount(m.committed),
                    delta(m.committed, b.committed)
                ),
            );
            let _ = writeln!(s, " ");
        }
        s
    }

    /// `detail.diff`: the summary comparison, then each reserving site's figures and change.
    pub fn detail_diff_report(&self, base: &NmtSummary, scale: NmtScale) -> String {
        let mut s = self.diff_report(base, scale);
        let amount = |v: u64| scale.show(v);
        let delta = |now: u64, then: u64| scale.delta(now as i128 - then as i128);
        let site = |s: &mut String, what: &str, ty: &str, u: Usage, b: Usage| {
            let _ = writeln!(s, "[{what}]");
            let _ = writeln!(
                s,
                "{:29}(mmap: reserved={}{}, committed={}{} Type={ty})",
                "",
                amount(u.reserved),
                delta(u.reserved, b.reserved),
                amount(u.committed),
                delta(u.committed, b.committed)
            );
            let _ = writeln!(s);
        };
        let _ = writeln!(s, "Details:");
        let _ = writeln!(s);
        site(
            &mut s,
            "rtvm heap reservation: Heap::reserve_and_commit",
            "Java Heap",
            self.heap,
            base.heap,
        );
        site(
            &mut s,
            "rtvm thread stacks: StackMapping::map, attach",
            "Thread Stack",
            self.stacks,
            base.stacks,
        );
        if self.stack_cache.0 > 0 || base.stack_cache.0 > 0 {
            site(
                &mut s,
                CACHE_SITE,
                "Thread Stack",
                self.stack_cache.1,
                base.stack_cache.1,
            );
        }
        let then = base.memory_categories();
        for (name, u) in self.memory_categories() {
            let b = then
                .iter()
                .find(|(c, _)| *c == name)
                .map(|(_, u)| *u)
                .unwrap_or_default();
            site(
                &mut s,
                "rtvm embedder memory: VmHandle::reserve_memory",
                &name,
                u,
                b,
            );
        }
        s
    }
}
