//! MMTk's `VMBinding` for rtvm: `Collection`, `ActivePlan`, `Scanning`, `ObjectModel` and
//! `ReferenceGlue`, once for every [`Language`].

use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use mmtk::util::copy::{CopySemantics, GCWorkerCopyContext};
use mmtk::util::opaque_pointer::{VMMutatorThread, VMThread, VMWorkerThread};
use mmtk::util::{Address, ObjectReference};
use mmtk::vm::slot::{SimpleSlot, UnimplementedMemorySlice};
use mmtk::vm::{
    ActivePlan, Collection, GCThreadContext, ObjectModel, ReferenceGlue, RootsWorkFactory,
    Scanning, SlotVisitor, VMBinding, VMGlobalLogBitSpec, VMLocalForwardingBitsSpec,
    VMLocalForwardingPointerSpec, VMLocalLOSMarkNurserySpec, VMLocalMarkBitSpec,
};
use mmtk::Mutator;

use crate::state::{self, MutatorCell};
use crate::{Language, ObjRef};

/// The binding type MMTk is instantiated with: rtvm's threads, stops and conservative roots,
/// with `L`'s objects.
pub struct Rtvm<L>(PhantomData<L>);

impl<L> std::fmt::Debug for Rtvm<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rtvm")
    }
}

impl<L> Default for Rtvm<L> {
    fn default() -> Self {
        Rtvm(PhantomData)
    }
}

impl<L: Language> VMBinding for Rtvm<L> {
    type VMObjectModel = Self;
    type VMScanning = Self;
    type VMCollection = Self;
    type VMActivePlan = Self;
    type VMReferenceGlue = Self;
    type VMSlot = SimpleSlot;
    type VMMemorySlice = UnimplementedMemorySlice<SimpleSlot>;
    // Objects are word-aligned: every header is a word.
    const MIN_ALIGNMENT: usize = 8;
    const MAX_ALIGNMENT: usize = 8;
}

fn object_of(object: ObjectReference) -> ObjRef {
    ObjRef::from_mmtk(object)
}

// ---- Collection -------------------------------------------------------------------------

impl<L: Language> Collection<Rtvm<L>> for Rtvm<L> {
    fn stop_all_mutators<F>(_tls: VMWorkerThread, mut mutator_visitor: F)
    where
        F: FnMut(&'static mut Mutator<Rtvm<L>>),
    {
        state::stop_the_world::<L>();
        for m in state::mutators() {
            // SAFETY: the world is stopped: every registered mutator's thread is stopped
            // (or in a safe region) and does not touch its `Mutator`; the set is fixed
            // until the world resumes (threads start, end, attach and detach only then).
            mutator_visitor(unsafe { MutatorCell::<L>::mutator_mut(m) });
        }
    }

    fn resume_mutators(_tls: VMWorkerThread) {
        state::resume_the_world::<L>();
    }

    fn block_for_gc(tls: VMMutatorThread) {
        state::block_for_gc(tls);
    }

    fn spawn_gc_thread(_tls: VMThread, ctx: GCThreadContext<Rtvm<L>>) {
        let GCThreadContext::Worker(worker) = ctx;
        state::spawn_worker::<L>(worker);
    }

    fn out_of_memory(tls: VMThread, err_kind: mmtk::util::alloc::AllocationError) {
        // Returning makes the allocation answer null: the mutator's `alloc` reports the
        // OutOfMemoryError to the language, which unwinds as it likes (never a panic here).
        log::info!(target: "gc", "Out of memory: {err_kind:?}");
        if state::is_mutator_tls(tls) {
            // SAFETY: a mutator's tls is the address of its live cell (`is_mutator_tls`).
            unsafe { MutatorCell::<L>::from_tls(tls) }
                .out_of_memory
                .store(true, Ordering::Relaxed);
        }
    }
}

// ---- ActivePlan -------------------------------------------------------------------------

impl<L: Language> ActivePlan<Rtvm<L>> for Rtvm<L> {
    fn is_mutator(tls: VMThread) -> bool {
        state::is_mutator_tls(tls)
    }

    fn mutator(tls: VMMutatorThread) -> &'static mut Mutator<Rtvm<L>> {
        // SAFETY: MMTk asks for the mutator of a mutator tls only on that thread or during a
        // pause; the tls is the address of the thread's live cell.
        unsafe { MutatorCell::<L>::from_tls(tls.0).mutator_mut_ref() }
    }

    fn mutators<'a>() -> Box<dyn Iterator<Item = &'a mut Mutator<Rtvm<L>>> + 'a> {
        let all: Vec<&'a mut Mutator<Rtvm<L>>> = state::mutators()
            .into_iter()
            // SAFETY: called during a pause: as in `stop_all_mutators`.
            .map(|m| unsafe { MutatorCell::<L>::mutator_mut(m) })
            .collect();
        Box::new(all.into_iter())
    }

    fn number_of_mutators() -> usize {
        state::mutators().len()
    }
}

// ---- Scanning ---------------------------------------------------------------------------

impl<L: Language> Scanning<Rtvm<L>> for Rtvm<L> {
    fn scan_object<SV: SlotVisitor<SimpleSlot>>(
        _tls: VMWorkerThread,
        object: ObjectReference,
        slot_visitor: &mut SV,
    ) {
        L::for_each_slot(object_of(object), &mut |slot: *mut usize| {
            let address = Address::from_mut_ptr(slot);
            slot_visitor.visit_slot(SimpleSlot::from_address(address));
        });
    }

    fn notify_initial_thread_scan_complete(_partial_scan: bool, _tls: VMWorkerThread) {}

    fn scan_roots_in_mutator_thread(
        _tls: VMWorkerThread,
        mutator: &'static mut Mutator<Rtvm<L>>,
        mut factory: impl RootsWorkFactory<SimpleSlot>,
    ) {
        // SAFETY: the mutator's tls is its cell's address (set at bind).
        let cell = unsafe { MutatorCell::<L>::from_tls(mutator.mutator_tls.0) };
        let roots = state::conservative_roots::<L>(cell.thread_id);
        if !roots.is_empty() {
            factory.create_process_pinning_roots_work(roots);
        }
    }

    fn scan_vm_specific_roots(
        _tls: VMWorkerThread,
        mut factory: impl RootsWorkFactory<SimpleSlot>,
    ) {
        let roots = state::global_roots();
        if !roots.is_empty() {
            factory.create_process_pinning_roots_work(roots);
        }
    }

    fn supports_return_barrier() -> bool {
        false
    }

    fn prepare_for_roots_re_scanning() {
        // Only concurrent plans scan roots twice; the binding refuses them.
    }
}

// ---- ObjectModel ------------------------------------------------------------------------

impl<L: Language> ObjectModel<Rtvm<L>> for Rtvm<L> {
    // One header word (the language's); MMTk's per-object state is on the side, except the
    // forwarding pointer, which overwrites the header of an object already copied.
    const GLOBAL_LOG_BIT_SPEC: VMGlobalLogBitSpec = VMGlobalLogBitSpec::side_first();
    const LOCAL_FORWARDING_POINTER_SPEC: VMLocalForwardingPointerSpec =
        VMLocalForwardingPointerSpec::in_header(0);
    const LOCAL_FORWARDING_BITS_SPEC: VMLocalForwardingBitsSpec =
        VMLocalForwardingBitsSpec::side_first();
    const LOCAL_MARK_BIT_SPEC: VMLocalMarkBitSpec =
        VMLocalMarkBitSpec::side_after(Self::LOCAL_FORWARDING_BITS_SPEC.as_spec());
    const LOCAL_LOS_MARK_NURSERY_SPEC: VMLocalLOSMarkNurserySpec =
        VMLocalLOSMarkNurserySpec::side_after(Self::LOCAL_MARK_BIT_SPEC.as_spec());
    const OBJECT_REF_OFFSET_LOWER_BOUND: isize = 0;
    const UNIFIED_OBJECT_REFERENCE_ADDRESS: bool = true;

    fn copy(
        from: ObjectReference,
        semantics: CopySemantics,
        copy_context: &mut GCWorkerCopyContext<Rtvm<L>>,
    ) -> ObjectReference {
        let bytes = L::size(object_of(from));
        let to = copy_context.alloc_copy(from, bytes, 8, 0, semantics);
        // SAFETY: `to` is fresh space of `bytes` bytes; `from` is a live object of `bytes`
        // bytes; they do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                from.to_raw_address().to_ptr::<u8>(),
                to.to_mut_ptr::<u8>(),
                bytes,
            );
        }
        let object = ObjectReference::from_raw_address(to).expect("MMTk copied to address 0");
        copy_context.post_copy(object, bytes, semantics);
        object
    }

    fn copy_to(from: ObjectReference, to: ObjectReference, region: Address) -> Address {
        let bytes = L::size(object_of(from));
        if from != to {
            // SAFETY: MMTk moves a live object of `bytes` bytes to space it owns; the ranges
            // may overlap (a slide), hence `copy`.
            unsafe {
                std::ptr::copy(
                    from.to_raw_address().to_ptr::<u8>(),
                    to.to_raw_address().to_mut_ptr::<u8>(),
                    bytes,
                );
            }
        }
        let start = if region.is_zero() {
            to.to_raw_address()
        } else {
            region
        };
        start + bytes
    }

    fn get_reference_when_copied_to(_from: ObjectReference, to: Address) -> ObjectReference {
        ObjectReference::from_raw_address(to).expect("copied to address 0")
    }

    fn get_current_size(object: ObjectReference) -> usize {
        L::size(object_of(object))
    }

    fn get_size_when_copied(object: ObjectReference) -> usize {
        L::size(object_of(object))
    }

    fn get_align_when_copied(_object: ObjectReference) -> usize {
        8
    }

    fn get_align_offset_when_copied(_object: ObjectReference) -> usize {
        0
    }

    fn get_type_descriptor(_reference: ObjectReference) -> &'static [i8] {
        &[]
    }

    fn ref_to_object_start(object: ObjectReference) -> Address {
        object.to_raw_address()
    }

    fn ref_to_header(object: ObjectReference) -> Address {
        object.to_raw_address()
    }

    fn dump_object(object: ObjectReference) {
        let o = object_of(object);
        log::info!(target: "gc", "object {:#x}: {} bytes, header {:#x}", o.address(), L::size(o), o.header());
    }
}

// ---- ReferenceGlue: rtvm has no weak references or finalizers (options `no_reference_types`
// and `no_finalizer` are set, so MMTk never calls these).

impl<L: Language> ReferenceGlue<Rtvm<L>> for Rtvm<L> {
    type FinalizableType = ObjectReference;

    fn clear_referent(_new_reference: ObjectReference) {}

    fn get_referent(_object: ObjectReference) -> Option<ObjectReference> {
        None
    }

    fn set_referent(_reff: ObjectReference, _referent: ObjectReference) {}

    fn enqueue_references(_references: &[ObjectReference], _tls: VMWorkerThread) {}
}
