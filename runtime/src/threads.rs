//! VM threads: named threads on stacks rtvm maps itself, with a start handshake, a registry
//! of live threads and their stack layouts, and the THP stack mitigation.
//!
//! Life of a thread, as in HotSpot's `os::create_thread` / `os::start_thread`:
//!
//! 1. **Allocated.** The parent sizes and maps the stack. With the mitigation on, the guard
//!    zone is `PROT_NONE` and the whole stack `MADV_NOHUGEPAGE` at this point — before any
//!    thread exists. The thread is registered: from now on the VM's destroy waits for it.
//! 2. **Initialized.** The child reports in: its tid and the stack bounds glibc sees. A held
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
//! The [`Registry`] also holds the VM's lifecycle phase, so that starting a thread and the
//! VM's destroy agree on whether the thread counts: a thread registered before the VM entered
//! [`VmState::ShuttingDown`] is waited for, later starts are refused.

use std::cell::Cell;
use std::fmt;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rtvm_flags::value::format_page_size;
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::stack::{self, minimum_usable_stack, StackMapping, StackSpec};
use rtvm_os_linux::thread::{self as os_thread, errno_name, ForeignCall, OsThread, ThreadContext};
use rtvm_os_linux::{base_page_size, Errno, GuardZones, OsError, PretouchRequest, StackLayout};

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
    /// A thread the host created and attached to the VM
    /// ([`VmHandle::attach_current_thread`](crate::VmHandle::attach_current_thread)): its
    /// stack is the host's. Destroy does not wait for it (as JNI's `DestroyJavaVM` does not
    /// wait for attached daemon threads).
    Attached,
}

impl ThreadKind {
    /// Whether destroy waits for threads of this kind (VM threads that run application code).
    pub fn is_application(self) -> bool {
        matches!(self, ThreadKind::Java | ThreadKind::Vm)
    }
}

impl fmt::Display for ThreadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThreadKind::Java => "java",
            ThreadKind::Vm => "vm",
            ThreadKind::Worker => "worker",
            ThreadKind::Attached => "attached",
        })
    }
}

/// How thread stacks are laid out and protected from transparent huge pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackPolicy {
    /// The mitigation is on (the default): guards before the thread exists, the stack
    /// `MADV_NOHUGEPAGE`, stack sizes never a multiple of the THP size.
    pub mitigated: bool,
    /// The THP page size, if known.
    pub thp_page_size: Option<usize>,
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
}

/// The smallest Java thread stack HotSpot allows on x86-64 before its zones are added (40K).
pub const JAVA_THREAD_MIN_STACK: usize = 40 * 1024;
/// The smallest VM-internal thread stack HotSpot allows on x86-64 (64K).
pub const VM_THREAD_MIN_STACK: usize = 64 * 1024;

impl StackPolicy {
    /// HotSpot's smallest Java thread stack: 40K plus the guard and shadow zones, page-aligned
    /// (136K with the default zones).
    pub(crate) fn minimum_java_stack_size(&self) -> usize {
        let page = base_page_size();
        (JAVA_THREAD_MIN_STACK + self.zones.total() + self.shadow_zone)
            .div_ceil(page)
            .saturating_mul(page)
            .max(minimum_usable_stack())
    }

    /// HotSpot's smallest VM-internal thread stack (64K), page-aligned.
    pub(crate) fn minimum_vm_stack_size(&self) -> usize {
        let page = base_page_size();
        VM_THREAD_MIN_STACK
            .div_ceil(page)
            .saturating_mul(page)
            .max(minimum_usable_stack())
    }

    /// The stack size a thread of `kind` gets — the stack proper, guard zone included:
    /// page-aligned, at least what glibc needs above the guard zone, and, with the
    /// mitigation on, such that the whole mapping is never a multiple of the THP page size
    /// (one page is added, as HotSpot's JDK-8312182 fix does).
    pub(crate) fn stack_size(&self, kind: ThreadKind, requested: Option<usize>) -> usize {
        let page = base_page_size();
        let base = requested.unwrap_or(match kind {
            ThreadKind::Java => self.java_stack_size,
            ThreadKind::Vm | ThreadKind::Worker | ThreadKind::Attached => self.vm_stack_size,
        });
        let floor = self.zones.total() + minimum_usable_stack();
        let mut size = base.max(floor).div_ceil(page).saturating_mul(page);
        if self.mitigated {
            if let Some(thp) = self.thp_page_size.filter(|&t| t > page) {
                if self.mapping_size(size).is_multiple_of(thp) {
                    size += page;
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
            size + base_page_size() + self.alt_stack_size
        }
    }

    /// Decides the policy from the THP configuration, with the sentence `-Xlog:pagesize`
    /// prints about it. The mitigation does not depend on the THP mode at start-up: an
    /// operator can switch it to `always` (or enable an mTHP size) at any time.
    pub(crate) fn decide(disable_mitigation: bool, pages: &PageInfo) -> (bool, String) {
        let thp = &pages.thp;
        let mthp_always: Vec<String> = thp
            .mthp_always()
            .iter()
            .map(|&s| format_page_size(s as u64))
            .collect();
        let mthp_text = if mthp_always.is_empty() {
            "none".to_string()
        } else {
            mthp_always.join(", ")
        };
        let state = format!(
            "THP mode: {}; mTHP sizes effectively always: {mthp_text}",
            thp.mode
        );
        if disable_mitigation {
            return (false, format!("{state}: stacks are mapped read-write and unadvised, their guards placed late by each thread (-XX:+DisableTHPStackMitigation)"));
        }
        (
            true,
            format!("{state}: stacks are MADV_NOHUGEPAGE with their guards in place before the thread starts, whatever the mode is now (it can change at run time)"),
        )
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
    /// The THP page size, for khugepaged emulation.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    huge_page: usize,
    /// The shadow zone size, for the soft limit.
    shadow_zone: usize,
    sync: Mutex<Handshake>,
    cv: Condvar,
    os: Mutex<Option<OsThread>>,
}

#[derive(Debug)]
struct Handshake {
    state: ThreadState,
    tid: i32,
    glibc_stack: Option<Range<usize>>,
    go: bool,
    outcome: Option<Outcome>,
}

/// How a thread's body ended.
#[derive(Clone, Debug)]
enum Outcome {
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
    /// interpreter should throw its own stack-overflow error. The guard zone plus the shadow
    /// zone (`StackShadowPages`) above the lowest usable address, so native code called from
    /// that point still has room.
    pub soft_limit: usize,
}

impl StackBounds {
    /// `base - limit`.
    pub fn size(&self) -> usize {
        self.base - self.limit
    }
}

impl ThreadInfo {
    fn lock(&self) -> MutexGuard<'_, Handshake> {
        self.sync.lock().unwrap_or_else(|p| p.into_inner())
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
            soft_limit: (usable.start + self.shadow_zone).min(usable.end),
        }
    }

    /// Whether the guard zone is protected.
    pub fn guard_installed(&self) -> bool {
        self.os
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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
        let os = self.os.lock().unwrap_or_else(|p| p.into_inner());
        os.as_ref()
            .and_then(OsThread::stack)
            .and_then(|s| s.resident_bytes().ok())
            .unwrap_or(0)
    }

    /// `MADV_COLLAPSE` over the huge-page regions around the stack: what khugepaged would
    /// do to them, now. A test tool: it reaches into the neighbouring mappings.
    #[cfg(feature = "testing")]
    pub fn collapse_stack(&self) -> Result<(), OsError> {
        let os = self.os.lock().unwrap_or_else(|p| p.into_inner());
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
    fn mark_finished(&self) {
        let mut hs = self.lock();
        if hs.outcome.is_none() {
            hs.outcome = Some(Outcome::Done);
        }
        hs.state = ThreadState::Finished;
        self.cv.notify_all();
    }

    fn wait_finished(&self) -> Option<Outcome> {
        let mut hs = self.lock();
        while hs.state != ThreadState::Finished {
            hs = self.cv.wait(hs).unwrap_or_else(|p| p.into_inner());
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
        errno: Errno,
    },
    /// The VM is shutting down: no thread starts any more.
    #[error("Failed to start thread \"{name}\" - the VM is shutting down")]
    ShuttingDown {
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

/// The VM's lifecycle phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum VmState {
    /// Running: threads may start.
    Running,
    /// Destroy was called and waits for the application threads to finish; they may still
    /// start more threads, which it then waits for too.
    DestroyRequested,
    /// No application thread is left: no thread starts any more; the VM is being torn down.
    ShuttingDown,
    /// Torn down.
    Destroyed,
}

#[derive(Debug)]
struct RegistryState {
    threads: Vec<Arc<ThreadInfo>>,
    /// Application threads registered and not yet finished.
    live_application: usize,
    state: VmState,
}

/// The live threads of a VM and its lifecycle phase.
#[derive(Debug)]
pub(crate) struct Registry {
    vm_id: u64,
    inner: Mutex<RegistryState>,
    cv: Condvar,
    next_id: AtomicU64,
}

impl Registry {
    pub(crate) fn new(vm_id: u64) -> Registry {
        Registry {
            vm_id,
            inner: Mutex::new(RegistryState {
                threads: Vec::new(),
                live_application: 0,
                state: VmState::Running,
            }),
            cv: Condvar::new(),
            next_id: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RegistryState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every live (not yet joined) thread.
    pub(crate) fn list(&self) -> Vec<Arc<ThreadInfo>> {
        self.lock().threads.clone()
    }

    /// How many threads are registered.
    pub(crate) fn count(&self) -> usize {
        self.lock().threads.len()
    }

    /// The lifecycle phase.
    pub(crate) fn state(&self) -> VmState {
        self.lock().state
    }

    fn register(&self, info: &Arc<ThreadInfo>) -> Result<(), ThreadError> {
        let mut s = self.lock();
        if s.state >= VmState::ShuttingDown {
            return Err(ThreadError::ShuttingDown {
                name: info.name.clone(),
            });
        }
        s.threads.push(Arc::clone(info));
        if info.kind.is_application() {
            s.live_application += 1;
        }
        Ok(())
    }

    /// Takes back a registration whose thread never started.
    fn unregister(&self, info: &ThreadInfo) {
        let mut s = self.lock();
        s.threads.retain(|t| t.id != info.id);
        if info.kind.is_application() {
            s.live_application -= 1;
        }
        self.cv.notify_all();
    }

    fn thread_finished(&self, kind: ThreadKind) {
        if kind.is_application() {
            let mut s = self.lock();
            s.live_application -= 1;
            self.cv.notify_all();
        }
    }

    fn remove(&self, id: u64) {
        self.lock().threads.retain(|t| t.id != id);
        self.cv.notify_all();
    }

    /// Enters [`VmState::DestroyRequested`]. Returns the phase found: only the caller that
    /// found [`VmState::Running`] goes on to tear the VM down; the others wait for
    /// [`VmState::Destroyed`] ([`wait_destroyed`](Registry::wait_destroyed)).
    pub(crate) fn request_destroy(&self) -> VmState {
        let mut s = self.lock();
        let found = s.state;
        if found == VmState::Running {
            s.state = VmState::DestroyRequested;
        }
        found
    }

    /// Waits until no application thread is left — threads started meanwhile included — and
    /// enters [`VmState::ShuttingDown`] atomically with that observation.
    pub(crate) fn wait_for_application_threads(&self) {
        let mut s = self.lock();
        while s.live_application > 0 {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.state = VmState::ShuttingDown;
    }

    pub(crate) fn set_destroyed(&self) {
        self.lock().state = VmState::Destroyed;
        self.cv.notify_all();
    }

    pub(crate) fn wait_destroyed(&self) {
        let mut s = self.lock();
        while s.state != VmState::Destroyed {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }
}

thread_local! {
    /// The VM thread the calling thread is: `(VM id, thread id)`, `(0, 0)` for none. Plain
    /// data without a destructor: setting it allocates nothing, on a thread that may start
    /// when memory is exhausted.
    static CURRENT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

impl Registry {
    /// The registry entry of the calling thread, if it is one of this VM's threads (started
    /// or attached).
    pub(crate) fn current_thread(&self) -> Option<Arc<ThreadInfo>> {
        let (vm, id) = CURRENT.with(Cell::get);
        if vm != self.vm_id {
            return None;
        }
        self.lock().threads.iter().find(|t| t.id == id).cloned()
    }

    /// Attaches the calling thread: reads its stack from glibc, registers it as
    /// [`ThreadKind::Attached`], and sets a hook that forgets it if it ends without
    /// detaching. `shadow` is the soft limit's distance above the stack's lowest address.
    pub(crate) fn attach_current(
        self: &Arc<Self>,
        name: &str,
        shadow: usize,
    ) -> Result<Arc<ThreadInfo>, ThreadError> {
        if let Some(me) = self.current_thread() {
            return Err(ThreadError::AlreadyAttached {
                name: me.name.clone(),
            });
        }
        let (usable, guard) = stack::current_thread_stack().ok_or_else(|| ThreadError::Attach {
            message: format!("Failed to attach thread \"{name}\" - pthread_getattr_np failed"),
            errno: Errno::last(),
        })?;
        let tid = rtvm_os_linux::system::current_tid();
        let info = Arc::new(ThreadInfo {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            name: name.to_owned(),
            kind: ThreadKind::Attached,
            layout: StackLayout::foreign(usable.clone(), guard),
            no_huge_pages: false,
            huge_page: 2 << 20,
            shadow_zone: shadow,
            sync: Mutex::new(Handshake {
                state: ThreadState::Runnable,
                tid,
                glibc_stack: Some(usable),
                go: true,
                outcome: None,
            }),
            cv: Condvar::new(),
            os: Mutex::new(None),
        });
        self.register(&info)?;
        // A host thread that ends attached is forgotten by the VM (the hook runs in its last
        // moments: no logging). Allocated here, on the attaching thread.
        let (registry, id) = (Arc::clone(self), info.id);
        let hook: os_thread::ExitHook = Box::new(move || registry.remove(id));
        if let Err(errno) = os_thread::set_current_thread_exit_hook(hook) {
            self.unregister(&info);
            return Err(ThreadError::Attach {
                message: format!(
                    "Failed to attach thread \"{name}\" - pthread_setspecific failed ({})",
                    errno_name(errno)
                ),
                errno,
            });
        }
        CURRENT.with(|c| c.set((self.vm_id, info.id)));
        let l = &info.layout;
        log::info!(
            target: "os+thread",
            "Thread attached (tid: {tid}, name: \"{name}\", stack: {:#x} - {:#x} ({}k), guard: {:#x}-{:#x}).",
            l.usable.end,
            l.usable.start,
            l.usable.len() / 1024,
            l.guard.start,
            l.guard.end
        );
        Ok(info)
    }

    /// Detaches the calling thread, which must be attached (not started by the VM).
    pub(crate) fn detach_current(&self) -> Result<(), ThreadError> {
        let me = self.current_thread();
        match me {
            Some(me) if me.kind == ThreadKind::Attached => {
                drop(os_thread::take_current_thread_exit_hook());
                CURRENT.with(|c| c.set((0, 0)));
                self.remove(me.id);
                log::info!(target: "os+thread", "Thread detached (tid: {}, name: \"{}\").", me.tid(), me.name);
                Ok(())
            }
            Some(me) => Err(ThreadError::NotAttached {
                started: Some(me.name.clone()),
            }),
            None => Err(ThreadError::NotAttached { started: None }),
        }
    }

    /// The name of the calling thread if it is one the VM started (not an attached one):
    /// such a thread cannot wait for the VM's destruction, which waits for it.
    pub(crate) fn current_started_thread_name(&self) -> Option<String> {
        let (vm, id) = CURRENT.with(Cell::get);
        if vm != self.vm_id {
            return None;
        }
        let s = self.lock();
        match s.threads.iter().find(|t| t.id == id) {
            Some(t) if t.kind == ThreadKind::Attached => None,
            Some(t) => Some(t.name.clone()),
            None => Some(format!("#{id}")),
        }
    }
}

/// A handle to a started (or held) VM thread.
#[derive(Debug)]
pub struct VmThread {
    info: Arc<ThreadInfo>,
    registry: Arc<Registry>,
}

/// What a thread runs.
pub(crate) enum Body {
    /// A Rust closure; a panic is caught and reported by `join`.
    Rust(Box<dyn FnOnce() + Send + 'static>),
    /// A C function, called last, from a plain frame: it may `pthread_exit`.
    Foreign(ForeignCall),
}

/// Starts a thread: maps its stack, registers it, creates it, and — if `hold` — waits for
/// it to report in; otherwise it runs `body` at once.
pub(crate) fn spawn(
    registry: &Arc<Registry>,
    policy: &StackPolicy,
    name: &str,
    kind: ThreadKind,
    stack_size: Option<usize>,
    hold: bool,
    body: Body,
) -> Result<VmThread, ThreadError> {
    let size = policy.stack_size(kind, stack_size);
    let attrs = format!(
        "stacksize: {}k, guardsize: {}k, joinable",
        size / 1024,
        policy.zones.total() / 1024
    );
    let fail = |what: &str, errno: Errno| {
        let message = format!(
            "Failed to start thread \"{name}\" - {what} failed ({}) for attributes: {attrs}.",
            errno_name(errno)
        );
        log::warn!(target: "os+thread", "{message}");
        ThreadError::Start { message, errno }
    };
    let spec = StackSpec {
        size,
        zones: policy.zones,
        alt_stack_size: policy.alt_stack_size,
        no_huge_pages: policy.mitigated,
        guard_early: policy.mitigated,
        name: name.to_owned(),
    };
    let mapping = StackMapping::map(&spec).map_err(|e| fail(mapping_op(&e), e.errno))?;
    let info = Arc::new(ThreadInfo {
        id: registry.next_id.fetch_add(1, Ordering::Relaxed),
        name: name.to_owned(),
        kind,
        layout: mapping.layout().clone(),
        no_huge_pages: spec.no_huge_pages,
        huge_page: policy.thp_page_size.unwrap_or(2 << 20),
        shadow_zone: policy.zones.total() + policy.shadow_zone,
        sync: Mutex::new(Handshake {
            state: ThreadState::Allocated,
            tid: 0,
            glibc_stack: None,
            go: !hold,
            outcome: None,
        }),
        cv: Condvar::new(),
        os: Mutex::new(None),
    });
    registry.register(&info)?;
    let child = Arc::clone(&info);
    let vm_id = registry.vm_id;
    let policy_c = policy.clone();
    let entry: os_thread::Entry =
        Box::new(move |ctx: &mut ThreadContext| run_child(child, vm_id, &policy_c, ctx, body));
    // However the thread ends — a return, a panic anywhere, pthread_exit — the VM learns of
    // it, and nobody waits for it forever. Allocated here, in the parent.
    let (exiting, exit_registry) = (Arc::clone(&info), Arc::clone(registry));
    let on_exit: os_thread::ExitHook = Box::new(move || {
        exiting.mark_finished();
        exit_registry.thread_finished(exiting.kind);
    });
    // Held while the OS thread is created, so a joiner that finds the thread finished waits
    // for its OsThread to be stored here.
    let mut os_slot = info.os.lock().unwrap_or_else(|p| p.into_inner());
    let os = match os_thread::spawn(mapping, entry, Some(on_exit)) {
        Ok(os) => os,
        Err(e) => {
            drop(os_slot);
            registry.unregister(&info);
            return Err(fail("pthread_create", e.errno));
        }
    };
    let pthread = os.pthread_id();
    *os_slot = Some(os);
    drop(os_slot);
    let l = &info.layout;
    log::info!(
        target: "os+thread",
        "Thread \"{name}\" started (pthread id: {pthread}, attributes: {attrs}; stack: {:#x}-{:#x}, guard: {:#x}-{:#x}, THP prevented: {}).",
        l.usable.start,
        l.usable.end,
        l.guard.start,
        l.guard.end,
        if spec.no_huge_pages { "yes" } else { "no" }
    );
    if hold {
        // A held thread is in its start window once it has reported in.
        let mut hs = info.lock();
        while hs.state == ThreadState::Allocated {
            hs = info.cv.wait(hs).unwrap_or_else(|p| p.into_inner());
        }
    }
    Ok(VmThread {
        info,
        registry: Arc::clone(registry),
    })
}

fn mapping_op(e: &OsError) -> &'static str {
    match e.op {
        rtvm_os_linux::Operation::Protect => "mprotect",
        rtvm_os_linux::Operation::Advise(_) => "madvise",
        _ => "mmap",
    }
}

fn run_child(
    info: Arc<ThreadInfo>,
    vm_id: u64,
    policy: &StackPolicy,
    ctx: &mut ThreadContext,
    body: Body,
) -> Option<ForeignCall> {
    CURRENT.with(|c| c.set((vm_id, info.id)));
    let tid = rtvm_os_linux::system::current_tid();
    let held = {
        let mut hs = info.lock();
        hs.tid = tid;
        hs.glibc_stack = stack::current_thread_stack().map(|(r, _)| r);
        hs.state = ThreadState::Initialized;
        let held = !hs.go;
        if held {
            info.cv.notify_all();
            while !hs.go {
                hs = info.cv.wait(hs).unwrap_or_else(|p| p.into_inner());
            }
        }
        hs.state = ThreadState::Runnable;
        held
    };
    log::info!(
        target: "os+thread",
        "Thread is alive (tid: {tid}, name: \"{}\"{}).",
        info.name,
        if held { ", was held at start" } else { "" }
    );
    if policy.delay_start {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !ctx.guard_installed() {
        if let Err(e) = ctx.install_guard() {
            let message = format!("placing the stack guard zone failed: {e}");
            log::warn!(target: "os+thread", "Thread \"{}\": {message}", info.name);
            info.lock().outcome = Some(Outcome::NoGuard(message));
            return None;
        }
    }
    if policy.pretouch_stacks {
        match ctx.pretouch_stack(&policy.pretouch_request) {
            Ok(p) => log::trace!(
                target: "os+thread",
                "Pretouching thread stack for {tid}: {} bytes with {}",
                p.bytes,
                p.primitive
            ),
            Err(e) => {
                log::warn!(target: "os+thread", "Pretouching the stack of \"{}\" failed: {e}", info.name)
            }
        }
    }
    match body {
        Body::Rust(f) => {
            let outcome = match catch_unwind(AssertUnwindSafe(f)) {
                Ok(()) => Outcome::Done,
                Err(p) => Outcome::Panicked(panic_message(&*p)),
            };
            log::info!(target: "os+thread", "Thread \"{}\" finished (tid: {tid}).", info.name);
            info.lock().outcome = Some(outcome);
            None
        }
        Body::Foreign(call) => Some(call),
    }
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

/// The calling thread's attachment to a VM
/// ([`VmHandle::attach_current_thread`](crate::VmHandle::attach_current_thread)); dropping it
/// detaches the thread (JNI's `DetachCurrentThread`). Not `Send`: only the attached thread
/// can detach itself.
#[derive(Debug)]
pub struct AttachedThread {
    info: Arc<ThreadInfo>,
    /// `None` once detached.
    registry: Option<Arc<Registry>>,
    _this_thread: std::marker::PhantomData<*const ()>,
}

impl AttachedThread {
    pub(crate) fn new(info: Arc<ThreadInfo>, registry: Arc<Registry>) -> AttachedThread {
        AttachedThread {
            info,
            registry: Some(registry),
            _this_thread: std::marker::PhantomData,
        }
    }

    /// The registry entry.
    pub fn info(&self) -> &Arc<ThreadInfo> {
        &self.info
    }

    /// The thread's stack bounds and soft limit, as glibc reports the stack
    /// (`pthread_getattr_np`); the guard is glibc's guard page (none for the process's first
    /// thread).
    pub fn stack_bounds(&self) -> StackBounds {
        self.info.stack_bounds()
    }

    /// Detaches the thread (what dropping the guard does, with the outcome).
    pub fn detach(mut self) -> Result<(), ThreadError> {
        self.registry.take().map_or(Ok(()), |r| r.detach_current())
    }
}

impl Drop for AttachedThread {
    fn drop(&mut self) {
        if let Some(r) = self.registry.take() {
            let _ = r.detach_current();
        }
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
    {
        let mut hs = info.lock();
        if !hs.go {
            hs.go = true;
            info.cv.notify_all();
        }
    }
    let outcome = info.wait_finished();
    let os = info.os.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(os) = os {
        os.join();
    }
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
