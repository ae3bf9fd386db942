//! How thread stacks are sized, laid out and protected from transparent huge pages — decided
//! once by ergonomics (`ergonomics::stacks`), read by every thread start.

use rtvm_os_linux::{GuardZones, PretouchRequest};

use super::ThreadKind;

/// The smallest Java thread stack HotSpot allows on x86-64 before its zones are added (40K).
pub(crate) const JAVA_THREAD_MIN_STACK: usize = 40 * 1024;
/// The smallest VM-internal thread stack HotSpot allows on x86-64 (64K).
pub(crate) const VM_THREAD_MIN_STACK: usize = 64 * 1024;

/// How thread stacks are laid out and protected from transparent huge pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StackPolicy {
    /// The mitigation is on (the default): guards before the thread exists, the stack
    /// `MADV_NOHUGEPAGE`, stack sizes never a multiple of the THP size.
    pub mitigated: bool,
    /// The THP page size, if known.
    pub thp_page_size: Option<usize>,
    /// The base page size.
    pub page: usize,
    /// The least stack glibc needs above the guard zone (`PTHREAD_STACK_MIN`, at least 16K).
    pub min_usable: usize,
    /// `-XX:+DelayThreadStartALot`.
    pub delay_start: bool,
    /// `-XX:+AlwaysPreTouchStacks`.
    pub pretouch_stacks: bool,
    /// How to pretouch (honours `-XX:-UseMadvPopulateWrite`).
    pub pretouch_request: PretouchRequest,
    /// Default stack size of Java threads, bytes.
    pub java_stack_size: usize,
    /// Default stack size of VM threads and workers, bytes.
    pub vm_stack_size: usize,
    /// The guard zone: `StackRedPages`, `StackYellowPages`, `StackReservedPages`.
    pub zones: GuardZones,
    /// The shadow zone (`StackShadowPages`): room above the guard zone that an interpreter
    /// keeps free for native frames; part of the soft limit.
    pub shadow_zone: usize,
    /// Alternate signal stack size.
    pub alt_stack_size: usize,
    /// Bytes of stacks of joined threads kept for reuse (`ThreadStackCacheSize` at start-up).
    pub cache_size: usize,
}

impl StackPolicy {
    fn page_align(&self, bytes: usize) -> usize {
        bytes.div_ceil(self.page).saturating_mul(self.page)
    }

    /// HotSpot's smallest Java thread stack: 40K plus the guard and shadow zones, page-aligned
    /// (136K with the default zones).
    pub(crate) fn minimum_java_stack_size(&self) -> usize {
        self.page_align(JAVA_THREAD_MIN_STACK + self.zones.total() + self.shadow_zone)
            .max(self.min_usable)
    }

    /// HotSpot's smallest VM-internal thread stack (64K), page-aligned.
    pub(crate) fn minimum_vm_stack_size(&self) -> usize {
        self.page_align(VM_THREAD_MIN_STACK).max(self.min_usable)
    }

    /// The stack size a thread of `kind` gets — the stack proper, guard zone included:
    /// page-aligned, at least what glibc needs above the guard zone, and, with the
    /// mitigation on, such that the whole mapping is never a multiple of the THP page size
    /// (one page is added, as HotSpot's JDK-8312182 fix does).
    pub(crate) fn stack_size(&self, kind: ThreadKind, requested: Option<usize>) -> usize {
        let base = requested.unwrap_or(match kind {
            ThreadKind::Java => self.java_stack_size,
            ThreadKind::Vm
            | ThreadKind::Worker
            | ThreadKind::Service
            | ThreadKind::Collector
            | ThreadKind::Attached => self.vm_stack_size,
        });
        let floor = self.zones.total() + self.min_usable;
        let mut size = self.page_align(base.max(floor));
        if self.mitigated {
            if let Some(thp) = self.thp_page_size.filter(|&t| t > self.page) {
                if self.mapping_size(size).is_multiple_of(thp) {
                    size += self.page;
                }
            }
        }
        size
    }

    /// The whole mapping for a stack of `size`: the stack, the signal stack's guard page and
    /// the signal stack.
    pub(crate) fn mapping_size(&self, size: usize) -> usize {
        if self.alt_stack_size == 0 {
            size
        } else {
            size + self.page + self.alt_stack_size
        }
    }

    /// How far the soft limit of a stack rtvm mapped lies above its lowest usable address:
    /// the shadow zone. The guard zone lies below that address already and is part of the
    /// stack size, so the soft limit sits where HotSpot's does — guard plus shadow zone above
    /// the stack's end — and a stack of HotSpot's minimum (`-Xss136k`) keeps its 40K above it.
    pub(crate) fn soft_limit_offset(&self) -> usize {
        self.shadow_zone
    }

    /// The same for a thread the host created and attached: its stack (glibc's) has no rtvm
    /// guard zone below it, so the zones HotSpot would place at its low end count inside it.
    pub(crate) fn attached_soft_limit_offset(&self) -> usize {
        self.zones.total() + self.shadow_zone
    }
}
