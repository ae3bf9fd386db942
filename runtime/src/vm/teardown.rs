//! The one teardown ([`Vm::shutdown`], or `Drop`): the order is in the module documentation
//! of [`crate::vm`].

use std::sync::Arc;
use std::time::Duration;

use rtvm_flags::flag;

use super::{Vm, VmInner};
use crate::error::ShutdownError;
use crate::lifecycle::VmState;
use crate::output::Stream;
use crate::threads;

impl VmInner {
    pub(super) fn shutdown(&self) -> Result<(), ShutdownError> {
        if !self.in_creator_process() {
            return Err(ShutdownError::Forked);
        }
        if let Some(thread) = self.registry.current_started_thread_name() {
            return Err(ShutdownError::OnVmThread { thread });
        }
        if crate::safepoint::in_stop() {
            return Err(ShutdownError::WorldStopped);
        }
        // An attached thread destroying the VM waits in a safe region.
        let _wait = crate::safepoint::SafeWait::enter();
        if self.registry.request_destroy() != VmState::Running {
            self.registry.wait_destroyed();
            return Ok(());
        }
        let mut errors = Vec::new();
        self.heap.end_holds();
        if let Err(e) = self.heap.wait_for_pretouch() {
            errors.push(e.to_string());
        }
        self.registry.wait_for_application_threads();
        for info in self.registry.list() {
            if info.kind.is_application() {
                if let Err(e) = threads::join_info(&self.registry, &info) {
                    errors.push(e.to_string());
                }
            }
        }
        if let Some(stress) = crate::safepoint::lock(&self.stress).take() {
            errors.extend(stress.stop());
        }
        // The collector's threads end when it tells them to: its hooks run now, in the order
        // they were added, then the collector's threads are joined.
        let hooks = std::mem::take(&mut *crate::safepoint::lock(&self.shutdown_hooks));
        for hook in hooks {
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(hook)) {
                errors.push(format!(
                    "a shutdown hook panicked: {}",
                    threads::panic_message(&*p)
                ));
            }
        }
        for info in self.registry.list() {
            if info.kind == threads::ThreadKind::Collector {
                if let Err(e) = threads::join_info(&self.registry, &info) {
                    errors.push(e.to_string());
                }
            }
        }
        // No attach client or SIGQUIT is served from here on; the socket and the perf data
        // file are gone.
        errors.extend(self.service.stop());
        if self.flags.get(flag::PrintNMTStatistics) {
            if let Some(n) = self.native_memory_summary() {
                self.output.write(Stream::Stdout, &n.report());
            }
        }
        errors.extend(self.gang.stop());
        // Every thread is joined: the stacks kept for reuse go too.
        self.registry.stack_cache().clear();
        let process = self.lock_process().take();
        drop(process);
        // Joined is not yet gone: each thread's last kernel steps follow its join. The host
        // finds none of the VM's threads left once destroy returns.
        let joined = self.registry.take_joined_in_destroy();
        let left = rtvm_os_linux::thread::wait_until_released(&joined, Duration::from_secs(2));
        if !left.is_empty() {
            log::warn!(target: "os+thread", "{} joined thread(s) not yet released by the kernel after 2 s: {left:?}", left.len());
        }
        self.registry.set_destroyed();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ShutdownError::Failures { messages: errors })
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        if !self.inner.in_creator_process() {
            // A child of fork(): the VM's threads (workers, the async logger) do not exist
            // here, so nothing of it can be torn down — joining them would wait forever. It
            // stays as the child's copy of the parent's memory, until exec or exit.
            std::mem::forget(Arc::clone(&self.inner));
            return;
        }
        if self.inner.registry.state() == VmState::Destroyed {
            return;
        }
        if self.inner.registry.current_started_thread_name().is_some() {
            // This thread cannot wait for itself: a reaper does, once it has finished.
            let inner = Arc::clone(&self.inner);
            let reaper = std::thread::Builder::new()
                .name("rtvm-reaper".into())
                .spawn(move || {
                    if let Err(e) = inner.shutdown() {
                        inner.output.write(Stream::Stderr, &format!("rtvm: {e}\n"));
                    }
                });
            if let Err(e) = reaper {
                self.inner.output.write(
                    Stream::Stderr,
                    &format!("rtvm: the VM was dropped on its own thread and no reaper thread could start ({e}); it stays alive\n"),
                );
            }
            return;
        }
        if let Err(e) = self.inner.shutdown() {
            self.inner
                .output
                .write(Stream::Stderr, &format!("rtvm: {e}\n"));
        }
    }
}
