//! Creating and destroying a VM from C.

use std::ffi::{c_char, c_int, c_void, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;

use super::{fail, guard, EINVAL, ENOMEM, ERR, EVERSION, OK};
use crate::error::{CreateError, ErrorCode};
use crate::output::{Output, Stream};
use crate::{InitArgs, Vm};

/// `RTVM_VERSION_1`: the first versioned ABI (major 1, minor 0).
pub const RTVM_VERSION_1: c_int = 0x0001_0000;

/// The C output hook and its context.
#[derive(Clone, Copy)]
struct CHook {
    f: unsafe extern "C" fn(*mut c_void, c_int, *const c_char, usize),
    context: *mut c_void,
}

// SAFETY: rtvm.h requires the hook to be callable from any thread, concurrently, with the
// context it was given; rtvm only passes the pointer back to it.
unsafe impl Send for CHook {}
// SAFETY: as above.
unsafe impl Sync for CHook {}

impl CHook {
    fn call(&self, stream: Stream, text: &str) {
        let code = match stream {
            Stream::Stdout => 1,
            Stream::Stderr => 2,
        };
        // NUL-terminated for convenience; the length excludes the NUL (text may hold no NUL:
        // interior NULs are cut there).
        let text = CString::new(text).unwrap_or_else(|e| {
            let n = e.nul_position();
            CString::new(&e.into_vec()[..n]).unwrap_or_default()
        });
        // SAFETY: the embedder's hook, called as rtvm.h specifies: a NUL-terminated string of
        // `len` bytes, valid for the call.
        unsafe { (self.f)(self.context, code, text.as_ptr(), text.as_bytes().len()) }
    }
}

/// Mirrors `rtvm_init_args` (`RTVM_VERSION_1`).
#[repr(C)]
#[derive(Debug)]
pub struct RtvmInitArgs {
    version: c_int,
    n_options: usize,
    options: *const *const c_char,
    ignore_unrecognized: c_int,
    output: Option<unsafe extern "C" fn(*mut c_void, c_int, *const c_char, usize)>,
    output_context: *mut c_void,
}

fn error_message(e: &CreateError) -> String {
    match e.code {
        ErrorCode::Exited => "rtvm_create: the options asked to print and stop (-version, -Xlog:help, -XX:+PrintFlagsInitial); the output went to the output hook and no VM was created".into(),
        _ => e.message.trim_end().to_owned(),
    }
}

/// `RTVM_EVERSION` (with its message) unless `version` is one this library knows.
fn check_version(what: &str, version: c_int) -> Result<(), c_int> {
    if version == RTVM_VERSION_1 {
        return Ok(());
    }
    Err(fail(
        EVERSION,
        &format!("{what}: rtvm_init_args version {version:#x} is not supported (this library knows {RTVM_VERSION_1:#x}); set it to RTVM_VERSION_1"),
    ))
}

/// See `rtvm_get_version` in rtvm.h.
#[no_mangle]
pub extern "C" fn rtvm_get_version() -> c_int {
    RTVM_VERSION_1
}

/// See `rtvm_get_default_init_args` in rtvm.h.
///
/// # Safety
/// `args` must be NULL or valid for reads and writes of an `rtvm_init_args`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_get_default_init_args(args: *mut RtvmInitArgs) -> c_int {
    guard("rtvm_get_default_init_args", || {
        if args.is_null() {
            return fail(EINVAL, "rtvm_get_default_init_args: args is NULL");
        }
        // SAFETY: checked non-NULL; the caller guarantees it is an rtvm_init_args. Only the
        // version field is read before it is known to be one this library understands.
        let version = unsafe { (*args).version };
        if let Err(code) = check_version("rtvm_get_default_init_args", version) {
            return code;
        }
        // SAFETY: as above; a version-1 struct is writable in full.
        unsafe {
            *args = RtvmInitArgs {
                version,
                n_options: 0,
                options: std::ptr::null(),
                ignore_unrecognized: 0,
                output: None,
                output_context: std::ptr::null_mut(),
            }
        };
        OK
    })
}

/// See `rtvm_create` in rtvm.h.
///
/// # Safety
/// `args` must point to a valid `rtvm_init_args` whose `options` holds `n_options` valid
/// NUL-terminated strings; `vm_out` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn rtvm_create(args: *const RtvmInitArgs, vm_out: *mut *mut Vm) -> c_int {
    guard("rtvm_create", || {
        if args.is_null() || vm_out.is_null() {
            return fail(EINVAL, "rtvm_create: args and vm_out must not be NULL");
        }
        // SAFETY: checked non-NULL; the caller guarantees it points to rtvm_init_args (whose
        // first field, the version, is read before anything else).
        let version = unsafe { (*args).version };
        if let Err(code) = check_version("rtvm_create", version) {
            return code;
        }
        // SAFETY: a version-1 struct, as checked.
        let a = unsafe { &*args };
        if a.n_options > 0 && a.options.is_null() {
            return fail(
                EINVAL,
                "rtvm_create: options is NULL but n_options is not 0",
            );
        }
        let mut options = Vec::new();
        if options.try_reserve(a.n_options).is_err() {
            return fail(
                ENOMEM,
                &format!("rtvm_create: no memory for {} options", a.n_options),
            );
        }
        for i in 0..a.n_options {
            // SAFETY: the caller guarantees `options` has `n_options` entries.
            let p = unsafe { *a.options.add(i) };
            if p.is_null() {
                return fail(EINVAL, &format!("rtvm_create: option {i} is NULL"));
            }
            // SAFETY: the caller guarantees each entry is a NUL-terminated string. Bytes that
            // are not UTF-8 become U+FFFD (the option earns the message its text earns),
            // except in an -Xlog file name (`InitArgs::from_os`).
            let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
            options.push(OsStr::from_bytes(bytes));
        }
        let mut init = InitArgs::from_os(options).ignore_unrecognized(a.ignore_unrecognized != 0);
        if let Some(f) = a.output {
            let hook = CHook {
                f,
                context: a.output_context,
            };
            init.output = Output::hook(move |stream, text| hook.call(stream, text));
        }
        match Vm::create(init) {
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
/// `vm` must be NULL or a VM from `rtvm_create` not destroyed before; no thread may use it
/// after the call.
#[no_mangle]
pub unsafe extern "C" fn rtvm_destroy(vm: *mut Vm) -> c_int {
    guard("rtvm_destroy", || {
        if vm.is_null() {
            return OK;
        }
        // SAFETY: the caller passes a live VM from rtvm_create. Only shared references are
        // made until the shutdown is complete, so VM threads that still use the pointer
        // (rtvm_thread_start during the destroy) are fine.
        let shared = unsafe { &*vm };
        // A child of fork(): nothing of the VM can be torn down here; it is left as it is.
        if let Err(code) = super::refuse_forked(shared, "rtvm_destroy") {
            return code;
        }
        match shared.shutdown() {
            Ok(()) => {}
            Err(e @ crate::ShutdownError::OnVmThread { .. }) => return fail(ERR, &e.to_string()),
            // Nothing was done: the world stays stopped by this very thread.
            Err(e @ crate::ShutdownError::WorldStopped) => return fail(EINVAL, &e.to_string()),
            Err(e) => {
                // SAFETY: the shutdown is complete; nothing uses the VM any more.
                drop(unsafe { Box::from_raw(vm) });
                return fail(ERR, &e.to_string());
            }
        }
        // SAFETY: the shutdown is complete: every VM thread has ended, so nothing but the
        // caller (and attached threads, which the header forbids to use it from now on) holds
        // the pointer, which it gives up with this call.
        drop(unsafe { Box::from_raw(vm) });
        OK
    })
}
