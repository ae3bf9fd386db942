//! Reports from C: native memory tracking and diagnostic commands, with one size-query
//! idiom (a call with no or too small a buffer keeps the text it made, and the same thread's
//! next call for the same VM and request with a buffer big enough receives exactly that text).

use std::cell::RefCell;
use std::ffi::{c_char, c_int};

use super::{c_text, fail, guard, vm_ref, EINVAL, OK};
use crate::Vm;

thread_local! {
    /// The text a size query made, for the same thread's next call with a buffer:
    /// `(VM id, request, text)`. Keyed by the VM's id, never its address: a later VM
    /// allocated where a destroyed one was must not get the destroyed VM's text.
    static SNAPSHOT: RefCell<Option<(u64, String, String)>> = const { RefCell::new(None) };
}

/// Delivers a report into a C buffer with the size-query idiom: `produce` makes the text
/// (or fails with a code, its message set) unless a snapshot of the same request fits.
///
/// # Safety
/// `buf` writable for `len` bytes (or NULL), `needed` NULL or writable.
unsafe fn deliver(
    what: &str,
    key: (u64, &str),
    produce: impl FnOnce() -> Result<String, c_int>,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> c_int {
    let snapshot = SNAPSHOT
        .try_with(|s| {
            let mut s = s.borrow_mut();
            match s.take() {
                Some((k, r, text))
                    if k == key.0 && r == key.1 && !buf.is_null() && len > text.len() =>
                {
                    Some(text)
                }
                _ => None,
            }
        })
        .ok()
        .flatten();
    let text = match snapshot {
        Some(text) => text,
        None => match produce() {
            Ok(t) => t,
            Err(code) => return code,
        },
    };
    let need = text.len() + 1;
    if !needed.is_null() {
        // SAFETY: checked non-NULL; the caller guarantees it is writable.
        unsafe { *needed = need };
    }
    if buf.is_null() || len < need {
        let message = format!("{what}: the buffer needs {need} bytes, it has {len}");
        // Keep this text for the call that brings a buffer of `need` bytes.
        let _ = SNAPSHOT.try_with(|s| *s.borrow_mut() = Some((key.0, key.1.to_owned(), text)));
        return fail(EINVAL, &message);
    }
    // SAFETY: `buf` is writable for `len >= need` bytes (caller's guarantee, checked size);
    // the source is our own string.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        *buf.add(text.len()) = 0;
    }
    OK
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
        let produce = || match vm_ref.native_memory_summary() {
            Some(summary) => Ok(summary.report()),
            None => Err(fail(
                EINVAL,
                "Native memory tracking is not enabled (use -XX:NativeMemoryTracking=summary)",
            )),
        };
        // SAFETY: forwarded to the caller.
        unsafe {
            deliver(
                "rtvm_nmt_summary",
                (vm_ref.id(), ""),
                produce,
                buf,
                len,
                needed,
            )
        }
    })
}

/// See `rtvm_diagnostic_command` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `command` a NUL-terminated string; `buf`
/// writable for `len` bytes (or NULL with `len` 0); `needed` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_diagnostic_command(
    vm: *mut Vm,
    command: *const c_char,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> c_int {
    guard("rtvm_diagnostic_command", || {
        // SAFETY: forwarded to the caller.
        let Some(vm_ref) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_diagnostic_command: vm is NULL");
        };
        if command.is_null() {
            return fail(EINVAL, "rtvm_diagnostic_command: command is NULL");
        }
        if let Err(code) = super::refuse_forked(vm_ref, "rtvm_diagnostic_command") {
            return code;
        }
        // SAFETY: the caller guarantees a NUL-terminated string.
        let line = unsafe { c_text(command) };
        let produce = || {
            vm_ref.diagnostic_command(&line).map_err(|e| {
                // HotSpot's argument errors are the caller's; a command that failed is not.
                let code = if e.starts_with("java.lang.IllegalArgumentException") {
                    EINVAL
                } else {
                    super::ERR
                };
                fail(code, e.trim_end())
            })
        };
        // SAFETY: forwarded to the caller.
        unsafe {
            deliver(
                "rtvm_diagnostic_command",
                (vm_ref.id(), &line),
                produce,
                buf,
                len,
                needed,
            )
        }
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

    /// A snapshot taken for one VM is not delivered for another (a VM created later at the
    /// same address included): the key is the VM's id.
    #[test]
    fn snapshots_are_keyed_by_vm_id_and_request() {
        SNAPSHOT.with(|s| *s.borrow_mut() = Some((1, String::new(), "old report".into())));
        let mut buf = [0 as c_char; 64];
        // SAFETY: a local buffer of its length; needed NULL.
        let rc = unsafe {
            deliver(
                "t",
                (2, ""),
                || Ok("fresh".into()),
                buf.as_mut_ptr(),
                buf.len(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, OK);
        // SAFETY: deliver wrote a NUL-terminated string.
        let got = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(got.to_str().unwrap(), "fresh");
        SNAPSHOT.with(|s| *s.borrow_mut() = Some((2, "VM.uptime".into(), "kept".into())));
        // SAFETY: as above.
        let rc = unsafe {
            deliver(
                "t",
                (2, "help"),
                || Ok("other".into()),
                buf.as_mut_ptr(),
                buf.len(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, OK);
        // SAFETY: as above.
        let got = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(
            got.to_str().unwrap(),
            "other",
            "another request's snapshot is not used"
        );
    }
}
