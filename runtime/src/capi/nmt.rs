//! Native memory tracking from C.

use std::cell::RefCell;
use std::ffi::{c_char, c_int};

use super::{fail, guard, vm_ref, EINVAL, OK};
use crate::Vm;

thread_local! {
    /// The report a size query took (`rtvm_nmt_summary` with no or too small a buffer), for
    /// the same thread's next call with a buffer: `(VM address, report)`.
    static NMT_SNAPSHOT: RefCell<Option<(usize, String)>> = const { RefCell::new(None) };
}

/// See `rtvm_nmt_summary` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `buf` writable for `len` bytes (or NULL with
/// `len` 0); `needed` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_nmt_summary(
    vm: *mut Vm,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm_ref) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_nmt_summary: vm is NULL");
        };
        let key = vm as usize;
        // The snapshot a size query took on this thread, if it fits the buffer now given;
        // else a fresh report.
        let snapshot = NMT_SNAPSHOT
            .try_with(|s| {
                let mut s = s.borrow_mut();
                match s.take() {
                    Some((k, text)) if k == key && !buf.is_null() && len > text.len() => Some(text),
                    _ => None,
                }
            })
            .ok()
            .flatten();
        let text = match snapshot {
            Some(text) => text,
            None => match vm_ref.native_memory_summary() {
                Some(summary) => summary.report(),
                None => return fail(
                    EINVAL,
                    "Native memory tracking is not enabled (use -XX:NativeMemoryTracking=summary)",
                ),
            },
        };
        let need = text.len() + 1;
        if !needed.is_null() {
            // SAFETY: checked non-NULL; the caller guarantees it is writable.
            unsafe { *needed = need };
        }
        if buf.is_null() || len < need {
            let message = format!("rtvm_nmt_summary: the buffer needs {need} bytes, it has {len}");
            // Keep this report for the call that brings a buffer of `need` bytes.
            let _ = NMT_SNAPSHOT.try_with(|s| *s.borrow_mut() = Some((key, text)));
            return fail(EINVAL, &message);
        }
        // SAFETY: `buf` is writable for `len >= need` bytes (caller's guarantee, checked
        // size); the source is our own string.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
            *buf.add(text.len()) = 0;
        }
        OK
    })
}
