//! The embedder's diagnostic commands from C: `rtvm_register_diagnostic_command` copies a
//! descriptor into a [`DiagnosticCommand`] whose handler calls the C function with an
//! argument view and an output writer that live for the call.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{c_text, code_of, fail, guard, vm_ref, EINVAL, EVERSION, OK};
use crate::service::dcmd::Value;
use crate::{DcmdArguments, DcmdParam, DcmdType, DiagnosticCommand, Vm};

const VERSION_1: c_int = 0x0001_0000;

/// Mirrors `rtvm_dcmd_param`.
#[repr(C)]
#[derive(Debug)]
pub struct RtvmDcmdParam {
    name: *const c_char,
    description: *const c_char,
    ty: c_int,
    mandatory: c_int,
    default_value: *const c_char,
}

type DcmdFn = unsafe extern "C" fn(*mut c_void, *const RtvmDcmdArgs, *mut RtvmDcmdOutput) -> c_int;

/// Mirrors `rtvm_dcmd_desc`.
#[repr(C)]
#[derive(Debug)]
pub struct RtvmDcmdDesc {
    version: c_int,
    name: *const c_char,
    description: *const c_char,
    impact: *const c_char,
    permission: *const c_char,
    n_arguments: usize,
    arguments: *const RtvmDcmdParam,
    n_options: usize,
    options: *const RtvmDcmdParam,
    f: Option<DcmdFn>,
    ctx: *mut c_void,
    release: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// `rtvm_dcmd_args`: the values of one run, with C strings for the `STRING` ones.
#[derive(Debug)]
pub struct RtvmDcmdArgs<'a> {
    args: &'a DcmdArguments,
    types: &'a HashMap<String, DcmdType>,
    strings: HashMap<&'a str, CString>,
}

/// `rtvm_dcmd_output`: what the command prints, and its error message.
#[derive(Debug)]
pub struct RtvmDcmdOutput<'a> {
    text: &'a mut String,
    error: Option<String>,
}

/// The C side of a command: its function and context, given back with `release` once rtvm
/// no longer needs it (only if the registration succeeded: `armed`).
struct CHandler {
    f: DcmdFn,
    ctx: *mut c_void,
    release: Option<unsafe extern "C" fn(*mut c_void)>,
    armed: Arc<AtomicBool>,
    name: String,
    types: HashMap<String, DcmdType>,
}

// SAFETY: rtvm.h makes the function and its context callable from any thread, concurrently
// (runs may overlap); rtvm only passes the pointer back.
unsafe impl Send for CHandler {}
// SAFETY: as above: the handler is only ever called, never mutated.
unsafe impl Sync for CHandler {}

impl Drop for CHandler {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            if self.armed.load(Ordering::Acquire) {
                // SAFETY: the embedder's function with its own context, once: no run of the
                // command is left (each holds the handler) and the table dropped it.
                unsafe { release(self.ctx) };
            }
        }
    }
}

impl CHandler {
    fn call(&self, args: &DcmdArguments, out: &mut String) -> Result<(), String> {
        let strings = args
            .names()
            .filter_map(|n| match args.value(n) {
                Some(Value::String(s)) => {
                    let bytes: Vec<u8> = s.bytes().take_while(|&b| b != 0).collect();
                    Some((n, CString::new(bytes).unwrap_or_default()))
                }
                _ => None,
            })
            .collect();
        let view = RtvmDcmdArgs {
            args,
            types: &self.types,
            strings,
        };
        let mut output = RtvmDcmdOutput {
            text: out,
            error: None,
        };
        // SAFETY: the embedder's function with its own context; the view and the writer
        // live for the call (rtvm.h: valid only during it).
        let rc = unsafe { (self.f)(self.ctx, &view, &mut output) };
        if rc == 0 {
            return Ok(());
        }
        Err(output
            .error
            .take()
            .unwrap_or_else(|| format!("diagnostic command {} failed ({rc})", self.name)))
    }
}

fn dcmd_type(ty: c_int) -> Option<DcmdType> {
    Some(match ty {
        1 => DcmdType::String,
        2 => DcmdType::Boolean,
        3 => DcmdType::Int,
        4 => DcmdType::MemorySize,
        5 => DcmdType::NanoTime,
        _ => return None,
    })
}

/// A C string that may be NULL.
///
/// # Safety
/// `p` NULL or NUL-terminated.
unsafe fn opt_text(p: *const c_char) -> Option<String> {
    // SAFETY: forwarded to the caller.
    (!p.is_null()).then(|| unsafe { c_text(p) })
}

/// Copies `n` parameters.
///
/// # Safety
/// `p` NULL (with `n` 0) or `n` readable `rtvm_dcmd_param`s with valid strings.
unsafe fn params(
    what: &str,
    p: *const RtvmDcmdParam,
    n: usize,
) -> Result<Vec<(DcmdParam, DcmdType)>, String> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(format!("{what}: {n} declared, the array is NULL"));
    }
    // SAFETY: the caller guarantees `n` readable entries.
    let all = unsafe { std::slice::from_raw_parts(p, n) };
    let mut out = Vec::with_capacity(n);
    for (i, p) in all.iter().enumerate() {
        if p.name.is_null() {
            return Err(format!("{what} {i}: name is NULL"));
        }
        // SAFETY: checked non-NULL; NUL-terminated by the caller's guarantee.
        let name = unsafe { c_text(p.name) };
        let Some(ty) = dcmd_type(p.ty) else {
            return Err(format!("{what} '{name}': type {} is not one of RTVM_DCMD_STRING, _BOOLEAN, _INT, _MEMORY_SIZE, _NANOTIME", p.ty));
        };
        // SAFETY: NULL or NUL-terminated (caller's guarantee).
        let description = unsafe { opt_text(p.description) }.unwrap_or_default();
        let mut param = DcmdParam::new(name, description, ty);
        if p.mandatory != 0 {
            param = param.mandatory();
        }
        // SAFETY: NULL or NUL-terminated (caller's guarantee).
        if let Some(d) = unsafe { opt_text(p.default_value) } {
            param = param.default_value(d);
        }
        out.push((param, ty));
    }
    Ok(out)
}

/// See `rtvm_register_diagnostic_command` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`; `desc` NULL or a readable descriptor whose
/// strings and arrays are valid for the call.
#[no_mangle]
pub unsafe extern "C" fn rtvm_register_diagnostic_command(
    vm: *mut Vm,
    desc: *const RtvmDcmdDesc,
) -> c_int {
    const WHAT: &str = "rtvm_register_diagnostic_command";
    guard(WHAT, || {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, &format!("{WHAT}: vm is NULL"));
        };
        // SAFETY: NULL or readable (caller's guarantee).
        let Some(d) = (unsafe { desc.as_ref() }) else {
            return fail(EINVAL, &format!("{WHAT}: desc is NULL"));
        };
        if d.version != VERSION_1 {
            return fail(
                EVERSION,
                &format!(
                    "{WHAT}: desc->version {:#x} is not RTVM_VERSION_1",
                    d.version
                ),
            );
        }
        if let Err(code) = super::refuse_forked(vm, WHAT) {
            return code;
        }
        let Some(f) = d.f else {
            return fail(EINVAL, &format!("{WHAT}: desc->fn is NULL"));
        };
        if d.name.is_null() || d.description.is_null() {
            return fail(
                EINVAL,
                &format!("{WHAT}: desc->name and desc->description must not be NULL"),
            );
        }
        // SAFETY: checked non-NULL, NUL-terminated (caller's guarantee).
        let name = unsafe { c_text(d.name) };
        // SAFETY: as above.
        let description = unsafe { c_text(d.description) };
        // SAFETY: the arrays are readable for their counts (caller's guarantee).
        let declared = unsafe {
            params("argument", d.arguments, d.n_arguments)
                .and_then(|a| params("option", d.options, d.n_options).map(|o| (a, o)))
        };
        let (arguments, options) = match declared {
            Ok(p) => p,
            Err(e) => return fail(EINVAL, &format!("{WHAT}: {name}: {e}")),
        };
        let armed = Arc::new(AtomicBool::new(false));
        let handler = CHandler {
            f,
            ctx: d.ctx,
            release: d.release,
            armed: Arc::clone(&armed),
            name: name.clone(),
            types: arguments
                .iter()
                .chain(&options)
                .map(|(p, ty)| (p.name().to_owned(), *ty))
                .collect(),
        };
        let mut command =
            DiagnosticCommand::new(name, description, move |args, out| handler.call(args, out));
        // SAFETY: NULL or NUL-terminated (caller's guarantee).
        if let Some(impact) = unsafe { opt_text(d.impact) } {
            command = command.impact(impact);
        }
        // SAFETY: NULL or NUL-terminated (caller's guarantee).
        if let Some(permission) = unsafe { opt_text(d.permission) } {
            command = command.permission(permission);
        }
        for (a, _) in arguments {
            command = command.argument(a);
        }
        for (o, _) in options {
            command = command.option(o);
        }
        match vm.register_diagnostic_command(command) {
            Ok(()) => {
                armed.store(true, Ordering::Release);
                OK
            }
            Err(e) => fail(code_of(&e), &e.to_string()),
        }
    })
}

/// Looks up a parameter of type `ty`: `Err(code)` for a bad call.
///
/// # Safety
/// `args` NULL or the view of a running call; `name` NULL or NUL-terminated.
unsafe fn lookup<'a>(
    what: &str,
    args: *const RtvmDcmdArgs<'a>,
    name: *const c_char,
    ty: Option<DcmdType>,
) -> Result<(&'a RtvmDcmdArgs<'a>, String), c_int> {
    // SAFETY: NULL or the live view (caller's guarantee).
    let Some(a) = (unsafe { args.as_ref() }) else {
        return Err(fail(EINVAL, &format!("{what}: args is NULL")));
    };
    if name.is_null() {
        return Err(fail(EINVAL, &format!("{what}: name is NULL")));
    }
    // SAFETY: checked non-NULL, NUL-terminated (caller's guarantee).
    let name = unsafe { c_text(name) };
    match (a.types.get(&name), ty) {
        (None, _) => Err(fail(
            EINVAL,
            &format!("{what}: the command has no parameter '{name}'"),
        )),
        (Some(t), Some(want)) if *t != want => Err(fail(
            EINVAL,
            &format!("{what}: parameter '{name}' is of type {}", t.name()),
        )),
        _ => Ok((a, name)),
    }
}

/// Stores a value through a C pointer: 1 if there was one, 0 if not.
///
/// # Safety
/// `out` writable (checked non-NULL by the caller of this function).
unsafe fn store<T>(out: *mut T, value: Option<T>) -> c_int {
    match value {
        Some(v) => {
            // SAFETY: forwarded to the caller.
            unsafe { out.write(v) };
            1
        }
        None => 0,
    }
}

macro_rules! getter {
    ($(#[$doc:meta])* $fn:ident, $ty:expr, $out:ty, $get:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `args` the view passed to a running command's function (or NULL); `name` NULL or
        /// NUL-terminated; `value` NULL or writable.
        #[no_mangle]
        pub unsafe extern "C" fn $fn(
            args: *const RtvmDcmdArgs<'_>,
            name: *const c_char,
            value: *mut $out,
        ) -> c_int {
            guard(stringify!($fn), || {
                // SAFETY: forwarded to the caller.
                let (a, name) = match unsafe { lookup(stringify!($fn), args, name, Some($ty)) } {
                    Ok(found) => found,
                    Err(code) => return code,
                };
                if value.is_null() {
                    return fail(EINVAL, concat!(stringify!($fn), ": value is NULL"));
                }
                let get: fn(&RtvmDcmdArgs<'_>, &str) -> Option<$out> = $get;
                // SAFETY: checked non-NULL, writable by the caller's guarantee.
                unsafe { store(value, get(a, &name)) }
            })
        }
    };
}

getter!(
    /// See `rtvm_dcmd_get_string` in rtvm.h.
    rtvm_dcmd_get_string,
    DcmdType::String,
    *const c_char,
    |a, n| a.strings.get(n).map(|s| s.as_ptr())
);
getter!(
    /// See `rtvm_dcmd_get_boolean` in rtvm.h.
    rtvm_dcmd_get_boolean,
    DcmdType::Boolean,
    c_int,
    |a, n| a.args.text(n).map(|_| c_int::from(a.args.boolean(n)))
);
getter!(
    /// See `rtvm_dcmd_get_int` in rtvm.h.
    rtvm_dcmd_get_int,
    DcmdType::Int,
    i64,
    |a, n| a.args.int(n)
);
getter!(
    /// See `rtvm_dcmd_get_memory_size` in rtvm.h.
    rtvm_dcmd_get_memory_size,
    DcmdType::MemorySize,
    u64,
    |a, n| a.args.memory_size(n)
);
getter!(
    /// See `rtvm_dcmd_get_nanotime` in rtvm.h.
    rtvm_dcmd_get_nanotime,
    DcmdType::NanoTime,
    i64,
    |a, n| a.args.nanotime(n)
);

/// See `rtvm_dcmd_is_set` in rtvm.h.
///
/// # Safety
/// `args` the view passed to a running command's function (or NULL); `name` NULL or
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn rtvm_dcmd_is_set(
    args: *const RtvmDcmdArgs<'_>,
    name: *const c_char,
) -> c_int {
    guard("rtvm_dcmd_is_set", || {
        // SAFETY: forwarded to the caller.
        match unsafe { lookup("rtvm_dcmd_is_set", args, name, None) } {
            Ok((a, name)) => c_int::from(a.args.is_set(&name)),
            Err(code) => code,
        }
    })
}

/// See `rtvm_dcmd_cancelled` in rtvm.h.
///
/// # Safety
/// `args` the view passed to a running command's function (or NULL).
#[no_mangle]
pub unsafe extern "C" fn rtvm_dcmd_cancelled(args: *const RtvmDcmdArgs<'_>) -> c_int {
    guard("rtvm_dcmd_cancelled", || {
        // SAFETY: NULL or the live view (caller's guarantee).
        match unsafe { args.as_ref() } {
            Some(a) => c_int::from(a.args.cancelled()),
            None => fail(EINVAL, "rtvm_dcmd_cancelled: args is NULL"),
        }
    })
}

/// Appends `len` bytes (lossily, as UTF-8) to the output.
///
/// # Safety
/// `out` NULL or the writer of a running call; `data` readable for `len` bytes.
unsafe fn append(
    what: &str,
    out: *mut RtvmDcmdOutput<'_>,
    data: *const c_char,
    len: usize,
) -> c_int {
    // SAFETY: NULL or the live writer, used by the calling thread only (caller's guarantee).
    let Some(o) = (unsafe { out.as_mut() }) else {
        return fail(EINVAL, &format!("{what}: out is NULL"));
    };
    if len == 0 {
        return OK;
    }
    if data.is_null() {
        return fail(EINVAL, &format!("{what}: text is NULL"));
    }
    // SAFETY: readable for `len` bytes (caller's guarantee).
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    o.text.push_str(&String::from_utf8_lossy(bytes));
    OK
}

/// See `rtvm_dcmd_print` in rtvm.h.
///
/// # Safety
/// `out` NULL or the writer of a running call; `text` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn rtvm_dcmd_print(
    out: *mut RtvmDcmdOutput<'_>,
    text: *const c_char,
) -> c_int {
    guard("rtvm_dcmd_print", || {
        if text.is_null() {
            return fail(EINVAL, "rtvm_dcmd_print: text is NULL");
        }
        // SAFETY: checked non-NULL, NUL-terminated (caller's guarantee).
        let len = unsafe { std::ffi::CStr::from_ptr(text) }.to_bytes().len();
        // SAFETY: forwarded to the caller; `text` is readable for `len` bytes.
        unsafe { append("rtvm_dcmd_print", out, text, len) }
    })
}

/// See `rtvm_dcmd_write` in rtvm.h.
///
/// # Safety
/// `out` NULL or the writer of a running call; `data` readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn rtvm_dcmd_write(
    out: *mut RtvmDcmdOutput<'_>,
    data: *const c_char,
    len: usize,
) -> c_int {
    // SAFETY: forwarded to the caller.
    guard("rtvm_dcmd_write", || unsafe {
        append("rtvm_dcmd_write", out, data, len)
    })
}

/// See `rtvm_dcmd_set_error` in rtvm.h.
///
/// # Safety
/// `out` NULL or the writer of a running call; `message` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn rtvm_dcmd_set_error(
    out: *mut RtvmDcmdOutput<'_>,
    message: *const c_char,
) -> c_int {
    guard("rtvm_dcmd_set_error", || {
        // SAFETY: NULL or the live writer (caller's guarantee).
        let Some(o) = (unsafe { out.as_mut() }) else {
            return fail(EINVAL, "rtvm_dcmd_set_error: out is NULL");
        };
        if message.is_null() {
            return fail(EINVAL, "rtvm_dcmd_set_error: message is NULL");
        }
        // SAFETY: checked non-NULL, NUL-terminated (caller's guarantee).
        o.error = Some(unsafe { c_text(message) });
        OK
    })
}
