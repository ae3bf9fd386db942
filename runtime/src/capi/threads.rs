//! Threads from C: starting and joining VM threads, attaching host threads, stack bounds.

use std::ffi::{c_char, c_int, c_void};

use rtvm_os_linux::ForeignCall;

use super::{c_text, code_of, fail, guard, vm_ref, EDETACHED, EINVAL, OK};
use crate::threads::{Body, BoxedBody};
use crate::{StackBounds, ThreadKind, Vm, VmThread};

/// `rtvm_thread`.
#[derive(Debug)]
pub struct RtvmThread(VmThread);

/// Mirrors `rtvm_stack_bounds`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RtvmStackBounds {
    base: usize,
    limit: usize,
    guard_start: usize,
    guard_end: usize,
    soft_limit: usize,
}

impl From<StackBounds> for RtvmStackBounds {
    fn from(b: StackBounds) -> RtvmStackBounds {
        RtvmStackBounds {
            base: b.base,
            limit: b.limit,
            guard_start: b.guard.0,
            guard_end: b.guard.1,
            soft_limit: b.soft_limit,
        }
    }
}

/// See `rtvm_thread_start` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `name` a NUL-terminated string; `f` a function
/// that may be called with `arg` on another thread; `thread_out` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_thread_start(
    vm: *mut Vm,
    name: *const c_char,
    f: Option<unsafe extern "C-unwind" fn(*mut c_void)>,
    arg: *mut c_void,
    thread_out: *mut *mut RtvmThread,
) -> c_int {
    // SAFETY: forwarded to the caller.
    unsafe {
        start(
            "rtvm_thread_start",
            ThreadKind::Java,
            vm,
            name,
            f,
            arg,
            thread_out,
        )
    }
}

/// See `rtvm_collector_thread_start` in rtvm.h.
///
/// # Safety
/// As for `rtvm_thread_start`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_collector_thread_start(
    vm: *mut Vm,
    name: *const c_char,
    f: Option<unsafe extern "C-unwind" fn(*mut c_void)>,
    arg: *mut c_void,
    thread_out: *mut *mut RtvmThread,
) -> c_int {
    // SAFETY: forwarded to the caller.
    unsafe {
        start(
            "rtvm_collector_thread_start",
            ThreadKind::Collector,
            vm,
            name,
            f,
            arg,
            thread_out,
        )
    }
}

/// Starts a VM thread of `kind` running the C function `f(arg)`.
///
/// # Safety
/// As for `rtvm_thread_start`.
unsafe fn start(
    what: &str,
    kind: ThreadKind,
    vm: *mut Vm,
    name: *const c_char,
    f: Option<unsafe extern "C-unwind" fn(*mut c_void)>,
    arg: *mut c_void,
    thread_out: *mut *mut RtvmThread,
) -> c_int {
    guard(what, || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, &format!("{what}: vm is NULL"));
        };
        if let Err(code) = super::refuse_forked(vm, what) {
            return code;
        }
        let Some(f) = f else {
            return fail(EINVAL, &format!("{what}: fn is NULL"));
        };
        if name.is_null() || thread_out.is_null() {
            return fail(
                EINVAL,
                &format!("{what}: name and thread_out must not be NULL"),
            );
        }
        // SAFETY: checked non-NULL; the caller guarantees a NUL-terminated string.
        let name = unsafe { c_text(name) };
        // The C body is called last, from a frame with nothing to drop: it may end its thread
        // with pthread_exit.
        let body = Body::<BoxedBody>::Foreign(ForeignCall { f, arg });
        match vm.thread(&name).kind(kind).spawn_body(body) {
            Ok(t) => {
                // SAFETY: checked non-NULL; the caller guarantees it is writable.
                unsafe { *thread_out = Box::into_raw(Box::new(RtvmThread(t))) };
                OK
            }
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_thread_join` in rtvm.h.
///
/// # Safety
/// `thread` must be a handle from `rtvm_thread_start`, joined at most once.
#[no_mangle]
pub unsafe extern "C" fn rtvm_thread_join(thread: *mut RtvmThread) -> c_int {
    guard("rtvm_thread_join", || {
        if thread.is_null() {
            return fail(EINVAL, "rtvm_thread_join: thread is NULL");
        }
        // SAFETY: the caller passes a handle from rtvm_thread_start, owned by us from here.
        let t = unsafe { Box::from_raw(thread) };
        match t.0.join() {
            Ok(()) => OK,
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_thread_stack_bounds` in rtvm.h.
///
/// # Safety
/// `thread` must be a handle from `rtvm_thread_start` not joined yet; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_thread_stack_bounds(
    thread: *const RtvmThread,
    out: *mut RtvmStackBounds,
) -> c_int {
    guard("rtvm_thread_stack_bounds", || {
        // SAFETY: the caller passes a live handle.
        let Some(t) = (unsafe { thread.as_ref() }) else {
            return fail(EINVAL, "rtvm_thread_stack_bounds: thread is NULL");
        };
        if out.is_null() {
            return fail(EINVAL, "rtvm_thread_stack_bounds: out is NULL");
        }
        // SAFETY: checked non-NULL; the caller guarantees it is writable.
        unsafe { *out = t.0.stack_bounds().into() };
        OK
    })
}

/// See `rtvm_current_stack_bounds` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_current_stack_bounds(
    vm: *mut Vm,
    out: *mut RtvmStackBounds,
) -> c_int {
    guard("rtvm_current_stack_bounds", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_current_stack_bounds: vm is NULL");
        };
        if let Err(code) = super::refuse_forked(vm, "rtvm_current_stack_bounds") {
            return code;
        }
        if out.is_null() {
            return fail(EINVAL, "rtvm_current_stack_bounds: out is NULL");
        }
        match vm.current_stack_bounds() {
            Some(b) => {
                // SAFETY: checked non-NULL; the caller guarantees it is writable.
                unsafe { *out = b.into() };
                OK
            }
            None => fail(
                EDETACHED,
                "rtvm_current_stack_bounds: the calling thread is not attached to the VM",
            ),
        }
    })
}

/// See `rtvm_attach_current_thread` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `name` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rtvm_attach_current_thread(vm: *mut Vm, name: *const c_char) -> c_int {
    guard("rtvm_attach_current_thread", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_attach_current_thread: vm is NULL");
        };
        if let Err(code) = super::refuse_forked(vm, "rtvm_attach_current_thread") {
            return code;
        }
        // As JNI's AttachCurrentThread: a thread already known is a success.
        if vm.current_thread().is_some() {
            return OK;
        }
        let name = if name.is_null() {
            format!("Thread-{}", rtvm_os_linux::system::current_tid())
        } else {
            // SAFETY: checked non-NULL; the caller guarantees a NUL-terminated string.
            unsafe { c_text(name) }
        };
        match vm.attach_current_unguarded(&name) {
            Ok(_) => OK,
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_detach_current_thread` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_detach_current_thread(vm: *mut Vm) -> c_int {
    guard("rtvm_detach_current_thread", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_detach_current_thread: vm is NULL");
        };
        if let Err(code) = super::refuse_forked(vm, "rtvm_detach_current_thread") {
            return code;
        }
        match vm.detach_current() {
            Ok(()) => OK,
            Err(e) => fail(code_of(&e), &format!("rtvm_detach_current_thread: {e}")),
        }
    })
}

/// See `rtvm_trim_current_stack` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `freed_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_trim_current_stack(vm: *mut Vm, freed_out: *mut usize) -> c_int {
    guard("rtvm_trim_current_stack", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_trim_current_stack: vm is NULL");
        };
        if let Err(code) = super::refuse_forked(vm, "rtvm_trim_current_stack") {
            return code;
        }
        match vm.trim_current_stack() {
            Ok(freed) => {
                if !freed_out.is_null() {
                    // SAFETY: checked non-NULL; the caller guarantees it is writable.
                    unsafe { *freed_out = freed };
                }
                OK
            }
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}
