//! The stack cache (`-XX:ThreadStackCacheSize`, manageable): stacks of joined VM threads are
//! kept — their used pages given back at once (all but the top the next thread starts on),
//! guard zones and `MADV_NOHUGEPAGE` in place — and
//! the next thread that asks for the same layout starts on one, skipping `mmap`, the
//! advice and the guard's `mprotect`. glibc keeps its own 40 MiB cache of thread stacks for
//! the same reason; rtvm maps its stacks itself and so keeps its own. Only mitigated stacks
//! (guards in place before their thread existed) are kept; a reused stack is exactly what a
//! fresh one would be, so the THP mitigation holds for it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rtvm_flags::value::format_exact_size;
use rtvm_os_linux::{StackMapping, StackSpec};

/// Stacks kept for reuse, up to a byte limit.
#[derive(Debug)]
pub(crate) struct StackCache {
    stacks: Mutex<Vec<StackMapping>>,
    /// Mapped bytes of the stacks kept.
    bytes: AtomicUsize,
    limit: AtomicUsize,
}

impl StackCache {
    /// A cache of at most `limit` bytes of stacks (0: none kept).
    pub(crate) fn new(limit: usize) -> StackCache {
        StackCache {
            stacks: Mutex::new(Vec::new()),
            bytes: AtomicUsize::new(0),
            limit: AtomicUsize::new(limit),
        }
    }

    fn lock(&self) -> crate::safepoint::Locked<'_, Vec<StackMapping>> {
        crate::safepoint::lock(&self.stacks)
    }

    /// Changes the limit (a `VM.set_flag ThreadStackCacheSize`); stacks beyond it are
    /// unmapped now.
    pub(crate) fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
        let mut stacks = self.lock();
        let mut dropped = Vec::new();
        while self.bytes.load(Ordering::Relaxed) > limit {
            let Some(s) = stacks.pop() else { break };
            self.bytes
                .fetch_sub(s.layout().mapping.len(), Ordering::Relaxed);
            dropped.push(s);
        }
        drop(stacks);
        if !dropped.is_empty() {
            log::debug!(target: "os+thread", "Stack cache limit {}: {} cached stacks unmapped", format_exact_size(limit as u64), dropped.len());
        }
    }

    /// A cached stack for a thread named `name` asking for `spec`, if one fits.
    pub(crate) fn take(&self, spec: &StackSpec, name: &str) -> Option<StackMapping> {
        let mut stacks = self.lock();
        let i = stacks.iter().rposition(|s| s.fits(spec))?;
        let mut s = stacks.swap_remove(i);
        drop(stacks);
        self.bytes
            .fetch_sub(s.layout().mapping.len(), Ordering::Relaxed);
        s.rename(name);
        let l = s.layout();
        log::debug!(
            target: "os+thread",
            "Reusing a cached stack [{:#x}-{:#x}) for thread \"{name}\"",
            l.mapping.start,
            l.mapping.end
        );
        Some(s)
    }

    /// Keeps the stack of a joined thread if it can be reused and fits under the limit (its
    /// pages below `in_use_from`, the thread's last reported stack pointer, are given back
    /// now: see [`StackMapping::recycle`]); otherwise it is unmapped.
    pub(crate) fn put(&self, mut stack: StackMapping, in_use_from: usize) {
        let len = stack.layout().mapping.len();
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == 0 || self.bytes.load(Ordering::Relaxed) + len > limit {
            return;
        }
        if let Err(e) = stack.recycle(in_use_from) {
            log::debug!(target: "os+thread", "Stack not cached: {e}");
            return;
        }
        let mut stacks = self.lock();
        if self.bytes.load(Ordering::Relaxed) + len > self.limit.load(Ordering::Relaxed) {
            return;
        }
        self.bytes.fetch_add(len, Ordering::Relaxed);
        stacks.push(stack);
    }

    /// Each stack kept: its mapping and what of it is resident (for NMT, which counts and
    /// lists them from this one look).
    pub(crate) fn mappings(&self) -> Vec<(std::ops::Range<usize>, usize)> {
        self.lock()
            .iter()
            .map(|s| (s.layout().mapping.clone(), s.resident_bytes().unwrap_or(0)))
            .collect()
    }

    /// Unmaps every kept stack.
    pub(crate) fn clear(&self) {
        let drained: Vec<StackMapping> = std::mem::take(&mut *self.lock());
        self.bytes.store(0, Ordering::Relaxed);
        drop(drained);
    }
}
