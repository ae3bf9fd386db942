//! The process-wide half of the binding: the one MMTk, the VM it serves now, the stopped
//! world, the GC epoch mutators wait on, the registered mutators and global roots, and the
//! per-collection figures `-Xlog:gc` prints.
//!
//! MMTk is process-wide (its globals, its address range): one instance per process, built on
//! the first VM that starts it and kept for the next ones with the same configuration. At VM
//! destroy its workers leave through `MMTK::prepare_to_fork` (they return from
//! `start_worker`, so rtvm joins its collector threads); the next VM's start respawns them on
//! its own collector threads with `MMTK::after_fork`.

use std::any::TypeId;
use std::cell::{Cell, UnsafeCell};
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use mmtk::util::opaque_pointer::{OpaquePointer, VMMutatorThread, VMThread, VMWorkerThread};
use mmtk::util::{Address, ObjectReference};
use mmtk::{memory_manager, Mutator, MMTK};
use rtvm::{NoAsyncStop, SafepointError, VmHandle, WorldStopped};

use crate::binding::Rtvm;
use crate::config::Config;
use crate::Language;

/// Poisoning is ignored: every structure here is consistent between statements.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The one MMTk of the process.
pub(crate) struct Instance {
    pub language: TypeId,
    pub config: Config,
    /// A VM uses it now.
    pub in_use: bool,
    /// Its workers could not all be started: it cannot collect again.
    pub broken: Option<String>,
}

pub(crate) static INSTANCE: Mutex<Option<Instance>> = Mutex::new(None);

/// The VM the workers stop and start threads in.
static VM: RwLock<Option<VmHandle>> = RwLock::new(None);

pub(crate) fn set_vm(vm: Option<VmHandle>) {
    *VM.write().unwrap_or_else(|p| p.into_inner()) = vm;
}

pub(crate) fn current_vm() -> Option<VmHandle> {
    VM.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The MMTk, once built (`&'static MMTK<Rtvm<L>>`; one language per process).
pub(crate) static MMTK_ADDRESS: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn mmtk<L: Language>() -> &'static MMTK<Rtvm<L>> {
    let address = MMTK_ADDRESS.load(Ordering::Acquire);
    assert_ne!(address, 0, "MMTk used before it was built");
    // SAFETY: set once to a leaked `MMTK<Rtvm<L>>` for the process's one language (checked
    // by `TypeId` at every start), never freed.
    unsafe { &*(address as *const MMTK<Rtvm<L>>) }
}

// ---- mutators ---------------------------------------------------------------------------

/// A mutator's state, boxed; its address is the mutator's MMTk tls.
pub(crate) struct MutatorCell<L: Language> {
    mutator: UnsafeCell<MaybeUninit<Box<Mutator<Rtvm<L>>>>>,
    /// The rtvm thread it runs on.
    pub thread_id: u64,
    /// `Collection::out_of_memory` ran for its current allocation.
    pub out_of_memory: AtomicBool,
}

/// Addresses of the registered `MutatorCell`s.
static MUTATORS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

impl<L: Language> MutatorCell<L> {
    pub(crate) fn new(thread_id: u64) -> Box<MutatorCell<L>> {
        Box::new(MutatorCell {
            mutator: UnsafeCell::new(MaybeUninit::uninit()),
            thread_id,
            out_of_memory: AtomicBool::new(false),
        })
    }

    pub(crate) fn tls(&self) -> VMMutatorThread {
        VMMutatorThread(VMThread(OpaquePointer::from_address(Address::from_ptr(
            self as *const Self,
        ))))
    }

    /// Stores the bound mutator and registers the cell (inside a no-stop section: a stop
    /// waits until the set is consistent).
    pub(crate) fn register(&self, mutator: Box<Mutator<Rtvm<L>>>) {
        // SAFETY: called once, by the owning thread, before the cell is registered.
        unsafe { (*self.mutator.get()).write(mutator) };
        let _ns = NoAsyncStop::enter();
        lock(&MUTATORS).push(self as *const Self as usize);
    }

    /// Unregisters the cell and destroys its mutator (the owning thread, running).
    pub(crate) fn unregister(&self) {
        let _ns = NoAsyncStop::enter();
        let me = self as *const Self as usize;
        lock(&MUTATORS).retain(|&m| m != me);
        // SAFETY: registered, so initialized; unregistered now, no one else reaches it.
        let mutator = unsafe { (*self.mutator.get()).assume_init_read() };
        let mut mutator = mutator;
        memory_manager::destroy_mutator(&mut *mutator);
    }

    /// The cell a mutator tls names.
    ///
    /// # Safety
    /// `tls` must be the tls of a registered (live) cell.
    pub(crate) unsafe fn from_tls<'a>(tls: VMThread) -> &'a MutatorCell<L> {
        // SAFETY: the caller's promise.
        unsafe { &*(tls.0.to_address().to_ptr::<MutatorCell<L>>()) }
    }

    /// The cell's mutator, mutably.
    ///
    /// # Safety
    /// The cell is registered, and no one else uses its mutator meanwhile (its own thread,
    /// running; or the collector, while the world is stopped).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn mutator_mut_ref(&self) -> &'static mut Mutator<Rtvm<L>> {
        // SAFETY: the caller's promise; the box lives as long as the cell is registered.
        unsafe { &mut **(*self.mutator.get()).assume_init_mut() as &mut Mutator<Rtvm<L>> }
            .into_static()
    }

    /// The mutator of the registered cell at `address`.
    ///
    /// # Safety
    /// As [`mutator_mut_ref`](Self::mutator_mut_ref).
    pub(crate) unsafe fn mutator_mut(address: usize) -> &'static mut Mutator<Rtvm<L>> {
        // SAFETY: the caller's promise.
        unsafe { (*(address as *const MutatorCell<L>)).mutator_mut_ref() }
    }
}

/// Extends a borrow of a boxed mutator to `'static`: MMTk's signatures ask for it; the box
/// lives until its thread unregisters it, which never happens during a pause.
trait IntoStatic<T> {
    fn into_static(self) -> &'static mut T;
}

impl<T> IntoStatic<T> for &mut T {
    fn into_static(self) -> &'static mut T {
        // SAFETY: see the trait's comment; the pointer is valid for the mutator's life.
        unsafe { &mut *(self as *mut T) }
    }
}

/// The registered mutators' cells (fixed while the world is stopped).
pub(crate) fn mutators() -> Vec<usize> {
    lock(&MUTATORS).clone()
}

/// Worker tls values are odd (`index * 2 + 1`): a mutator's is its cell's (aligned) address.
pub(crate) fn is_mutator_tls(tls: VMThread) -> bool {
    let a = tls.0.to_address().as_usize();
    a != 0 && a & 1 == 0
}

// ---- global roots -----------------------------------------------------------------------

/// Addresses of the embedder's root words ([`crate::Root`]).
pub(crate) static ROOTS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

pub(crate) fn global_roots() -> Vec<ObjectReference> {
    let roots = lock(&ROOTS).clone();
    roots
        .into_iter()
        .filter_map(|a| {
            // SAFETY: a registered root is a live `AtomicUsize` (unregistered before freed).
            let v =
                unsafe { &*(a as *const std::sync::atomic::AtomicUsize) }.load(Ordering::Acquire);
            (v != 0).then(|| ObjectReference::from_raw_address(unsafe_address(v)))?
        })
        .collect()
}

fn unsafe_address(v: usize) -> Address {
    // SAFETY: an `Address` is a plain number; it is dereferenced only by MMTk, for an object
    // MMTk says it allocated.
    unsafe { Address::from_usize(v) }
}

// ---- the stop -----------------------------------------------------------------------------

/// What a stopped thread gives as roots: its scan ranges and saved registers.
struct ThreadRoots {
    ranges: Vec<Range<usize>>,
    registers: Vec<usize>,
}

struct Pause {
    world: Option<WorldStopped>,
    began: Instant,
    used_before: usize,
    cause: &'static str,
    time_to_stop: Duration,
}

static PAUSE: Mutex<Option<Pause>> = Mutex::new(None);
/// The scan ranges of the pause, read by every worker at once.
static ROOT_TABLE: RwLock<Option<HashMap<u64, ThreadRoots>>> = RwLock::new(None);

/// Collections finished in this process (`GC(n)` numbers them from 0).
pub(crate) static COLLECTIONS: AtomicU64 = AtomicU64::new(0);
/// Total pause time, in ns.
pub(crate) static PAUSE_NANOS: AtomicU64 = AtomicU64::new(0);
/// The next collection was asked for by `GC.run` / [`crate::Mmtk::collect`].
static USER_REQUEST: AtomicBool = AtomicBool::new(false);

/// How long one attempt to stop the world may take before it is logged and retried.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Stops every mutator of the current VM and records what a collection needs.
pub(crate) fn stop_the_world<L: Language>() {
    let used_before = memory_manager::used_bytes(mmtk::<L>());
    let vm = current_vm().expect("MMTk collects with no VM");
    let user = USER_REQUEST.load(Ordering::Acquire);
    let (reason, cause) = if user {
        ("MMTkCollectFull", "Diagnostic Command")
    } else {
        ("MMTkCollectForAllocation", "Allocation Failure")
    };
    let began = Instant::now();
    let world = loop {
        match vm.stop_the_world(reason, STOP_TIMEOUT) {
            Ok(w) => break w,
            Err(SafepointError::Busy { .. }) => continue,
            Err(e) => {
                log::warn!(target: "gc", "The collection could not stop every thread ({e}); trying again");
            }
        }
    };
    let roots: HashMap<u64, ThreadRoots> = world
        .threads()
        .map(|t| {
            (
                t.id(),
                ThreadRoots {
                    ranges: t.scan_ranges().collect(),
                    registers: t.registers().to_vec(),
                },
            )
        })
        .collect();
    *ROOT_TABLE.write().unwrap_or_else(|p| p.into_inner()) = Some(roots);
    let time_to_stop = world.time_to_stop();
    *lock(&PAUSE) = Some(Pause {
        world: Some(world),
        began,
        used_before,
        cause,
        time_to_stop,
    });
}

/// Ends the pause: logs it, resumes the world, and wakes the threads waiting for it.
pub(crate) fn resume_the_world<L: Language>() {
    let mmtk = mmtk::<L>();
    *ROOT_TABLE.write().unwrap_or_else(|p| p.into_inner()) = None;
    // Held until the epoch moves: a request (`request_collection`) sees a pause from its
    // stop to its epoch, never half of one.
    let mut guard = lock(&PAUSE);
    let pause = guard.take();
    let used_after = memory_manager::used_bytes(mmtk);
    let total = memory_manager::total_bytes(mmtk);
    let young = mmtk
        .get_plan()
        .generational()
        .is_some_and(|g| g.is_current_gc_nursery());
    if let Some(mut p) = pause {
        let took = p.began.elapsed();
        let id = COLLECTIONS.fetch_add(1, Ordering::AcqRel);
        PAUSE_NANOS.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        log::info!(
            target: "gc",
            "GC({id}) Pause {} ({}) {}M->{}M({}M) {:.3}ms",
            if young { "Young" } else { "Full" },
            p.cause,
            p.used_before >> 20,
            used_after >> 20,
            total >> 20,
            took.as_secs_f64() * 1e3
        );
        log::info!(
            target: "gc+heap",
            "GC({id}) MMTk {:?}: used {}K->{}K, heap {}K, reached the stop in {:.3}ms",
            *mmtk.get_options().plan,
            p.used_before >> 10,
            used_after >> 10,
            total >> 10,
            p.time_to_stop.as_secs_f64() * 1e3
        );
        // Resume (on this worker; the stop may have begun on another).
        drop(p.world.take());
    }
    USER_REQUEST.store(false, Ordering::Release);
    let (epoch, cv) = &EPOCH;
    *lock(epoch) += 1;
    cv.notify_all();
    drop(guard);
}

/// The conservative roots of a stopped thread: every word of its scan ranges and saved
/// registers that points into an object MMTk allocated (at its reference, or inside it up to
/// `L::MAX_INTERIOR_OFFSET` bytes past it).
pub(crate) fn conservative_roots<L: Language>(thread_id: u64) -> Vec<ObjectReference> {
    let table = ROOT_TABLE.read().unwrap_or_else(|p| p.into_inner());
    let Some(roots) = table.as_ref().and_then(|t| t.get(&thread_id)) else {
        log::warn!(target: "gc", "A mutator (thread #{thread_id}) was not among the stopped threads: no roots scanned for it");
        return Vec::new();
    };
    let (lo, hi) = (
        memory_manager::starting_heap_address().as_usize(),
        memory_manager::last_heap_address().as_usize(),
    );
    let mut found = Vec::new();
    let mut consider = |v: usize| {
        if v < lo || v >= hi || v & 7 != 0 {
            return;
        }
        let a = unsafe_address(v);
        let object = memory_manager::is_mmtk_object(a).or_else(|| {
            (L::MAX_INTERIOR_OFFSET > 0)
                .then(|| {
                    memory_manager::find_object_from_internal_pointer(a, L::MAX_INTERIOR_OFFSET)
                })
                .flatten()
        });
        if let Some(o) = object {
            found.push(o);
        }
    };
    for &r in &roots.registers {
        consider(r);
    }
    for range in &roots.ranges {
        let mut at = (range.start + 7) & !7;
        while at + 8 <= range.end {
            // SAFETY: the range is part of a stopped thread's stack (or signal stack), mapped
            // and not changing while the world is stopped; word-aligned.
            let v = unsafe { std::ptr::read_volatile(at as *const usize) };
            consider(v);
            at += 8;
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

// ---- waiting for a collection -------------------------------------------------------------

/// Collections finished (the epoch threads wait on) and its condition variable.
static EPOCH: (Mutex<u64>, Condvar) = (Mutex::new(0), Condvar::new());

thread_local! {
    /// This thread is asking for a collection itself ([`request_collection`]): MMTk's
    /// `block_for_gc` returns at once, the request waits once MMTk took it.
    static ASKING: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn epoch() -> u64 {
    *lock(&EPOCH.0)
}

/// Waits, in a safe region, until the epoch is past `before`.
///
/// The epoch's lock is taken inside the region and given up before the region is left:
/// leaving waits while the next collection stops the world, and a thread waiting there with
/// the lock held would keep every mutator that reaches `block_for_gc` meanwhile (inside its
/// allocation's no-stop section, not yet in a region) from stopping — the stop could never
/// complete.
fn wait_past(before: u64) {
    let _region = rtvm::SafeRegion::enter();
    let (epoch, cv) = &EPOCH;
    let mut e = lock(epoch);
    while *e == before {
        e = cv.wait(e).unwrap_or_else(|p| p.into_inner());
    }
    drop(e);
}

/// Asks MMTk for a collection on behalf of `tls` and waits for it (`GC.run`, `collect`), from
/// any thread — one the world does not stop (the attach listener's) too: MMTk (0.33) panics
/// at a request made during a pause (`Trying to request a GC pause in invalid status:
/// InPause`), so a request waits for the pause in progress to end, then asks while no pause
/// can begin.
pub(crate) fn request_collection<L: Language>(tls: VMMutatorThread) -> bool {
    loop {
        let ns = NoAsyncStop::enter();
        let pause = lock(&PAUSE);
        let before = epoch();
        if pause.is_some() {
            drop(pause);
            drop(ns);
            wait_past(before);
            continue;
        }
        USER_REQUEST.store(true, Ordering::Release);
        ASKING.with(|a| a.set(true));
        let ran = memory_manager::handle_user_collection_request(mmtk::<L>(), tls);
        ASKING.with(|a| a.set(false));
        drop(pause);
        drop(ns);
        if !ran {
            USER_REQUEST.store(false, Ordering::Release);
            return false;
        }
        wait_past(before);
        return true;
    }
}

/// `Collection::block_for_gc`: waits, in a safe region, until the collection ends.
///
/// A mutator gets here from inside an allocation, which runs in a no-stop section: the
/// collection it asked for cannot have stopped the world — so cannot have ended — before it
/// reads the epoch here and enters the safe region. A thread that asks itself
/// ([`request_collection`]) does not wait here, but once MMTk took its request.
pub(crate) fn block_for_gc(_tls: VMMutatorThread) {
    if !ASKING.with(|a| a.get()) {
        wait_past(epoch());
    }
}

// ---- workers ------------------------------------------------------------------------------

/// The next worker's number in the current VM (`GC Thread#<n>`).
pub(crate) static NEXT_WORKER: AtomicUsize = AtomicUsize::new(0);
/// A worker that could not be started, for the start to report.
pub(crate) static SPAWN_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// `Collection::spawn_gc_thread`: the worker runs on a collector thread of the current VM.
pub(crate) fn spawn_worker<L: Language>(worker: Box<mmtk::scheduler::GCWorker<Rtvm<L>>>) {
    let index = NEXT_WORKER.fetch_add(1, Ordering::AcqRel);
    let name = format!("GC Thread#{index}");
    let Some(vm) = current_vm() else {
        *lock(&SPAWN_ERROR) = Some(format!("{name}: no VM to start it in"));
        return;
    };
    let mmtk = mmtk::<L>();
    let tls = VMWorkerThread(VMThread(OpaquePointer::from_address(unsafe_address(
        index * 2 + 1,
    ))));
    let thread = name.clone();
    match vm.spawn_collector(&name, move || {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            memory_manager::start_worker(mmtk, tls, worker);
        }));
        if run.is_err() {
            // MMTk's state is broken mid-collection: every mutator would wait for the
            // collection forever. End the process as a VM's fatal error does.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("rtvm: fatal error: MMTk's GC worker \"{thread}\" panicked (see above); the heap cannot be collected any more\n").as_bytes(),
            );
            std::process::abort();
        }
    }) {
        Ok(_thread) => {} // the VM's destroy joins it
        Err(e) => *lock(&SPAWN_ERROR) = Some(format!("{name}: {e}")),
    }
}

/// A shutdown hook: the workers return (MMTk keeps their state for the next VM), and the
/// instance is free for another VM.
pub(crate) fn release<L: Language>() {
    let mmtk = mmtk::<L>();
    // HotSpot's `-Xlog:gc+heap+exit`: `Heap`, then what `GC.heap_info` prints.
    if log::log_enabled!(target: "gc+heap+exit", log::Level::Info) {
        if let Some(config) = lock(&INSTANCE).as_ref().map(|i| i.config) {
            log::info!(target: "gc+heap+exit", "Heap");
            for line in crate::service::heap_info::<L>(&config).lines() {
                log::info!(target: "gc+heap+exit", "{line}");
            }
        }
    }
    mmtk.prepare_to_fork();
    set_vm(None);
    if let Some(i) = lock(&INSTANCE).as_mut() {
        i.in_use = false;
    }
    log::debug!(target: "gc", "MMTk's workers asked to end with the VM");
}

/// Heap figures for logs, `GC.heap_info` and NMT.
pub(crate) struct HeapFigures {
    pub used: usize,
    pub total: usize,
    pub reserved: usize,
    pub range: Range<usize>,
}

pub(crate) fn heap_figures<L: Language>(config: &Config) -> HeapFigures {
    let mmtk = mmtk::<L>();
    HeapFigures {
        used: memory_manager::used_bytes(mmtk),
        total: memory_manager::total_bytes(mmtk),
        reserved: config.trigger.max(),
        range: memory_manager::starting_heap_address().as_usize()
            ..memory_manager::last_heap_address().as_usize(),
    }
}

pub(crate) fn describe(config: &Config) -> String {
    format!(
        "MMTk {} ({}, {} GC threads{})",
        config.plan,
        config.trigger_text(),
        config.threads,
        if config.transparent_hugepages {
            ", transparent huge pages"
        } else {
            ""
        }
    )
}
