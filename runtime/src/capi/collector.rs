//! What a collector needs besides stops (see rtvm.h): shutdown hooks, no-stop sections,
//! declared code ranges and fiber stacks.

use std::ffi::{c_int, c_void};

use super::{code_of, fail, guard, vm_ref, EDETACHED, EINVAL, OK};
use crate::{CodeKind, Vm};

/// A C shutdown hook and its context, sent to the destroying thread.
struct CHook {
    f: unsafe extern "C" fn(*mut c_void),
    ctx: *mut c_void,
}

// SAFETY: rtvm.h says the hook runs on the thread that calls rtvm_destroy; the embedder
// vouches that `ctx` may be used there.
unsafe impl Send for CHook {}

/// See `rtvm_add_shutdown_hook` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `f` a function with `ctx` what it expects,
/// callable on the thread that destroys the VM.
#[no_mangle]
pub unsafe extern "C" fn rtvm_add_shutdown_hook(
    vm: *mut Vm,
    f: Option<unsafe extern "C" fn(*mut c_void)>,
    ctx: *mut c_void,
) -> c_int {
    guard("rtvm_add_shutdown_hook", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_add_shutdown_hook: vm is NULL");
        };
        let Some(f) = f else {
            return fail(EINVAL, "rtvm_add_shutdown_hook: fn is NULL");
        };
        let hook = CHook { f, ctx };
        let run = move || {
            let hook = hook;
            // SAFETY: the embedder's hook with its context (the header's contract).
            unsafe { (hook.f)(hook.ctx) };
        };
        match vm.add_shutdown_hook(run) {
            Ok(()) => OK,
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_async_stop_disable` in rtvm.h.
#[no_mangle]
pub extern "C" fn rtvm_async_stop_disable() {
    if let Some(r) = rtvm_os_linux::safepoint::current() {
        rtvm_os_linux::safepoint::no_stop_enter(r);
    }
}

/// See `rtvm_async_stop_enable` in rtvm.h.
#[no_mangle]
pub extern "C" fn rtvm_async_stop_enable() {
    if let Some(r) = rtvm_os_linux::safepoint::current() {
        if r.core().critical.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            // A stop taken at the section's end waits here; a panic cannot come from it.
            let _ = std::panic::catch_unwind(|| rtvm_os_linux::safepoint::no_stop_exit(r));
        }
    }
}

/// `RTVM_CODE_NO_STOP`, `RTVM_CODE_STOPPABLE`.
fn code_kind(kind: c_int) -> Option<CodeKind> {
    match kind {
        1 => Some(CodeKind::NoStop),
        2 => Some(CodeKind::Stoppable),
        _ => None,
    }
}

/// See `rtvm_declare_code` in rtvm.h.
#[no_mangle]
pub extern "C" fn rtvm_declare_code(start: usize, end: usize, kind: c_int) -> c_int {
    guard("rtvm_declare_code", || {
        let Some(kind) = code_kind(kind) else {
            return fail(
                EINVAL,
                &format!("rtvm_declare_code: unknown kind {kind} (RTVM_CODE_NO_STOP 1, RTVM_CODE_STOPPABLE 2)"),
            );
        };
        match crate::declare_code(start..end, kind) {
            Ok(()) => OK,
            Err(e) => fail(EINVAL, &format!("rtvm_declare_code: {e}")),
        }
    })
}

/// See `rtvm_forget_code` in rtvm.h.
#[no_mangle]
pub extern "C" fn rtvm_forget_code(start: usize, end: usize) -> c_int {
    guard("rtvm_forget_code", || {
        if crate::forget_code(start..end) {
            OK
        } else {
            fail(
                EINVAL,
                &format!("rtvm_forget_code: {start:#x}-{end:#x} was not declared"),
            )
        }
    })
}

/// See `rtvm_set_current_fiber` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_set_current_fiber(vm: *mut Vm, start: usize, end: usize) -> c_int {
    guard("rtvm_set_current_fiber", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_set_current_fiber: vm is NULL");
        };
        if start > end {
            return fail(
                EINVAL,
                &format!("rtvm_set_current_fiber: {start:#x}-{end:#x} is reversed"),
            );
        }
        let stack = (start != end).then_some(start..end);
        match vm.set_current_fiber(stack) {
            Ok(()) => OK,
            Err(_) => fail(
                EDETACHED,
                "rtvm_set_current_fiber: the calling thread is not attached to the VM",
            ),
        }
    })
}
