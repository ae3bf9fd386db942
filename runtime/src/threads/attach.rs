//! Threads the host created, joining the VM (JNI's `AttachCurrentThread`) and leaving it.

use std::sync::Arc;

use rtvm_os_linux::stack;
use rtvm_os_linux::thread::{self as os_thread, errno_name};
use rtvm_os_linux::{Errno, StackLayout};

use crate::safepoint;

thread_local! {
    /// The attached thread's own signal mask, put back when it detaches. Plain data.
    static CALLER_MASK: std::cell::Cell<Option<rtvm_os_linux::safepoint::SignalMask>> =
        const { std::cell::Cell::new(None) };
}

use super::{NewThread, Registry, StackBounds, ThreadError, ThreadInfo, ThreadKind, ThreadState};

impl Registry {
    /// Attaches the calling thread: reads its stack from glibc, registers it as
    /// [`ThreadKind::Attached`], and sets a hook that forgets it if it ends without
    /// detaching. `soft_limit_offset` is the soft limit's distance above the stack's lowest
    /// address.
    pub(crate) fn attach_current(
        self: &Arc<Self>,
        name: &str,
        soft_limit_offset: usize,
    ) -> Result<Arc<ThreadInfo>, ThreadError> {
        if let Some(me) = self.current_thread() {
            return Err(ThreadError::AlreadyAttached {
                name: me.name.clone(),
            });
        }
        let (usable, guard) = stack::current_thread_stack().ok_or_else(|| ThreadError::Attach {
            message: format!("Failed to attach thread \"{name}\" - pthread_getattr_np failed"),
            errno: Errno::last(),
        })?;
        let tid = rtvm_os_linux::system::current_tid();
        let id = self.next_id();
        let mutator = self
            .safepoints()
            .register(id, name, usable.clone())
            .map_err(|e| ThreadError::Attach {
                message: format!("Failed to attach thread \"{name}\" - {e}"),
                errno: Errno::EINVAL,
            })?;
        let info = ThreadInfo::new(NewThread {
            id,
            name: name.to_owned(),
            kind: ThreadKind::Attached,
            layout: StackLayout::foreign(usable.clone(), guard),
            no_huge_pages: false,
            huge_page: 2 << 20,
            soft_limit_offset,
            state: ThreadState::Runnable,
            tid,
            glibc_stack: Some(usable),
            go: true,
            mutator: Some(mutator),
        });
        if let Err(e) = self.register(&info) {
            self.safepoints().unregister(mutator);
            return Err(e);
        }
        // A host thread that ends attached is forgotten by the VM (the hook runs in its last
        // moments: no logging). Allocated here, on the attaching thread.
        let (registry, id) = (Arc::clone(self), info.id);
        let hook: os_thread::ExitHook = Box::new(move || {
            safepoint::finish(mutator);
            safepoint::unbind();
            registry.remove(id);
        });
        if let Err(errno) = os_thread::set_current_thread_exit_hook(hook) {
            self.unregister(&info);
            return Err(ThreadError::Attach {
                message: format!(
                    "Failed to attach thread \"{name}\" - pthread_setspecific failed ({})",
                    errno_name(errno)
                ),
                errno,
            });
        }
        self.set_current(Some(info.id));
        // While attached, the stop signal and the faults rtvm reports reach this thread
        // whatever mask the host gave it (the signalfd idiom blocks everything); its own mask
        // comes back at detach, as HotSpot restores an attached thread's caller mask.
        let mask = rtvm_os_linux::safepoint::unblock_vm_signals(0);
        CALLER_MASK.with(|c| c.set(Some(mask)));
        // The host's code goes on as a mutator (a stop of the world under way is waited for).
        safepoint::bind(mutator);
        safepoint::start_running(mutator);
        let l = &info.layout;
        log::info!(
            target: "os+thread",
            "Thread attached (tid: {tid}, name: \"{name}\", stack: {:#x} - {:#x} ({}k), guard: {:#x}-{:#x}).",
            l.usable.end,
            l.usable.start,
            l.usable.len() / 1024,
            l.guard.start,
            l.guard.end
        );
        Ok(info)
    }

    /// Detaches the calling thread, which must be attached (not started by the VM).
    pub(crate) fn detach_current(&self) -> Result<(), ThreadError> {
        match self.current_thread() {
            Some(me) if me.kind == ThreadKind::Attached => {
                drop(os_thread::take_current_thread_exit_hook());
                if let Some(m) = me.mutator {
                    // Detaching waits while the world is stopped.
                    safepoint::finish(m);
                    safepoint::unbind();
                }
                if let Some(mask) = CALLER_MASK.with(|c| c.take()) {
                    mask.restore();
                }
                self.set_current(None);
                self.remove(me.id);
                log::info!(target: "os+thread", "Thread detached (tid: {}, name: \"{}\").", me.tid(), me.name);
                Ok(())
            }
            Some(me) => Err(ThreadError::NotAttached {
                started: Some(me.name.clone()),
            }),
            None => Err(ThreadError::NotAttached { started: None }),
        }
    }
}

/// The calling thread's attachment to a VM
/// ([`VmHandle::attach_current_thread`](crate::VmHandle::attach_current_thread)); dropping it
/// detaches the thread (JNI's `DetachCurrentThread`). Not `Send`: only the attached thread
/// can detach itself.
#[derive(Debug)]
pub struct AttachedThread {
    info: Arc<ThreadInfo>,
    /// `None` once detached.
    registry: Option<Arc<Registry>>,
    _this_thread: std::marker::PhantomData<*const ()>,
}

impl AttachedThread {
    pub(crate) fn new(info: Arc<ThreadInfo>, registry: Arc<Registry>) -> AttachedThread {
        AttachedThread {
            info,
            registry: Some(registry),
            _this_thread: std::marker::PhantomData,
        }
    }

    /// The registry entry.
    pub fn info(&self) -> &Arc<ThreadInfo> {
        &self.info
    }

    /// The thread's stack bounds and soft limit, as glibc reports the stack
    /// (`pthread_getattr_np`); the guard is glibc's guard page (none for the process's first
    /// thread).
    pub fn stack_bounds(&self) -> StackBounds {
        self.info.stack_bounds()
    }

    /// Detaches the thread (what dropping the guard does, with the outcome).
    pub fn detach(mut self) -> Result<(), ThreadError> {
        self.registry.take().map_or(Ok(()), |r| r.detach_current())
    }
}

impl Drop for AttachedThread {
    fn drop(&mut self) {
        if let Some(r) = self.registry.take() {
            let _ = r.detach_current();
        }
    }
}
