//! VM threads: named threads on stacks rtvm maps itself, with a start handshake, a registry
//! of live threads and their stack layouts, and the THP stack mitigation.
//!
//! Life of a thread, as in HotSpot's `os::create_thread` / `os::start_thread`:
//!
//! 1. **Allocated.** The parent sizes and maps the stack. With the mitigation on, the guard
//!    zone is `PROT_NONE` and the whole stack `MADV_NOHUGEPAGE` at this point — before any
//!    thread exists.
//! 2. **Initialized.** The child reports in: its tid and the stack bounds glibc sees. A held
//!    thread then waits for the parent's go (a test holds it here: the window in which
//!    khugepaged could collapse an unmitigated stack, made deterministic), and the parent
//!    waits for the report. A thread that is not held goes straight on: the parent does not
//!    block on every thread start, so starting threads costs no context switch.
//! 3. **Runnable.** The child sleeps 100 ms with `-XX:+DelayThreadStartALot`, places its
//!    guard zone if the mitigation is off (as glibc and HotSpot did), pretouches its stack
//!    with `-XX:+AlwaysPreTouchStacks`, and runs the body.
//! 4. **Finished.** The body returned (or panicked); joining unmaps the stack.

use std::fmt;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rtvm_flags::value::format_page_size;
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::stack::{self, errno_name, OsThread, StackMapping, StackSpec, ThreadContext};
use rtvm_os_linux::{base_page_size, Errno, OsError, PretouchRequest, StackLayout};

/// What a thread is for; decides its default stack size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadKind {
    /// An application thread, sized by `ThreadStackSize` (`-Xss`).
    Java,
    /// A VM-internal thread, sized by `VMThreadStackSize`.
    Vm,
    /// A worker of the parallel gang, sized by `VMThreadStackSize`.
    Worker,
}

impl fmt::Display for ThreadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThreadKind::Java => "java",
            ThreadKind::Vm => "vm",
            ThreadKind::Worker => "worker",
        })
    }
}

/// How thread stacks are protected from transparent huge pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackPolicy {
    /// The mitigation is on (the default): guard zone before the thread exists, stack sizes
    /// never a multiple of the THP size.
    pub mitigated: bool,
    /// Also advise stacks `MADV_NOHUGEPAGE` (whenever THP could back them).
    pub no_huge_pages: bool,
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
    /// Guard zone size.
    pub guard_size: usize,
    /// Alternate signal stack size.
    pub alt_stack_size: usize,
}

/// Smallest usable stack (above guard and signal stack) a thread may get: with the 4 KiB
/// guard and 16 KiB signal stack it makes HotSpot's familiar 136K minimum.
pub const MIN_USABLE_STACK: usize = 116 * 1024;

impl StackPolicy {
    /// The smallest total stack size, in bytes, for this policy.
    pub fn minimum_stack_size(&self) -> usize {
        let page = base_page_size();
        let usable = MIN_USABLE_STACK.max(stack::minimum_usable_stack());
        (self.guard_size + self.alt_stack_size + usable).div_ceil(page) * page
    }

    /// The stack size a thread of `kind` gets: page-aligned and, with the mitigation on,
    /// never a multiple of the THP page size (one page is added, as HotSpot's JDK-8312182
    /// fix does).
    pub fn stack_size(&self, kind: ThreadKind, requested: Option<usize>) -> usize {
        let page = base_page_size();
        let base = requested.unwrap_or(match kind {
            ThreadKind::Java => self.java_stack_size,
            ThreadKind::Vm | ThreadKind::Worker => self.vm_stack_size,
        });
        let mut size = base.max(self.minimum_stack_size()).div_ceil(page) * page;
        if self.mitigated {
            if let Some(thp) = self.thp_page_size.filter(|&t| t > page) {
                if size.is_multiple_of(thp) {
                    size += page;
                }
            }
        }
        size
    }

    /// Decides the policy from the THP configuration and logs the decision once (tag
    /// `pagesize`).
    pub fn decide(disable_mitigation: bool, pages: &PageInfo) -> (bool, bool, String) {
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
        if disable_mitigation {
            return (
                false,
                false,
                format!(
                    "THP mode: {}; mTHP sizes effectively always: {mthp_text}",
                    thp.mode
                ),
            );
        }
        let could_back = matches!(
            thp.mode,
            rtvm_os_linux::ThpMode::Always
                | rtvm_os_linux::ThpMode::Madvise
                | rtvm_os_linux::ThpMode::Unknown
        ) || thp
            .mthp
            .iter()
            .any(|m| m.effective != rtvm_os_linux::ThpMode::Never);
        let why = match thp.mode {
            rtvm_os_linux::ThpMode::Always => "THP mode is always".to_string(),
            rtvm_os_linux::ThpMode::Madvise => {
                "THP mode is madvise (an operator can switch it to always at run time)".to_string()
            }
            rtvm_os_linux::ThpMode::Unknown => "THP mode could not be read".to_string(),
            rtvm_os_linux::ThpMode::Never if could_back => {
                "THP mode is never but some mTHP sizes are enabled".to_string()
            }
            rtvm_os_linux::ThpMode::Never => {
                "THP mode is never and no mTHP size is enabled".to_string()
            }
        };
        let reason = if could_back {
            format!("{why}; mTHP sizes effectively always: {mthp_text}: stacks get MADV_NOHUGEPAGE and a guard zone before the thread starts")
        } else {
            format!("{why}: stacks get a guard zone before the thread starts; MADV_NOHUGEPAGE is not needed")
        };
        (true, could_back, reason)
    }
}

/// The state of a thread in its start handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    huge_page: usize,
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
    outcome: Option<Result<(), String>>,
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

    /// Whether the guard zone is protected.
    pub fn guard_installed(&self) -> bool {
        self.os
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|t| t.stack().guard_installed())
    }

    /// Resident bytes of the stack mapping, by `mincore` (0 once joined).
    pub fn stack_resident_bytes(&self) -> usize {
        let os = self.os.lock().unwrap_or_else(|p| p.into_inner());
        os.as_ref()
            .and_then(|t| t.stack().resident_bytes().ok())
            .unwrap_or(0)
    }

    /// `MADV_COLLAPSE` over the huge-page regions around the stack: what khugepaged would
    /// do to them, now (see [`StackMapping::collapse`]).
    pub fn collapse_stack(&self) -> Result<(), OsError> {
        let os = self.os.lock().unwrap_or_else(|p| p.into_inner());
        match os.as_ref() {
            Some(t) => t.stack().collapse(self.huge_page),
            None => Err(OsError {
                op: rtvm_os_linux::Operation::Advise("MADV_COLLAPSE"),
                addr: self.layout.mapping.start,
                len: self.layout.mapping.len(),
                errno: Errno::ESRCH,
            }),
        }
    }
}

/// Why a thread could not be started or ended badly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThreadError {
    /// The stack could not be mapped or the OS thread not created. The message has
    /// HotSpot's shape: `Failed to start thread "x" - pthread_create failed (EAGAIN) for
    /// attributes: stacksize: 2048k, guardsize: 4k, joinable.`
    #[error("{message}")]
    Start {
        /// The message.
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

/// The live threads of a VM.
#[derive(Debug, Default)]
pub struct Registry {
    threads: Mutex<Vec<Arc<ThreadInfo>>>,
    next_id: AtomicU64,
}

impl Registry {
    /// Every live (not yet joined) thread.
    pub fn list(&self) -> Vec<Arc<ThreadInfo>> {
        self.threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many threads are registered.
    pub fn count(&self) -> usize {
        self.threads.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn remove(&self, id: u64) {
        self.threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|t| t.id != id);
    }
}

/// A handle to a started (or held) VM thread.
#[derive(Debug)]
pub struct VmThread {
    info: Arc<ThreadInfo>,
    registry: Arc<Registry>,
}

/// A thread body.
pub type Body = Box<dyn FnOnce() + Send + 'static>;

/// Starts a thread: maps its stack, creates it, waits for it to report in and — unless
/// `hold` — lets it run `body`.
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
        policy.guard_size / 1024
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
        guard_size: policy.guard_size,
        alt_stack_size: policy.alt_stack_size,
        no_huge_pages: policy.mitigated && policy.no_huge_pages,
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
    let child = Arc::clone(&info);
    let policy_c = policy.clone();
    let entry = Box::new(move |ctx: &mut ThreadContext| run_child(&child, &policy_c, ctx, body));
    let os = stack::spawn(mapping, entry).map_err(|e| fail("pthread_create", e.errno))?;
    let pthread = os.pthread_id();
    *info.os.lock().unwrap_or_else(|p| p.into_inner()) = Some(os);
    registry
        .threads
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Arc::clone(&info));
    let l = &info.layout;
    log::info!(
        target: "os+thread",
        "Thread \"{name}\" started (pthread id: {pthread}, attributes: {attrs}; stack: {:#x}-{:#x}, guard: {:#x}-{:#x}, THP prevented: {}).",
        l.usable.start,
        l.usable.end,
        l.guard.start,
        l.guard.end,
        if spec.no_huge_pages { "yes" } else if policy.mitigated { "not needed" } else { "no" }
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

fn run_child(info: &ThreadInfo, policy: &StackPolicy, ctx: &mut ThreadContext, body: Body) {
    let tid = rtvm_os_linux::system::current_tid();
    let held = {
        let mut hs = info.lock();
        hs.tid = tid;
        hs.glibc_stack = stack::current_thread_stack();
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
    let mut outcome: Result<(), String> = Ok(());
    if !ctx.guard_installed() {
        if let Err(e) = ctx.install_guard() {
            outcome = Err(format!("placing the stack guard zone failed: {e}"));
        }
    }
    if outcome.is_ok() && policy.pretouch_stacks {
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
    if outcome.is_ok() {
        outcome = catch_unwind(AssertUnwindSafe(body)).map_err(|p| panic_message(&p));
    }
    log::info!(target: "os+thread", "Thread \"{}\" finished (tid: {tid}).", info.name);
    let mut hs = info.lock();
    hs.outcome = Some(outcome);
    hs.state = ThreadState::Finished;
    info.cv.notify_all();
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
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

    /// Lets a held thread run its body (no-op if it already runs).
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
        self.start();
        let outcome = {
            let mut hs = self.info.lock();
            while hs.state != ThreadState::Finished {
                hs = self.info.cv.wait(hs).unwrap_or_else(|p| p.into_inner());
            }
            hs.outcome.take().unwrap_or(Ok(()))
        };
        let os = self
            .info
            .os
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(os) = os {
            os.join();
        }
        self.registry.remove(self.info.id);
        outcome.map_err(|message| ThreadError::Panicked {
            name: self.info.name.clone(),
            message,
        })
    }
}

/// Joins a registered thread (starting it first if held). Used at shutdown.
pub(crate) fn join_info(
    registry: &Arc<Registry>,
    info: Arc<ThreadInfo>,
) -> Result<(), ThreadError> {
    VmThread {
        info,
        registry: Arc::clone(registry),
    }
    .join()
}
