//! The VM's table of the embedder's diagnostic commands, and how one runs.
//!
//! * **Where a handler runs.** On a VM service thread of its own, `"DCmd <name>"`, started for
//!   the run (from the stack cache, so cheap) — never on a mutator, whoever asked: the attach
//!   listener (`jcmd`) or a thread calling [`VmHandle::diagnostic_command`] (which waits in a
//!   safe region meanwhile). So a handler may block — a `GC.run` waiting for a collection
//!   while the world stops — without holding up a stop, and it shows in thread dumps
//!   under its command's name.
//! * **Who waits.** An in-process caller waits for the reply ([`EmbedderCommands::run`]);
//!   the attach listener does not: the handler's thread answers the client itself
//!   ([`EmbedderCommands::run_detached`]) and the listener goes on serving the others. Its
//!   thread is joined by the next run or the destroy.
//! * **A panic** in a handler is caught on its thread: the reply fails
//!   (`java.lang.RuntimeException: …`), the VM runs on, the command stays registered.
//! * **A handler that never returns** holds up only the caller or client that asked.
//! * **Destroy** closes the table first: no new run starts and
//!   [`DcmdArguments::cancelled`] turns true; running handlers get [`SHUTDOWN_GRACE`] to
//!   return (their clients get their replies). One still running then is left running on
//!   its thread — what it uses (its handler, arguments, output, thread and stack) is kept
//!   for as long as it runs; its client gets a failure and the destroy reports it. The
//!   table's commands are dropped (a C command's `release` is called once no run of it is
//!   left).
//!
//! [`VmHandle::diagnostic_command`]: crate::VmHandle::diagnostic_command

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::embedder::{DiagnosticCommand, Registered};
use super::parse::DcmdArguments;
use super::Reply;
use crate::error::DcmdError;
use crate::service::context::Context;
use crate::threads::{self, panic_message, Body, ThreadError, ThreadKind, VmThread};

/// How long a destroy waits for running embedder handlers before it leaves them running.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Where a run's reply goes when no caller waits for it: the attach client's connection.
pub(crate) type Deliver = Box<dyn FnOnce(Reply) + Send>;

/// How one run ends.
enum Outcome {
    Running,
    /// The reply, for the caller that waits (taken when it wakes up).
    Done(Option<Reply>),
    /// The destroy stopped waiting for it.
    Abandoned,
}

/// A run's state, under one lock: its outcome, its thread, its client.
struct RunState {
    outcome: Outcome,
    /// The handler's thread, once `spawn` returned.
    thread: Option<VmThread>,
    /// A client to answer (`None`: a caller waits in [`EmbedderCommands::run`]).
    client: Option<Deliver>,
    /// Whether the run answers a client (then nobody waits, and its thread is joined by the
    /// next run or the destroy).
    detached: bool,
}

/// One run of an embedder's command.
struct Run {
    command: String,
    state: Mutex<RunState>,
    cv: Condvar,
}

impl Run {
    fn lock(&self) -> MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Leaves a thread the destroy stopped waiting for running: its handle is never dropped,
/// so neither its stack nor its registry entry goes while it runs (or after).
fn forget(thread: Option<VmThread>) {
    if let Some(t) = thread {
        std::mem::forget(t);
    }
}

fn join(command: &str, thread: Option<VmThread>) {
    if let Some(t) = thread {
        if let Err(e) = t.join() {
            log::debug!(target: "attach", "Joining the thread of {command}: {e}");
        }
    }
}

#[derive(Default)]
struct Table {
    /// Sorted by name.
    commands: Vec<Arc<Registered>>,
    running: Vec<Arc<Run>>,
    /// Ended runs that answered a client: their threads, to join.
    ended: Vec<VmThread>,
    closed: bool,
}

/// The embedder's commands of one VM.
#[derive(Default)]
pub(crate) struct EmbedderCommands {
    table: Mutex<Table>,
    /// Signalled when a run ends.
    ended: Condvar,
    /// [`DcmdArguments::cancelled`].
    cancelled: Arc<AtomicBool>,
}

impl std::fmt::Debug for EmbedderCommands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedderCommands").finish_non_exhaustive()
    }
}

fn not_finished(command: &str) -> Reply {
    Reply::Failed(format!(
        "java.lang.RuntimeException: diagnostic command {command} did not finish before the VM shut down\n"
    ))
}

impl EmbedderCommands {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a command (`builtin` tells whether a name is one of rtvm's own).
    pub(crate) fn register(
        &self,
        command: DiagnosticCommand,
        builtin: impl Fn(&str) -> bool,
    ) -> Result<(), DcmdError> {
        let r = Registered::from_command(command)?;
        if builtin(&r.name) {
            return Err(DcmdError::Exists {
                name: r.name,
                builtin: true,
            });
        }
        let mut t = self.lock();
        if t.closed {
            return Err(DcmdError::ShuttingDown { name: r.name });
        }
        match t
            .commands
            .binary_search_by(|c| c.name.as_bytes().cmp(r.name.as_bytes()))
        {
            Ok(_) => Err(DcmdError::Exists {
                name: r.name,
                builtin: false,
            }),
            Err(at) => {
                log::info!(target: "attach", "Diagnostic command {} registered", r.name);
                t.commands.insert(at, Arc::new(r));
                Ok(())
            }
        }
    }

    /// The registered commands, sorted by name.
    pub(crate) fn list(&self) -> Vec<Arc<Registered>> {
        self.lock().commands.clone()
    }

    pub(crate) fn find(&self, name: &str) -> Option<Arc<Registered>> {
        self.lock()
            .commands
            .iter()
            .find(|c| c.name == name)
            .cloned()
    }

    /// Joins the threads of runs that answered their clients.
    pub(crate) fn reap(&self) {
        let ended = std::mem::take(&mut self.lock().ended);
        for t in ended {
            join("a diagnostic command", Some(t));
        }
    }

    /// Runs `command` on a thread of its own and waits for its reply (in a safe region when
    /// the caller is a mutator).
    pub(crate) fn run(
        self: &Arc<Self>,
        ctx: &Context,
        command: Arc<Registered>,
        args: DcmdArguments,
    ) -> Reply {
        self.reap();
        let Some(run) = self.start(ctx, command, args, None) else {
            return Reply::illegal("Unknown diagnostic command");
        };
        let _safe = crate::safepoint::SafeWait::enter();
        let mut st = run.lock();
        while matches!(st.outcome, Outcome::Running) {
            st = run.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        let reply = match &mut st.outcome {
            Outcome::Done(reply) => reply.take(),
            _ => None,
        };
        let thread = st.thread.take();
        drop(st);
        match reply {
            Some(reply) => {
                join(&run.command, thread);
                reply
            }
            None => {
                forget(thread);
                not_finished(&run.command)
            }
        }
    }

    /// Runs `command` on a thread of its own, which answers through `deliver` when the
    /// handler returns; the caller goes on at once. The attach listener's way: a handler that
    /// takes long holds up only its own client.
    pub(crate) fn run_detached(
        self: &Arc<Self>,
        ctx: &Context,
        command: Arc<Registered>,
        args: DcmdArguments,
        deliver: Deliver,
    ) {
        self.reap();
        // A closed table has delivered `Unknown diagnostic command` already.
        let _ = self.start(ctx, command, args, Some(deliver));
    }

    /// Starts a run; `None` if the table is closed (a client is answered).
    fn start(
        self: &Arc<Self>,
        ctx: &Context,
        command: Arc<Registered>,
        mut args: DcmdArguments,
        client: Option<Deliver>,
    ) -> Option<Arc<Run>> {
        let detached = client.is_some();
        let run = Arc::new(Run {
            command: command.name.clone(),
            state: Mutex::new(RunState {
                outcome: Outcome::Running,
                thread: None,
                client,
                detached,
            }),
            cv: Condvar::new(),
        });
        {
            let mut t = self.lock();
            if t.closed {
                drop(t);
                if let Some(deliver) = run.lock().client.take() {
                    deliver(Reply::illegal("Unknown diagnostic command"));
                }
                return None;
            }
            t.running.push(Arc::clone(&run));
        }
        args.set_cancel_flag(Arc::clone(&self.cancelled));
        let (table, r) = (Arc::clone(self), Arc::clone(&run));
        let body = move || {
            let mut out = String::new();
            let result = catch_unwind(AssertUnwindSafe(|| (command.handler)(&args, &mut out)));
            let reply = match result {
                Ok(Ok(())) => Reply::Ok(out),
                Ok(Err(message)) => Reply::Failed(format!(
                    "{out}java.lang.RuntimeException: {}\n",
                    message.trim_end_matches('\n')
                )),
                Err(p) => {
                    let message = panic_message(&*p);
                    log::info!(target: "attach", "Diagnostic command {} panicked: {message}", command.name);
                    Reply::Failed(format!(
                        "{out}java.lang.RuntimeException: diagnostic command {} panicked: {message}\n",
                        command.name
                    ))
                }
            };
            // The handler (and what it holds) goes before the run is reported ended, so a
            // destroy that saw every run end has dropped no handler still in use.
            drop(command);
            drop(args);
            table.finish(&r, reply);
        };
        let name = format!("DCmd {}", run.command);
        let spawned = threads::spawn(
            &ctx.registry,
            &ctx.stacks,
            &name,
            ThreadKind::Service,
            None,
            false,
            Body::Rust(Box::new(body)),
        );
        match spawned {
            Ok(t) => {
                let mut st = run.lock();
                if st.detached && !matches!(st.outcome, Outcome::Running) {
                    // It ended already (or was abandoned): nobody else will join it.
                    let abandoned = matches!(st.outcome, Outcome::Abandoned);
                    drop(st);
                    if abandoned {
                        forget(Some(t));
                    } else {
                        join(&run.command, Some(t));
                    }
                } else {
                    st.thread = Some(t);
                }
            }
            Err(e) => {
                log::warn!(target: "attach", "Diagnostic command {}: {e}", run.command);
                let reply = match e {
                    ThreadError::Start { .. } => format!("java.lang.OutOfMemoryError: unable to create native thread: possibly out of memory or process/resource limits reached ({e})\n"),
                    e => format!(
                        "java.lang.RuntimeException: diagnostic command {} not run: {e}\n",
                        run.command
                    ),
                };
                self.finish(&run, Reply::Failed(reply));
            }
        }
        Some(run)
    }

    /// A run's thread reports its reply: to the waiting caller, or to its client (then its
    /// thread is left for the next run or the destroy to join).
    fn finish(&self, run: &Arc<Run>, reply: Reply) {
        let mut reply = Some(reply);
        let mut st = run.lock();
        let (mut deliver, mut to_join) = (None, None);
        if matches!(st.outcome, Outcome::Running) {
            if st.detached {
                st.outcome = Outcome::Done(None);
                deliver = st.client.take();
                to_join = st.thread.take();
            } else {
                st.outcome = Outcome::Done(reply.take());
            }
        } else {
            log::info!(target: "attach", "Diagnostic command {} finished after the VM shut down", run.command);
        }
        run.cv.notify_all();
        drop(st);
        // Its thread (if it answers a client) is listed for joining before the client gets
        // its reply: a client that asks again at once finds it joined by that next run (the
        // join waits at most for this delivery, bounded by the reply's write timeout). It
        // leaves `running` after the delivery: a destroy that saw it leave joins it.
        self.lock().ended.extend(to_join);
        if let (Some(d), Some(r)) = (deliver, reply) {
            d(r);
        }
        let mut t = self.lock();
        t.running.retain(|r| !Arc::ptr_eq(r, run));
        self.ended.notify_all();
    }

    /// The destroy's part: no new run or registration, handlers told to stop, `grace` for
    /// the running ones to return; the ones still running are left running (their clients
    /// get a failure). The threads of the others are joined, the commands dropped. Returns
    /// what was left running.
    pub(crate) fn close(&self, grace: Duration) -> Vec<String> {
        let mut t = self.lock();
        t.closed = true;
        self.cancelled
            .store(true, std::sync::atomic::Ordering::Release);
        let deadline = Instant::now() + grace;
        while !t.running.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            t = self
                .ended
                .wait_timeout(t, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let late = t.running.clone();
        drop(t);
        let mut left = Vec::new();
        let mut abandoned = Vec::new();
        for run in late {
            let mut st = run.lock();
            if !matches!(st.outcome, Outcome::Running) {
                // It is ending as the grace runs out: waited for below.
                continue;
            }
            st.outcome = Outcome::Abandoned;
            run.cv.notify_all();
            let client = st.client.take();
            // A waiting caller forgets the thread itself when it wakes.
            if st.detached {
                forget(st.thread.take());
            }
            drop(st);
            if let Some(deliver) = client {
                deliver(not_finished(&run.command));
            }
            let message = format!(
                "diagnostic command {} was still running {} s into the VM's destroy: its thread \"DCmd {}\" is left running",
                run.command,
                grace.as_secs_f64(),
                run.command
            );
            log::warn!(target: "attach", "{message}");
            left.push(message);
            abandoned.push(run);
        }
        let mut t = self.lock();
        t.running
            .retain(|r| !abandoned.iter().any(|a| Arc::ptr_eq(a, r)));
        // The ones ending now (delivering a reply, bounded by the client's write timeout).
        while !t.running.is_empty() {
            t = self.ended.wait(t).unwrap_or_else(|p| p.into_inner());
        }
        let ended = std::mem::take(&mut t.ended);
        let commands = std::mem::take(&mut t.commands);
        drop(t);
        for thread in ended {
            join("a diagnostic command", Some(thread));
        }
        // A C command's `release` runs here for the commands no run holds.
        drop(commands);
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::dcmd::{DcmdParam, DcmdType};

    fn noop(_: &DcmdArguments, _: &mut String) -> Result<(), String> {
        Ok(())
    }

    #[test]
    fn registrations_are_checked() {
        let t = EmbedderCommands::default();
        let builtin = |n: &str| n == "VM.version";
        t.register(DiagnosticCommand::new("GC.run", "d", noop), builtin)
            .unwrap();
        assert_eq!(
            t.register(DiagnosticCommand::new("GC.run", "d", noop), builtin),
            Err(DcmdError::Exists {
                name: "GC.run".into(),
                builtin: false
            })
        );
        let e = t
            .register(DiagnosticCommand::new("VM.version", "d", noop), builtin)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "a diagnostic command named 'VM.version' exists already (one of rtvm's own)"
        );
        let bad = |c: DiagnosticCommand| t.register(c, builtin).unwrap_err().to_string();
        assert!(bad(DiagnosticCommand::new("run", "d", noop)).contains("is invalid"));
        assert_eq!(
            bad(DiagnosticCommand::new("GC.a", "d", noop)
                .option(DcmdParam::new("-n", "", DcmdType::Int).default_value("x"))),
            "diagnostic command 'GC.a': option '-n': its default 'x' is not a INT value: Integer parsing error in command argument '-n'. Could not parse: x."
        );
        assert!(bad(
            DiagnosticCommand::new("GC.a", "d", noop).option(DcmdParam::new(
                "a b",
                "",
                DcmdType::Int
            ))
        )
        .contains("no space"));
        assert!(bad(DiagnosticCommand::new("GC.a", "d", noop)
            .argument(DcmdParam::new("x", "", DcmdType::Int))
            .option(DcmdParam::new("x", "", DcmdType::Int)))
        .contains("a second parameter"));
        assert!(bad(DiagnosticCommand::new("GC.a", "d", noop).argument(
            DcmdParam::new("x", "", DcmdType::Int)
                .mandatory()
                .default_value("1")
        ))
        .contains("mandatory"));
        assert!(bad(DiagnosticCommand::new("GC.a", "", noop)).contains("description"));
        assert!(bad(DiagnosticCommand::new("GC.a", "d", noop).impact("a\0b")).contains("impact"));
        // Sorted by bytes, as HotSpot's strcmp sorts.
        t.register(DiagnosticCommand::new("GC.heap_info", "d", noop), builtin)
            .unwrap();
        t.register(DiagnosticCommand::new("GC.Zed", "d", noop), builtin)
            .unwrap();
        let names: Vec<String> = t.list().iter().map(|c| c.name.clone()).collect();
        assert_eq!(names, ["GC.Zed", "GC.heap_info", "GC.run"]);
        assert!(t.close(Duration::ZERO).is_empty());
        assert!(t.list().is_empty());
        assert!(matches!(
            t.register(DiagnosticCommand::new("GC.b", "d", noop), builtin),
            Err(DcmdError::ShuttingDown { .. })
        ));
    }
}
