//! The heap from C: shared allocation, the inline TLAB's slow path, expansion, figures.

use std::ffi::{c_char, c_int, c_void};

use super::{code_of, fail, guard, heap_full, set_error, vm_ref, EINVAL, OK};
use crate::heap::{alloc_size, refill_and_allocate, tlab_refill_size, Refilled};
use crate::Vm;

/// Mirrors `rtvm_heap_stats`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RtvmHeapStats {
    reserved: usize,
    committed: usize,
    used: usize,
}

/// Mirrors `rtvm_tlab`: the fast path is inline in the header.
#[repr(C)]
#[derive(Debug)]
pub struct RtvmTlab {
    top: *mut c_char,
    end: *mut c_char,
    vm: *mut Vm,
    buffer_size: usize,
}

/// See `rtvm_heap_allocate` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_heap_allocate(vm: *mut Vm, bytes: usize) -> *mut c_void {
    // No `guard`: nothing here can panic (no allocation, no formatting), and the hot path
    // stays a load, a fetch_add and a compare.
    // SAFETY: forwarded to the caller.
    let Some(vm) = (unsafe { vm_ref(vm) }) else {
        set_error("rtvm_heap_allocate: vm is NULL");
        return std::ptr::null_mut();
    };
    match vm.allocate(bytes) {
        Some(b) => b.as_ptr().cast(),
        None => {
            heap_full("rtvm_heap_allocate", vm, bytes);
            std::ptr::null_mut()
        }
    }
}

/// See `rtvm_tlab_init` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `tlab` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_tlab_init(
    vm: *mut Vm,
    tlab: *mut RtvmTlab,
    buffer_size: usize,
) -> c_int {
    guard(|| {
        if vm.is_null() || tlab.is_null() {
            return fail(EINVAL, "rtvm_tlab_init: vm and tlab must not be NULL");
        }
        // SAFETY: checked non-NULL; the caller guarantees it is writable.
        unsafe {
            *tlab = RtvmTlab {
                top: std::ptr::null_mut(),
                end: std::ptr::null_mut(),
                vm,
                buffer_size: tlab_refill_size(buffer_size),
            }
        };
        OK
    })
}

/// See `rtvm_tlab_allocate_slow` in rtvm.h.
///
/// # Safety
/// `tlab` must have been set up by `rtvm_tlab_init` for a live VM, and be used by one thread
/// at a time.
#[no_mangle]
pub unsafe extern "C" fn rtvm_tlab_allocate_slow(tlab: *mut RtvmTlab, bytes: usize) -> *mut c_void {
    // SAFETY: the caller guarantees a TLAB set up by rtvm_tlab_init, used by this thread only.
    let Some(t) = (unsafe { tlab.as_mut() }) else {
        set_error("rtvm_tlab_allocate_slow: tlab is NULL");
        return std::ptr::null_mut();
    };
    // SAFETY: rtvm_tlab_init stored a live VM (caller's guarantee that it is still live).
    let Some(vm) = (unsafe { vm_ref(t.vm) }) else {
        set_error("rtvm_tlab_allocate_slow: the TLAB was not set up with rtvm_tlab_init");
        return std::ptr::null_mut();
    };
    let Some(size) = alloc_size(bytes) else {
        heap_full("rtvm_tlab_allocate", vm, bytes);
        return std::ptr::null_mut();
    };
    // The inline fast path found the buffer too small for `size`.
    match refill_and_allocate(vm.heap(), t.buffer_size, size) {
        Refilled::Buffer { buffer, used } => {
            let start = buffer.as_ptr() as *mut c_char;
            // `buffer` is a live heap block: these stay inside it (or one past its end).
            t.top = start.wrapping_add(used * 8);
            t.end = start.wrapping_add(buffer.len() * 8);
            start.cast()
        }
        Refilled::Direct(Some(block)) => block.as_ptr().cast(),
        Refilled::Direct(None) => {
            heap_full("rtvm_tlab_allocate", vm, bytes);
            std::ptr::null_mut()
        }
    }
}

/// See `rtvm_heap_expand` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `committed_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_heap_expand(
    vm: *mut Vm,
    bytes: usize,
    committed_out: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_heap_expand: vm is NULL");
        };
        match vm.expand_heap(bytes) {
            Ok(committed) => {
                if !committed_out.is_null() {
                    // SAFETY: checked non-NULL; the caller guarantees it is writable.
                    unsafe { *committed_out = committed };
                }
                OK
            }
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_heap_get_stats` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_heap_get_stats(vm: *mut Vm, out: *mut RtvmHeapStats) -> c_int {
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_heap_get_stats: vm is NULL");
        };
        if out.is_null() {
            return fail(EINVAL, "rtvm_heap_get_stats: out is NULL");
        }
        let s = vm.heap_stats();
        // SAFETY: checked non-NULL; the caller guarantees it is writable.
        unsafe {
            *out = RtvmHeapStats {
                reserved: s.reserved,
                committed: s.committed,
                used: s.used,
            }
        };
        OK
    })
}

/// See `rtvm_heap_resident` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_heap_resident(vm: *mut Vm, out: *mut usize) -> c_int {
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_heap_resident: vm is NULL");
        };
        if out.is_null() {
            return fail(EINVAL, "rtvm_heap_resident: out is NULL");
        }
        // SAFETY: checked non-NULL; the caller guarantees it is writable.
        unsafe { *out = vm.heap().resident_bytes() };
        OK
    })
}

/// See `rtvm_release_pretouch` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_release_pretouch(vm: *mut Vm) -> c_int {
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_release_pretouch: vm is NULL");
        };
        if vm.release_pretouch() {
            OK
        } else {
            fail(
                EINVAL,
                "rtvm_release_pretouch: the background pretouch is not held (-XX:+HoldBackgroundPreTouch)",
            )
        }
    })
}
