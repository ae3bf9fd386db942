//! Where the stop signal may stop a thread: a process-wide table of code ranges the
//! handler reads without a lock.
//!
//! A thread interrupted inside code that may hold a process-wide lock — the C library (its
//! `malloc` arenas, stdio, `atexit` and `fork` locks), the dynamic linker, the unwinder,
//! libstdc++, known allocators and sanitizer runtimes, rtvm itself when it is a shared object
//! — is not stopped there: a stopper or a collector that then took the same lock would wait
//! for ever. The handler returns, and the stopper asks again later (Go's asynchronous
//! preemption does the same: it only stops at an "async-safe point"). Everything else — the
//! embedder's own code, JIT code in anonymous memory — is stoppable. An embedder marks more
//! ranges ([`declare`]): [`CodeKind::NoStop`] for code of its own that holds locks a collector
//! needs (a statically linked allocator), [`CodeKind::Stoppable`] for code that must be
//! stoppable even where it lies among no-stop code (a declared range wins).
//!
//! The system objects are found with `dl_iterate_phdr` (their executable `PT_LOAD` segments);
//! [`refresh`] looks again when libraries were loaded or unloaded since (the stopper calls
//! it before each stop, when no thread is stopped yet).

use std::ffi::{c_int, c_void, CStr};
use std::ops::Range;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// What a declared range of code is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodeKind {
    /// The stop signal never stops a thread here (it may hold a lock a collector needs).
    NoStop,
    /// The stop signal may stop a thread here, whatever else covers it.
    Stoppable,
}

/// The table's capacity (system objects and declared ranges together).
pub const CAPACITY: usize = 256;

const KIND_NO_STOP: usize = 1;
const KIND_STOPPABLE: usize = 2;

struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    kind: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    kind: AtomicUsize::new(0),
};

/// Odd while the table is rewritten (a seqlock: readers that see it odd, or see it change,
/// treat the code as no-stop — the stopper asks again).
static SEQ: AtomicU32 = AtomicU32::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);
static SLOTS: [Slot; CAPACITY] = [EMPTY; CAPACITY];
/// `dlpi_adds + dlpi_subs` when the system objects were last read (0: never).
static LOADS_SEEN: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Debug)]
struct Entry {
    range: Range<usize>,
    kind: CodeKind,
    name: String,
}

#[derive(Default)]
struct Tables {
    system: Vec<Entry>,
    declared: Vec<Entry>,
}

static TABLES: Mutex<Tables> = Mutex::new(Tables {
    system: Vec::new(),
    declared: Vec::new(),
});

/// Why a declaration was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    /// An empty or reversed range.
    #[error("the code range {0:#x}-{1:#x} is empty")]
    Empty(usize, usize),
    /// The table is full.
    #[error(
        "no room for the code range {0:#x}-{1:#x}: {CAPACITY} ranges are declared or known already"
    )]
    Full(usize, usize),
}

fn lock() -> std::sync::MutexGuard<'static, Tables> {
    TABLES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Writes the lock-free table from `t` (declared ranges first: they are found first).
fn publish(t: &Tables) {
    SEQ.fetch_add(1, Ordering::AcqRel);
    fence(Ordering::Release);
    let mut n = 0;
    for e in t.declared.iter().chain(&t.system).take(CAPACITY) {
        let s = &SLOTS[n];
        s.start.store(e.range.start, Ordering::Relaxed);
        s.end.store(e.range.end, Ordering::Relaxed);
        s.kind.store(
            match e.kind {
                CodeKind::NoStop => KIND_NO_STOP,
                CodeKind::Stoppable => KIND_STOPPABLE,
            },
            Ordering::Relaxed,
        );
        n += 1;
    }
    LEN.store(n, Ordering::Relaxed);
    SEQ.fetch_add(1, Ordering::Release);
}

/// Whether the stop signal may stop a thread interrupted at `pc`. Lock-free,
/// allocation-free, async-signal-safe. `false` while the table is being rewritten.
pub fn stoppable(pc: usize) -> bool {
    let s1 = SEQ.load(Ordering::Acquire);
    if s1 & 1 == 1 {
        return false;
    }
    let n = LEN.load(Ordering::Relaxed).min(CAPACITY);
    let mut no_stop = false;
    for s in &SLOTS[..n] {
        let (start, end) = (
            s.start.load(Ordering::Relaxed),
            s.end.load(Ordering::Relaxed),
        );
        if (start..end).contains(&pc) {
            if s.kind.load(Ordering::Relaxed) == KIND_STOPPABLE {
                no_stop = false;
                break;
            }
            no_stop = true;
        }
    }
    fence(Ordering::Acquire);
    SEQ.load(Ordering::Relaxed) == s1 && !no_stop
}

/// Whether `pc` lies in a no-stop range whose code can be read (a system object's text):
/// the handler looks at the instruction there.
pub(super) fn in_system_text(pc: usize) -> bool {
    let s1 = SEQ.load(Ordering::Acquire);
    if s1 & 1 == 1 {
        return false;
    }
    let n = LEN.load(Ordering::Relaxed).min(CAPACITY);
    let found = SLOTS[..n].iter().any(|s| {
        s.kind.load(Ordering::Relaxed) == KIND_NO_STOP
            && (s.start.load(Ordering::Relaxed)..s.end.load(Ordering::Relaxed)).contains(&pc)
    });
    fence(Ordering::Acquire);
    found && SEQ.load(Ordering::Relaxed) == s1
}

/// Declares `range` as `kind` (see the module). Replaces an earlier declaration of the very
/// same range.
pub fn declare(range: Range<usize>, kind: CodeKind) -> Result<(), CodeError> {
    if range.start >= range.end {
        return Err(CodeError::Empty(range.start, range.end));
    }
    let mut t = lock();
    t.declared.retain(|e| e.range != range);
    if t.declared.len() + t.system.len() >= CAPACITY {
        return Err(CodeError::Full(range.start, range.end));
    }
    log::debug!(target: "safepoint", "Code {:#x}-{:#x} declared {}", range.start, range.end, describe_kind(kind));
    t.declared.push(Entry {
        range,
        kind,
        name: "declared".into(),
    });
    publish(&t);
    Ok(())
}

/// Forgets a range declared with [`declare`]. Returns whether it was declared.
pub fn forget(range: Range<usize>) -> bool {
    let mut t = lock();
    let before = t.declared.len();
    t.declared.retain(|e| e.range != range);
    let found = t.declared.len() != before;
    if found {
        publish(&t);
    }
    found
}

fn describe_kind(kind: CodeKind) -> &'static str {
    match kind {
        CodeKind::NoStop => "no-stop",
        CodeKind::Stoppable => "stoppable",
    }
}

/// The object (or declared range) `pc` lies in, for reports: `libc.so.6+0x9a2b4`.
pub fn describe(pc: usize) -> Option<String> {
    let t = lock();
    t.declared
        .iter()
        .chain(&t.system)
        .find(|e| e.range.contains(&pc))
        .map(|e| format!("{}+{:#x}", e.name, pc - e.range.start))
}

/// The no-stop objects and ranges known now: `(name, range)`.
pub fn no_stop_ranges() -> Vec<(String, Range<usize>)> {
    let t = lock();
    t.declared
        .iter()
        .chain(&t.system)
        .filter(|e| e.kind == CodeKind::NoStop)
        .map(|e| (e.name.clone(), e.range.clone()))
        .collect()
}

/// Whether `file` (a path's last component) is a system object that may hold process-wide
/// locks.
pub fn is_system_object(file: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "libc.so",
        "libc-",
        "ld-linux",
        "ld64.so",
        "ld-musl",
        "libpthread.so",
        "libpthread-",
        "libdl.so",
        "librt.so",
        "libresolv.so",
        "libnss_",
        "libgcc_s.so",
        "libstdc++.so",
        "libunwind",
        "libjemalloc.so",
        "libtcmalloc",
        "libmimalloc.so",
        "libgc.so",
        "libasan.so",
        "libtsan.so",
        "liblsan.so",
        "libubsan.so",
        "libhwasan.so",
    ];
    PREFIXES.iter().any(|p| file.starts_with(p))
}

struct Scan {
    own: usize,
    loads: u64,
    first: bool,
    /// Only read the load counter (from the first object) and stop.
    counter_only: bool,
    found: Vec<Entry>,
}

unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, size: usize, data: *mut c_void) -> c_int {
    // SAFETY: dl_iterate_phdr passes its own info (valid for the call) and our `Scan`.
    let (info, scan) = unsafe { (&*info, &mut *data.cast::<Scan>()) };
    let first = std::mem::replace(&mut scan.first, false);
    if size >= std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) + 8 {
        scan.loads = info.dlpi_adds.wrapping_add(info.dlpi_subs);
    }
    if scan.counter_only {
        return 1;
    }
    let path = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: a non-NULL dlpi_name is a C string owned by the loader, valid for the call.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let file = path.rsplit('/').next().unwrap_or("").to_owned();
    let mut texts = Vec::new();
    for i in 0..usize::from(info.dlpi_phnum) {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
            let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
            texts.push(start..start + ph.p_memsz as usize);
        }
    }
    let own = !first && texts.iter().any(|r| r.contains(&scan.own));
    if own || (!first && is_system_object(&file)) {
        let name = if file.is_empty() { path } else { file };
        for range in texts {
            scan.found.push(Entry {
                range,
                kind: CodeKind::NoStop,
                name: name.clone(),
            });
        }
    }
    0
}

/// Reads the system objects again if libraries were loaded or unloaded since the last look
/// (or never looked at). Takes the dynamic linker's lock: call it when no thread is stopped.
pub fn refresh() {
    let mut scan = Scan {
        own: refresh as *const () as usize,
        loads: 0,
        first: true,
        counter_only: true,
        found: Vec::new(),
    };
    // A cheap first pass reads the load counter off the first object; the full scan only
    // runs when it moved.
    // SAFETY: the callback only reads what the loader hands it and writes `scan`.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut scan as *mut Scan).cast()) };
    let loads = scan.loads.wrapping_add(1);
    if LOADS_SEEN.load(Ordering::Acquire) == loads {
        return;
    }
    let mut t = lock();
    scan.first = true;
    scan.counter_only = false;
    // SAFETY: as above.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut scan as *mut Scan).cast()) };
    let loads = scan.loads.wrapping_add(1);
    for e in &scan.found {
        if !t.system.iter().any(|old| old.range == e.range) {
            log::debug!(target: "safepoint", "No stops inside {} ({:#x}-{:#x})", e.name, e.range.start, e.range.end);
        }
    }
    t.system = scan.found;
    publish(&t);
    LOADS_SEEN.store(loads, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_is_no_stop_and_this_test_is_stoppable() {
        refresh();
        let malloc = libc::malloc as *const () as usize;
        assert!(!stoppable(malloc), "{:?}", describe(malloc));
        assert!(describe(malloc).unwrap().starts_with("libc.so"));
        let here = libc_is_no_stop_and_this_test_is_stoppable as *const () as usize;
        assert!(stoppable(here));
        // A declared stoppable range wins over no-stop code.
        declare(malloc..malloc + 1, CodeKind::Stoppable).unwrap();
        assert!(stoppable(malloc));
        assert!(forget(malloc..malloc + 1));
        assert!(!stoppable(malloc));
        declare(here..here + 1, CodeKind::NoStop).unwrap();
        assert!(!stoppable(here));
        assert!(forget(here..here + 1));
        assert_eq!(declare(5..5, CodeKind::NoStop), Err(CodeError::Empty(5, 5)));
    }

    #[test]
    fn system_objects_by_name() {
        for f in [
            "libc.so.6",
            "ld-linux-x86-64.so.2",
            "libgcc_s.so.1",
            "libstdc++.so.6",
        ] {
            assert!(is_system_object(f), "{f}");
        }
        for f in [
            "",
            "librtvm_test.so",
            "libm.so.6",
            "linux-vdso.so.1",
            "libwasm.so",
        ] {
            assert!(!is_system_object(f), "{f}");
        }
    }
}
