//! Thread stacks that rtvm maps itself, and threads that run on them.
//!
//! ```text
//!  low addresses                                                         high addresses
//!  ┌──────────────┬──────────────┬──────────────────────────────────────────────────┐
//!  │  alt stack   │  guard zone  │  usable stack (grows down)     … TLS, TCB (glibc) │
//!  │  RW, signals │  PROT_NONE   │  RW                                              │
//!  └──────────────┴──────────────┴──────────────────────────────────────────────────┘
//!  mapping.start  alt.end=guard.start  guard.end=usable.start            usable.end=mapping.end
//! ```
//!
//! **Mitigated** (the default): the whole mapping is advised `MADV_NOHUGEPAGE` and the guard
//! zone protected *before* `pthread_create` hands the stack to the thread
//! (`pthread_attr_setstack`). No huge page can form in it, and neighbouring stacks are split
//! by their guard zones from the first instant — there is no window for khugepaged.
//!
//! **Unmitigated** (for negative tests): the mapping is plain read-write anonymous memory —
//! no `MADV_NOHUGEPAGE` and no `MAP_STACK` (recent kernels turn `MAP_STACK` into
//! `VM_NOHUGEPAGE`) — so adjacent stacks merge into one region, and the guard zone is placed
//! later by the thread itself ([`ThreadContext::install_guard`]), as glibc and HotSpot did
//! on the kernels where JDK-8312182 struck.
//!
//! A guard-zone hit is reported by a `SIGSEGV`/`SIGBUS` handler running on the alternate
//! stack: `stack overflow in thread "<name>"` with the fault address and both ranges, then
//! `abort()`. Faults that are not guard hits go to the handler that was installed before.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::fmt::Write as _;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, OnceLock};

use nix::errno::Errno;
use nix::sys::mman::MapFlags;

use crate::error::{Operation, OsError, Result};
use crate::pages::base_page_size;
use crate::pretouch::{pretouch_range, PretouchRequest, Pretouched};
use crate::sys::{self, Protection, MADV_COLLAPSE};

/// How to map a stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackSpec {
    /// Total size of the mapping in bytes (a multiple of the page size).
    pub size: usize,
    /// Size of the guard zone (a multiple of the page size, at least one page).
    pub guard_size: usize,
    /// Size of the alternate signal stack at the low end (a multiple of the page size).
    pub alt_stack_size: usize,
    /// Advise the whole mapping `MADV_NOHUGEPAGE` before any thread runs on it.
    pub no_huge_pages: bool,
    /// Protect the guard zone before the thread exists; otherwise the thread does it.
    pub guard_early: bool,
    /// The thread's name, for the mapping name and overflow reports.
    pub name: String,
}

/// Where the parts of a stack mapping are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackLayout {
    /// The whole mapping.
    pub mapping: Range<usize>,
    /// The alternate signal stack.
    pub alt_stack: Range<usize>,
    /// The guard zone.
    pub guard: Range<usize>,
    /// The part the thread runs on.
    pub usable: Range<usize>,
}

/// The alternate signal stack size to use: 16 KiB, or four times the kernel's
/// `AT_MINSIGSTKSZ` (the signal frame size, large with AVX-512) if that is more, rounded up
/// to pages.
pub fn recommended_alt_stack_size() -> usize {
    const AT_MINSIGSTKSZ: libc::c_ulong = 51;
    let page = base_page_size();
    // SAFETY: getauxval has no preconditions; it returns 0 for a missing entry.
    let min = unsafe { libc::getauxval(AT_MINSIGSTKSZ) } as usize;
    let want = min.saturating_mul(4).max(16 * 1024);
    want.div_ceil(page) * page
}

/// The smallest usable part glibc accepts for a thread stack (`PTHREAD_STACK_MIN`).
pub fn minimum_usable_stack() -> usize {
    // SAFETY: sysconf has no preconditions.
    let min = unsafe { libc::sysconf(libc::_SC_THREAD_STACK_MIN) };
    usize::try_from(min).unwrap_or(16 * 1024).max(16 * 1024)
}

/// A thread stack mapped by rtvm. Unmapped on drop.
#[derive(Debug)]
pub struct StackMapping {
    layout: StackLayout,
    spec: StackSpec,
    guard_installed: AtomicBool,
}

impl StackMapping {
    /// Maps a stack as `spec` says. Nothing runs on it yet; for a mitigated spec the guard
    /// zone is `PROT_NONE` and the mapping `nh` when this returns.
    pub fn map(spec: &StackSpec) -> Result<StackMapping> {
        let page = base_page_size();
        let aligned = |n: usize| n.is_multiple_of(page);
        let reserved = spec.guard_size.checked_add(spec.alt_stack_size);
        let fits = reserved.is_some_and(|r| r < spec.size);
        if !aligned(spec.size)
            || !aligned(spec.guard_size)
            || !aligned(spec.alt_stack_size)
            || spec.guard_size == 0
            || !fits
        {
            return Err(OsError::new(
                Operation::MapStack,
                0,
                spec.size,
                Errno::EINVAL,
            ));
        }
        let base = sys::map_anonymous(spec.size, Protection::ReadWrite, MapFlags::empty())
            .map_err(|e| OsError::new(Operation::MapStack, 0, spec.size, e))?;
        let alt_end = base + spec.alt_stack_size;
        let guard_end = alt_end + spec.guard_size;
        let layout = StackLayout {
            mapping: base..base + spec.size,
            alt_stack: base..alt_end,
            guard: alt_end..guard_end,
            usable: guard_end..base + spec.size,
        };
        let mapping = StackMapping {
            layout,
            spec: spec.clone(),
            guard_installed: AtomicBool::new(false),
        };
        if spec.no_huge_pages {
            // SAFETY: the mapping was just created here and nothing runs on it;
            // MADV_NOHUGEPAGE changes VMA flags only. On error `mapping` is dropped (unmapped).
            unsafe { sys::madvise(base, spec.size, libc::MADV_NOHUGEPAGE) }.map_err(|e| {
                OsError::new(Operation::Advise("MADV_NOHUGEPAGE"), base, spec.size, e)
            })?;
        }
        if spec.guard_early {
            mapping.protect_guard()?;
        }
        crate::naming::name_range(base, spec.size, &format!("rtvm stack: {}", spec.name));
        Ok(mapping)
    }

    fn protect_guard(&self) -> Result<()> {
        let g = &self.layout.guard;
        // SAFETY: the guard zone belongs to this mapping and no code uses it: it lies below
        // the usable stack, which is the only part a thread runs on.
        unsafe { sys::protect(g.start, g.len(), Protection::None) }
            .map_err(|e| OsError::new(Operation::Protect, g.start, g.len(), e))?;
        self.guard_installed.store(true, Ordering::Release);
        Ok(())
    }

    /// The layout.
    pub fn layout(&self) -> &StackLayout {
        &self.layout
    }

    /// The spec it was mapped with.
    pub fn spec(&self) -> &StackSpec {
        &self.spec
    }

    /// Whether the guard zone is protected.
    pub fn guard_installed(&self) -> bool {
        self.guard_installed.load(Ordering::Acquire)
    }

    /// `MADV_COLLAPSE` over every `huge_page`-aligned region the stack touches: what
    /// khugepaged would do to the memory around it, done now. A stack is rarely aligned to
    /// the huge page size, so the regions reach into the neighbouring mappings — with which
    /// an unmitigated stack has merged, exactly as khugepaged sees it. Refused with `EINVAL`
    /// when any part is `MADV_NOHUGEPAGE`; `ENOMEM` if a region is not fully mapped. A
    /// collapse keeps every byte of every page, ours and the neighbours'.
    pub fn collapse(&self, huge_page: usize) -> Result<()> {
        let m = &self.layout.mapping;
        let huge = if huge_page.is_power_of_two() {
            huge_page
        } else {
            base_page_size()
        };
        let start = m.start & !(huge - 1);
        let end = (m.end + huge - 1) & !(huge - 1);
        // SAFETY: MADV_COLLAPSE copies the pages of each region into a huge page and never
        // changes what any address reads, so it is sound on our mapping and on neighbouring
        // memory alike; unmapped parts make the call fail, not fault.
        unsafe { sys::madvise(start, end - start, MADV_COLLAPSE) }
            .map_err(|e| OsError::new(Operation::Advise("MADV_COLLAPSE"), start, end - start, e))
    }

    /// Resident bytes of the whole mapping, per `mincore` (how HotSpot's NMT measures
    /// committed stack).
    pub fn resident_bytes(&self) -> Result<usize> {
        let m = &self.layout.mapping;
        let page = base_page_size();
        sys::resident_pages(m.start, m.len(), page)
            .map(|p| p * page)
            .map_err(|e| OsError::new(Operation::Mincore, m.start, m.len(), e))
    }
}

impl Drop for StackMapping {
    fn drop(&mut self) {
        let m = &self.layout.mapping;
        // SAFETY: a StackMapping is dropped only when no thread runs on it ([`OsThread`]
        // joins first), and it owns the mapping.
        if let Err(e) = unsafe { sys::unmap(m.start, m.len()) } {
            log::error!(target: "os+thread", "{}", OsError::new(Operation::Release, m.start, m.len(), e));
        }
    }
}

/// What the thread's own code can do with its stack.
#[derive(Debug)]
pub struct ThreadContext {
    layout: StackLayout,
    name: String,
    guard_installed: bool,
}

impl ThreadContext {
    /// The stack layout.
    pub fn layout(&self) -> &StackLayout {
        &self.layout
    }

    /// Whether the guard zone is in place.
    pub fn guard_installed(&self) -> bool {
        self.guard_installed
    }

    /// Protects the guard zone now (unmitigated stacks), and arms overflow reporting for it.
    pub fn install_guard(&mut self) -> Result<()> {
        if self.guard_installed {
            return Ok(());
        }
        let g = &self.layout.guard;
        // SAFETY: called on the thread that runs on this stack, whose frames are all in the
        // usable part above the guard zone; the mapping outlives the thread.
        unsafe { sys::protect(g.start, g.len(), Protection::None) }
            .map_err(|e| OsError::new(Operation::Protect, g.start, g.len(), e))?;
        self.guard_installed = true;
        arm_overflow_report(&self.layout, &self.name);
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

/// The stack bounds glibc reports for the calling thread (`pthread_getattr_np`).
pub fn current_thread_stack() -> Option<Range<usize>> {
    // SAFETY: `attr` is initialised by pthread_getattr_np before use and destroyed after;
    // the out-pointers point to locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (rc == 0).then(|| addr as usize..addr as usize + size)
    }
}

/// A thread running on a [`StackMapping`]. Joined — and only then unmapped — on
/// [`join`](OsThread::join) or drop.
#[derive(Debug)]
pub struct OsThread {
    pthread: libc::pthread_t,
    stack: Option<StackMapping>,
}

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

struct StartPacket {
    entry: Box<dyn FnOnce(&mut ThreadContext) + Send + 'static>,
    context: ThreadContext,
}

/// Starts a thread on `stack` running `entry`. On failure the stack is unmapped and nothing
/// is left behind. `pthread_create` is retried on `EAGAIN` up to three more times, as
/// HotSpot does.
pub fn spawn(
    stack: StackMapping,
    entry: Box<dyn FnOnce(&mut ThreadContext) + Send + 'static>,
) -> std::result::Result<OsThread, SpawnError> {
    install_overflow_handler();
    let usable = stack.layout.usable.clone();
    let context = ThreadContext {
        layout: stack.layout.clone(),
        name: stack.spec.name.clone(),
        guard_installed: stack.guard_installed(),
    };
    let packet = Box::into_raw(Box::new(StartPacket { entry, context }));
    // SAFETY: `attr` is initialised before use and destroyed on every path. The stack
    // region passed to pthread_attr_setstack is the usable part of a mapping that this
    // OsThread owns and unmaps only after pthread_join. `packet` is handed to exactly one
    // thread (which frees it) or, if no thread was created, freed here.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        let rc = libc::pthread_attr_init(&mut attr);
        if rc != 0 {
            drop(Box::from_raw(packet));
            return Err(SpawnError {
                errno: Errno::from_raw(rc),
            });
        }
        let mut rc =
            libc::pthread_attr_setstack(&mut attr, usable.start as *mut c_void, usable.len());
        let mut pthread: libc::pthread_t = 0;
        if rc == 0 {
            for _ in 0..4 {
                rc = libc::pthread_create(&mut pthread, &attr, trampoline, packet.cast());
                if rc != libc::EAGAIN {
                    break;
                }
            }
        }
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            drop(Box::from_raw(packet));
            return Err(SpawnError {
                errno: Errno::from_raw(rc),
            });
        }
        Ok(OsThread {
            pthread,
            stack: Some(stack),
        })
    }
}

impl OsThread {
    /// The pthread id (as HotSpot prints it in thread logs).
    pub fn pthread_id(&self) -> u64 {
        self.pthread
    }

    /// The stack the thread runs on.
    pub fn stack(&self) -> &StackMapping {
        self.stack.as_ref().expect("stack present until drop")
    }

    /// Waits for the thread to finish, then unmaps its stack.
    pub fn join(mut self) {
        self.join_inner();
    }

    fn join_inner(&mut self) {
        if self.stack.is_none() {
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
            return;
        }
        self.stack = None;
    }
}

impl Drop for OsThread {
    fn drop(&mut self) {
        self.join_inner();
    }
}

extern "C" fn trampoline(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the StartPacket leaked by `spawn` for exactly this thread.
    let packet = unsafe { Box::from_raw(arg.cast::<StartPacket>()) };
    let StartPacket { entry, mut context } = *packet;
    set_alt_stack(Some(&context.layout.alt_stack));
    set_current_thread_name(&context.name);
    if context.guard_installed {
        arm_overflow_report(&context.layout, &context.name);
    }
    // A panic must not unwind into C; the runtime reports panics itself.
    let _ = catch_unwind(AssertUnwindSafe(|| entry(&mut context)));
    OVERFLOW.with(|c| c.set(None));
    set_alt_stack(None);
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

fn set_alt_stack(range: Option<&Range<usize>>) {
    let ss = libc::stack_t {
        ss_sp: range.map_or(std::ptr::null_mut(), |r| r.start as *mut c_void),
        ss_flags: if range.is_some() { 0 } else { libc::SS_DISABLE },
        ss_size: range.map_or(0, |r| r.len()),
    };
    // SAFETY: the alternate stack is this thread's own RW region inside its stack mapping,
    // which outlives the thread; disabling passes no memory.
    let rc = unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) };
    if rc != 0 {
        log::debug!(target: "os+thread", "sigaltstack failed ({})", crate::error::strerror(Errno::last()));
    }
}

/// What the fault handler needs to know about the current thread's stack. Plain data, so
/// reading it from a signal handler is safe.
#[derive(Clone, Copy)]
struct OverflowInfo {
    guard: (usize, usize),
    stack: (usize, usize),
    name: [u8; 40],
    name_len: usize,
}

thread_local! {
    static OVERFLOW: Cell<Option<OverflowInfo>> = const { Cell::new(None) };
}

fn arm_overflow_report(layout: &StackLayout, name: &str) {
    let mut info = OverflowInfo {
        guard: (layout.guard.start, layout.guard.end),
        stack: (layout.usable.start, layout.usable.end),
        name: [0; 40],
        name_len: 0,
    };
    let bytes = name.as_bytes();
    let n = bytes.len().min(info.name.len());
    info.name[..n].copy_from_slice(&bytes[..n]);
    info.name_len = n;
    OVERFLOW.with(|c| c.set(Some(info)));
}

struct PreviousHandlers {
    segv: libc::sigaction,
    bus: libc::sigaction,
}

// SAFETY: the saved sigactions are plain data written once before our handler is installed
// and only read afterwards.
unsafe impl Sync for PreviousHandlers {}
// SAFETY: as above; the function pointers in them are process-global.
unsafe impl Send for PreviousHandlers {}

static PREVIOUS: OnceLock<PreviousHandlers> = OnceLock::new();

/// Installs the stack-overflow reporter for `SIGSEGV` and `SIGBUS` once per process,
/// keeping the handlers installed before it (Rust's own, an embedder's) to chain to.
pub fn install_overflow_handler() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // SAFETY: sigaction with zeroed-then-filled structs. The previous actions are saved
        // (and published) before ours is installed, so the handler always finds them.
        unsafe {
            let mut segv: libc::sigaction = std::mem::zeroed();
            let mut bus: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut segv);
            libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut bus);
            let _ = PREVIOUS.set(PreviousHandlers { segv, bus });
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fault as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut());
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
}

/// A fixed buffer that `core::fmt` can write into without allocating (signal-safe).
struct SignalBuf {
    buf: [u8; 512],
    len: usize,
}

impl std::fmt::Write for SignalBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

extern "C" fn on_fault(sig: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let hit = OVERFLOW
        .with(|c| c.get())
        .filter(|i| i.guard.0 <= addr && addr < i.guard.1);
    if let Some(i) = hit {
        let mut out = SignalBuf {
            buf: [0; 512],
            len: 0,
        };
        let name = std::str::from_utf8(&i.name[..i.name_len]).unwrap_or("?");
        let _ = writeln!(
            out,
            "stack overflow in thread \"{name}\": fault address {addr:#018x}, guard zone [{:#018x} - {:#018x}), \
             stack [{:#018x} - {:#018x})",
            i.guard.0, i.guard.1, i.stack.0, i.stack.1
        );
        // SAFETY: write(2) and abort(3) are async-signal-safe; the buffer is a local.
        unsafe {
            libc::write(2, out.buf.as_ptr().cast(), out.len);
            libc::abort();
        }
    }
    chain(sig, info, ucontext);
}

fn chain(sig: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let previous = PREVIOUS
        .get()
        .map(|p| if sig == libc::SIGBUS { p.bus } else { p.segv });
    let handler = previous.map_or(libc::SIG_DFL, |p| p.sa_sigaction);
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Restore the default and return: the faulting instruction runs again and the
        // process dies of the signal, as it would have without us.
        // SAFETY: installing SIG_DFL is async-signal-safe.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
        return;
    }
    let flags = previous.map_or(0, |p| p.sa_flags);
    // SAFETY: `handler` is the function pointer the previous owner installed with these
    // flags; we call it as the kernel would have.
    unsafe {
        if flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                std::mem::transmute(handler);
            f(sig, info, ucontext);
        } else {
            let f: extern "C" fn(c_int) = std::mem::transmute(handler);
            f(sig);
        }
    }
}

/// Whether this kernel marks `MAP_STACK` mappings `VM_NOHUGEPAGE` (`nh`), which protects
/// glibc-allocated stacks from THP since about Linux 6.8. Probed once on a mapping of our
/// own; rtvm's mitigation does not rely on it.
pub fn kernel_marks_map_stack_nohugepage() -> bool {
    static PROBE: OnceLock<bool> = OnceLock::new();
    *PROBE.get_or_init(|| {
        let page = base_page_size();
        let Ok(addr) = sys::map_anonymous(page, Protection::ReadWrite, MapFlags::MAP_STACK) else {
            return false;
        };
        let nh = crate::procfs::smaps_for(addr)
            .ok()
            .flatten()
            .is_some_and(|e| e.has_flag("nh"));
        // SAFETY: the probe page was mapped above by this function and is not used elsewhere.
        let _ = unsafe { sys::unmap(addr, page) };
        nh
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(size: usize, mitigated: bool) -> StackSpec {
        StackSpec {
            size,
            guard_size: base_page_size(),
            alt_stack_size: recommended_alt_stack_size(),
            no_huge_pages: mitigated,
            guard_early: mitigated,
            name: "unit".into(),
        }
    }

    #[test]
    fn bad_specs() {
        let page = base_page_size();
        for s in [
            StackSpec {
                size: 100,
                ..spec(1 << 20, true)
            },
            StackSpec {
                guard_size: 0,
                ..spec(1 << 20, true)
            },
            StackSpec {
                guard_size: 1 << 20,
                ..spec(1 << 20, true)
            },
            StackSpec {
                alt_stack_size: page + 1,
                ..spec(1 << 20, true)
            },
            StackSpec {
                guard_size: usize::MAX - page + 1,
                ..spec(1 << 20, true)
            },
        ] {
            assert_eq!(
                StackMapping::map(&s).unwrap_err().errno,
                Errno::EINVAL,
                "{s:?}"
            );
        }
    }

    #[test]
    fn layout_adds_up() {
        let s = StackMapping::map(&spec(1 << 20, true)).unwrap();
        let l = s.layout();
        assert_eq!(l.mapping.start, l.alt_stack.start);
        assert_eq!(l.alt_stack.end, l.guard.start);
        assert_eq!(l.guard.end, l.usable.start);
        assert_eq!(l.usable.end, l.mapping.end);
        assert_eq!(l.mapping.len(), 1 << 20);
        assert!(s.guard_installed());
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
                    current_thread_stack(),
                    crate::system::current_tid(),
                    ctx.guard_installed(),
                ))
                .unwrap();
            }),
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
    fn panics_stay_inside_the_thread() {
        let s = StackMapping::map(&spec(1 << 20, true)).unwrap();
        let t = spawn(
            s,
            Box::new(|_: &mut ThreadContext| panic!("expected test panic")),
        )
        .unwrap();
        t.join();
    }
}
