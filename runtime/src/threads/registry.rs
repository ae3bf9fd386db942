//! The live threads of a VM — started, workers and attached — and, under the same lock, the
//! VM's [`Lifecycle`], so that a thread start and the destroy agree on whether it counts.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::notify::Notifier;
use super::stack_cache::StackCache;
use super::{ThreadError, ThreadInfo, ThreadKind, CURRENT};
use crate::lifecycle::{Lifecycle, VmState};
use crate::safepoint::{Locked, Safepoints};

#[derive(Debug)]
struct RegistryState {
    threads: Vec<Arc<ThreadInfo>>,
    /// The VM's phase, embedded here: see [`crate::lifecycle`].
    lifecycle: Lifecycle,
    /// Kernel ids of the VM's own threads joined since the destroy began: the destroy waits
    /// until the kernel has released them too.
    joined_in_destroy: Vec<i32>,
}

/// The live threads of a VM and its lifecycle phase.
#[derive(Debug)]
pub(crate) struct Registry {
    pub(super) vm_id: u64,
    inner: Mutex<RegistryState>,
    cv: Notifier,
    next_id: AtomicU64,
    /// The process generation at creation: a child of `fork()` registers no thread.
    generation: u64,
    /// Stacks of joined threads, kept for the next ones.
    stack_cache: StackCache,
    /// The mutators (application and attached threads) and the stops of the world.
    safepoints: Arc<Safepoints>,
}

impl Registry {
    /// The registry of VM `vm_id`, keeping up to `stack_cache` bytes of stacks of joined
    /// threads for reuse.
    pub(crate) fn new(vm_id: u64, stack_cache: usize) -> Registry {
        Registry {
            vm_id,
            stack_cache: StackCache::new(stack_cache),
            safepoints: Arc::new(Safepoints::new()),
            inner: Mutex::new(RegistryState {
                threads: Vec::new(),
                lifecycle: Lifecycle::new(),
                joined_in_destroy: Vec::new(),
            }),
            cv: Notifier::new(),
            next_id: AtomicU64::new(0),
            generation: rtvm_os_linux::system::process_generation(),
        }
    }

    /// The stack cache.
    pub(crate) fn stack_cache(&self) -> &StackCache {
        &self.stack_cache
    }

    /// The mutators and the stops of the world.
    pub(crate) fn safepoints(&self) -> &Safepoints {
        &self.safepoints
    }

    /// The mutators and the stops of the world, shared (a stop outlives the borrow).
    pub(crate) fn safepoints_arc(&self) -> &Arc<Safepoints> {
        &self.safepoints
    }

    /// The VM's process-unique id (never reused, unlike its address).
    pub(crate) fn vm_id(&self) -> u64 {
        self.vm_id
    }

    fn lock(&self) -> Locked<'_, RegistryState> {
        let mut s = crate::safepoint::lock(&self.inner);
        // Threads a stop found gone without finishing (no exit hook ran) are forgotten.
        let vanished = self.safepoints.take_vanished();
        if !vanished.is_empty() {
            s.threads.retain(|t| !vanished.contains(&t.id));
        }
        s
    }

    /// A fresh thread id.
    pub(super) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Every live (not yet joined) thread.
    pub(crate) fn list(&self) -> Vec<Arc<ThreadInfo>> {
        self.lock().threads.clone()
    }

    /// How many threads are registered.
    pub(crate) fn count(&self) -> usize {
        self.lock().threads.len()
    }

    /// The lifecycle phase.
    pub(crate) fn state(&self) -> VmState {
        self.lock().lifecycle.state()
    }

    /// Whether this is a child of `fork()`, where the registered threads do not exist.
    pub(crate) fn forked(&self) -> bool {
        self.generation != rtvm_os_linux::system::process_generation()
    }

    pub(super) fn register(&self, info: &Arc<ThreadInfo>) -> Result<(), ThreadError> {
        if self.forked() {
            return Err(ThreadError::Forked {
                name: info.name.clone(),
            });
        }
        let mut s = self.lock();
        if !s.lifecycle.may_start() {
            return Err(ThreadError::ShuttingDown {
                name: info.name.clone(),
            });
        }
        s.threads.push(Arc::clone(info));
        s.lifecycle.started(info.kind.is_application());
        Ok(())
    }

    /// Takes back a registration whose thread never started.
    pub(super) fn unregister(&self, info: &ThreadInfo) {
        let mut s = self.lock();
        s.threads.retain(|t| t.id != info.id);
        s.lifecycle.finished(info.kind.is_application());
        self.cv.notify_all();
        drop(s);
        if let Some(m) = info.mutator {
            self.safepoints.unregister(m);
        }
    }

    pub(super) fn thread_finished(&self, kind: ThreadKind) {
        if kind.is_application() {
            self.lock().lifecycle.finished(true);
            self.cv.notify_all();
        }
    }

    pub(super) fn remove(&self, id: u64) {
        let mut s = self.lock();
        let gone = s
            .threads
            .iter()
            .position(|t| t.id == id)
            .map(|i| s.threads.remove(i));
        let destroying = s.lifecycle.state() != VmState::Running;
        drop(s);
        self.cv.notify_all();
        if let Some(t) = gone
            .as_ref()
            .filter(|t| destroying && t.kind != ThreadKind::Attached)
        {
            // Its handshake lock is taken outside the registry's.
            let tid = t.tid();
            self.lock().joined_in_destroy.push(tid);
        }
        // Its record goes back once the thread is finished (a stop may still hold it).
        if let Some(m) = gone.and_then(|t| t.mutator) {
            self.safepoints.unregister(m);
        }
    }

    /// Enters [`VmState::DestroyRequested`]. Returns the phase found: only the caller that
    /// found [`VmState::Running`] goes on to tear the VM down; the others wait for
    /// [`VmState::Destroyed`] ([`wait_destroyed`](Registry::wait_destroyed)).
    pub(crate) fn request_destroy(&self) -> VmState {
        self.lock().lifecycle.request_destroy()
    }

    /// Waits until no application thread is left — threads started meanwhile included — and
    /// enters [`VmState::ShuttingDown`] atomically with that observation.
    pub(crate) fn wait_for_application_threads(&self) {
        let mut s = self.lock();
        while s.lifecycle.application_threads_left() {
            s = self.cv.wait_locked(s);
        }
        s.lifecycle.shut_down();
    }

    /// The kernel ids of the VM's threads joined since the destroy began (once).
    pub(crate) fn take_joined_in_destroy(&self) -> Vec<i32> {
        std::mem::take(&mut self.lock().joined_in_destroy)
    }

    pub(crate) fn set_destroyed(&self) {
        self.lock().lifecycle.destroyed();
        self.cv.notify_all();
    }

    pub(crate) fn wait_destroyed(&self) {
        let mut s = self.lock();
        while s.lifecycle.state() != VmState::Destroyed {
            s = self.cv.wait_locked(s);
        }
    }

    /// Makes the calling thread this VM's thread `id` (or no VM's, with `None`).
    pub(super) fn set_current(&self, id: Option<u64>) {
        CURRENT.with(|c| c.set(id.map_or((0, 0), |id| (self.vm_id, id))));
    }

    /// The id of the calling thread, if it is one of this VM's threads (no lock taken).
    pub(crate) fn current_thread_id(&self) -> Option<u64> {
        let (vm, id) = CURRENT.with(Cell::get);
        (vm == self.vm_id).then_some(id)
    }

    /// The registry entry of the calling thread, if it is one of this VM's threads (started
    /// or attached).
    pub(crate) fn current_thread(&self) -> Option<Arc<ThreadInfo>> {
        let (vm, id) = CURRENT.with(Cell::get);
        if vm != self.vm_id {
            return None;
        }
        self.lock().threads.iter().find(|t| t.id == id).cloned()
    }

    /// Gives back the calling thread's stack pages below its current frame (see
    /// [`VmHandle::trim_current_stack`](crate::VmHandle::trim_current_stack)); returns the
    /// bytes given back. `NotAttached` for a thread this VM does not know, with nothing done.
    pub(crate) fn trim_current_stack(&self) -> Result<usize, ThreadError> {
        let (vm, id) = CURRENT.with(Cell::get);
        if vm != self.vm_id {
            return Err(ThreadError::NotAttached { started: None });
        }
        match rtvm_os_linux::stack::trim_own_stack() {
            Ok(freed) => {
                if freed > 0 {
                    log::trace!(target: "os+thread", "Thread #{id} gave back {freed} bytes of its stack");
                }
                Ok(freed)
            }
            Err(e) => Err(ThreadError::StackTrim {
                message: format!("trimming the stack failed: {e}"),
                errno: e.errno,
            }),
        }
    }

    /// The name of the calling thread if it is one the VM started (not an attached one):
    /// such a thread cannot wait for the VM's destruction, which waits for it.
    pub(crate) fn current_started_thread_name(&self) -> Option<String> {
        let (vm, id) = CURRENT.with(Cell::get);
        if vm != self.vm_id {
            return None;
        }
        let s = self.lock();
        match s.threads.iter().find(|t| t.id == id) {
            Some(t) if t.kind == ThreadKind::Attached => None,
            Some(t) => Some(t.name.clone()),
            None => Some(format!("#{id}")),
        }
    }
}
