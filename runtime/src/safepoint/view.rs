//! What a collector gets for each stopped thread: how it stopped, its scan ranges (on its
//! own stack and on another it was found on) and its published registers.

use std::ffi::CStr;
use std::ops::Range;

use rtvm_os_linux::safepoint::{self as os, OtherStack, StopRecord, SAVED_REGISTERS};

use super::Member;

/// How a thread was found stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopHow {
    /// At a poll ([`safepoint_poll`](crate::safepoint_poll)); its registers are spilled in its
    /// scan range.
    Poll,
    /// In a safe region (entered by the embedder, or one of rtvm's own waits).
    SafeRegion,
    /// By the stop signal, in its handler; the kernel saved its context in its scan range.
    Signal,
}

impl StopHow {
    pub(super) fn of(state: u32) -> StopHow {
        match state {
            os::STOPPED_POLL => StopHow::Poll,
            os::STOPPED_SIGNAL => StopHow::Signal,
            _ => StopHow::SafeRegion,
        }
    }

    /// The C code (`RTVM_STOPPED_POLL`, `_SAFE_REGION`, `_SIGNAL`).
    pub fn code(self) -> i32 {
        match self {
            StopHow::Poll => 1,
            StopHow::SafeRegion => 2,
            StopHow::Signal => 3,
        }
    }
}

/// The stack a stopped thread was found on when it was not its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StackKind {
    /// Its alternate signal stack (inside an `SA_ONSTACK` handler).
    SignalStack,
    /// A stack it declared ([`VmHandle::set_current_fiber`](crate::VmHandle::set_current_fiber)).
    Fiber,
    /// A stack nobody declared: the mapping that holds its stack pointer, from there up.
    Unknown,
}

impl StackKind {
    /// The C code (`RTVM_STACK_SIGNAL`, `_FIBER`, `_UNKNOWN`; 0 for none).
    pub fn code(self) -> i32 {
        match self {
            StackKind::SignalStack => 1,
            StackKind::Fiber => 2,
            StackKind::Unknown => 3,
        }
    }
}

/// A stopped (or safe) thread, as a collector needs it.
#[derive(Clone, Debug)]
pub struct StoppedThread<'a> {
    record: &'static StopRecord,
    id: u64,
    tid: i32,
    name: &'a CStr,
    how: StopHow,
    scan: Range<usize>,
    other: Option<(Range<usize>, StackKind)>,
    registers: [usize; SAVED_REGISTERS],
    stack: Range<usize>,
}

impl StoppedThread<'_> {
    /// The VM thread id (`VmThread::info().id`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The kernel thread id.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// The thread's name.
    pub fn name(&self) -> &str {
        self.name.to_str().unwrap_or("?")
    }

    pub(crate) fn c_name(&self) -> &CStr {
        self.name
    }

    /// How it stopped.
    pub fn how(&self) -> StopHow {
        self.how
    }

    /// The conservative scan range on the thread's own stack, `[sp, base)`: for a thread
    /// stopped at a poll or by the signal it holds every value the thread had in a register
    /// too; for a thread in a safe region it starts where the region was entered (the
    /// registers it had then are [`registers`](Self::registers)). Empty for a thread that has
    /// not begun its body. A thread found on another stack ([`other_stack`](Self::other_stack))
    /// is scanned over its whole usable stack here (where it left it is not known).
    pub fn scan(&self) -> Range<usize> {
        self.scan.clone()
    }

    /// The part in use of the stack the thread was found on, `[sp, end)`, and what that stack
    /// is — when it is not the thread's own: its alternate signal stack, a fiber it declared,
    /// or an unknown stack (the readable mapping that holds its stack pointer). Scan it too.
    pub fn other_stack(&self) -> Option<(Range<usize>, StackKind)> {
        self.other.clone()
    }

    /// The part in use of the alternate signal stack, `[sp, end)`, if the thread was on it.
    pub fn alt_stack(&self) -> Option<Range<usize>> {
        match &self.other {
            Some((r, StackKind::SignalStack)) => Some(r.clone()),
            _ => None,
        }
    }

    /// Every range to scan: [`scan`](Self::scan) and, if any, the other stack's part.
    pub fn scan_ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        std::iter::once(self.scan.clone()).chain(self.other.iter().map(|(r, _)| r.clone()))
    }

    /// The callee-saved registers as published (x86-64: rbx, rbp, r12–r15; aarch64:
    /// x19–x30): at the poll, at the safe region's entry, or from the signal's context.
    pub fn registers(&self) -> &[usize; SAVED_REGISTERS] {
        &self.registers
    }

    /// The thread's usable stack.
    pub fn stack(&self) -> Range<usize> {
        self.stack.clone()
    }

    /// Whether the thread is running now (a verification's question: never, while stopped).
    pub(crate) fn state_running(&self) -> bool {
        self.record.state() == os::RUNNING
    }
}

/// `t` as its record says now (a verification reads it twice).
pub(crate) fn view_again<'a>(t: &StoppedThread<'a>) -> StoppedThread<'a> {
    view_of(t.id, t.record, t.name, &t.stack, t.how, None)
}

impl Member {
    pub(super) fn view(&self, how: StopHow) -> StoppedThread<'_> {
        view_of(
            self.mutator.id(),
            &self.mutator.record,
            &self.name,
            &self.stack,
            how,
            None,
        )
    }
}

/// The view of a thread: what its record published, or `published` (a spill taken just now
/// by the thread itself: `(sp, registers)`, on its own stack).
pub(super) fn view_of<'a>(
    id: u64,
    record: &'static StopRecord,
    name: &'a CStr,
    stack: &Range<usize>,
    how: StopHow,
    published: Option<(usize, [usize; SAVED_REGISTERS])>,
) -> StoppedThread<'a> {
    let (sp, other, registers) = match published {
        Some((sp, regs)) => (sp, None, regs),
        None => (record.sp(), record.other_stack(), record.registers()),
    };
    let tid = record.tid();
    // A published address may be that of a byte: scan from the word it lies in.
    let sp = sp & !(std::mem::size_of::<usize>() - 1);
    let (scan, other) = match other {
        Some(OtherStack::SignalStack(_, end)) => {
            (stack.clone(), Some((sp..end, StackKind::SignalStack)))
        }
        Some(OtherStack::Fiber(_, end)) => (stack.clone(), Some((sp..end, StackKind::Fiber))),
        None if sp == 0 => (stack.end..stack.end, None),
        None if stack.contains(&sp) => (sp..stack.end, None),
        Some(OtherStack::Unknown) | None => {
            let end = rtvm_os_linux::procfs::readable_mapping_end(sp).unwrap_or(sp);
            (stack.clone(), Some((sp..end, StackKind::Unknown)))
        }
    };
    StoppedThread {
        record,
        id,
        tid,
        name,
        how,
        scan,
        other,
        registers,
        stack: stack.clone(),
    }
}
