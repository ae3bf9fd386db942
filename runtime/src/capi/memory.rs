//! Embedder memories from C.

use std::ffi::{c_char, c_int, c_void};

use super::{c_text, code_of, fail, guard, vm_ref, EINVAL, OK};
use crate::{MemoryRequest, Vm, VmMemory};

/// `rtvm_memory`: locked so that any thread may grow it or ask for its figures.
#[derive(Debug)]
pub struct RtvmMemory(std::sync::Mutex<VmMemory>);

impl RtvmMemory {
    fn lock(&self) -> crate::safepoint::Locked<'_, VmMemory> {
        // A panic while growing cannot leave the memory inconsistent (a growth publishes its
        // size last): the lock's poison is ignored.
        crate::safepoint::lock(&self.0)
    }
}

/// Mirrors `rtvm_memory_info`.
#[repr(C)]
#[derive(Debug)]
pub struct RtvmMemoryInfo {
    base: *mut c_void,
    size: usize,
    capacity: usize,
    guard: usize,
    page_size: usize,
}

/// See `rtvm_memory_reserve` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `category` a NUL-terminated string;
/// `memory_out` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_memory_reserve(
    vm: *mut Vm,
    category: *const c_char,
    capacity: usize,
    guard_bytes: usize,
    initial: usize,
    memory_out: *mut *mut RtvmMemory,
) -> c_int {
    guard("rtvm_memory_reserve", || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_memory_reserve: vm is NULL");
        };
        if let Err(code) = super::refuse_forked(vm, "rtvm_memory_reserve") {
            return code;
        }
        if category.is_null() || memory_out.is_null() {
            return fail(
                EINVAL,
                "rtvm_memory_reserve: category and memory_out must not be NULL",
            );
        }
        // SAFETY: checked non-NULL; the caller guarantees a NUL-terminated string.
        let category = unsafe { c_text(category) };
        let request = MemoryRequest::new(category, capacity)
            .guard(guard_bytes)
            .initial(initial);
        match vm.handle().reserve_memory(request) {
            Ok(memory) => {
                let memory = Box::new(RtvmMemory(std::sync::Mutex::new(memory)));
                // SAFETY: checked non-NULL; the caller guarantees it is writable.
                unsafe { *memory_out = Box::into_raw(memory) };
                OK
            }
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_memory_grow` in rtvm.h.
///
/// # Safety
/// `memory` must be a handle from `rtvm_memory_reserve` not released yet.
#[no_mangle]
pub unsafe extern "C" fn rtvm_memory_grow(memory: *mut RtvmMemory, new_size: usize) -> c_int {
    guard("rtvm_memory_grow", || {
        // SAFETY: the caller passes a live handle.
        let Some(m) = (unsafe { memory.as_ref() }) else {
            return fail(EINVAL, "rtvm_memory_grow: memory is NULL");
        };
        match m.lock().grow_to(new_size) {
            Ok(()) => OK,
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_memory_discard` in rtvm.h.
///
/// # Safety
/// `memory` must be a live handle from `rtvm_memory_reserve`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_memory_discard(
    memory: *mut RtvmMemory,
    offset: usize,
    len: usize,
) -> c_int {
    guard("rtvm_memory_discard", || {
        // SAFETY: the caller passes a live handle.
        let Some(m) = (unsafe { memory.as_ref() }) else {
            return fail(EINVAL, "rtvm_memory_discard: memory is NULL");
        };
        match m.lock().discard(offset, len) {
            Ok(()) => OK,
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_memory_shrink` in rtvm.h.
///
/// # Safety
/// `memory` must be a live handle from `rtvm_memory_reserve`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_memory_shrink(memory: *mut RtvmMemory, new_size: usize) -> c_int {
    guard("rtvm_memory_shrink", || {
        // SAFETY: the caller passes a live handle.
        let Some(m) = (unsafe { memory.as_ref() }) else {
            return fail(EINVAL, "rtvm_memory_shrink: memory is NULL");
        };
        match m.lock().shrink_to(new_size) {
            Ok(()) => OK,
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_memory_get_info` in rtvm.h.
///
/// # Safety
/// `memory` must be a handle from `rtvm_memory_reserve` not released yet; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_memory_get_info(
    memory: *mut RtvmMemory,
    out: *mut RtvmMemoryInfo,
) -> c_int {
    guard("rtvm_memory_get_info", || {
        // SAFETY: the caller passes a live handle.
        let Some(m) = (unsafe { memory.as_ref() }) else {
            return fail(EINVAL, "rtvm_memory_get_info: memory is NULL");
        };
        if out.is_null() {
            return fail(EINVAL, "rtvm_memory_get_info: out is NULL");
        }
        let m = m.lock();
        // SAFETY: checked non-NULL; the caller guarantees it is writable.
        unsafe {
            *out = RtvmMemoryInfo {
                base: m.base().cast(),
                size: m.size(),
                capacity: m.capacity(),
                guard: m.guard(),
                page_size: m.page_size(),
            }
        };
        OK
    })
}

/// See `rtvm_memory_release` in rtvm.h.
///
/// # Safety
/// `memory` must be NULL or a handle from `rtvm_memory_reserve`, released at most once, with
/// no other call on it running.
#[no_mangle]
pub unsafe extern "C" fn rtvm_memory_release(memory: *mut RtvmMemory) -> c_int {
    guard("rtvm_memory_release", || {
        if memory.is_null() {
            return OK;
        }
        // SAFETY: the caller passes a handle from rtvm_memory_reserve, owned by us from here.
        let m = unsafe { Box::from_raw(memory) };
        let mut m = m.0.into_inner().unwrap_or_else(|p| p.into_inner());
        // A background pretouch of it is waited for (the drop would wait too); its failure is
        // reported, and the memory is unmapped either way.
        let waited = m.wait_for_pretouch();
        drop(m);
        match waited {
            Ok(_) => OK,
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}
