//! `rtvm_stop_the_world`, `rtvm_handshake`, the poll's slow path, safe regions and
//! `rtvm_current_thread_id` (see rtvm.h).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::time::Duration;

use super::{code_of, fail, guard, vm_ref, EDETACHED, EINVAL, OK};
use crate::safepoint::{self, StoppedThread, POLL_PENDING};
use crate::Vm;

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
}

/// The word rtvm.h's inline `rtvm_safepoint_poll()` reads: non-zero while a stop of the world
/// or a handshake is pending.
#[no_mangle]
pub static rtvm_safepoint_pending: &std::sync::atomic::AtomicU32 = &POLL_PENDING;

/// The C view of a stopped thread; `registers` must outlive it.
fn c_view(t: &StoppedThread<'_>, registers: &[usize]) -> RtvmStoppedThread {
    let scan = t.scan();
    let alt = t.alt_stack().unwrap_or(0..0);
    RtvmStoppedThread {
        id: t.id(),
        tid: t.tid(),
        name: t.c_name().as_ptr(),
        how: t.how().code(),
        scan_start: scan.start,
        scan_end: scan.end,
        altstack_start: alt.start,
        altstack_end: alt.end,
        registers: registers.as_ptr(),
        n_registers: registers.len(),
    }
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
        if let Err(code) = super::refuse_forked(vm, "rtvm_stop_the_world") {
            return code;
        }
        let reason = if reason.is_null() {
            "rtvm_stop_the_world".to_owned()
        } else {
            // SAFETY: a non-NULL reason is a C string (the header's contract).
            unsafe { CStr::from_ptr(reason) }
                .to_string_lossy()
                .into_owned()
        };
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        // Everything the callback's array needs is allocated before a thread is stopped.
        let mut registers: Vec<[usize; rtvm_os_linux::safepoint::SAVED_REGISTERS]> = Vec::new();
        let mut threads: Vec<RtvmStoppedThread> = Vec::new();
        let stopped = vm
            .inner
            .registry
            .safepoints()
            .stop_reserving(&reason, timeout, &mut |n| {
                registers.reserve(n);
                threads.reserve(n);
            });
        let world = match stopped {
            Ok(w) => w,
            Err(e) => return fail(code_of(&e), &e.to_string()),
        };
        for t in world.threads() {
            registers.push(*t.registers());
        }
        for (t, regs) in world.threads().zip(&registers) {
            threads.push(c_view(&t, regs));
        }
        // SAFETY: the embedder's callback with its context, an array of `threads.len()`
        // entries that stays valid (with the names and registers it points to) until it returns.
        unsafe { callback(ctx, threads.as_ptr(), threads.len()) };
        drop(world);
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
        OK
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
