//! Threads on stacks rtvm mapped: start, the first moments of a thread, its end, join.
//!
//! [`spawn`] hands the usable part of a [`StackMapping`] to `pthread_create`
//! (`pthread_attr_setstack`) and runs an entry closure on the new thread. The thread first
//! sets its alternate signal stack, its name and — when its guards are in place — arms
//! overflow reporting; then the entry runs, inside `catch_unwind`.
//!
//! The entry may return a [`ForeignCall`]: a C function the thread calls *after* the entry,
//! from a frame with nothing left to drop. Such a body may end with `pthread_exit`: the
//! forced unwind crosses only plain frames. Whatever ends the thread — a return or
//! `pthread_exit` — the exit hook given to [`spawn`] runs from a `pthread_key` destructor, so
//! the runtime always learns that the thread is gone.
//!
//! A new thread allocates nothing to get there: the start packet and the exit hook are
//! allocated by the parent, and the hook is registered with `pthread_setspecific` on a key
//! below glibc's first-level block (no allocation) rather than as a thread-local destructor,
//! whose registration `calloc`s and aborts the process when memory is exhausted — exactly
//! when threads fail to start.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use nix::errno::Errno;

use crate::base_page_size;
use crate::error::Result;
use crate::pretouch::{pretouch_range, PretouchRequest, Pretouched};
use crate::signals;
use crate::stack::{StackLayout, StackMapping};

/// A C function a thread calls as its body, and its argument.
#[derive(Clone, Copy, Debug)]
pub struct ForeignCall {
    /// The function. `C-unwind`: it may end the thread with `pthread_exit`.
    pub f: unsafe extern "C-unwind" fn(*mut c_void),
    /// Its argument, passed through untouched.
    pub arg: *mut c_void,
}

// SAFETY: the pointer is only handed to the function the embedder supplied with it, on the
// thread the embedder asked for; the embedder's C API contract says `fn(arg)` runs there.
unsafe impl Send for ForeignCall {}

/// What a thread's entry closure gets: its stack, and hooks for its own set-up.
#[derive(Debug)]
pub struct ThreadContext {
    layout: StackLayout,
    name: String,
    guard_installed: bool,
    guards: Option<GuardRanges>,
}

/// What an unmitigated thread protects itself.
#[derive(Debug)]
struct GuardRanges {
    zone: std::ops::Range<usize>,
    alt_guard: std::ops::Range<usize>,
}

/// What runs when a thread ends, however it ends. It runs during the thread's last moments
/// (from a `pthread_key` destructor): it must not log or print.
pub type ExitHook = Box<dyn FnOnce() + Send + 'static>;

/// An attached thread's exit hook as the foreign key holds it.
struct OnExit(ExitHook);

/// A `pthread_key` with `destructor`, created once per `slot` (`None` if it could not be).
fn key_with_destructor(
    slot: &OnceLock<Option<libc::pthread_key_t>>,
    destructor: unsafe extern "C" fn(*mut c_void),
) -> Option<libc::pthread_key_t> {
    *slot.get_or_init(|| {
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: creates a key whose destructor is a function of this library, which lives
        // as long as the process once loaded (the library is linked `-z nodelete`).
        let rc = unsafe { libc::pthread_key_create(&mut key, Some(destructor)) };
        (rc == 0).then_some(key)
    })
}

/// The `pthread_key` whose destructor runs exit hooks (`None` if it could not be created).
fn exit_key() -> Option<libc::pthread_key_t> {
    static KEY: OnceLock<Option<libc::pthread_key_t>> = OnceLock::new();
    key_with_destructor(&KEY, run_exit_hook)
}

unsafe extern "C" fn run_exit_hook(value: *mut c_void) {
    signals::disarm();
    // The signal stack stays set: its memory is mapped until the thread is joined, after the
    // kernel is done with the thread (a system call saved on every thread's exit).
    if value.is_null() {
        return;
    }
    // SAFETY: the key only ever holds, for a thread `spawn` started, a pointer to that
    // thread's `StartPacket`, whose first field (`repr(C)`) is the function that runs its
    // hook; the packet lives until the thread is joined, and glibc calls the destructor once.
    unsafe {
        let run = *value.cast::<unsafe fn(*mut c_void)>();
        run(value);
    }
}

/// The `pthread_key` for hooks on threads rtvm did not create (attached threads): its
/// destructor runs the hook and leaves the thread's signal set-up alone — it is the host's.
fn foreign_exit_key() -> Option<libc::pthread_key_t> {
    static KEY: OnceLock<Option<libc::pthread_key_t>> = OnceLock::new();
    key_with_destructor(&KEY, run_foreign_exit_hook)
}

unsafe extern "C" fn run_foreign_exit_hook(value: *mut c_void) {
    if value.is_null() {
        return;
    }
    // SAFETY: the key only ever holds a pointer from `Box::into_raw(Box<OnExit>)` set by
    // `set_current_thread_exit_hook`, and glibc calls the destructor once, with that value.
    let hook = unsafe { Box::from_raw(value.cast::<OnExit>()) };
    let _ = catch_unwind(AssertUnwindSafe(move || (hook.0)()));
}

/// Makes `hook` run when the calling thread ends — a return from its start routine or
/// `pthread_exit`, not the process's `exit` — unless it is taken back first with
/// [`take_current_thread_exit_hook`]. For threads rtvm did not create; replaces (and
/// returns) a hook set before. `EAGAIN`/`ENOMEM` if no key could be had.
pub fn set_current_thread_exit_hook(
    hook: ExitHook,
) -> std::result::Result<Option<ExitHook>, Errno> {
    let key = foreign_exit_key().ok_or(Errno::EAGAIN)?;
    let old = take_current_thread_exit_hook();
    let value = Box::into_raw(Box::new(OnExit(hook))).cast::<c_void>();
    // SAFETY: the key is valid; the value is a leaked Box<OnExit> that the destructor or
    // `take_current_thread_exit_hook` reclaims, once.
    let rc = unsafe { libc::pthread_setspecific(key, value) };
    if rc != 0 {
        // SAFETY: the key did not take the value: reclaim it here.
        drop(unsafe { Box::from_raw(value.cast::<OnExit>()) });
        return Err(Errno::from_raw(rc));
    }
    Ok(old)
}

/// Takes back the calling thread's hook set with [`set_current_thread_exit_hook`], without
/// running it.
pub fn take_current_thread_exit_hook() -> Option<ExitHook> {
    let key = foreign_exit_key()?;
    // SAFETY: reading this thread's value of a valid key.
    let value = unsafe { libc::pthread_getspecific(key) };
    if value.is_null() {
        return None;
    }
    // SAFETY: clearing this thread's value first, so the destructor can no longer see it;
    // then the value is a Box<OnExit> owned by nobody else.
    unsafe {
        libc::pthread_setspecific(key, std::ptr::null());
        Some(Box::from_raw(value.cast::<OnExit>()).0)
    }
}

impl ThreadContext {
    /// The stack layout.
    pub fn layout(&self) -> &StackLayout {
        &self.layout
    }

    /// The thread's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the guards are in place.
    pub fn guard_installed(&self) -> bool {
        self.guard_installed
    }

    /// Protects the guard zone and the signal stack's guard page now (unmitigated stacks),
    /// and arms overflow reporting.
    pub fn install_guard(&mut self) -> Result<()> {
        if self.guard_installed {
            return Ok(());
        }
        if let Some(g) = &self.guards {
            for r in [&g.zone, &g.alt_guard] {
                if r.is_empty() {
                    continue;
                }
                // SAFETY: called on the thread that runs on this stack, whose frames are all
                // in the usable part between the two guards; the mapping outlives the thread.
                unsafe { crate::sys::protect(r.start, r.len(), crate::sys::Protection::None) }
                    .map_err(|e| {
                        crate::OsError::new(crate::Operation::Protect, r.start, r.len(), e)
                    })?;
            }
        }
        self.guard_installed = true;
        signals::arm(&self.layout, &self.name);
        Ok(())
    }

    /// Pretouches the unused part of this thread's stack: from the guard zone up to a page
    /// below the current frame (`-XX:+AlwaysPreTouchStacks`).
    pub fn pretouch_stack(&self, request: &PretouchRequest) -> Result<Pretouched> {
        let page = base_page_size();
        let marker = 0u8;
        let sp = std::hint::black_box(&marker) as *const u8 as usize;
        let start = self.layout.usable.start;
        let end = (sp & !(page - 1)).saturating_sub(page).max(start);
        // SAFETY: [start, end) is this thread's own stack below its current frame: mapped
        // read-write, unused, and only this thread could ever use it.
        unsafe { pretouch_range(start, end - start, request) }
    }
}

/// A thread running on a [`StackMapping`]. Joined — and only then unmapped — on
/// [`join`](OsThread::join) or drop.
#[derive(Debug)]
pub struct OsThread {
    pthread: libc::pthread_t,
    stack: Option<StackMapping>,
    /// The start packet and how to free it, once the thread is joined.
    packet: Option<(*mut c_void, FreePacket)>,
    /// A [`Joiner`] was taken: whoever has it joins the thread.
    joiner_out: bool,
}

/// The right to join a thread, taken out of its [`OsThread`] so that the join can wait
/// without holding whatever keeps the `OsThread` (others may still read its stack meanwhile).
#[derive(Debug)]
#[must_use = "a thread whose joiner is dropped is never joined (its stack is leaked)"]
pub struct Joiner {
    pthread: libc::pthread_t,
}

/// Proof that a thread was joined, for [`OsThread::into_stack`].
#[derive(Debug)]
pub struct Joined {
    pthread: libc::pthread_t,
}

impl Joiner {
    /// Waits for the thread to end (`pthread_join`); `None` if that failed (cannot happen for
    /// a joinable thread rtvm started: the stack is then leaked, never unmapped under it).
    pub fn join(self) -> Option<Joined> {
        // SAFETY: `pthread` is a joinable thread created by `spawn`; its OsThread handed out
        // this one Joiner and joins nothing itself afterwards.
        let rc = unsafe { libc::pthread_join(self.pthread, std::ptr::null_mut()) };
        if rc != 0 {
            log::error!(target: "os+thread", "pthread_join failed ({}); leaking the stack", errno_name(Errno::from_raw(rc)));
            return None;
        }
        Some(Joined {
            pthread: self.pthread,
        })
    }
}

// SAFETY: the packet pointer is only dereferenced (freed) by whoever joins the thread, after
// the join, when no other thread uses it; everything in it is `Send`.
unsafe impl Send for OsThread {}

/// Why a thread could not be started.
#[derive(Debug, thiserror::Error)]
#[error("pthread_create failed ({})", errno_name(*errno))]
pub struct SpawnError {
    /// The errno from `pthread_create` (or the attribute calls).
    pub errno: Errno,
}

/// The symbolic name of an errno (`EAGAIN`), as HotSpot prints it in thread errors.
pub fn errno_name(errno: Errno) -> String {
    format!("{errno:?}")
}

/// A thread's entry, boxed (any `FnOnce(&mut ThreadContext) -> Option<ForeignCall>` will
/// do): runs on the new thread; may return a foreign body to call last.
pub type Entry = Box<dyn FnOnce(&mut ThreadContext) -> Option<ForeignCall> + Send + 'static>;

/// Everything a new thread needs, in one allocation the parent makes and frees after the
/// join: the child moves the entry and the hook out and uses the context in place, so it
/// frees nothing — a thread whose body allocates nothing never touches malloc (whose first
/// free on a thread sets up a per-thread cache and an arena, a large part of a short
/// thread's cost).
#[repr(C)]
struct StartPacket<E, H> {
    /// Runs the hook; first, so the exit key's destructor finds it without knowing `E`, `H`.
    run_hook: unsafe fn(*mut c_void),
    entry: Option<E>,
    on_exit: Option<H>,
    context: ThreadContext,
}

/// Runs and clears a packet's exit hook, once.
///
/// # Safety
/// `packet` points to a live `StartPacket<E, H>` used by no other thread now (its thread
/// calls this in its last moments; the parent touches the packet only after the join).
unsafe fn run_packet_hook<E, H: FnOnce()>(packet: *mut c_void) {
    // SAFETY: per the contract above.
    let hook = unsafe { (*packet.cast::<StartPacket<E, H>>()).on_exit.take() };
    if let Some(hook) = hook {
        // A panic may not unwind out of a destructor called by glibc.
        let _ = catch_unwind(AssertUnwindSafe(hook));
    }
}

/// How an [`OsThread`] frees its thread's start packet (whose type it does not know).
type FreePacket = unsafe fn(*mut c_void);

/// Frees a packet (after the join, or when no thread was created).
///
/// # Safety
/// `packet` is a `Box<StartPacket<E, H>>` leaked by `spawn`, with no thread using it.
unsafe fn free_packet<E, H>(packet: *mut c_void) {
    // SAFETY: per the contract above; whatever the child moved out is `None` now.
    drop(unsafe { Box::from_raw(packet.cast::<StartPacket<E, H>>()) });
}

/// Starts a thread on `stack` running `entry`; `on_exit` runs when the thread ends, however
/// it ends. On failure the stack is unmapped and nothing is left behind. `pthread_create` is
/// retried on `EAGAIN` up to three more times, as HotSpot does.
pub fn spawn<E, H>(
    stack: StackMapping,
    entry: E,
    on_exit: Option<H>,
) -> std::result::Result<OsThread, SpawnError>
where
    E: FnOnce(&mut ThreadContext) -> Option<ForeignCall> + Send + 'static,
    H: FnOnce() + Send + 'static,
{
    // Created here, in the parent: the child only sets its value.
    let _ = exit_key();
    let layout = stack.layout().clone();
    let usable = layout.usable.clone();
    let guards = GuardRanges {
        zone: layout.guard.clone(),
        alt_guard: layout.alt_guard.clone(),
    };
    let context = ThreadContext {
        name: stack.spec().name.clone(),
        guard_installed: stack.guard_installed(),
        guards: Some(guards),
        layout,
    };
    let packet = Box::into_raw(Box::new(StartPacket {
        run_hook: run_packet_hook::<E, H>,
        entry: Some(entry),
        on_exit,
        context,
    }))
    .cast::<c_void>();
    let free = free_packet::<E, H>;
    let start: extern "C-unwind" fn(*mut c_void) -> *mut c_void = trampoline::<E, H>;
    // SAFETY: `attr` is initialised before use and destroyed on every path. The stack
    // region passed to pthread_attr_setstack is the usable part of a mapping that this
    // OsThread owns and unmaps only after pthread_join. `packet` is handed to exactly one
    // thread, and freed by the OsThread after its join (or here, if no thread was created).
    // The start routine is a C-unwind function with the C calling convention pthread expects.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        let rc = libc::pthread_attr_init(&mut attr);
        if rc != 0 {
            free(packet);
            return Err(SpawnError {
                errno: Errno::from_raw(rc),
            });
        }
        let mut rc =
            libc::pthread_attr_setstack(&mut attr, usable.start as *mut c_void, usable.len());
        let mut pthread: libc::pthread_t = 0;
        if rc == 0 {
            let routine: extern "C" fn(*mut c_void) -> *mut c_void = std::mem::transmute(start);
            for _ in 0..4 {
                rc = libc::pthread_create(&mut pthread, &attr, routine, packet);
                if rc != libc::EAGAIN {
                    break;
                }
            }
        }
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            free(packet);
            return Err(SpawnError {
                errno: Errno::from_raw(rc),
            });
        }
        Ok(OsThread {
            pthread,
            stack: Some(stack),
            packet: Some((packet, free)),
            joiner_out: false,
        })
    }
}

impl OsThread {
    /// The pthread id (as HotSpot prints it in thread logs).
    pub fn pthread_id(&self) -> u64 {
        self.pthread
    }

    /// The stack the thread runs on.
    pub fn stack(&self) -> Option<&StackMapping> {
        self.stack.as_ref()
    }

    /// Waits for the thread to finish, then unmaps its stack.
    pub fn join(mut self) {
        self.join_inner();
    }

    /// Waits for the thread to finish and hands its stack back instead of unmapping it (to
    /// [`StackMapping::recycle`] for another thread); `None` if it could not be joined.
    pub fn join_keeping_stack(mut self) -> Option<StackMapping> {
        let joined = self.take_joiner()?.join()?;
        self.into_stack(joined)
    }

    /// Takes the right to join the thread (once; `None` afterwards).
    pub fn take_joiner(&mut self) -> Option<Joiner> {
        if self.joiner_out || self.stack.is_none() {
            return None;
        }
        self.joiner_out = true;
        Some(Joiner {
            pthread: self.pthread,
        })
    }

    /// The stack of a thread its [`Joiner`] joined, to unmap or recycle; `None` for the
    /// proof of another thread's join.
    pub fn into_stack(mut self, joined: Joined) -> Option<StackMapping> {
        if joined.pthread != self.pthread {
            return None;
        }
        self.joiner_out = false;
        self.free_packet();
        self.stack.take()
    }

    /// Frees the start packet of a joined thread.
    fn free_packet(&mut self) {
        if let Some((packet, free)) = self.packet.take() {
            // SAFETY: the thread is joined: nobody uses the packet any more.
            unsafe { free(packet) };
        }
    }

    fn join_inner(&mut self) {
        if self.stack.is_none() {
            return;
        }
        if self.joiner_out {
            // Its Joiner may still be waiting, or was dropped: the thread may run on.
            std::mem::forget(self.stack.take());
            self.packet = None;
            return;
        }
        // SAFETY: `pthread` is a joinable thread created by `spawn` and joined only here
        // (guarded by taking the stack).
        let rc = unsafe { libc::pthread_join(self.pthread, std::ptr::null_mut()) };
        if rc != 0 {
            // Cannot happen for a joinable thread we own; never unmap a stack that may still
            // be in use.
            log::error!(target: "os+thread", "pthread_join failed ({}); leaking the stack", errno_name(Errno::from_raw(rc)));
            std::mem::forget(self.stack.take());
            self.packet = None;
            return;
        }
        self.free_packet();
        self.stack = None;
    }
}

impl Drop for OsThread {
    fn drop(&mut self) {
        self.join_inner();
    }
}

/// The Rust part of a thread's start: everything but the foreign body. Returns the foreign
/// call, if any, once every value it created has been dropped, and the packet if its exit
/// hook could not be registered with the key (the trampoline then runs it itself).
fn start<E, H>(arg: *mut c_void) -> (Option<ForeignCall>, *mut c_void)
where
    E: FnOnce(&mut ThreadContext) -> Option<ForeignCall>,
    H: FnOnce(),
{
    // SAFETY: `arg` is the StartPacket `spawn` made for exactly this thread; the parent does
    // not touch it until this thread is joined.
    let packet = unsafe { &mut *arg.cast::<StartPacket<E, H>>() };
    let entry = packet.entry.take();
    let context = &mut packet.context;
    // Register the exit hook before anything can end the thread. Without a key (or if glibc
    // refuses the value) the thread still runs; only `pthread_exit` would then go unnoticed.
    let unregistered = match exit_key() {
        // SAFETY: the key is valid; the value is the packet, which outlives the thread.
        Some(key) if unsafe { libc::pthread_setspecific(key, arg) } == 0 => std::ptr::null_mut(),
        _ => arg,
    };
    // A thread started by one that blocks every signal (the signalfd or sigwait idiom)
    // inherits that mask: the faults the guard-zone reporter handles and the stop signal
    // must reach this one (HotSpot unblocks its own signals in the threads it starts too).
    let _ = crate::safepoint::unblock_vm_signals(0);
    signals::set_alt_stack(Some(&context.layout.alt_stack));
    set_current_thread_name(&context.name);
    if context.guard_installed {
        signals::arm(&context.layout, &context.name);
    }
    // A panic must not unwind into C; the runtime reports panics itself.
    let call = entry.and_then(|entry| {
        catch_unwind(AssertUnwindSafe(|| entry(context)))
            .ok()
            .flatten()
    });
    (call, unregistered)
}

extern "C-unwind" fn trampoline<E, H>(arg: *mut c_void) -> *mut c_void
where
    E: FnOnce(&mut ThreadContext) -> Option<ForeignCall>,
    H: FnOnce(),
{
    // This frame holds nothing that needs dropping while the foreign body runs (a call and a
    // raw pointer): a `pthread_exit` in it unwinds through here — a plain old frame — to
    // glibc's start_thread, which runs the key destructors, and with them the exit hook.
    let (call, unregistered) = start::<E, H>(arg);
    if let Some(call) = call {
        // SAFETY: the embedder supplied `f` to be called with `arg` on this thread.
        unsafe { (call.f)(call.arg) };
    }
    if !unregistered.is_null() {
        // SAFETY: the packet's hook, which the key could not take: run it here, once.
        unsafe { run_exit_hook(unregistered) };
    }
    std::ptr::null_mut()
}

/// Sets the calling thread's OS name (15 bytes; `/proc/self/task/*/comm`).
pub fn set_current_thread_name(name: &str) {
    let mut buf = [0u8; 16];
    for (dst, src) in buf
        .iter_mut()
        .zip(name.bytes().filter(|&b| b != 0).take(15))
    {
        *dst = src;
    }
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes from `buf`.
    unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// Waits until the kernel has released each of `tids` (threads of this process that were
/// joined), for at most `within`; returns those still present then.
///
/// `pthread_join` returns once the kernel clears the thread's id word, early in its exit:
/// the task is still counted in `/proc/self/status` `Threads:` and listed under
/// `/proc/self/task` until its exit is complete a little later. A VM that reports "no thread
/// left" (and a host that counts its threads after `rtvm_destroy`) waits for that too. A
/// released thread makes `tgkill(pid, tid, 0)` fail with `ESRCH`.
pub fn wait_until_released(tids: &[i32], within: std::time::Duration) -> Vec<i32> {
    let deadline = std::time::Instant::now() + within;
    let present = |tid: i32| crate::sys::tgkill(tid, 0) != Err(Errno::ESRCH);
    let mut left: Vec<i32> = tids.iter().copied().filter(|&t| t > 0).collect();
    let mut pause = std::time::Duration::from_micros(20);
    loop {
        left.retain(|&t| present(t));
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{recommended_alt_stack_size, GuardZones, StackSpec};

    fn spec(size: usize, mitigated: bool) -> StackSpec {
        StackSpec {
            size,
            zones: GuardZones::hotspot_default(),
            alt_stack_size: recommended_alt_stack_size(),
            no_huge_pages: mitigated,
            guard_early: mitigated,
            name: "unit".into(),
        }
    }

    #[test]
    fn thread_runs_on_our_stack() {
        let s = StackMapping::map(&spec(1 << 20, true)).unwrap();
        let usable = s.layout().usable.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = spawn(
            s,
            Box::new(move |ctx: &mut ThreadContext| {
                let local = 0u8;
                let sp = &local as *const u8 as usize;
                tx.send((
                    sp,
                    crate::stack::current_thread_stack().map(|(r, _)| r),
                    crate::system::current_tid(),
                    ctx.guard_installed(),
                ))
                .unwrap();
                None
            }),
            None::<ExitHook>,
        )
        .unwrap();
        let (sp, glibc_view, tid, guard) = rx.recv().unwrap();
        t.join();
        assert!(usable.contains(&sp), "{sp:#x} not in {usable:x?}");
        assert_eq!(glibc_view, Some(usable));
        assert!(tid > 0);
        assert!(guard);
    }

    #[test]
    fn panics_stay_inside_the_thread_and_the_exit_hook_runs() {
        let s = StackMapping::map(&spec(1 << 20, true)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = spawn(
            s,
            Box::new(move |_: &mut ThreadContext| panic!("expected test panic")),
            Some(Box::new(move || tx.send("exited").unwrap())),
        )
        .unwrap();
        t.join();
        assert_eq!(rx.recv().unwrap(), "exited");
    }

    #[test]
    fn joined_threads_are_waited_for_until_the_kernel_releases_them() {
        let task = |tid: i32| std::path::Path::new(&format!("/proc/self/task/{tid}")).exists();
        let mut still_listed_after_join = 0;
        for _ in 0..300 {
            let t = std::thread::spawn(crate::sys::current_tid);
            let tid = t.join().unwrap();
            if task(tid) {
                still_listed_after_join += 1;
            }
            let left = wait_until_released(&[tid], std::time::Duration::from_secs(5));
            assert!(left.is_empty(), "thread {tid} still present after 5 s");
            assert!(
                !task(tid),
                "thread {tid} released, yet listed in /proc/self/task"
            );
        }
        println!("{still_listed_after_join} of 300 joined threads were still listed right after their join");
        assert_eq!(
            wait_until_released(&[0, -1], std::time::Duration::ZERO),
            Vec::<i32>::new()
        );
    }
}
