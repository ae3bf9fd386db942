//! The C API declared in `include/rtvm.h` (the `cdylib` and `staticlib` export these
//! symbols). The header is the contract: versions, codes, thread-safety, ownership, and what
//! each call does during and after `rtvm_destroy`.
//!
//! Every entry point catches panics (they never cross into C: they become `RTVM_ERR` with a
//! message) and records failures for `rtvm_last_error` in a thread-local slot. A failure on a
//! hot path (`rtvm_heap_allocate`, the TLAB's slow path) records plain numbers; the message
//! is formatted only if `rtvm_last_error` asks for it. Pointers from C are checked for NULL;
//! beyond that they must be what the header says. Codes come from the crate's one mapping
//! of errors to JNI-style codes (`From<&E> for ErrorCode`).
//!
//! | file | entry points |
//! | --- | --- |
//! | `init` | `rtvm_get_version`, `rtvm_get_default_init_args`, `rtvm_create`, `rtvm_destroy` |
//! | `heap` | `rtvm_heap_*`, `rtvm_tlab_*`, `rtvm_release_pretouch` |
//! | `memory` | `rtvm_memory_*` |
//! | `threads` | `rtvm_thread_*`, `rtvm_current_stack_bounds`, `rtvm_attach_current_thread`, `rtvm_detach_current_thread` |
//! | `nmt` | `rtvm_nmt_summary`, `rtvm_diagnostic_command` |
//! | `dcmd` | `rtvm_register_diagnostic_command`, `rtvm_dcmd_*` (the embedder's commands) |
//! | `safepoint` | `rtvm_stop_the_world`, `rtvm_handshake`, the poll's slow path, safe regions, `rtvm_current_thread_id` |
//! | here | `rtvm_last_error`, and what every entry point shares |

mod collector;
mod dcmd;
mod heap;
mod init;
mod memory;
mod nmt;
mod safepoint;
mod threads;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::ErrorCode;
use crate::heap::AllocFailure;
use crate::Vm;

const OK: c_int = 0;
const ERR: c_int = ErrorCode::Err.code();
const EDETACHED: c_int = ErrorCode::Detached.code();
const EVERSION: c_int = ErrorCode::Version.code();
const ENOMEM: c_int = ErrorCode::NoMem.code();
const EINVAL: c_int = ErrorCode::Inval.code();
const EFORK: c_int = ErrorCode::Forked.code();

/// `RTVM_EFORK` (with its message) in a child of `fork()`, where the VM belongs to the parent
/// and its threads do not exist: calls that would wait for them, start or join threads, or
/// tear the VM down refuse at once instead of hanging.
fn refuse_forked(vm: &Vm, what: &str) -> Result<(), c_int> {
    if vm.in_creator_process() {
        return Ok(());
    }
    Err(fail(
        EFORK,
        &format!("{what}: called in a child process after fork(): the VM belongs to the parent process (its threads do not exist here); only exec or _exit are safe"),
    ))
}

/// The C code of an error, from the crate's one mapping.
fn code_of<'e, E>(e: &'e E) -> c_int
where
    ErrorCode: From<&'e E>,
{
    ErrorCode::from(e).code()
}

/// What the last failed call on this thread left for `rtvm_last_error`.
enum LastError {
    /// A formatted message (the buffer `rtvm_last_error` returns).
    Text(CString),
    /// An allocation that did not fit, with what the allocator saw: formatted on demand.
    HeapFull {
        what: &'static str,
        why: AllocFailure,
    },
}

thread_local! {
    /// `None` until a call fails on this thread.
    static LAST_ERROR: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

pub(super) fn set_error(message: &str) {
    let clean: String = message.trim_end().chars().filter(|&c| c != '\0').collect();
    let text = CString::new(clean).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = Some(LastError::Text(text)));
}

pub(super) fn fail(code: c_int, message: &str) -> c_int {
    set_error(message);
    code
}

/// Records a failed allocation without formatting anything: the figures the allocator saw
/// when it gave up (read again now, they could say anything — the heap may have changed).
pub(super) fn heap_full(what: &'static str, why: AllocFailure) {
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = Some(LastError::HeapFull { what, why }));
}

/// The message of a failed allocation.
fn heap_full_message(what: &str, why: &AllocFailure) -> String {
    let AllocFailure {
        requested,
        used,
        committed,
        free_at_end,
        largest_gap,
        nursery,
    } = *why;
    let mut text = format!(
        "{what}: {requested} bytes do not fit the committed heap ({free_at_end} bytes free at its end; {used} bytes used of {committed} committed"
    );
    if nursery > 0 {
        text += &format!(", of which {nursery} bytes are the nursery, -Xmn, allocated with rtvm_with_nursery only");
    }
    if largest_gap > 0 {
        text += &format!("; the largest gap below the end holds {largest_gap} bytes");
    }
    text + "); grow it with rtvm_heap_expand"
}

/// Runs `f`, turning a panic into `RTVM_ERR`; refuses calls from inside the output hook with
/// `RTVM_EINVAL`.
pub(super) fn guard(what: &str, f: impl FnOnce() -> c_int) -> c_int {
    if crate::output::in_output_hook() {
        // The hook runs while the printing thread holds rtvm's locks: a call from there
        // would wait for them forever.
        return fail(
            EINVAL,
            &format!(
                "{what}: called from the output hook, which must not call back into rtvm (rtvm.h)"
            ),
        );
    }
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

/// Reads a C string lossily (bytes that are not UTF-8 become U+FFFD).
///
/// # Safety
/// `p` must be a valid NUL-terminated string.
pub(super) unsafe fn c_text(p: *const c_char) -> String {
    // SAFETY: forwarded to the caller.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Borrows the VM behind a C pointer.
///
/// # Safety
/// `vm` must be NULL or a live VM from `rtvm_create`.
pub(super) unsafe fn vm_ref<'a>(vm: *mut Vm) -> Option<&'a Vm> {
    // SAFETY: forwarded to the caller.
    unsafe { vm.as_ref() }
}

/// See `rtvm_last_error` in rtvm.h.
#[no_mangle]
pub extern "C" fn rtvm_last_error() -> *const c_char {
    static EMPTY: &CStr = c"";
    LAST_ERROR
        .try_with(|e| {
            let mut e = e.borrow_mut();
            if let Some(LastError::HeapFull { what, why }) = &*e {
                let text = heap_full_message(what, why);
                *e = Some(LastError::Text(CString::new(text).unwrap_or_default()));
            }
            match &*e {
                Some(LastError::Text(t)) => t.as_ptr(),
                _ => EMPTY.as_ptr(),
            }
        })
        .unwrap_or(EMPTY.as_ptr())
}
