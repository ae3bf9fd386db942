//! Native memory tracking from C.

use std::cell::RefCell;
use std::ffi::{c_char, c_int};

use super::{fail, guard, vm_ref, EINVAL, OK};
use crate::Vm;

thread_local! {
    /// The report a size query took (`rtvm_nmt_summary` with no or too small a buffer), for
    /// the same thread's next call with a buffer: `(VM id, report)`. Keyed by the VM's id,
    /// never its address: a later VM allocated where a destroyed one was must not get the
    /// destroyed VM's report.
    static NMT_SNAPSHOT: RefCell<Option<(u64, String)>> = const { RefCell::new(None) };
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
    guard("rtvm_nmt_summary", || {
        // SAFETY: forwarded to the caller.
        let Some(vm_ref) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_nmt_summary: vm is NULL");
        };
        if let Err(code) = super::refuse_forked(vm_ref, "rtvm_nmt_summary") {
            return code;
        }
        let key = vm_ref.id();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InitArgs;

    fn vm(options: &[&str]) -> Vm {
        Vm::create(InitArgs::new(options.iter().copied())).expect("create a VM")
    }

    /// A size query whose fetch never comes, then a new VM at the very same address (one
    /// stack slot, reused): the new VM must get its own answer, not the old VM's report.
    #[test]
    fn a_snapshot_is_never_given_to_a_later_vm_at_the_same_address() {
        let mut slot = vm(&["-Xmx64m", "-XX:NativeMemoryTracking=summary"]);
        let p: *mut Vm = &mut slot;
        let mut needed = 0;
        // SAFETY: `p` points to a live VM; no buffer, a writable `needed`.
        let rc = unsafe { rtvm_nmt_summary(p, std::ptr::null_mut(), 0, &mut needed) };
        assert_eq!(rc, EINVAL);
        assert!(needed > 0);
        slot.shutdown().unwrap();
        // The old VM is dropped here and the new one moved into the same place.
        slot = vm(&["-Xmx128m"]);
        assert_eq!(p, &mut slot as *mut Vm, "the same address");
        let mut buf = vec![0 as c_char; 1 << 16];
        // SAFETY: `p` points to the new live VM; `buf` is writable for its length.
        let rc = unsafe { rtvm_nmt_summary(p, buf.as_mut_ptr(), buf.len(), &mut needed) };
        assert_eq!(rc, EINVAL, "NMT is off in the new VM");
        slot.shutdown().unwrap();
        slot = vm(&["-Xmx128m", "-XX:NativeMemoryTracking=summary"]);
        // SAFETY: as above.
        let rc = unsafe { rtvm_nmt_summary(p, buf.as_mut_ptr(), buf.len(), &mut needed) };
        assert_eq!(rc, OK);
        // SAFETY: rtvm_nmt_summary wrote a NUL-terminated report into `buf`.
        let report = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
        assert!(report.contains("Java Heap (reserved=134217728"), "{report}");
        slot.shutdown().unwrap();
    }
}
