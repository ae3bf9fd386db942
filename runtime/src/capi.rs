//! The C API declared in `include/rtvm.h` (the `cdylib` and `staticlib` export these
//! symbols). The header is the contract: versions, codes, thread-safety, ownership, and what
//! each call does during and after `rtvm_destroy`.
//!
//! Every entry point catches panics (they never cross into C: they become `RTVM_ERR` with a
//! message) and records failures for `rtvm_last_error` in a thread-local slot. A failure on a
//! hot path (`rtvm_heap_allocate`, the TLAB's slow path) records plain numbers; the message
//! is formatted only if `rtvm_last_error` asks for it. Pointers from C are checked for NULL;
//! beyond that they must be what the header says.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{CreateError, ErrorCode};
use crate::heap::{alloc_size, refill_and_allocate, tlab_refill_size, Refilled};
use crate::output::{Output, Stream};
use crate::threads::ThreadError;
use crate::{InitArgs, MemoryError, MemoryRequest, StackBounds, Vm, VmMemory, VmThread};
use rtvm_os_linux::{Errno, ForeignCall};

const OK: c_int = 0;
const ERR: c_int = ErrorCode::Err.code();
const EDETACHED: c_int = ErrorCode::Detached.code();
const EVERSION: c_int = ErrorCode::Version.code();
const ENOMEM: c_int = ErrorCode::NoMem.code();
const EINVAL: c_int = ErrorCode::Inval.code();

/// `RTVM_VERSION_1`: the first versioned ABI (major 1, minor 0).
pub const RTVM_VERSION_1: c_int = 0x0001_0000;

/// What the last failed call on this thread left for `rtvm_last_error`.
enum LastError {
    /// A formatted message (the buffer `rtvm_last_error` returns).
    Text(CString),
    /// An allocation that did not fit: formatted on demand.
    HeapFull {
        what: &'static str,
        bytes: usize,
        used: usize,
        committed: usize,
    },
}

thread_local! {
    /// `None` until a call fails on this thread.
    static LAST_ERROR: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

fn set_error(message: &str) {
    let clean: String = message.trim_end().chars().filter(|&c| c != '\0').collect();
    let text = CString::new(clean).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = Some(LastError::Text(text)));
}

fn fail(code: c_int, message: &str) -> c_int {
    set_error(message);
    code
}

/// Records a failed allocation without formatting anything.
fn heap_full(what: &'static str, vm: &Vm, bytes: usize) {
    let s = vm.heap_stats();
    let _ = LAST_ERROR.try_with(|e| {
        *e.borrow_mut() = Some(LastError::HeapFull {
            what,
            bytes,
            used: s.used,
            committed: s.committed,
        })
    });
}

/// Runs `f`, turning a panic into `RTVM_ERR`.
fn guard(f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(code) => code,
        Err(p) => fail(
            ERR,
            &format!(
                "internal error in rtvm: {}",
                crate::threads::panic_message(&*p)
            ),
        ),
    }
}

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

/// Mirrors `rtvm_heap_stats`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RtvmHeapStats {
    reserved: usize,
    committed: usize,
    used: usize,
}

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

/// Mirrors `rtvm_tlab`: the fast path is inline in the header.
#[repr(C)]
#[derive(Debug)]
pub struct RtvmTlab {
    top: *mut c_char,
    end: *mut c_char,
    vm: *mut Vm,
    buffer_size: usize,
}

/// `rtvm_thread`.
#[derive(Debug)]
pub struct RtvmThread(VmThread);

/// `rtvm_memory`: locked so that any thread may grow it or ask for its figures.
#[derive(Debug)]
pub struct RtvmMemory(std::sync::Mutex<VmMemory>);

impl RtvmMemory {
    fn lock(&self) -> std::sync::MutexGuard<'_, VmMemory> {
        // A panic while growing cannot leave the memory inconsistent (a growth publishes its
        // size last): the lock's poison is ignored.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
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

/// The code for a failed memory operation.
fn memory_error_code(e: &MemoryError) -> c_int {
    match e {
        MemoryError::Invalid { .. } => EINVAL,
        MemoryError::Capacity { .. } => ENOMEM,
        MemoryError::ShuttingDown { .. } => ErrorCode::ShuttingDown.code(),
        e if e.is_out_of_memory() => ENOMEM,
        _ => ERR,
    }
}

fn error_message(e: &CreateError) -> String {
    match e.code {
        ErrorCode::Exited => "rtvm_create: the options asked to print and stop (-version, -Xlog:help, -XX:+PrintFlagsInitial); the output went to the output hook and no VM was created".into(),
        _ => e.message.trim_end().to_owned(),
    }
}

/// Reads a C string lossily (bytes that are not UTF-8 become U+FFFD).
///
/// # Safety
/// `p` must be a valid NUL-terminated string.
unsafe fn c_text(p: *const c_char) -> String {
    // SAFETY: forwarded to the caller.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
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
    guard(|| {
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
    guard(|| {
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
            // are not UTF-8 become U+FFFD: the option earns the message its text earns.
            options.push(unsafe { c_text(p) });
        }
        let mut init = InitArgs::new(options).ignore_unrecognized(a.ignore_unrecognized != 0);
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
        // caller (and attached threads, which the header forbids to use it from now on) holds
        // the pointer, which it gives up with this call.
        drop(unsafe { Box::from_raw(vm) });
        OK
    })
}

/// See `rtvm_last_error` in rtvm.h.
#[no_mangle]
pub extern "C" fn rtvm_last_error() -> *const c_char {
    static EMPTY: &CStr = c"";
    LAST_ERROR
        .try_with(|e| {
            let mut e = e.borrow_mut();
            if let Some(LastError::HeapFull {
                what,
                bytes,
                used,
                committed,
            }) = *e
            {
                let text = format!("{what}: {bytes} bytes do not fit the committed heap ({used} bytes used of {committed} committed); grow it with rtvm_heap_expand");
                *e = Some(LastError::Text(CString::new(text).unwrap_or_default()));
            }
            match &*e {
                Some(LastError::Text(t)) => t.as_ptr(),
                _ => EMPTY.as_ptr(),
            }
        })
        .unwrap_or(EMPTY.as_ptr())
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
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_memory_reserve: vm is NULL");
        };
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
            Err(e) => fail(memory_error_code(&e), &e.to_string()),
        }
    })
}

/// See `rtvm_memory_grow` in rtvm.h.
///
/// # Safety
/// `memory` must be a handle from `rtvm_memory_reserve` not released yet.
#[no_mangle]
pub unsafe extern "C" fn rtvm_memory_grow(memory: *mut RtvmMemory, new_size: usize) -> c_int {
    guard(|| {
        // SAFETY: the caller passes a live handle.
        let Some(m) = (unsafe { memory.as_ref() }) else {
            return fail(EINVAL, "rtvm_memory_grow: memory is NULL");
        };
        match m.lock().grow_to(new_size) {
            Ok(()) => OK,
            Err(e) => fail(memory_error_code(&e), &e.to_string()),
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
    guard(|| {
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
    guard(|| {
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
            Err(e) => fail(memory_error_code(&e), &e.to_string()),
        }
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
        let name = unsafe { c_text(name) };
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

/// The code for a thread that could not start: a limit, memory, bad arguments, a VM shutting
/// down.
fn thread_error_code(e: &ThreadError) -> c_int {
    match e {
        ThreadError::Start { errno, .. } if *errno == Errno::EAGAIN => ErrorCode::Again.code(),
        ThreadError::Start { errno, .. } if *errno == Errno::ENOMEM => ENOMEM,
        ThreadError::Start { errno, .. } if *errno == Errno::EINVAL => EINVAL,
        ThreadError::ShuttingDown { .. } => ErrorCode::ShuttingDown.code(),
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

/// See `rtvm_thread_stack_bounds` in rtvm.h.
///
/// # Safety
/// `thread` must be a handle from `rtvm_thread_start` not joined yet; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn rtvm_thread_stack_bounds(
    thread: *const RtvmThread,
    out: *mut RtvmStackBounds,
) -> c_int {
    guard(|| {
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
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_current_stack_bounds: vm is NULL");
        };
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
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_attach_current_thread: vm is NULL");
        };
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
            Err(e @ ThreadError::ShuttingDown { .. }) => {
                fail(ErrorCode::ShuttingDown.code(), &e.to_string())
            }
            Err(
                e @ ThreadError::Attach {
                    errno: Errno::ENOMEM,
                    ..
                },
            ) => fail(ENOMEM, &e.to_string()),
            Err(e) => fail(ERR, &e.to_string()),
        }
    })
}

/// See `rtvm_detach_current_thread` in rtvm.h.
///
/// # Safety
/// `vm` must be a live VM from `rtvm_create`.
#[no_mangle]
pub unsafe extern "C" fn rtvm_detach_current_thread(vm: *mut Vm) -> c_int {
    guard(|| {
        // SAFETY: forwarded to the caller.
        let Some(vm) = (unsafe { vm_ref(vm) }) else {
            return fail(EINVAL, "rtvm_detach_current_thread: vm is NULL");
        };
        match vm.detach_current() {
            Ok(()) => OK,
            Err(e @ ThreadError::NotAttached { started: None }) => {
                fail(EDETACHED, &format!("rtvm_detach_current_thread: {e}"))
            }
            Err(e) => fail(EINVAL, &format!("rtvm_detach_current_thread: {e}")),
        }
    })
}

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
