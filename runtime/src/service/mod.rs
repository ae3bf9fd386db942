//! Serviceability: what makes a running VM operable with the JDK's own tools.
//!
//! | file | what |
//! | --- | --- |
//! | `context` | what these threads see of the VM |
//! | `dispatcher` | the Signal Dispatcher: `SIGQUIT` → attach listener or thread dump; `SIGTERM`, `SIGINT`, `SIGHUP` → `exit` |
//! | `exit` | the end those three bring: the VM's files removed, java's exit status |
//! | `attach` | the attach listener and its operations (`jcmd`, `jstack`, `jinfo`) |
//! | `dcmd/` | diagnostic commands: the parser, `help`, the commands |
//! | `threaddump` | HotSpot's thread-dump layout, with each thread's stack and guard zone |
//! | `perfdata` | the `hsperfdata` file of `jps` and `jcmd -l` |
//! | `properties` | the system properties and `Properties.store`'s format |
//! | `info` | `VM.info` |
//! | `trim` | trimming the C heap |
//! | `trimmer` | `-XX:TrimNativeHeapInterval`: the periodic trimmer thread |
//!
//! [`Service::start`] runs at VM creation (after the heap), [`Service::stop`] at destroy,
//! after the application threads: the embedder's diagnostic commands are closed (running
//! ones get a grace period), the listener is stopped (a client being served is
//! dropped) and its socket removed, the dispatcher is stopped and joined, the perf-data file
//! is removed (saved first with `-XX:+PerfDataSaveToFile`), and `SIGTERM`, `SIGINT` and
//! `SIGHUP` are given back.
//!
//! **Termination signals.** With the dispatcher (not with `-Xrs`), rtvm takes those of
//! `SIGTERM`, `SIGINT` and `SIGHUP` whose action is `SIG_DFL` (the host's handlers stay the
//! host's, an ignored signal stays ignored): on one, the VM's files are removed before the
//! process ends (`exit`), instead of staying behind for `jps` to list as `process information
//! unavailable`.

mod attach;
pub(crate) mod context;
pub(crate) mod dcmd;
mod dispatcher;
mod exit;
mod info;
mod perfdata;
mod properties;
mod threaddump;
pub(crate) mod trim;
mod trimmer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rtvm_flags::flag;
use rtvm_os_linux::terminate::{self, TerminationHandlers};

use self::attach::Listener;
use self::context::Context;
use self::perfdata::PerfData;
use self::trimmer::Trimmer;
use crate::threads::{self, Body, ThreadError, ThreadKind, VmThread};

pub(crate) use threaddump::DumpOptions;

/// The serviceability threads and files of one VM.
pub(crate) struct Service {
    ctx: Arc<Context>,
    listener: Arc<Mutex<Option<Listener>>>,
    dispatcher: Mutex<Option<(VmThread, Arc<AtomicBool>)>>,
    perf: Arc<Mutex<Option<PerfData>>>,
    /// rtvm's handlers of `SIGTERM`, `SIGINT` and `SIGHUP` (with the dispatcher).
    terminate: Mutex<Option<TerminationHandlers>>,
    trimmer: Mutex<Option<Trimmer>>,
    generation: u64,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").finish_non_exhaustive()
    }
}

impl Service {
    /// Starts what the flags ask for: the perf data (`UsePerfData`), the Signal Dispatcher
    /// when rtvm's `SIGQUIT` handler is installed (`quit_baseline`: the signal count when it
    /// went in; not with `-Xrs`), and the
    /// attach listener at once with `-Xrs` or `-XX:+StartAttachListener` (never with
    /// `-XX:+DisableAttachMechanism`). Failing to start the dispatcher fails the VM (as a
    /// thread the VM needs); the listener and the perf data only log why they are missing.
    pub(crate) fn start(ctx: Context, quit_baseline: Option<u32>) -> Result<Service, ThreadError> {
        let ctx = Arc::new(ctx);
        // A socket left by an earlier VM of this process (or of a process with this pid).
        let _ = std::fs::remove_file(attach::socket_path());
        let service = Service {
            perf: Arc::new(Mutex::new(PerfData::create(&ctx))),
            listener: Arc::new(Mutex::new(None)),
            dispatcher: Mutex::new(None),
            terminate: Mutex::new(None),
            trimmer: Mutex::new(None),
            generation: rtvm_os_linux::system::process_generation(),
            ctx,
        };
        let interval = service.ctx.flags.get(flag::TrimNativeHeapInterval);
        if interval > 0 {
            if rtvm_os_linux::system::malloc_stats().is_some() {
                let t = Trimmer::start(&service.ctx, interval)?;
                *service.trimmer.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
            } else {
                log::warn!(target: "trimnative", "Native heap trim is not supported on this platform");
            }
        }
        if let Some(seen) = quit_baseline {
            // Before the dispatcher: a signal that comes first waits for it.
            match terminate::install() {
                Ok(h) => *service.terminate.lock().unwrap_or_else(|p| p.into_inner()) = Some(h),
                Err(e) => {
                    log::warn!(target: "os", "Installing the SIGTERM/SIGINT/SIGHUP handlers failed ({}); these signals will leave the VM's files behind", rtvm_os_linux::strerror(e))
                }
            }
            let stop = Arc::new(AtomicBool::new(false));
            let (c, l, p, s) = (
                Arc::clone(&service.ctx),
                Arc::clone(&service.listener),
                Arc::clone(&service.perf),
                Arc::clone(&stop),
            );
            let body = Body::Rust(Box::new(move || dispatcher::run(&c, &l, &p, &s, seen)));
            let t = threads::spawn(
                &service.ctx.registry,
                &service.ctx.stacks,
                "Signal Dispatcher",
                ThreadKind::Service,
                None,
                false,
                body,
            )?;
            *service.dispatcher.lock().unwrap_or_else(|p| p.into_inner()) = Some((t, stop));
        }
        let f = &service.ctx.flags;
        let at_start = f.get(flag::ReduceSignalUsage) || f.get(flag::StartAttachListener);
        if at_start && !f.get(flag::DisableAttachMechanism) {
            match Listener::start(&service.ctx) {
                Ok(l) => *service.listener.lock().unwrap_or_else(|p| p.into_inner()) = Some(l),
                Err(e) => log::warn!(target: "attach", "The attach listener could not start: {e}"),
            }
        }
        Ok(service)
    }

    /// What the serviceability code sees of the VM.
    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Runs a diagnostic command (`jcmd <pid> <line>` without the attach mechanism).
    pub(crate) fn execute(&self, line: &str) -> dcmd::Reply {
        dcmd::execute(&self.ctx, line)
    }

    /// A thread dump, as `SIGQUIT` prints it.
    pub(crate) fn thread_dump(&self, options: DumpOptions) -> String {
        self.ctx.dcmds.reap();
        threaddump::thread_dump(&self.ctx.registry, options)
    }

    /// Registers an embedder's diagnostic command.
    pub(crate) fn register(&self, command: dcmd::DiagnosticCommand) -> Result<(), dcmd::DcmdError> {
        self.ctx.dcmds.register(command, dcmd::is_builtin)
    }

    /// Stops the listener and the dispatcher and removes the files; returns what failed.
    /// The embedder's diagnostic commands go first: running ones get
    /// [`dcmd::SHUTDOWN_GRACE`] to finish while the listener still delivers their replies.
    pub(crate) fn stop(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let in_creator = self.generation == rtvm_os_linux::system::process_generation();
        if in_creator {
            errors.extend(self.ctx.dcmds.close(dcmd::SHUTDOWN_GRACE));
        }
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let dispatcher = self
            .dispatcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let trimmer = self
            .trimmer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let handlers = self
            .terminate
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if !in_creator {
            // A child of fork(): these threads are the parent's (and the handlers end the
            // child by the default action: no dispatcher of its own takes the signals).
            std::mem::forget((listener, dispatcher, trimmer, handlers));
            return errors;
        }
        if let Some(t) = trimmer {
            errors.extend(t.stop());
        }
        if let Some(l) = listener {
            errors.extend(l.stop());
        }
        if let Some((t, stop)) = dispatcher {
            stop.store(true, Ordering::Release);
            rtvm_os_linux::quit::kick();
            if let Err(e) = t.join() {
                errors.push(e.to_string());
            }
        }
        // The dispatcher may have started a listener while it was being stopped.
        if let Some(l) = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            errors.extend(l.stop());
        }
        if let Some(p) = self.perf.lock().unwrap_or_else(|p| p.into_inner()).take() {
            p.finish(&self.ctx);
        }
        // The files are gone: SIG_DFL again. A signal that came after the dispatcher
        // stopped has waited for this; it ends the process now.
        if let Some(sig) = handlers.and_then(TerminationHandlers::restore) {
            exit::end_for_signal(&self.ctx, &self.listener, &self.perf, sig);
        }
        errors
    }
}

impl Drop for Service {
    /// A VM that failed during creation (or was never shut down) leaves no thread, socket or
    /// file behind.
    fn drop(&mut self) {
        for e in self.stop() {
            log::warn!(target: "attach", "{e}");
        }
    }
}
