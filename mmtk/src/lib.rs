//! # rtvm-mmtk
//!
//! MMTk's collectors on rtvm: the binding implements MMTk's `VMBinding` once, for any
//! language on rtvm, on rtvm's public API only.
//!
//! * **Threads.** MMTk's GC workers run on rtvm collector threads named `GC Thread#<n>`
//!   (never stopped; listed by `jstack`, NMT and `-Xlog:os+thread`).
//! * **Stops.** A collection stops the world through [`VmHandle::stop_the_world`] (operation
//!   `MMTkCollectForAllocation`, or `MMTkCollectFull` for [`Mmtk::collect`] and `GC.run`);
//!   MMTk resumes it from whichever worker ends the collection. A mutator that must wait for
//!   a collection waits in a safe region.
//! * **Roots.** Conservative: every word of each stopped mutator's scan ranges and saved
//!   registers that points at (or into, up to [`Language::MAX_INTERIOR_OFFSET`] bytes) an
//!   object MMTk allocated is a pinning root; plus the embedder's [`Root`]s.
//! * **Objects.** One header word, the language's; MMTk's per-object state lives in side
//!   metadata. The language says how big an object is and where its references are
//!   ([`Language`]); it allocates and stores references through its thread's [`Mutator`],
//!   which keeps MMTk's valid-object bits and write barriers right, and polls
//!   ([`rtvm::safepoint_poll`]) at loop back-edges.
//!
//! **The heap** is MMTk's, in MMTk's own address range: create the VM with
//! [`InitArgs::collector_heap`](rtvm::InitArgs::collector_heap) so rtvm reserves none of its
//! own (the launcher does for its MMTk mains). NMT's `Java Heap` line then reports MMTk's:
//! reserved `-Xmx`, committed the pages MMTk's spaces hold. `-XX:+AlwaysPreTouch` is warned
//! about and ignored: MMTk maps its memory chunk by chunk as the heap grows and has no hook
//! to pretouch a chunk it maps.
//!
//! Plans: `Immix` (the default), `StickyImmix`, `MarkSweep`, `NoGC` — those that take pinning
//! roots; `-XX:MMTkPlan` chooses. The heap: `-Xmx` is its limit, `-Xms` below `-Xmx` makes it
//! grow and shrink between the two. See [`Config::from_flags`].
//!
//! **One MMTk per process** (MMTk's own limit): the first [`Mmtk::start`] builds it; a later
//! VM (one at a time) reuses it when it asks for the same configuration and gets
//! [`StartError::OtherConfiguration`] otherwise. At VM destroy the workers end (MMTk's
//! `prepare_to_fork`); the next VM's start respawns them on its own threads (`after_fork`).

use std::any::TypeId;
use std::marker::PhantomData;
use std::num::NonZeroUsize;
use std::panic::AssertUnwindSafe;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mmtk::plan::{AllocationSemantics, BarrierSelector};
use mmtk::util::alloc::{Allocator, AllocatorSelector, ImmixAllocator};
use mmtk::util::metadata::vo_bit::VO_BIT_SIDE_METADATA_SPEC;
use mmtk::util::options::GCTriggerSelector;
use mmtk::util::ObjectReference;
use mmtk::vm::slot::SimpleSlot;
use mmtk::{memory_manager, MMTKBuilder};
use rtvm::{NoAsyncStop, VmHandle};

mod binding;
mod config;
mod service;
mod state;
pub mod workloads;

pub use binding::Rtvm;
pub use config::{Config, ConfigError, Plan, Trigger, ACCEPTED_PLANS, MIN_HEAP};

use state::{lock, MutatorCell};

/// Whether MMTk was built with its `sanity` feature (this crate's feature `sanity`): every
/// collection is followed by a sanity trace that checks it.
pub const SANITY_CHECKS: bool = cfg!(feature = "sanity");

/// A language's object model, as the collector needs it. Objects start with one header word
/// (the language's to use); an object reference is the address of that word.
pub trait Language: Send + Sync + 'static {
    /// How far past an object's start a pointer on a stack still keeps the object alive
    /// (interior pointers); 0: only pointers to the header word do.
    const MAX_INTERIOR_OFFSET: usize = 0;

    /// The object's size in bytes, header included (a multiple of 8, at least 16).
    fn size(object: ObjRef) -> usize;

    /// Calls `slot` with the address of every word of `object` that holds a reference to
    /// another object, or 0.
    fn for_each_slot(object: ObjRef, slot: &mut dyn FnMut(*mut usize));
}

/// A reference to an object on the MMTk heap: the address of its header word.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(transparent)]
pub struct ObjRef(NonZeroUsize);

impl ObjRef {
    /// The object's address.
    #[inline(always)]
    pub fn address(self) -> usize {
        self.0.get()
    }

    /// The object at `address`, if it is not 0.
    ///
    /// # Safety
    /// `address` is 0 or an object the collector allocated and that is still reachable.
    #[inline(always)]
    pub unsafe fn from_address(address: usize) -> Option<ObjRef> {
        NonZeroUsize::new(address).map(ObjRef)
    }

    /// The header word.
    #[inline(always)]
    pub fn header(self) -> usize {
        // SAFETY: an `ObjRef` names a live object whose first word is its header.
        unsafe { self.word(0) }
    }

    /// Word `index` of the object.
    ///
    /// # Safety
    /// `index` is within the object.
    #[inline(always)]
    pub unsafe fn word(self, index: usize) -> usize {
        // SAFETY: the caller's promise; objects are word-aligned.
        unsafe { *(self.address() as *const usize).add(index) }
    }

    /// The address of word `index`.
    #[inline(always)]
    pub fn word_ptr(self, index: usize) -> *mut usize {
        (self.address() as *mut usize).wrapping_add(index)
    }

    #[inline(always)]
    pub(crate) fn from_mmtk(o: ObjectReference) -> ObjRef {
        ObjRef(NonZeroUsize::new(o.to_raw_address().as_usize()).expect("null object"))
    }

    #[inline(always)]
    fn to_mmtk(self) -> ObjectReference {
        // SAFETY: an `Address` is a number; this one is an object MMTk allocated.
        let a = unsafe { mmtk::util::Address::from_usize(self.address()) };
        ObjectReference::from_raw_address(a).expect("ObjRef is never 0")
    }
}

/// Why [`Mmtk::start`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// The flags ask for what the binding cannot do.
    Config(ConfigError),
    /// The process's MMTk was built with another configuration.
    OtherConfiguration {
        /// What it was built with.
        built: String,
        /// What this VM asks for.
        asked: String,
    },
    /// Another VM uses the process's MMTk now.
    InUse,
    /// The process's MMTk serves another language's objects.
    OtherLanguage,
    /// MMTk could not be built or its workers started.
    Failed(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => e.fmt(f),
            StartError::OtherConfiguration { built, asked } => write!(
                f,
                "The MMTk heap of this process was created as {built}; a process has one MMTk heap, so a VM asking for {asked} cannot use it"
            ),
            StartError::InUse => f.write_str("The MMTk heap of this process is in use by another VM"),
            StartError::OtherLanguage => f.write_str(
                "The MMTk heap of this process was created for another language's objects",
            ),
            StartError::Failed(why) => write!(f, "MMTk could not be started: {why}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> Self {
        StartError::Config(e)
    }
}

/// The heap could not satisfy an allocation: `java.lang.OutOfMemoryError: Java heap space`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory;

impl std::fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("java.lang.OutOfMemoryError: Java heap space")
    }
}

impl std::error::Error for OutOfMemory {}

/// The MMTk heap of a VM. Cheap to clone; every thread that allocates binds a [`Mutator`].
pub struct Mmtk<L: Language> {
    vm: VmHandle,
    config: Config,
    /// Objects from this size up go to the large object space.
    los_threshold: usize,
    /// The plan needs the object-remembering barrier (StickyImmix).
    barrier: bool,
    /// NoGC: the heap's limit, which the binding enforces (0: MMTk's trigger does).
    no_gc_limit: usize,
    _language: PhantomData<fn() -> L>,
}

impl<L: Language> Clone for Mmtk<L> {
    fn clone(&self) -> Self {
        Mmtk {
            vm: self.vm.clone(),
            config: self.config,
            los_threshold: self.los_threshold,
            barrier: self.barrier,
            no_gc_limit: self.no_gc_limit,
            _language: PhantomData,
        }
    }
}

impl<L: Language> std::fmt::Debug for Mmtk<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mmtk")
            .field("config", &self.config)
            .finish()
    }
}

impl<L: Language> Mmtk<L> {
    /// Starts MMTk for `vm` with the configuration its flags give ([`Config::from_flags`]):
    /// builds the process's MMTk (first VM) or reuses it (a later VM, same configuration),
    /// starts the GC workers on `vm`'s collector threads, registers `GC.heap_info` and
    /// `GC.run`, and ends the workers when `vm` is destroyed. Logs `Using MMTk <Plan>`
    /// (`-Xlog:gc`).
    pub fn start(vm: &VmHandle) -> Result<Mmtk<L>, StartError> {
        let config = Config::from_flags(vm.flags())?;
        let mut instance = lock(&state::INSTANCE);
        match instance.as_mut() {
            Some(i) => {
                if let Some(why) = &i.broken {
                    return Err(StartError::Failed(why.clone()));
                }
                if i.language != TypeId::of::<L>() {
                    return Err(StartError::OtherLanguage);
                }
                if i.in_use {
                    return Err(StartError::InUse);
                }
                if i.config != config {
                    return Err(StartError::OtherConfiguration {
                        built: state::describe(&i.config),
                        asked: state::describe(&config),
                    });
                }
                state::set_vm(Some(vm.clone()));
                state::NEXT_WORKER.store(0, Ordering::Release);
                state::mmtk::<L>().after_fork(mmtk::util::opaque_pointer::VMThread::UNINITIALIZED);
                log::debug!(target: "gc", "MMTk reused: {} workers respawned", config.threads);
            }
            None => {
                let mut builder = MMTKBuilder::new_no_env_vars();
                let o = &mut builder.options;
                let set = o.plan.set(config.plan.selector())
                    && o.threads.set(config.threads)
                    && o.gc_trigger.set(match config.trigger {
                        Trigger::Fixed(n) => GCTriggerSelector::FixedHeapSize(n),
                        Trigger::Dynamic { min, max } => {
                            GCTriggerSelector::DynamicHeapSize(min, max)
                        }
                    })
                    && o.transparent_hugepages.set(config.transparent_hugepages)
                    && o.no_finalizer.set(true)
                    && o.no_reference_types.set(true);
                if !set {
                    return Err(StartError::Failed(format!(
                        "MMTk refused the options of {}",
                        state::describe(&config)
                    )));
                }
                let built = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    memory_manager::mmtk_init::<Rtvm<L>>(&builder)
                }))
                .map_err(|p| StartError::Failed(panic_text(&p)))?;
                let mmtk: &'static mmtk::MMTK<Rtvm<L>> = Box::leak(built);
                state::MMTK_ADDRESS.store(mmtk as *const _ as usize, Ordering::Release);
                state::set_vm(Some(vm.clone()));
                state::NEXT_WORKER.store(0, Ordering::Release);
                memory_manager::initialize_collection(
                    mmtk,
                    mmtk::util::opaque_pointer::VMThread::UNINITIALIZED,
                );
                if config.plan == Plan::NoGC {
                    // MMTk's NoGC panics when its trigger asks for a collection: it never
                    // asks now, and the binding enforces -Xmx itself (`Mutator::alloc`).
                    let _ = memory_manager::disable_collection(mmtk);
                }
                *instance = Some(state::Instance {
                    language: TypeId::of::<L>(),
                    config,
                    in_use: false,
                    broken: None,
                });
            }
        }
        let i = instance.as_mut().expect("set above");
        if let Some(e) = lock(&state::SPAWN_ERROR).take() {
            i.broken = Some(format!("a GC worker thread did not start: {e}"));
            state::set_vm(None);
            return Err(StartError::Failed(i.broken.clone().unwrap_or_default()));
        }
        i.in_use = true;
        drop(instance);
        let hook = vm.add_shutdown_hook(state::release::<L>);
        if let Err(e) = hook {
            state::release::<L>();
            return Err(StartError::Failed(e.to_string()));
        }
        let mmtk = state::mmtk::<L>();
        let constraints = mmtk.get_plan().constraints();
        let me = Mmtk {
            vm: vm.clone(),
            config,
            los_threshold: constraints.max_non_los_default_alloc_bytes,
            barrier: constraints.barrier != BarrierSelector::NoBarrier,
            no_gc_limit: if config.plan == Plan::NoGC {
                config.trigger.max()
            } else {
                0
            },
            _language: PhantomData,
        };
        log::info!(target: "gc", "Using MMTk {}", config.plan);
        log::info!(
            target: "gc+heap",
            "Heap: {}, address range [{:#x}, {:#x}){}",
            state::describe(&config),
            memory_manager::starting_heap_address().as_usize(),
            memory_manager::last_heap_address().as_usize(),
            if SANITY_CHECKS {
                ", sanity checks on (a sanity trace after every collection)"
            } else {
                ""
            }
        );
        service::register(&me);
        vm.report_heap(move || {
            let f = state::heap_figures::<L>(&config);
            rtvm::CollectorHeap {
                reserved: f.reserved,
                committed: f.used,
                range: f.range,
                pages: if config.transparent_hugepages {
                    "MMTk chunks, transparent huge pages".into()
                } else {
                    "MMTk chunks".into()
                },
            }
        });
        Ok(me)
    }

    /// The configuration MMTk runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The VM.
    pub fn vm(&self) -> &VmHandle {
        &self.vm
    }

    /// Binds the calling thread (a VM thread or an attached thread of this VM) as a mutator.
    /// The [`Mutator`] must stay on this thread and be dropped before the thread ends or
    /// detaches. `None` on any other thread.
    pub fn bind(&self) -> Option<Mutator<L>> {
        let id = self.vm.current_thread_id()?;
        let cell = MutatorCell::<L>::new(id);
        let _ns = NoAsyncStop::enter();
        let m = memory_manager::bind_mutator(state::mmtk::<L>(), cell.tls());
        cell.register(m);
        let immix = match memory_manager::get_allocator_mapping(
            state::mmtk::<L>(),
            AllocationSemantics::Default,
        ) {
            s @ AllocatorSelector::Immix(_) => {
                // SAFETY: this thread's mutator, registered just now.
                let m = unsafe { cell.mutator_mut_ref() };
                // SAFETY: the plan's selector for `Default` names an `ImmixAllocator`.
                let a = unsafe { m.allocator_impl_mut::<ImmixAllocator<Rtvm<L>>>(s) };
                Some(NonNull::from(a))
            }
            _ => None,
        };
        Some(Mutator {
            cell,
            immix,
            los_threshold: self.los_threshold,
            barrier: self.barrier,
            no_gc_limit: self.no_gc_limit,
            _not_send: PhantomData,
        })
    }

    /// Runs a full collection now (`GC.run` and `System.gc()` run it) and waits for it, from
    /// any thread: a mutator waits in a safe region. With `NoGC`, nothing happens (`false`).
    pub fn collect(&self) -> bool {
        let tls = mmtk::util::opaque_pointer::VMMutatorThread(
            mmtk::util::opaque_pointer::VMThread::UNINITIALIZED,
        );
        if self.config.plan == Plan::NoGC {
            return false;
        }
        state::request_collection::<L>(tls)
    }

    /// Bytes in use, the current heap size, and the collections so far.
    pub fn usage(&self) -> HeapUsage {
        let f = state::heap_figures::<L>(&self.config);
        HeapUsage {
            used: f.used,
            total: f.total,
            max: f.reserved,
            collections: state::COLLECTIONS.load(Ordering::Acquire),
            pause_nanos: state::PAUSE_NANOS.load(Ordering::Acquire),
        }
    }
}

/// What [`Mmtk::usage`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapUsage {
    /// Bytes MMTk counts as used (reserved pages).
    pub used: usize,
    /// The heap's current size (the trigger's).
    pub total: usize,
    /// `-Xmx`.
    pub max: usize,
    /// Collections in this process so far.
    pub collections: u64,
    /// Their pauses, in total.
    pub pause_nanos: u64,
}

/// A thread's binding to the MMTk heap: allocation and reference stores. Not `Send`.
pub struct Mutator<L: Language> {
    cell: Box<MutatorCell<L>>,
    /// The plan's allocator for `Default` when it is an `ImmixAllocator` (Immix,
    /// StickyImmix), inside the boxed MMTk mutator (which stays put until `Drop`): `alloc`
    /// calls it directly, with no lookup and no dynamic dispatch, so its bump-pointer path
    /// inlines here (as MMTk's OpenJDK binding reaches into its mutator's allocator).
    immix: Option<NonNull<ImmixAllocator<Rtvm<L>>>>,
    los_threshold: usize,
    barrier: bool,
    no_gc_limit: usize,
    _not_send: PhantomData<*const ()>,
}

impl<L: Language> std::fmt::Debug for Mutator<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutator")
            .field("thread", &self.cell.thread_id)
            .finish()
    }
}

impl<L: Language> Mutator<L> {
    /// Allocates `bytes` (a multiple of 8, at least 16) and lets `init` write every word of
    /// the new object before any collection can see it: the header and each reference slot
    /// (0 or an object). `init` must not allocate, poll or block. May collect first (the
    /// thread waits in a safe region); [`OutOfMemory`] when even a collection leaves no room.
    #[inline]
    pub fn alloc(
        &mut self,
        bytes: usize,
        init: impl FnOnce(ObjRef),
    ) -> Result<ObjRef, OutOfMemory> {
        debug_assert!(
            bytes >= 16 && bytes.is_multiple_of(8),
            "object size {bytes}"
        );
        let semantics = if bytes >= self.los_threshold {
            AllocationSemantics::Los
        } else {
            AllocationSemantics::Default
        };
        // No stop between the allocation and its valid-object bit: a scan would miss it.
        let _ns = NoAsyncStop::enter();
        if self.no_gc_limit != 0
            && memory_manager::used_bytes(state::mmtk::<L>()) + bytes > self.no_gc_limit
        {
            return Err(OutOfMemory);
        }
        let immix = match semantics {
            AllocationSemantics::Default => self.immix,
            _ => None,
        };
        let a = match immix {
            // SAFETY: the allocator of this thread's registered mutator, used by this thread
            // while running (as `memory_manager::alloc` would use it).
            Some(mut allocator) => unsafe { allocator.as_mut() }.alloc(bytes, 8, 0),
            None => {
                // SAFETY: this thread's own registered mutator, used by this thread while
                // running.
                let m = unsafe { self.cell.mutator_mut_ref() };
                memory_manager::alloc(m, bytes, 8, 0, semantics)
            }
        };
        if a.is_zero() {
            self.cell.out_of_memory.store(false, Ordering::Relaxed);
            return Err(OutOfMemory);
        }
        let object = ObjectReference::from_raw_address(a).expect("not zero");
        let r = ObjRef::from_mmtk(object);
        init(r);
        if immix.is_some() {
            // The Immix space's post-allocation work is the VO bit alone
            // (`ImmixSpace::initialize_object_metadata`).
            debug_assert_eq!(
                VO_BIT_SIDE_METADATA_SPEC.load_atomic::<u8>(a, Ordering::Relaxed),
                0
            );
            // SAFETY: MMTk's atomic store is a compare-and-swap loop on the metadata byte
            // that holds the VO bits of 64 heap bytes; a plain read-modify-write is enough:
            // the byte covers part of an Immix line (256 bytes) this thread's allocator
            // holds, and no other thread writes it meanwhile: other mutators allocate in
            // other lines, the collector writes VO bits only with the world stopped (this
            // thread is in `NoAsyncStop`, and the stop orders its writes before the
            // collector's reads).
            unsafe { VO_BIT_SIDE_METADATA_SPEC.store::<u8>(a, 1) };
        } else {
            // SAFETY: as above.
            let m = unsafe { self.cell.mutator_mut_ref() };
            memory_manager::post_alloc(m, object, bytes, semantics);
        }
        Ok(r)
    }

    /// Stores `value` into word `index` of `object` (a reference slot), with the plan's
    /// write barrier.
    #[inline]
    pub fn store(&mut self, object: ObjRef, index: usize, value: Option<ObjRef>) {
        let slot = object.word_ptr(index);
        let raw = value.map_or(0, ObjRef::address);
        if !self.barrier {
            // SAFETY: `index` is a slot of the live `object` (the caller's promise as for
            // `Language::for_each_slot`).
            unsafe { std::ptr::write_volatile(slot, raw) };
            return;
        }
        let _ns = NoAsyncStop::enter();
        // SAFETY: as in `alloc`.
        let m = unsafe { self.cell.mutator_mut_ref() };
        let s = SimpleSlot::from_address(mmtk::util::Address::from_mut_ptr(slot));
        let target = value.map(ObjRef::to_mmtk);
        memory_manager::object_reference_write_pre(m, object.to_mmtk(), s, target);
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(slot, raw) };
        memory_manager::object_reference_write_post(m, object.to_mmtk(), s, target);
    }
}

impl<L: Language> Drop for Mutator<L> {
    fn drop(&mut self) {
        self.cell.unregister();
    }
}

/// A global root of the embedder's: a word the collector treats as a pinning root while the
/// `Root` exists.
#[derive(Debug)]
pub struct Root {
    word: Arc<AtomicUsize>,
}

impl Root {
    /// A new root holding `object`.
    pub fn new(object: Option<ObjRef>) -> Root {
        let word = Arc::new(AtomicUsize::new(object.map_or(0, ObjRef::address)));
        let _ns = NoAsyncStop::enter();
        lock(&state::ROOTS).push(Arc::as_ptr(&word) as usize);
        Root { word }
    }

    /// The object it holds.
    pub fn get(&self) -> Option<ObjRef> {
        NonZeroUsize::new(self.word.load(Ordering::Acquire)).map(ObjRef)
    }

    /// Makes it hold `object`.
    pub fn set(&self, object: Option<ObjRef>) {
        self.word
            .store(object.map_or(0, ObjRef::address), Ordering::Release);
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let me = Arc::as_ptr(&self.word) as usize;
        let _ns = NoAsyncStop::enter();
        lock(&state::ROOTS).retain(|&r| r != me);
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic".into())
}
