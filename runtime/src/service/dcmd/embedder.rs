//! Diagnostic commands the embedder adds (a collector's `GC.heap_info` and `GC.run`): the
//! public builder, the VM's table of them, and how one runs.
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

use super::parse::{parse_value, DcmdArguments, DcmdType, Param};
use super::Reply;
use crate::service::context::Context;
use crate::threads::{self, panic_message, Body, ThreadError, ThreadKind, VmThread};

/// How long a destroy waits for running embedder handlers before it leaves them running.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A handler: writes its output into the `String`; an `Err` fails the command.
pub(crate) type Handler =
    dyn Fn(&DcmdArguments, &mut String) -> Result<(), String> + Send + Sync + 'static;

/// An argument or option of an embedder's diagnostic command: a name, a description, a
/// [`DcmdType`], whether it is mandatory and its default, as `help` prints them
/// (`\t-parallel : [optional] Number of parallel threads… (INT, 0)`).
#[derive(Clone, Debug)]
pub struct DcmdParam {
    name: String,
    description: String,
    ty: DcmdType,
    mandatory: bool,
    default: Option<String>,
}

impl DcmdParam {
    /// An optional parameter without a default. For an option the name is its key
    /// (`-all`, `scale`); an argument's name only appears in `help` (`flag name`).
    pub fn new(name: impl Into<String>, description: impl Into<String>, ty: DcmdType) -> Self {
        DcmdParam {
            name: name.into(),
            description: description.into(),
            ty,
            mandatory: false,
            default: None,
        }
    }

    /// Makes it mandatory: a command line without it fails with `The argument '<name>' is
    /// mandatory.` (`option` for an option). A mandatory parameter has no default.
    pub fn mandatory(mut self) -> Self {
        self.mandatory = true;
        self
    }

    /// Its default, as text read like a value given on the command line (`"false"`, `"0"`,
    /// `"1m"`, `"10s"`) and printed by `help`.
    pub fn default_value(mut self, default: impl Into<String>) -> Self {
        self.default = Some(default.into());
        self
    }

    /// The parameter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn param(&self) -> Param<String> {
        Param {
            name: self.name.clone(),
            description: self.description.clone(),
            ty: self.ty,
            mandatory: self.mandatory,
            default: self.default.clone(),
        }
    }
}

/// A diagnostic command for [`VmHandle::register_diagnostic_command`]: what `help` shows
/// (name, description, impact, permission, arguments and options) and the handler that runs
/// it.
///
/// ```
/// use rtvm::{DcmdParam, DcmdType, DiagnosticCommand};
///
/// let run = DiagnosticCommand::new("GC.run", "Call java.lang.System.gc().", |_args, _out| {
///     // trigger a collection and wait for it
///     Ok(())
/// })
/// .impact("Medium: Depends on Java heap size and content.");
/// let histogram = DiagnosticCommand::new(
///     "GC.class_histogram",
///     "Provide statistics about the Java heap usage.",
///     |args, out| {
///         out.push_str(&format!("parallel: {:?}\n", args.int("-parallel")));
///         Ok(())
///     },
/// )
/// .permission("java.lang.management.ManagementPermission(monitor)")
/// .option(DcmdParam::new("-all", "Inspect all objects", DcmdType::Boolean).default_value("false"))
/// .option(DcmdParam::new("-parallel", "Number of parallel threads", DcmdType::Int).default_value("0"));
/// # let _ = (run, histogram);
/// ```
///
/// [`VmHandle::register_diagnostic_command`]: crate::VmHandle::register_diagnostic_command
#[derive(Clone)]
pub struct DiagnosticCommand {
    name: String,
    description: String,
    impact: String,
    permission: Option<String>,
    arguments: Vec<DcmdParam>,
    options: Vec<DcmdParam>,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for DiagnosticCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiagnosticCommand")
            .field("name", &self.name)
            .field("impact", &self.impact)
            .field("permission", &self.permission)
            .field("arguments", &self.arguments)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl DiagnosticCommand {
    /// A command named `name` (HotSpot's `Area.name` form: `GC.run`), described by
    /// `description` (one line, `help`'s second), with impact `Low` and no permission line,
    /// taking no arguments, run by `handler`. The handler appends its output to the string;
    /// `Err(message)` fails the command: the reply is what it wrote, then
    /// `java.lang.RuntimeException: <message>` (status -1 for the attach client, `Err` for
    /// [`VmHandle::diagnostic_command`](crate::VmHandle::diagnostic_command)).
    pub fn new<F>(name: impl Into<String>, description: impl Into<String>, handler: F) -> Self
    where
        F: Fn(&DcmdArguments, &mut String) -> Result<(), String> + Send + Sync + 'static,
    {
        DiagnosticCommand {
            name: name.into(),
            description: description.into(),
            impact: "Low".into(),
            permission: None,
            arguments: Vec::new(),
            options: Vec::new(),
            handler: Arc::new(handler),
        }
    }

    /// The `Impact:` line's text (`Medium: Depends on Java heap size and content.`).
    pub fn impact(mut self, impact: impl Into<String>) -> Self {
        self.impact = impact.into();
        self
    }

    /// The `Permission:` line's text
    /// (`java.lang.management.ManagementPermission(monitor)`); without it `help` prints no
    /// permission line, as for HotSpot's `GC.run`.
    pub fn permission(mut self, permission: impl Into<String>) -> Self {
        self.permission = Some(permission.into());
        self
    }

    /// Adds a positional argument (in order: the first token that names no option is the
    /// first argument).
    pub fn argument(mut self, param: DcmdParam) -> Self {
        self.arguments.push(param);
        self
    }

    /// Adds an option, given as `key` or `key=value`.
    pub fn option(mut self, param: DcmdParam) -> Self {
        self.options.push(param);
        self
    }

    /// The command's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Why [`VmHandle::register_diagnostic_command`] refused a command (nothing was registered).
///
/// [`VmHandle::register_diagnostic_command`]: crate::VmHandle::register_diagnostic_command
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DcmdError {
    /// The name is not of HotSpot's `Area.name` form.
    #[error("diagnostic command name '{name}' is invalid: a name is Area.name (an ASCII letter, then letters, digits or '_'; a '.'; then letters, digits or '_'; at most 100 bytes), like GC.run")]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A command of that name exists: one of rtvm's own, or one registered before.
    #[error("a diagnostic command named '{name}' exists already ({})", if *.builtin { "one of rtvm's own" } else { "registered before" })]
    Exists {
        /// The name given.
        name: String,
        /// Whether it is one of rtvm's own commands.
        builtin: bool,
    },
    /// An argument or option is malformed: an empty or duplicate name, an option name with a
    /// space, `=` or a quote, a default its type cannot read, a mandatory parameter with a
    /// default, text with a NUL.
    #[error("diagnostic command '{command}': {what} '{parameter}': {reason}")]
    InvalidParameter {
        /// The command's name.
        command: String,
        /// `argument` or `option`.
        what: &'static str,
        /// The parameter's name.
        parameter: String,
        /// What is wrong.
        reason: String,
    },
    /// The command's own text (description, impact, permission) has a NUL or is empty.
    #[error("diagnostic command '{command}': {reason}")]
    InvalidText {
        /// The command's name.
        command: String,
        /// What is wrong.
        reason: String,
    },
    /// The VM's destroy has begun.
    #[error("diagnostic command '{name}' not registered: the VM is shutting down")]
    ShuttingDown {
        /// The name given.
        name: String,
    },
}

/// HotSpot's names: `Area.name`.
fn valid_name(name: &str) -> bool {
    let Some((area, rest)) = name.split_once('.') else {
        return false;
    };
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    name.len() <= 100
        && area.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && word(area)
        && word(rest)
}

/// A registered command.
pub(crate) struct Registered {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) impact: String,
    pub(crate) permission: Option<String>,
    pub(crate) arguments: Vec<Param<String>>,
    pub(crate) options: Vec<Param<String>>,
    handler: Arc<Handler>,
}

impl Registered {
    /// Checks a command and makes it a table entry.
    fn from_command(c: DiagnosticCommand) -> Result<Registered, DcmdError> {
        if !valid_name(&c.name) {
            return Err(DcmdError::InvalidName { name: c.name });
        }
        let text_error = |reason: String| DcmdError::InvalidText {
            command: c.name.clone(),
            reason,
        };
        let mut texts = vec![("description", &c.description), ("impact", &c.impact)];
        if let Some(p) = &c.permission {
            texts.push(("permission", p));
        }
        for (what, t) in texts {
            if t.is_empty() || t.contains('\0') {
                return Err(text_error(format!("the {what} is empty or has a NUL")));
            }
        }
        let mut seen: Vec<&str> = Vec::new();
        for (what, p) in c
            .arguments
            .iter()
            .map(|a| ("argument", a))
            .chain(c.options.iter().map(|o| ("option", o)))
        {
            let bad = |reason: &str| DcmdError::InvalidParameter {
                command: c.name.clone(),
                what,
                parameter: p.name.clone(),
                reason: reason.to_owned(),
            };
            if p.name.is_empty() || p.name.contains(['\0', '\n']) {
                return Err(bad("a name is not empty and has no NUL or newline"));
            }
            if what == "option" && p.name.contains([' ', '=', '"', '\'']) {
                return Err(bad(
                    "an option's name is its key: no space, '=' or quote in it",
                ));
            }
            if seen.contains(&p.name.as_str()) {
                return Err(bad("a second parameter of this name"));
            }
            seen.push(&p.name);
            if p.description.contains('\0') {
                return Err(bad("the description has a NUL"));
            }
            if p.mandatory && p.default.is_some() {
                return Err(bad("a mandatory parameter has no default"));
            }
            if let Some(d) = &p.default {
                if d.contains('\0') {
                    return Err(bad("the default has a NUL"));
                }
                if let Err(e) = parse_value(&p.name, p.ty, Some(d)) {
                    return Err(bad(&format!(
                        "its default '{d}' is not a {} value: {}",
                        p.ty.name(),
                        e.trim_end()
                    )));
                }
            }
        }
        Ok(Registered {
            arguments: c.arguments.iter().map(DcmdParam::param).collect(),
            options: c.options.iter().map(DcmdParam::param).collect(),
            name: c.name,
            description: c.description,
            impact: c.impact,
            permission: c.permission,
            handler: c.handler,
        })
    }
}

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
    fn reap(&self) {
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
        if let (Some(d), Some(r)) = (deliver, reply) {
            d(r);
        }
        // Its thread (if it answered a client) is listed for joining in the same step as the
        // run leaves `running`: a destroy that saw it leave joins it.
        let mut t = self.lock();
        t.ended.extend(to_join);
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

    fn noop(_: &DcmdArguments, _: &mut String) -> Result<(), String> {
        Ok(())
    }

    #[test]
    fn names_are_hotspots_form() {
        for good in [
            "GC.run",
            "GC.heap_info",
            "Compiler.CodeHeap_Analytics",
            "A.b",
            "X1.2",
        ] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "", "GC", "GC.", ".run", "1GC.run", "GC.run.x", "GC.r un", "GC.run\n", "GC-x.run",
            "Gc.ü",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(!valid_name(&format!("A.{}", "b".repeat(99))));
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
