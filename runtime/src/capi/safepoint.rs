//! `rtvm_stop_the_world`, `rtvm_handshake`, the poll's slow path, safe regions and
//! `rtvm_current_thread_id` (see rtvm.h).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::time::Duration;

use super::{code_of, fail, guard, vm_ref, EDETACHED, EINVAL, OK};
use crate::safepoint::{self, StoppedThread, POLL_PENDING};
use crate::{Vm, WorldStopped};

/// `rtvm_stopped_thread`: the layout of rtvm.h (fields are only ever appended).
#[repr(C)]
pub struct RtvmStoppedThread {
    id: u64,
    tid: c_int,
    name: *const c_char,
    how: c_int,
    scan_start: usize,
    scan_end: usize,
    altstack_start: usize,
    altstack_end: usize,
    registers: *const usize,
    n_registers: usize,
    other_kind: c_int,
}

/// The word rtvm.h's inline `rtvm_safepoint_poll()` reads: non-zero while a stop of the world
/// or a handshake is pending.
#[no_mangle]
pub static rtvm_safepoint_pending: &std::sync::atomic::AtomicU32 = &POLL_PENDING;

/// The C view of a stopped thread; `registers` must outlive it.
fn c_view(t: &StoppedThread<'_>, registers: &[usize]) -> RtvmStoppedThread {
    let scan = t.scan();
    let (other, kind) = t.other_stack().map_or((0..0, 0), |(r, k)| (r, k.code()));
    RtvmStoppedThread {
        id: t.id(),
        tid: t.tid(),
        name: t.c_name().as_ptr(),
        how: t.how().code(),
        scan_start: scan.start,
        scan_end: scan.end,
        altstack_start: other.start,
        altstack_end: other.end,
        registers: registers.as_ptr(),
        n_registers: registers.len(),
        other_kind: kind,
    }
}

/// A stopped world as C sees it: the stop, and its threads' views (which point into the
/// stop's names and into `registers`).
pub struct RtvmWorld {
    threads: Vec<RtvmStoppedThread>,
    /// What the views' `registers` point into (a Vec's buffer stays put when it moves).
    _registers: Vec<[usize; rtvm_os_linux::safepoint::SAVED_REGISTERS]>,
    world: WorldStopped,
}

// SAFETY: the raw pointers in `threads` point into `registers` and into the names the stop
// owns; both move with the value and are read-only. The stop itself is Send.
unsafe impl Send for RtvmWorld {}

impl std::fmt::Debug for RtvmWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.world.fmt(f)
    }
}

/// Stops the world and builds its C views.
fn stop_world(
    vm: &Vm,
    what: &str,
    reason: *const c_char,
    timeout_ms: c_int,
) -> Result<Box<RtvmWorld>, c_int> {
    super::refuse_forked(vm, what)?;
    let reason = if reason.is_null() {
        what.to_owned()
    } else {
        // SAFETY: a non-NULL reason is a C string (the header's contract).
        unsafe { CStr::from_ptr(reason) }
            .to_string_lossy()
            .into_owned()
    };
    let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
    let world = vm
        .stop_the_world(&reason, timeout)
        .map_err(|e| fail(code_of(&e), &e.to_string()))?;
    let registers: Vec<_> = world.threads().map(|t| *t.registers()).collect();
    let threads = world
        .threads()
        .zip(&registers)
        .map(|(t, regs)| c_view(&t, regs))
        .collect();
    Ok(Box::new(RtvmWorld {
        threads,
        _registers: registers,
        world,
    }))
}

/// See `rtvm_stop_the_world` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `reason` NULL or a C string; `callback` a
/// function with `ctx` what it expects.
#[no_mangle]
pub unsafe extern "C" fn rtvm_stop_the_world(
    vm: *mut Vm,
    reason: *const c_char,
    timeout_ms: c_int,
    callback: Option<unsafe extern "C" fn(*mut c_void, *const RtvmStoppedThread, usize)>,
    ctx: *mut c_void,
) -> c_int {
    guard("rtvm_stop_the_world", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_stop_the_world: vm is NULL");
        };
        let Some(callback) = callback else {
            return fail(EINVAL, "rtvm_stop_the_world: callback is NULL");
        };
        let world = match stop_world(vm, "rtvm_stop_the_world", reason, timeout_ms) {
            Ok(w) => w,
            Err(code) => return code,
        };
        // SAFETY: the embedder's callback with its context, an array of `threads.len()`
        // entries that stays valid (with the names and registers it points to) until it returns.
        unsafe { callback(ctx, world.threads.as_ptr(), world.threads.len()) };
        drop(world);
        OK
    })
}

/// See `rtvm_world_stop` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `reason` NULL or a C string; `world_out`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_world_stop(
    vm: *mut Vm,
    reason: *const c_char,
    timeout_ms: c_int,
    world_out: *mut *mut RtvmWorld,
) -> c_int {
    guard("rtvm_world_stop", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_world_stop: vm is NULL");
        };
        if world_out.is_null() {
            return fail(EINVAL, "rtvm_world_stop: world_out is NULL");
        }
        match stop_world(vm, "rtvm_world_stop", reason, timeout_ms) {
            Ok(w) => {
                // SAFETY: checked non-NULL; the caller guarantees it is writable.
                unsafe { *world_out = Box::into_raw(w) };
                OK
            }
            Err(code) => code,
        }
    })
}

/// See `rtvm_world_threads` in rtvm.h.
///
/// # Safety
/// `world` must come from `rtvm_world_stop` and not be resumed yet; `threads` and `n`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_world_threads(
    world: *const RtvmWorld,
    threads: *mut *const RtvmStoppedThread,
    n: *mut usize,
) -> c_int {
    guard("rtvm_world_threads", || {
        // SAFETY: the caller passes a live world.
        let Some(w) = (unsafe { world.as_ref() }) else {
            return fail(EINVAL, "rtvm_world_threads: world is NULL");
        };
        if threads.is_null() || n.is_null() {
            return fail(EINVAL, "rtvm_world_threads: threads and n must not be NULL");
        }
        // SAFETY: checked non-NULL; the caller guarantees they are writable.
        unsafe {
            *threads = w.threads.as_ptr();
            *n = w.threads.len();
        }
        OK
    })
}

/// See `rtvm_world_resume` in rtvm.h.
///
/// # Safety
/// `world` must come from `rtvm_world_stop`, resumed at most once.
#[no_mangle]
pub unsafe extern "C" fn rtvm_world_resume(world: *mut RtvmWorld) -> c_int {
    guard("rtvm_world_resume", || {
        if world.is_null() {
            return fail(EINVAL, "rtvm_world_resume: world is NULL");
        }
        // SAFETY: the caller passes a world from rtvm_world_stop, owned by us from here.
        drop(unsafe { Box::from_raw(world) });
        OK
    })
}

/// The C callback and its context, sent to the thread that runs the handshake.
struct CHandshake {
    f: unsafe extern "C" fn(*mut c_void, *const RtvmStoppedThread),
    ctx: *mut c_void,
}

// SAFETY: the header says the callback runs on the target thread or on the caller's; the
// embedder vouches that `ctx` may be used from either (the caller waits for it).
unsafe impl Send for CHandshake {}

/// See `rtvm_handshake` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `callback` a function with `ctx` what it
/// expects, callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn rtvm_handshake(
    vm: *mut Vm,
    thread_id: u64,
    callback: Option<unsafe extern "C" fn(*mut c_void, *const RtvmStoppedThread)>,
    ctx: *mut c_void,
) -> c_int {
    guard("rtvm_handshake", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_handshake: vm is NULL");
        };
        let Some(f) = callback else {
            return fail(EINVAL, "rtvm_handshake: callback is NULL");
        };
        if let Err(code) = super::refuse_forked(vm, "rtvm_handshake") {
            return code;
        }
        let call = CHandshake { f, ctx };
        let op = move |t: &StoppedThread<'_>| {
            let call = call;
            let view = c_view(t, t.registers());
            // SAFETY: the embedder's callback with its context and a view valid for the call.
            unsafe { (call.f)(call.ctx, &view) };
        };
        match vm.handshake(thread_id, op) {
            Ok(()) => OK,
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// The slow path of rtvm.h's inline `rtvm_safepoint_poll()`.
#[no_mangle]
pub extern "C" fn rtvm_safepoint_poll_slow() {
    // A panic cannot come from here (atomics and futex calls), but never crosses into C.
    let _ = std::panic::catch_unwind(safepoint::safepoint_poll);
}

/// See `rtvm_enter_safe_region` in rtvm.h. A naked entry: it jumps to the OS layer's
/// trampoline with the caller's registers untouched, so what is published is what the C
/// caller holds in its callee-saved registers and its own stack pointer (its frames stay
/// while it is in the region; the trampoline's are gone when this returns).
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn rtvm_enter_safe_region(vm: *mut Vm) -> c_int {
    // rdi (vm) goes through as the context; rsi becomes the function to call.
    std::arch::naked_asm!(
        "lea rsi, [rip + {inner}]",
        "jmp {call}",
        inner = sym enter_safe_region_at,
        call = sym rtvm_os_linux::safepoint::call_with_caller_registers,
    )
}

/// See `rtvm_enter_safe_region` in rtvm.h (the x86-64 entry explains the shape).
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn rtvm_enter_safe_region(vm: *mut Vm) -> c_int {
    std::arch::naked_asm!(
        "adrp x1, {inner}",
        "add x1, x1, :lo12:{inner}",
        "b {call}",
        inner = sym enter_safe_region_at,
        call = sym rtvm_os_linux::safepoint::call_with_caller_registers,
    )
}

/// `rtvm_enter_safe_region` proper, with the caller's registers and stack pointer.
///
/// # Safety
/// `vm` as for `rtvm_enter_safe_region`; `regs` points to SAVED_REGISTERS words.
unsafe extern "C" fn enter_safe_region_at(vm: *mut c_void, regs: *const usize, sp: usize) -> usize {
    let code = guard("rtvm_enter_safe_region", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm.cast::<Vm>()) }) else {
            return fail(EINVAL, "rtvm_enter_safe_region: vm is NULL");
        };
        if vm.current_thread_id().is_none() {
            return fail(
                EDETACHED,
                "rtvm_enter_safe_region: the calling thread is not attached to the VM",
            );
        }
        // SAFETY: the trampoline's spill of SAVED_REGISTERS words, alive for this call.
        let regs = unsafe { &*regs.cast::<[usize; rtvm_os_linux::safepoint::SAVED_REGISTERS]>() };
        if safepoint::enter_current_with(sp, regs) {
            OK
        } else {
            fail(
                EDETACHED,
                "rtvm_enter_safe_region: the calling thread is not attached to the VM",
            )
        }
    });
    // The int return register holds the low half: C sees `code`.
    code as isize as usize
}

/// See `rtvm_leave_safe_region` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_leave_safe_region(vm: *mut Vm) -> c_int {
    // SAFETY: forwarded to the caller.
    let Some(vm) = (unsafe { vm_ref(vm) }) else {
        return fail(EINVAL, "rtvm_leave_safe_region: vm is NULL");
    };
    if vm.current_thread_id().is_none() {
        return fail(
            EDETACHED,
            "rtvm_leave_safe_region: the calling thread is not attached to the VM",
        );
    }
    if safepoint::leave_current() {
        // In the child of fork() the leave did not wait (the child's world is let go at the
        // fork), but the VM is the parent's.
        match super::refuse_forked(vm, "rtvm_leave_safe_region") {
            Ok(()) => OK,
            Err(code) => code,
        }
    } else {
        fail(
            EINVAL,
            "rtvm_leave_safe_region: the calling thread is not in a safe region",
        )
    }
}

/// See `rtvm_current_thread_id` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create` (or NULL: 0).
#[no_mangle]
pub unsafe extern "C" fn rtvm_current_thread_id(vm: *mut Vm) -> u64 {
    // SAFETY: forwarded to the caller.
    unsafe { vm_ref(vm) }
        .and_then(|vm| vm.current_thread_id())
        .unwrap_or(0)
}
