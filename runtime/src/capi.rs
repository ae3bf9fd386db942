//! The C API declared in `include/rtvm.h`, as Rust declarations (the `cdylib` and
//! `staticlib` export these symbols).
//!
//! Every entry point catches panics (they never cross into C: they become `RTVM_ERR` with a
//! message) and records failures for `rtvm_last_error` in a thread-local buffer.
//! Pointers from C are checked for NULL; beyond that they must be what the header says.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{CreateError, ErrorCode};
use crate::{InitArgs, Vm, VmThread};
use rtvm_os_linux::ForeignCall;

const OK: c_int = 0;
const ERR: c_int = ErrorCode::Err.code();
const ENOMEM: c_int = ErrorCode::NoMem.code();
const EINVAL: c_int = ErrorCode::Inval.code();

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(message: &str) {
    let clean: String = message.trim_end().chars().filter(|&c| c != '\0').collect();
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(clean).unwrap_or_default());
}

fn fail(code: c_int, message: &str) -> c_int {
    set_error(message);
    code
}

/// Runs `f`, turning a panic into `RTVM_ERR`.
fn guard(f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(code) => code,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            fail(ERR, &format!("internal error in rtvm: {what}"))
        }
    }
}

/// Mirrors `rtvm_init_args`.
#[repr(C)]
#[derive(Debug)]
pub struct RtvmInitArgs {
    options: *const *const c_char,
    n_options: usize,
    ignore_unrecognized: c_int,
}

/// Mirrors `rtvm_heap_stats`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RtvmHeapStats {
    reserved: usize,
    committed: usize,
    used: usize,
    resident: usize,
}

/// `rtvm_thread`.
#[derive(Debug)]
pub struct RtvmThread(VmThread);

fn error_message(e: &CreateError) -> String {
    e.message.trim_end().to_owned()
}

/// See `rtvm_create` in rtvm.h.
///
/// # Safety
/// `args` must point to a valid `rtvm_init_args` whose `options` holds `n_options` valid
/// NUL-terminated strings; `vm_out` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn rtvm_create(args: *const RtvmInitArgs, vm_out: *mut *mut Vm) -> c_int {
    guard(|| {
        if args.is_null() || vm_out.is_null() {
            return fail(EINVAL, "rtvm_create: args and vm_out must not be NULL");
        }
        // SAFETY: checked non-NULL; the caller guarantees it points to rtvm_init_args.
        let a = unsafe { &*args };
        if a.n_options > 0 && a.options.is_null() {
            return fail(
                EINVAL,
                "rtvm_create: options is NULL but n_options is not 0",
            );
        }
        let mut options = Vec::with_capacity(a.n_options);
        for i in 0..a.n_options {
            // SAFETY: the caller guarantees `options` has `n_options` entries.
            let p = unsafe { *a.options.add(i) };
            if p.is_null() {
                return fail(EINVAL, &format!("rtvm_create: option {i} is NULL"));
            }
            // SAFETY: the caller guarantees each entry is a NUL-terminated string. Bytes that
            // are not UTF-8 become U+FFFD: the option earns the message its text earns.
            options.push(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
        }
        match Vm::create(InitArgs::new(options).ignore_unrecognized(a.ignore_unrecognized != 0)) {
            Ok(vm) => {
                // SAFETY: checked non-NULL; the caller guarantees it is writable.
                unsafe { *vm_out = Box::into_raw(Box::new(vm)) };
                OK
            }
            Err(e) => fail(e.code.code(), &error_message(&e)),
        }
    })
}

/// See `rtvm_destroy` in rtvm.h.
///
/// # Safety
/// `vm` must be NULL or a VM from `rtvm_create` not destroyed before; no other thread may
/// use it during or after the call.
#[no_mangle]
pub unsafe extern "C" fn rtvm_destroy(vm: *mut Vm) -> c_int {
    guard(|| {
        if vm.is_null() {
            return OK;
        }
        // SAFETY: the caller passes a live VM from rtvm_create. Only shared references are
        // made until the shutdown is complete, so VM threads that still use the pointer
        // (rtvm_thread_start during the destroy) are fine.
        let shared = unsafe { &*vm };
        match shared.shutdown() {
            Ok(()) => {}
            Err(e @ crate::ShutdownError::OnVmThread { .. }) => return fail(ERR, &e.to_string()),
            Err(e) => {
                // SAFETY: the shutdown is complete; nothing uses the VM any more.
                drop(unsafe { Box::from_raw(vm) });
                return fail(ERR, &e.to_string());
            }
        }
        // SAFETY: the shutdown is complete: every VM thread has ended, so nothing but the
        // caller holds the pointer, which it gives up with this call.
        drop(unsafe { Box::from_raw(vm) });
        OK
    })
}

/// See `rtvm_last_error` in rtvm.h.
#[no_mangle]
pub extern "C" fn rtvm_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Borrows the VM behind a C pointer.
///
/// # Safety
/// `vm` must be NULL or a live VM from `rtvm_create`.
unsafe fn vm_ref<'a>(vm: *mut Vm) -> Option<&'a Vm> {
    // SAFETY: forwarded to the caller.
    unsafe { vm.as_ref() }
}

/// See `rtvm_heap_allocate` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_heap_allocate(vm: *mut Vm, bytes: usize) -> *mut c_void {
    let mut out = std::ptr::null_mut();
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_heap_allocate: vm is NULL");
        };
        match vm.allocate(bytes) {
            Some(b) => {
                out = b.as_ptr().cast();
                OK
            }
            None => {
                let s = vm.heap_stats();
                fail(ENOMEM, &format!("rtvm_heap_allocate: {bytes} bytes do not fit the committed heap ({} bytes used of {} committed)", s.used, s.committed))
            }
        }
    });
    out
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
            Err(e) => {
                let code = match &e {
                    crate::HeapError::Commit(os) | crate::HeapError::Pretouch(os)
                        if os.is_out_of_memory() =>
                    {
                        ENOMEM
                    }
                    crate::HeapError::Exhausted { .. } => ENOMEM,
                    _ => ERR,
                };
                fail(code, &e.to_string())
            }
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
                resident: vm.heap().resident_bytes(),
            }
        };
        OK
    })
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
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_thread_start: vm is NULL");
        };
        let Some(f) = f else {
            return fail(EINVAL, "rtvm_thread_start: fn is NULL");
        };
        if name.is_null() || thread_out.is_null() {
            return fail(
                EINVAL,
                "rtvm_thread_start: name and thread_out must not be NULL",
            );
        }
        // SAFETY: checked non-NULL; the caller guarantees a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned();
        // The C body is called last, from a frame with nothing to drop: it may end its thread
        // with pthread_exit.
        let body = crate::threads::Body::Foreign(ForeignCall { f, arg });
        match vm.thread(&name).spawn_body(body) {
            Ok(t) => {
                // SAFETY: checked non-NULL; the caller guarantees it is writable.
                unsafe { *thread_out = Box::into_raw(Box::new(RtvmThread(t))) };
                OK
            }
            Err(e) => fail(thread_error_code(&e), &e.to_string()),
        }
    })
}

/// The code for a thread that could not start: a limit, memory, or a VM shutting down.
fn thread_error_code(e: &crate::ThreadError) -> c_int {
    match e {
        crate::ThreadError::Start { errno, .. } if *errno == rtvm_os_linux::Errno::EAGAIN => {
            ErrorCode::Again.code()
        }
        crate::ThreadError::Start { errno, .. } if *errno == rtvm_os_linux::Errno::ENOMEM => ENOMEM,
        crate::ThreadError::Start { errno, .. } if *errno == rtvm_os_linux::Errno::EINVAL => EINVAL,
        crate::ThreadError::ShuttingDown { .. } => ErrorCode::ShuttingDown.code(),
        _ => ERR,
    }
}

/// See `rtvm_thread_join` in rtvm.h.
///
/// # Safety
/// `thread` must be a handle from `rtvm_thread_start`, joined at most once.
#[no_mangle]
pub unsafe extern "C" fn rtvm_thread_join(thread: *mut RtvmThread) -> c_int {
    guard(|| {
        if thread.is_null() {
            return fail(EINVAL, "rtvm_thread_join: thread is NULL");
        }
        // SAFETY: the caller passes a handle from rtvm_thread_start, owned by us from here.
        let t = unsafe { Box::from_raw(thread) };
        match t.0.join() {
            Ok(()) => OK,
            Err(e) => fail(ERR, &e.to_string()),
        }
    })
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
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_nmt_summary: vm is NULL");
        };
        let Some(summary) = vm.native_memory_summary() else {
            return fail(
                EINVAL,
                "Native memory tracking is not enabled (use -XX:NativeMemoryTracking=summary)",
            );
        };
        let text = summary.report();
        let need = text.len() + 1;
        if !needed.is_null() {
            // SAFETY: checked non-NULL; the caller guarantees it is writable.
            unsafe { *needed = need };
        }
        if buf.is_null() || len < need {
            return fail(
                EINVAL,
                &format!("rtvm_nmt_summary: the buffer needs {need} bytes, it has {len}"),
            );
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
