//! Starting a VM thread: the stack mapped (and, mitigated, guarded and advised) before the
//! thread exists, the registration, the start handshake, and the child's first steps.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use rtvm_os_linux::stack::{StackMapping, StackSpec};
use rtvm_os_linux::thread::{self as os_thread, errno_name, ForeignCall, ThreadContext};
use rtvm_os_linux::{Errno, OsError};

use crate::safepoint;

use super::{
    panic_message, NewThread, Outcome, Registry, StackPolicy, ThreadError, ThreadInfo, ThreadKind,
    ThreadState, VmThread,
};

/// A boxed Rust body: what the VM's own threads run.
pub(crate) type BoxedBody = Box<dyn FnOnce() + Send + 'static>;

/// What a thread runs. The closure is kept inline, not boxed, on the path of
/// [`ThreadBuilder::spawn`]: it travels in the start packet, so a new thread frees nothing.
pub(crate) enum Body<F = BoxedBody> {
    /// A Rust closure; a panic is caught and reported by `join`.
    Rust(F),
    /// A C function, called last, from a plain frame: it may `pthread_exit`.
    Foreign(ForeignCall),
}

/// Builds a VM thread ([`VmHandle::thread`](crate::VmHandle::thread)).
#[derive(Debug)]
pub struct ThreadBuilder<'vm> {
    registry: &'vm Arc<Registry>,
    policy: &'vm StackPolicy,
    name: String,
    kind: ThreadKind,
    stack_size: Option<usize>,
    hold: bool,
}

impl<'vm> ThreadBuilder<'vm> {
    pub(crate) fn new(
        registry: &'vm Arc<Registry>,
        policy: &'vm StackPolicy,
        name: &str,
    ) -> ThreadBuilder<'vm> {
        ThreadBuilder {
            registry,
            policy,
            name: name.to_owned(),
            kind: ThreadKind::Java,
            stack_size: None,
            hold: false,
        }
    }

    /// The thread's kind (default: [`ThreadKind::Java`]; [`ThreadKind::Collector`] for a
    /// collector's worker; [`ThreadKind::Worker`], the gang's own, [`ThreadKind::Service`]
    /// and [`ThreadKind::Attached`] are refused).
    pub fn kind(mut self, kind: ThreadKind) -> Self {
        self.kind = kind;
        self
    }

    /// An explicit stack size in bytes instead of the kind's default.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Keep the thread in its start handshake until [`VmThread::start`]: its stack is mapped
    /// and it has reported in, but (unmitigated) it has not placed its guards yet. A test
    /// tool (the window khugepaged could use, made deterministic).
    #[cfg(feature = "testing")]
    pub fn hold_at_start(mut self, hold: bool) -> Self {
        self.hold = hold;
        self
    }

    /// Starts the thread.
    pub fn spawn<F: FnOnce() + Send + 'static>(self, body: F) -> Result<VmThread, ThreadError> {
        self.spawn_body(Body::Rust(body))
    }

    pub(crate) fn spawn_body<F: FnOnce() + Send + 'static>(
        self,
        body: Body<F>,
    ) -> Result<VmThread, ThreadError> {
        if !self.kind.is_application() && self.kind != ThreadKind::Collector {
            // Workers belong to the gang, which the shutdown stops; attached threads are the
            // host's; a thread the VM starts for the embedder is an application thread (Java
            // or Vm), which the shutdown waits for, or a collector's, which it waits for once
            // the shutdown hooks ran.
            return Err(ThreadError::Start {
                message: format!(
                    "Failed to start thread \"{}\" - ThreadKind::{:?} cannot be started (only Java, Vm and Collector threads can)",
                    self.name, self.kind
                ),
                errno: Errno::EINVAL,
            });
        }
        spawn(
            self.registry,
            self.policy,
            &self.name,
            self.kind,
            self.stack_size,
            self.hold,
            body,
        )
    }
}

/// Starts a thread: maps its stack, registers it, creates it, and — if `hold` — waits for
/// it to report in; otherwise it runs `body` at once.
pub(crate) fn spawn<F: FnOnce() + Send + 'static>(
    registry: &Arc<Registry>,
    policy: &StackPolicy,
    name: &str,
    kind: ThreadKind,
    stack_size: Option<usize>,
    hold: bool,
    body: Body<F>,
) -> Result<VmThread, ThreadError> {
    let size = policy.stack_size(kind, stack_size);
    // HotSpot's attribute words, formatted only for a message that is printed.
    let zones = policy.zones.total();
    let attrs = move || {
        format!(
            "stacksize: {}k, guardsize: {}k, joinable",
            size / 1024,
            zones / 1024
        )
    };
    let fail = |what: &str, errno: Errno| {
        let message = format!(
            "Failed to start thread \"{name}\" - {what} failed ({}) for attributes: {}.",
            errno_name(errno),
            attrs()
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
    let mapping = match registry.stack_cache().take(&spec, name) {
        Some(cached) => cached,
        None => StackMapping::map(&spec).map_err(|e| fail(mapping_op(&e), e.errno))?,
    };
    let id = registry.next_id();
    // The embedder's code runs on application threads: they take part in stops of the world
    // (in a safe region until their body begins). A collector's threads do not.
    let mutator = if kind.is_application() {
        let usable = mapping.layout().usable.clone();
        Some(
            registry
                .safepoints()
                .register(id, name, usable)
                .map_err(|e| ThreadError::Start {
                    message: format!("Failed to start thread \"{name}\" - {e}"),
                    errno: Errno::EINVAL,
                })?,
        )
    } else {
        None
    };
    let info = ThreadInfo::new(NewThread {
        id,
        name: name.to_owned(),
        kind,
        layout: mapping.layout().clone(),
        no_huge_pages: spec.no_huge_pages,
        huge_page: policy.thp_page_size.unwrap_or(2 << 20),
        soft_limit_offset: policy.soft_limit_offset(),
        state: ThreadState::Allocated,
        tid: 0,
        // What glibc sees: the usable part, given with pthread_attr_setstack (asking glibc
        // with pthread_getattr_np would cost the child a sched_getaffinity and a malloc).
        glibc_stack: Some(mapping.layout().usable.clone()),
        go: !hold,
        mutator,
    });
    if let Err(e) = registry.register(&info) {
        if let Some(m) = mutator {
            registry.safepoints().unregister(m);
        }
        return Err(e);
    }
    let child = Arc::clone(&info);
    let child_registry = Arc::clone(registry);
    let policy_c = policy.clone();
    let entry =
        move |ctx: &mut ThreadContext| run_child(child, &child_registry, &policy_c, ctx, body);
    // However the thread ends — a return, a panic anywhere, pthread_exit — the VM learns of
    // it, and nobody waits for it forever. Kept in the start packet the parent allocates.
    let (exiting, exit_registry) = (Arc::clone(&info), Arc::clone(registry));
    let on_exit = move || {
        if let Some(m) = exiting.mutator {
            // A foreign body ends here (a return or pthread_exit); a Rust body finished
            // already. The stack stays while a stop of the world holds the thread.
            safepoint::finish(m);
            safepoint::unbind();
        }
        let marker = 0u8;
        exiting.mark_finished(std::hint::black_box(&marker as *const u8 as usize));
        exit_registry.thread_finished(exiting.kind);
    };
    // Held while the OS thread is created, so a joiner that finds the thread finished waits
    // for its OsThread to be stored here.
    let mut os_slot = crate::safepoint::lock(&info.os);
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
        "Thread \"{name}\" started (pthread id: {pthread}, attributes: {}; stack: {:#x}-{:#x}, guard: {:#x}-{:#x}, THP prevented: {}).",
        attrs(),
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
            hs = info.cv.wait_locked(hs);
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

fn run_child<F: FnOnce()>(
    info: Arc<ThreadInfo>,
    registry: &Registry,
    policy: &StackPolicy,
    ctx: &mut ThreadContext,
    body: Body<F>,
) -> Option<ForeignCall> {
    registry.set_current(Some(info.id));
    let tid = rtvm_os_linux::system::current_tid();
    let held = {
        let mut hs = info.lock();
        hs.tid = tid;
        hs.state = ThreadState::Initialized;
        let held = !hs.go;
        if held {
            info.cv.notify_all();
            while !hs.go {
                hs = info.cv.wait_locked(hs);
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
    if let Some(m) = info.mutator {
        safepoint::bind(m);
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
    // The embedder's code begins: out of the start's safe region (waiting while the world
    // is stopped).
    if let Some(m) = info.mutator {
        safepoint::start_running(m);
    }
    match body {
        Body::Rust(f) => {
            let outcome = match catch_unwind(AssertUnwindSafe(f)) {
                Ok(()) => Outcome::Done,
                Err(p) => Outcome::Panicked(panic_message(&*p)),
            };
            if let Some(m) = info.mutator {
                safepoint::finish(m);
            }
            log::info!(target: "os+thread", "Thread \"{}\" finished (tid: {tid}).", info.name);
            info.lock().outcome = Some(outcome);
            None
        }
        Body::Foreign(call) => Some(call),
    }
}
