//! Arguments for [`Vm::create`](crate::Vm::create), in the spirit of `JavaVMInitArgs`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Instant;

use rtvm_flags::{ArgError, ArgErrorKind, EnvOptions, ParseOptions, XlogAction};

use crate::error::CreateError;
use crate::output::{Output, Stream};
use crate::xlog::{self, LogConfig, XlogStep};

/// The environment variable whose options are applied before the command line (rtvm's
/// `JAVA_TOOL_OPTIONS`).
pub const ENV_OPTIONS: &str = "RTVM_OPTIONS";

/// Arguments for [`Vm::create`](crate::Vm::create).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct InitArgs {
    /// VM options, as on a command line (`-Xmx1g`, `-XX:+AlwaysPreTouch`, ...).
    pub options: Vec<String>,
    /// Skip options that are not recognized instead of failing (JNI's `ignoreUnrecognized`,
    /// as HotSpot implements it: unknown `-XX:` and `-X` options are skipped; locked flags
    /// and bad values still fail).
    pub ignore_unrecognized: bool,
    /// Where the VM prints (JNI's `vfprintf` hook); the standard streams by default.
    pub output: Output,
    /// What the VM runs, as `VM.command_line`'s `java_command`, the perf data's
    /// `sun.rt.javaCommand` (`jps` and `jcmd -l` show it) and `sun.java.command` say it: the
    /// main and its arguments (`MyServer --port 80`).
    pub command: Option<String>,
    /// Who creates the VM (`Launcher Type`, `sun.java.launcher`): `generic` unless set, as
    /// HotSpot says for a VM created through JNI.
    pub launcher: Option<String>,
    /// The heap belongs to the embedder's collector ([`collector_heap`]).
    ///
    /// [`collector_heap`]: InitArgs::collector_heap
    pub collector_heap: bool,
    /// The bytes of options that are not UTF-8, by their text in `options` ([`from_os`]):
    /// an `-Xlog` file name is used as given.
    ///
    /// [`from_os`]: InitArgs::from_os
    raw: HashMap<String, Vec<u8>>,
    /// What ends the process after a `SIGTERM`, `SIGINT` or `SIGHUP` ([`exit_hook`]).
    ///
    /// [`exit_hook`]: InitArgs::exit_hook
    pub(crate) exit: Option<ExitHook>,
}

/// The embedder's exit hook ([`InitArgs::exit_hook`]).
#[derive(Clone)]
pub(crate) struct ExitHook(Arc<dyn Fn(i32) + Send + Sync>);

impl ExitHook {
    /// Calls the hook with the exit status.
    pub(crate) fn call(&self, status: i32) {
        (self.0)(status);
    }
}

impl std::fmt::Debug for ExitHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExitHook")
    }
}

impl InitArgs {
    /// Arguments from a list of options.
    pub fn new<I, S>(options: I) -> InitArgs
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        InitArgs {
            options: options.into_iter().map(Into::into).collect(),
            ignore_unrecognized: false,
            output: Output::standard(),
            command: None,
            launcher: None,
            collector_heap: false,
            raw: HashMap::new(),
            exit: None,
        }
    }

    /// Sets [`command`](InitArgs::command): what the VM runs, for `jps` and `jcmd`.
    pub fn command(mut self, main_and_args: impl Into<String>) -> InitArgs {
        self.command = Some(main_and_args.into());
        self
    }

    /// Sets [`launcher`](InitArgs::launcher).
    pub fn launcher(mut self, name: impl Into<String>) -> InitArgs {
        self.launcher = Some(name.into());
        self
    }

    /// Arguments from options as the OS gives them (`argv`, a C string's bytes). An option
    /// that is not UTF-8 is read lossily — it earns the message its text earns — except that
    /// an `-Xlog` output's file name is used as the bytes given, as java uses it.
    pub fn from_os<I, S>(options: I) -> InitArgs
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut raw = HashMap::new();
        let options = options
            .into_iter()
            .map(|o| {
                let text = lossy(o.as_ref());
                if text.as_bytes() != o.as_ref().as_bytes() {
                    raw.entry(text.clone())
                        .or_insert_with(|| o.as_ref().as_bytes().to_vec());
                }
                text
            })
            .collect();
        InitArgs {
            options,
            raw,
            ..InitArgs::new(Vec::<String>::new())
        }
    }

    /// Says that the embedder's collector owns the heap (the MMTk binding's does): rtvm
    /// decides and checks the heap sizes as always (`-Xms`, `-Xmx`, ergonomics; the collector
    /// reads them from [`VmHandle::flags`](crate::VmHandle::flags)) but reserves and commits
    /// no heap of its own — [`Vm::allocate`](crate::VmHandle::allocate) and TLABs have no
    /// room, there is no nursery — and `-XX:+AlwaysPreTouch` gets a warning instead of a
    /// pretouch (the collector maps its memory as it grows). NMT's `Java Heap` line reports
    /// what the collector reports ([`VmHandle::report_heap`](crate::VmHandle::report_heap)).
    pub fn collector_heap(mut self, yes: bool) -> InitArgs {
        self.collector_heap = yes;
        self
    }

    /// Sets `ignore_unrecognized`.
    pub fn ignore_unrecognized(mut self, yes: bool) -> InitArgs {
        self.ignore_unrecognized = yes;
        self
    }

    /// Sends everything the VM prints to `hook` instead of the standard streams.
    pub fn output(mut self, hook: impl Fn(Stream, &str) + Send + Sync + 'static) -> InitArgs {
        self.output = Output::hook(hook);
        self
    }

    /// What ends the process when a `SIGTERM`, `SIGINT` or `SIGHUP` that rtvm handles
    /// arrives (JNI's `exit` option). rtvm handles those of the three whose action was
    /// `SIG_DFL` when the VM was created, and none with `-Xrs`; on one, the "Signal
    /// Dispatcher" thread removes the VM's files (the attach socket, the perf data), prints
    /// the NMT statistics if asked, and calls `hook` with java's exit status, 128 + the
    /// signal's number (143, 130, 129). If the hook returns, or there is none, the process
    /// ends by the signal's default action — what it would have done without rtvm. The
    /// `rtvm` launcher's hook is `std::process::exit`, as java exits.
    pub fn exit_hook(mut self, hook: impl Fn(i32) + Send + Sync + 'static) -> InitArgs {
        self.exit = Some(ExitHook(Arc::new(hook)));
        self
    }
}

/// Text from the OS (an argument, an environment variable) as a `String`: invalid UTF-8
/// becomes U+FFFD, so an option with bad bytes is reported with the message its text earns
/// instead of being dropped or panicking.
pub fn lossy(text: &OsStr) -> String {
    text.to_string_lossy().into_owned()
}

/// `RTVM_OPTIONS`, read as bytes (`None` if unset).
pub(crate) fn env_options() -> Option<String> {
    std::env::var_os(ENV_OPTIONS).map(|v| lossy(&v))
}

/// Parses the options with `-Xlog` applied in order, and stops where `java` stops.
pub(crate) fn parse_options(
    args: &InitArgs,
    output: &Output,
    start: Instant,
) -> Result<(rtvm_flags::Parsed, LogConfig), CreateError> {
    let env_value = env_options();
    let xlog = RefCell::new(LogConfig::new());
    let hook = |option: &str| -> Result<XlogAction, ArgError> {
        let applied = match args.raw.get(option) {
            Some(bytes) => xlog.borrow_mut().apply_bytes(bytes),
            None => xlog.borrow_mut().apply(option),
        };
        match applied {
            Ok(XlogStep::Continue) => Ok(XlogAction::Continue),
            Ok(XlogStep::Help) => {
                output.write(Stream::Stdout, &xlog::help_text());
                Ok(XlogAction::Stop)
            }
            Err(e) => {
                xlog::print_error(&e, output, start);
                Err(ArgError {
                    message: e.message(),
                    kind: ArgErrorKind::InvalidOption,
                })
            }
        }
    };
    let options = ParseOptions {
        ignore_unrecognized: args.ignore_unrecognized,
        env: env_value.as_deref().map(|value| EnvOptions {
            name: ENV_OPTIONS,
            value,
        }),
        xlog: Some(&hook),
    };
    let parsed = rtvm_flags::parse(&args.options, &options, &mut |s, t| output.write(s, t))?;
    Ok((parsed, xlog.into_inner()))
}
