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
    match vm.heap().allocate_or_explain(bytes) {
        Ok(b) => b.as_ptr().cast(),
        Err(why) => {
            heap_full("rtvm_heap_allocate", why);
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
    guard("rtvm_tlab_init", || {
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
        if let Err(why) = vm.heap().allocate_or_explain(bytes) {
            heap_full("rtvm_tlab_allocate", why);
        }
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
        Refilled::Direct(Ok(block)) => block.as_ptr().cast(),
        Refilled::Direct(Err(why)) => {
            heap_full("rtvm_tlab_allocate", why);
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
    guard("rtvm_heap_expand", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_heap_expand: vm is NULL");
        };
        if let Err(code) = super::refuse_forked(vm, "rtvm_heap_expand") {
            return code;
        }
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

/// See `rtvm_heap_shrink` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `committed_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_heap_shrink(
    vm: *mut Vm,
    target: usize,
    committed_out: *mut usize,
) -> c_int {
    guard("rtvm_heap_shrink", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_heap_shrink: vm is NULL");
        };
        if let Err(code) = super::refuse_forked(vm, "rtvm_heap_shrink") {
            return code;
        }
        match vm.shrink_heap(target) {
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

/// See `rtvm_trim_native_heap` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; the out-pointers NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_trim_native_heap(
    vm: *mut Vm,
    rss_before: *mut usize,
    rss_after: *mut usize,
) -> c_int {
    guard("rtvm_trim_native_heap", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_trim_native_heap: vm is NULL");
        };
        match vm.trim_native_heap() {
            Some(r) => {
                for (out, v) in [(rss_before, r.rss_before), (rss_after, r.rss_after)] {
                    if !out.is_null() {
                        // SAFETY: checked non-NULL; the caller guarantees it is writable.
                        unsafe { *out = usize::try_from(v).unwrap_or(usize::MAX) };
                    }
                }
                OK
            }
            None => fail(
                EINVAL,
                "rtvm_trim_native_heap: the C allocator cannot be trimmed (it is not glibc's)",
            ),
        }
    })
}

/// See `rtvm_heap_get_stats` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_heap_get_stats(vm: *mut Vm, out: *mut RtvmHeapStats) -> c_int {
    guard("rtvm_heap_get_stats", || {
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
    guard("rtvm_heap_resident", || {
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
    guard("rtvm_release_pretouch", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_release_pretouch: vm is NULL");
        };
        if let Err(code) = super::refuse_forked(vm, "rtvm_release_pretouch") {
            return code;
        }
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

/// `rtvm_nursery`: the nursery during one `rtvm_with_nursery` call (a `&Nursery` behind an
/// opaque pointer, valid only during the callback).
#[derive(Debug)]
pub struct RtvmNursery {
    _opaque: [u8; 0],
}

thread_local! {
    /// This thread is inside an `rtvm_with_nursery` callback (a nested scope would wait for
    /// itself).
    static IN_NURSERY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// See `rtvm_with_nursery` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `f` a function that may be called with `ctx`
/// and a nursery pointer valid during the call only.
#[no_mangle]
pub unsafe extern "C" fn rtvm_with_nursery(
    vm: *mut Vm,
    f: Option<unsafe extern "C" fn(*mut c_void, *mut RtvmNursery)>,
    ctx: *mut c_void,
) -> c_int {
    guard("rtvm_with_nursery", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_with_nursery: vm is NULL");
        };
        let Some(f) = f else {
            return fail(EINVAL, "rtvm_with_nursery: fn is NULL");
        };
        if vm.heap_stats().nursery == 0 {
            return fail(
                EINVAL,
                "rtvm_with_nursery: the heap has no nursery (it needs -Xmn or -XX:NewSize)",
            );
        }
        if IN_NURSERY.with(|n| n.replace(true)) {
            return fail(
                EINVAL,
                "rtvm_with_nursery: called from inside a nursery scope of this thread",
            );
        }
        vm.heap().with_nursery(|n| {
            let p = (n as *const crate::Nursery<'_>)
                .cast_mut()
                .cast::<RtvmNursery>();
            // SAFETY: the embedder's function, called as rtvm.h specifies: the nursery pointer
            // is valid for the call (the scope lasts until it returns).
            unsafe { f(ctx, p) }
        });
        IN_NURSERY.with(|n| n.set(false));
        OK
    })
}

/// The nursery behind an `rtvm_nursery` pointer.
///
/// # Safety
/// `n` must be NULL or the pointer an `rtvm_with_nursery` callback received, during the call.
unsafe fn nursery<'a>(n: *mut RtvmNursery) -> Option<&'a crate::Nursery<'a>> {
    // SAFETY: forwarded to the caller: it points to the Nursery rtvm_with_nursery lent.
    unsafe { n.cast::<crate::Nursery<'a>>().as_ref() }
}

/// See `rtvm_nursery_allocate` in rtvm.h.
///
/// # Safety
/// `n` must be the nursery an `rtvm_with_nursery` callback received, during the call.
#[no_mangle]
pub unsafe extern "C" fn rtvm_nursery_allocate(n: *mut RtvmNursery, bytes: usize) -> *mut c_void {
    // SAFETY: forwarded to the caller.
    let Some(n) = (unsafe { nursery(n) }) else {
        set_error("rtvm_nursery_allocate: nursery is NULL");
        return std::ptr::null_mut();
    };
    match n.allocate(bytes) {
        Some(b) => b.as_ptr().cast(),
        None => {
            set_error(&format!(
                "rtvm_nursery_allocate: {bytes} bytes do not fit the nursery ({} bytes used of {})",
                n.used(),
                n.capacity()
            ));
            std::ptr::null_mut()
        }
    }
}

/// See `rtvm_nursery_get_usage` in rtvm.h.
///
/// # Safety
/// `n` must be the nursery an `rtvm_with_nursery` callback received, during the call; `used`
/// and `capacity` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_nursery_get_usage(
    n: *mut RtvmNursery,
    used: *mut usize,
    capacity: *mut usize,
) -> c_int {
    // SAFETY: forwarded to the caller.
    let Some(n) = (unsafe { nursery(n) }) else {
        return fail(EINVAL, "rtvm_nursery_get_usage: nursery is NULL");
    };
    // SAFETY: each checked non-NULL; the caller guarantees they are writable.
    unsafe {
        if !used.is_null() {
            *used = n.used();
        }
        if !capacity.is_null() {
            *capacity = n.capacity();
        }
    }
    OK
}
