//! VM threads: named threads on stacks rtvm maps itself, with a start handshake, a registry
//! of live threads and their stack layouts, and the THP stack mitigation.
//!
//! Life of a thread, as in HotSpot's `os::create_thread` / `os::start_thread`:
//!
//! 1. **Allocated.** The parent sizes and maps the stack. With the mitigation on, the guard
//!    zone is `PROT_NONE` and the whole stack `MADV_NOHUGEPAGE` at this point — before any
//!    thread exists. The thread is registered: from now on the VM's destroy waits for it.
//! 2. **Initialized.** The child reports in with its tid. A held
//!    thread then waits for the parent's go (a test holds it here: the window in which
//!    khugepaged could collapse an unmitigated stack, made deterministic), and the parent
//!    waits for the report. A thread that is not held goes straight on: the parent does not
//!    block on every thread start, so starting threads costs no context switch.
//! 3. **Runnable.** The child sleeps 100 ms with `-XX:+DelayThreadStartALot`, places its
//!    guards if the mitigation is off (as glibc and HotSpot did), pretouches its stack with
//!    `-XX:+AlwaysPreTouchStacks`, and runs the body.
//! 4. **Finished.** The body returned, panicked, or (a C body) called `pthread_exit`: an
//!    exit hook that runs however the thread ends marks it finished and tells the registry.
//!    Joining unmaps the stack.
//!
//! | file | what |
//! | --- | --- |
//! | `stack_policy` | stack sizes, zones and the mitigation as ergonomics decided them |
//! | `registry` | the live threads, with the VM's [`Lifecycle`](crate::lifecycle) under its lock |
//! | `spawn` | [`ThreadBuilder`], the start handshake, the child's first steps |
//! | `attach` | threads the host created: attach, detach, [`AttachedThread`] |
//! | `stack_cache` | stacks of joined threads kept for the next ones (`ThreadStackCacheSize`) |

mod attach;
mod notify;
mod registry;
mod spawn;
mod stack_cache;
mod stack_policy;

use std::cell::Cell;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use rtvm_os_linux::stack::StackMapping;
#[cfg(feature = "testing")]
use rtvm_os_linux::OsError;
use rtvm_os_linux::{base_page_size, Errno, OsThread, StackLayout};

use notify::Notifier;

use crate::safepoint::{Mutator, SafeWait};

pub use attach::AttachedThread;
pub(crate) use registry::Registry;
pub use spawn::ThreadBuilder;
pub(crate) use spawn::{spawn, Body, BoxedBody};
pub(crate) use stack_policy::StackPolicy;

thread_local! {
    /// The VM thread the calling thread is: `(VM id, thread id)`, `(0, 0)` for none. Plain
    /// data without a destructor: setting it allocates nothing, on a thread that may start
    /// when memory is exhausted.
    static CURRENT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// What a thread is for; decides its default stack size and whether destroy waits for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ThreadKind {
    /// An application thread, sized by `ThreadStackSize` (`-Xss`). Destroy waits for it.
    Java,
    /// A VM-internal thread, sized by `VMThreadStackSize`. Destroy waits for it.
    Vm,
    /// A worker of the parallel gang, sized by `VMThreadStackSize`; stopped by destroy.
    Worker,
    /// One of the VM's service threads (the signal dispatcher, the attach listener, the
    /// native-heap trimmer), sized by `VMThreadStackSize`; stopped by destroy.
    Service,
    /// A collector's own thread (a GC worker), sized by `VMThreadStackSize`: a VM thread
    /// that is not a mutator — never stopped by a stop of the world, free to run and to
    /// allocate while the world is stopped, and not among
    /// [`WorldStopped::threads`](crate::WorldStopped::threads). Destroy runs the shutdown
    /// hooks ([`VmHandle::add_shutdown_hook`](crate::VmHandle::add_shutdown_hook)) once the
    /// application threads are done, then waits for these.
    Collector,
    /// A thread the host created and attached to the VM
    /// ([`VmHandle::attach_current_thread`](crate::VmHandle::attach_current_thread)): its
    /// stack is the host's. Destroy does not wait for it (as JNI's `DestroyJavaVM` does not
    /// wait for attached daemon threads).
    Attached,
}

impl ThreadKind {
    /// Whether destroy waits for threads of this kind before anything else (VM threads that
    /// run application code).
    pub fn is_application(self) -> bool {
        matches!(self, ThreadKind::Java | ThreadKind::Vm)
    }

    /// Whether threads of this kind are mutators: stopped by stops of the world, targets of
    /// handshakes (application and attached threads).
    pub fn is_mutator(self) -> bool {
        matches!(
            self,
            ThreadKind::Java | ThreadKind::Vm | ThreadKind::Attached
        )
    }
}

impl fmt::Display for ThreadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThreadKind::Java => "java",
            ThreadKind::Vm => "vm",
            ThreadKind::Worker => "worker",
            ThreadKind::Service => "service",
            ThreadKind::Collector => "collector",
            ThreadKind::Attached => "attached",
        })
    }
}

/// The state of a thread in its start handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThreadState {
    /// Stack mapped, OS thread being created.
    Allocated,
    /// The thread has reported in and waits for its start.
    Initialized,
    /// The body runs (or is about to).
    Runnable,
    /// The body has returned.
    Finished,
}

/// A thread's registry entry.
#[derive(Debug)]
pub struct ThreadInfo {
    /// A VM-unique id.
    pub id: u64,
    /// The name.
    pub name: String,
    /// The kind.
    pub kind: ThreadKind,
    /// The stack layout.
    pub layout: StackLayout,
    /// Whether the stack is `MADV_NOHUGEPAGE`.
    pub no_huge_pages: bool,
    /// When the VM registered the thread (its start, or its attach).
    pub created: std::time::Instant,
    /// The THP page size, for khugepaged emulation.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    huge_page: usize,
    /// The soft limit's distance above the lowest usable address.
    soft_limit_offset: usize,
    sync: Mutex<Handshake>,
    pub(super) cv: Notifier,
    pub(super) os: Mutex<Option<OsThread>>,
    /// Its part in stops of the world (application and attached threads).
    pub(crate) mutator: Option<&'static Mutator>,
}

#[derive(Debug)]
pub(super) struct Handshake {
    pub(super) state: ThreadState,
    pub(super) tid: i32,
    pub(super) glibc_stack: Option<Range<usize>>,
    /// The parent let the thread run its body (a held thread waits for it).
    pub(super) go: bool,
    pub(super) outcome: Option<Outcome>,
    /// The stack pointer of the thread's exit hook (0 before): what it still stood on then
    /// is what its stack's next thread will start on.
    pub(super) exit_sp: usize,
}

/// How a thread's body ended.
#[derive(Clone, Debug)]
pub(super) enum Outcome {
    /// Returned (or, a C body, returned or called `pthread_exit`).
    Done,
    /// Panicked with this message.
    Panicked(String),
    /// Never ran: placing the guard zone failed.
    NoGuard(String),
}

/// A thread's stack as an interpreter or a GC needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackBounds {
    /// The highest address of the stack (exclusive): where the stack starts, it grows down.
    pub base: usize,
    /// The lowest usable address: below it lies the guard zone.
    pub limit: usize,
    /// The guard zone `[start, end)` (empty if the stack has none rtvm knows of).
    pub guard: (usize, usize),
    /// The address to compare the stack pointer with before growing the stack: below it an
    /// interpreter should throw its own stack-overflow error. HotSpot's stack overflow limit:
    /// the guard zone plus the shadow zone (`StackShadowPages`) above the stack's end — for a
    /// stack rtvm mapped, the shadow zone above the lowest usable address (the guard zone
    /// lies below it); for an attached thread, both zones above it — so native code called
    /// from that point still has room.
    pub soft_limit: usize,
}

impl StackBounds {
    /// `base - limit`.
    pub fn size(&self) -> usize {
        self.base - self.limit
    }
}

/// What a new registry entry is made of.
pub(super) struct NewThread {
    pub(super) id: u64,
    pub(super) name: String,
    pub(super) kind: ThreadKind,
    pub(super) layout: StackLayout,
    pub(super) no_huge_pages: bool,
    pub(super) huge_page: usize,
    pub(super) soft_limit_offset: usize,
    /// The state it starts in: `Allocated` for a thread the VM starts, `Runnable` for one
    /// that attaches.
    pub(super) state: ThreadState,
    pub(super) tid: i32,
    pub(super) glibc_stack: Option<Range<usize>>,
    pub(super) go: bool,
    pub(super) mutator: Option<&'static Mutator>,
}

/// How the VM sizes and lays out thread stacks ([`VmHandle::stack_config`]): the facts an
/// embedder (an interpreter, a GC) needs about stacks it has not seen yet.
///
/// [`VmHandle::stack_config`]: crate::VmHandle::stack_config
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StackConfig {
    /// The THP stack mitigation is on: guards and `MADV_NOHUGEPAGE` in place before a thread
    /// exists.
    pub mitigated: bool,
    /// Default stack size of Java threads (`-Xss`), bytes.
    pub java_stack_size: usize,
    /// Default stack size of VM threads and workers (`VMThreadStackSize`), bytes.
    pub vm_stack_size: usize,
    /// The red zone at the bottom of the guard zone (`StackRedPages`), bytes.
    pub red_zone: usize,
    /// The yellow zone above it (`StackYellowPages`), bytes.
    pub yellow_zone: usize,
    /// The reserved zone at the top of the guard zone (`StackReservedPages`), bytes.
    pub reserved_zone: usize,
    /// The whole guard zone, bytes.
    pub guard_zone: usize,
    /// The shadow zone above the guard zone (`StackShadowPages`), bytes.
    pub shadow_zone: usize,
    /// The alternate signal stack above each stack, bytes.
    pub signal_stack: usize,
}

impl From<&StackPolicy> for StackConfig {
    fn from(p: &StackPolicy) -> StackConfig {
        StackConfig {
            mitigated: p.mitigated,
            java_stack_size: p.java_stack_size,
            vm_stack_size: p.vm_stack_size,
            red_zone: p.zones.red,
            yellow_zone: p.zones.yellow,
            reserved_zone: p.zones.reserved,
            guard_zone: p.zones.total(),
            shadow_zone: p.shadow_zone,
            signal_stack: p.alt_stack_size,
        }
    }
}

impl ThreadInfo {
    pub(super) fn new(t: NewThread) -> Arc<ThreadInfo> {
        Arc::new(ThreadInfo {
            id: t.id,
            name: t.name,
            kind: t.kind,
            layout: t.layout,
            no_huge_pages: t.no_huge_pages,
            created: std::time::Instant::now(),
            huge_page: t.huge_page,
            soft_limit_offset: t.soft_limit_offset,
            sync: Mutex::new(Handshake {
                state: t.state,
                tid: t.tid,
                glibc_stack: t.glibc_stack,
                go: t.go,
                outcome: None,
                exit_sp: 0,
            }),
            cv: Notifier::new(),
            os: Mutex::new(None),
            mutator: t.mutator,
        })
    }

    pub(super) fn lock(&self) -> crate::safepoint::Locked<'_, Handshake> {
        crate::safepoint::lock(&self.sync)
    }

    /// The current state.
    pub fn state(&self) -> ThreadState {
        self.lock().state
    }

    /// The kernel thread id (0 before the thread reported in).
    pub fn tid(&self) -> i32 {
        self.lock().tid
    }

    /// The stack bounds glibc reported from inside the thread (`pthread_getattr_np`).
    pub fn glibc_stack(&self) -> Option<Range<usize>> {
        self.lock().glibc_stack.clone()
    }

    /// The thread's stack bounds and soft limit.
    pub fn stack_bounds(&self) -> StackBounds {
        let usable = &self.layout.usable;
        let guard = &self.layout.guard;
        StackBounds {
            base: usable.end,
            limit: usable.start,
            guard: (guard.start, guard.end),
            soft_limit: (usable.start + self.soft_limit_offset).min(usable.end),
        }
    }

    /// Whether the guard zone is protected.
    pub fn guard_installed(&self) -> bool {
        crate::safepoint::lock(&self.os)
            .as_ref()
            .and_then(OsThread::stack)
            .is_some_and(StackMapping::guard_installed)
    }

    /// Resident bytes of the stack (0 once joined): by `mincore` over a stack rtvm mapped,
    /// by the page tables (`/proc/self/pagemap`) over an attached thread's stack, which may
    /// have parts nothing is mapped at (the first thread's stack grows on demand).
    pub fn stack_resident_bytes(&self) -> usize {
        if self.kind == ThreadKind::Attached {
            let m = &self.layout.mapping;
            return rtvm_os_linux::procfs::present_pages(m.start, m.end)
                .map_or(0, |p| p * base_page_size());
        }
        let os = crate::safepoint::lock(&self.os);
        os.as_ref()
            .and_then(OsThread::stack)
            .and_then(|s| s.resident_bytes().ok())
            .unwrap_or(0)
    }

    /// `MADV_COLLAPSE` over the huge-page regions around the stack: what khugepaged would
    /// do to them, now. A test tool: it reaches into the neighbouring mappings.
    #[cfg(feature = "testing")]
    pub fn collapse_stack(&self) -> Result<(), OsError> {
        let os = crate::safepoint::lock(&self.os);
        match os.as_ref().and_then(OsThread::stack) {
            Some(s) => s.collapse(self.huge_page),
            None => Err(OsError {
                op: rtvm_os_linux::Operation::Advise("MADV_COLLAPSE"),
                addr: self.layout.mapping.start,
                len: self.layout.mapping.len(),
                errno: Errno::ESRCH,
            }),
        }
    }

    /// Marks the thread finished (from its exit hook) and wakes whoever waits.
    /// Called by the thread's exit hook, on the thread, with its stack pointer.
    pub(super) fn mark_finished(&self, sp: usize) {
        let mut hs = self.lock();
        hs.exit_sp = sp;
        if hs.outcome.is_none() {
            hs.outcome = Some(Outcome::Done);
        }
        hs.state = ThreadState::Finished;
        self.cv.notify_all();
    }

    pub(super) fn wait_finished(&self) -> Option<Outcome> {
        let mut hs = self.lock();
        while hs.state != ThreadState::Finished {
            hs = self.cv.wait_locked(hs);
        }
        hs.outcome.take()
    }
}

/// Why a thread could not be started or ended badly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadError {
    /// The stack could not be mapped or the OS thread not created. The message has
    /// HotSpot's shape: `Failed to start thread "x" - pthread_create failed (EAGAIN) for
    /// attributes: stacksize: 2048k, guardsize: 16k, joinable.`
    #[error("{message}")]
    Start {
        /// The message.
        message: String,
        /// The errno.
        #[source]
        errno: Errno,
    },
    /// The VM is shutting down: no thread starts any more.
    #[error("Failed to start thread \"{name}\" - the VM is shutting down")]
    ShuttingDown {
        /// The thread's name.
        name: String,
    },
    /// Called in a child of `fork()`: the VM belongs to the parent process.
    #[error("Failed to start or attach thread \"{name}\" - called in a child process after fork(): the VM belongs to the parent process")]
    Forked {
        /// The thread's name.
        name: String,
    },
    /// An unmitigated thread could not place its guard zone; its body did not run.
    #[error("thread \"{name}\": {message}")]
    Guard {
        /// The thread's name.
        name: String,
        /// What failed.
        message: String,
    },
    /// The calling thread is already one of this VM's threads (attached, or started by it).
    #[error("the current thread is already attached to the VM as \"{name}\"")]
    AlreadyAttached {
        /// The name it is known by.
        name: String,
    },
    /// The calling thread is not attached to this VM (detach), or is a thread the VM
    /// started, which cannot be detached.
    #[error("the current thread is not attached to the VM{}", .started.as_ref().map(|n| format!(" (it is the VM's own thread \"{n}\")")).unwrap_or_default())]
    NotAttached {
        /// The name of the VM thread the caller is, if it is one.
        started: Option<String>,
    },
    /// Attaching failed: the stack bounds could not be read or the exit hook not set.
    #[error("{message}")]
    Attach {
        /// What failed.
        message: String,
        /// The errno.
        #[source]
        errno: Errno,
    },
    /// Giving back the calling thread's stack pages failed.
    #[error("{message}")]
    StackTrim {
        /// What failed.
        message: String,
        /// The errno.
        #[source]
        errno: Errno,
    },
    /// The body panicked.
    #[error("thread \"{name}\" panicked: {message}")]
    Panicked {
        /// The thread's name.
        name: String,
        /// The panic message.
        message: String,
    },
}

/// A handle to a started (or held) VM thread.
#[derive(Debug)]
pub struct VmThread {
    info: Arc<ThreadInfo>,
    registry: Arc<Registry>,
}

/// The text of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}

impl VmThread {
    /// The registry entry.
    pub fn info(&self) -> &Arc<ThreadInfo> {
        &self.info
    }

    /// The thread's stack bounds and soft limit.
    pub fn stack_bounds(&self) -> StackBounds {
        self.info.stack_bounds()
    }

    /// Lets a held thread run its body (no-op if it already runs).
    #[cfg(feature = "testing")]
    pub fn start(&self) {
        let mut hs = self.info.lock();
        if !hs.go {
            hs.go = true;
            self.info.cv.notify_all();
        }
    }

    /// Waits for the body to finish, unmaps the stack and removes the thread from the
    /// registry. A held thread is started first.
    pub fn join(self) -> Result<(), ThreadError> {
        join_info(&self.registry, &self.info)
    }
}

/// Joins a registered thread (starting it first if held): waits for it to finish, joins the
/// OS thread, unmaps its stack, forgets it.
pub(crate) fn join_info(registry: &Registry, info: &ThreadInfo) -> Result<(), ThreadError> {
    if registry.forked() {
        // The thread is the parent's: it never ends here.
        return Err(ThreadError::Forked {
            name: info.name.clone(),
        });
    }
    {
        let mut hs = info.lock();
        if !hs.go {
            hs.go = true;
            info.cv.notify_all();
        }
    }
    // A mutator waiting for a join is in a safe region.
    let wait = SafeWait::enter();
    // pthread_join at once: the exit hook (which marks the thread finished) runs before the
    // thread is gone, so once joined the outcome is there — one wait, not one for the hook
    // and then one for the thread's exit. The OsThread stays in its slot meanwhile (thread
    // dumps and NMT still see the stack).
    let joiner = crate::safepoint::lock(&info.os)
        .as_mut()
        .and_then(OsThread::take_joiner);
    match joiner {
        Some(joiner) => {
            if let Some(joined) = joiner.join() {
                let os = crate::safepoint::lock(&info.os).take();
                if let Some(stack) = os.and_then(|os| os.into_stack(joined)) {
                    let in_use_from = info.lock().exit_sp;
                    registry.stack_cache().put(stack, in_use_from);
                }
            }
        }
        // Joined by another caller (the destroy's join of a thread it raced with).
        None => drop(info.wait_finished()),
    }
    drop(wait);
    let outcome = info.lock().outcome.take();
    registry.remove(info.id);
    match outcome {
        None | Some(Outcome::Done) => Ok(()),
        Some(Outcome::Panicked(message)) => Err(ThreadError::Panicked {
            name: info.name.clone(),
            message,
        }),
        Some(Outcome::NoGuard(message)) => Err(ThreadError::Guard {
            name: info.name.clone(),
            message,
        }),
    }
}
