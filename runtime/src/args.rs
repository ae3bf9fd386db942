//! Arguments for [`Vm::create`](crate::Vm::create), in the spirit of `JavaVMInitArgs`.

use std::ffi::OsStr;

use crate::output::{Output, Stream};

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
        }
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
