//! Argument processing, in HotSpot's order and with HotSpot's messages.
//!
//! 1. `-XX:VMOptionsFile=` options are replaced by the file's options where they stand.
//! 2. A pre-scan picks up `-XX:Flags=`, `±PrintVMOptions` and `±IgnoreUnrecognizedVMOptions`.
//! 3. The settings file (`-XX:Flags=`) is applied, origin `{config file}`.
//! 4. The environment variable's options are applied, origin `{environment}`.
//! 5. The command line is applied, origin `{command line}`; the last setting wins.
//!
//! Messages that do not stop parsing (a `Picked up` line, `-XX:+PrintVMOptions` echoes, a
//! commented-out `-XX:#Foo`) go to the caller's sink as they happen; the first fatal one is
//! returned as an [`ArgError`].
//!
//! Some options end processing where they stand, as in `java`: `-XX:+PrintFlagsInitial`
//! (found by the pre-scan, wherever it is), `-Xlog:help` and `-version` (what follows them is
//! not looked at). `-Xlog` options are handed to the caller's hook in order, so an invalid
//! one is reported before a later bad option, and `-Xlog:help` before a later error.

use crate::error::ArgError;
use crate::optfile::{read_options_file, read_settings_file, tokenize_options, tokenize_settings};
use crate::similarity::{similarity, SUGGESTION_THRESHOLD};
use crate::value::{parse_unsigned, K, M};
use crate::{find_index, flag, FlagType, Settings, Source, Value, FLAGS};

/// Which stream a message belongs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Deliberately exhaustive: a process has these two output streams, and matching on them
// must stay total for the embedder's output hook.
pub enum Stream {
    /// Standard output (`-XX:+PrintVMOptions` echoes, listings).
    Stdout,
    /// Standard error (`Picked up ...`, warnings).
    Stderr,
}

/// The options of an environment variable, as read by the caller.
#[derive(Clone, Copy, Debug)]
pub struct EnvOptions<'a> {
    /// The variable's name, for the `Picked up` line and error messages.
    pub name: &'a str,
    /// Its value.
    pub value: &'a str,
}

/// What the `-Xlog` hook decides about an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XlogAction {
    /// The option was applied; go on.
    Continue,
    /// `-Xlog:help`: stop processing options.
    Stop,
}

/// The caller's handler for `-Xlog` options, called in order as they are met.
pub type XlogHook<'a> = &'a dyn Fn(&str) -> Result<XlogAction, ArgError>;

/// How to parse.
#[derive(Clone, Copy, Default)]
pub struct ParseOptions<'a> {
    /// Skip options that are not recognized (JNI's `ignoreUnrecognized`), as
    /// `-XX:+IgnoreUnrecognizedVMOptions` does. Locked flags and bad values still fail.
    pub ignore_unrecognized: bool,
    /// Options from the environment, applied before the command line.
    pub env: Option<EnvOptions<'a>>,
    /// Handles `-Xlog` options as they are met; without one they are collected in
    /// [`Parsed::xlog`].
    pub xlog: Option<XlogHook<'a>>,
}

impl std::fmt::Debug for ParseOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParseOptions")
            .field("ignore_unrecognized", &self.ignore_unrecognized)
            .field("env", &self.env)
            .field("xlog", &self.xlog.map(|_| "hook"))
            .finish()
    }
}

/// Why option processing ended early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `-XX:+PrintFlagsInitial`: print the table's defaults and exit.
    PrintFlagsInitial,
    /// `-Xlog:help` (the hook printed it).
    XlogHelp,
    /// `-version`: create the VM with the options before it, print the version, exit.
    Version,
}

/// The result of parsing.
#[derive(Clone, Debug)]
pub struct Parsed {
    /// Every flag's value and origin, ready for ergonomics.
    pub settings: Settings,
    /// The `-Xlog` options, in order, as given, when no hook took them.
    pub xlog: Vec<String>,
    /// Set when an option ended processing.
    pub stop: Option<StopReason>,
    /// `-showversion` was given: print the version and go on.
    pub show_version: bool,
}

/// Parses VM options. `args` are the command-line options (everything the launcher did not
/// consume); `sink` receives non-fatal messages as they occur.
pub fn parse(
    args: &[String],
    options: &ParseOptions<'_>,
    sink: &mut dyn FnMut(Stream, &str),
) -> Result<Parsed, ArgError> {
    let env_args = match options.env {
        // Set, even to nothing: announced (HotSpot prints `Picked up ...: ` for an empty
        // JAVA_TOOL_OPTIONS too).
        Some(env) => {
            sink(
                Stream::Stderr,
                &format!("Picked up {}: {}\n", env.name, env.value),
            );
            let tokens = tokenize_options(env.value, env.name)?;
            expand_options_files(tokens, &format!("env_var='{}'", env.name))?
        }
        _ => Vec::new(),
    };
    let cmd_args = expand_options_files(args.to_vec(), "cmd_line_args")?;

    let mut parser = Parser {
        settings: Settings::defaults(),
        xlog: Vec::new(),
        xlog_hook: options.xlog,
        ignore_unrecognized: options.ignore_unrecognized,
        stop: None,
        show_version: false,
        sink,
    };

    // Pre-scan: options that change how everything else is processed.
    let mut settings_file = None;
    for (arg, _) in env_args.iter().chain(&cmd_args) {
        match arg.as_str() {
            "-XX:+PrintFlagsInitial" => {
                return Ok(Parsed {
                    settings: parser.settings,
                    xlog: Vec::new(),
                    stop: Some(StopReason::PrintFlagsInitial),
                    show_version: false,
                });
            }
            "-XX:+PrintVMOptions" | "-XX:-PrintVMOptions" => {
                let on = arg.starts_with("-XX:+");
                let source = if cmd_args.iter().any(|(a, _)| a == arg) {
                    Source::CommandLine
                } else {
                    Source::Environment
                };
                parser
                    .settings
                    .set_value(
                        flag_index(flag::PrintVMOptions.info().name),
                        Value::Bool(on),
                        crate::Origin::from(source),
                    )
                    .map_err(ArgError::invalid)?;
            }
            "-XX:+IgnoreUnrecognizedVMOptions" => parser.ignore_unrecognized = true,
            "-XX:-IgnoreUnrecognizedVMOptions" => {
                parser.ignore_unrecognized = options.ignore_unrecognized
            }
            _ => {
                if let Some(path) = arg.strip_prefix("-XX:Flags=") {
                    settings_file = Some(path.to_owned());
                }
            }
        }
    }

    if let Some(path) = settings_file {
        let text = read_settings_file(&path)?;
        for token in tokenize_settings(&text) {
            parser.process_xx(&token, Source::ConfigFile)?;
        }
    }
    let sources = env_args
        .iter()
        .map(|(a, f)| (a, Source::Environment, *f))
        .chain(cmd_args.iter().map(|(a, f)| (a, Source::CommandLine, *f)));
    for (arg, source, from_file) in sources {
        parser.process(arg, source, from_file)?;
        if parser.stop.is_some() {
            break;
        }
    }
    Ok(Parsed {
        settings: parser.settings,
        xlog: parser.xlog,
        stop: parser.stop,
        show_version: parser.show_version,
    })
}

/// Replaces each `-XX:VMOptionsFile=<file>` by the options in the file, each marked `true`
/// (from a file). A file may not name another options file.
fn expand_options_files(
    args: Vec<String>,
    container: &str,
) -> Result<Vec<(String, bool)>, ArgError> {
    let mut out = Vec::with_capacity(args.len());
    let mut seen: Option<String> = None;
    for arg in args {
        let Some(path) = arg.strip_prefix("-XX:VMOptionsFile=") else {
            out.push((arg, false));
            continue;
        };
        if let Some(first) = &seen {
            return Err(ArgError::file(format!(
                "The option '{first}' is already specified in the options container \
                 '{container}' so the specification of '{arg}' in the same options container \
                 is an error.\n"
            )));
        }
        seen = Some(arg.clone());
        let text = read_options_file(path)?;
        let tokens = tokenize_options(&text, path)?;
        if tokens.iter().any(|t| t.starts_with("-XX:VMOptionsFile")) {
            return Err(ArgError::file(format!(
                "A VM options file may not refer to a VM options file. Specification of \
                 '-XX:VMOptionsFile=<file-name>' in the options file '{arg}' in options \
                 container '{container}' is an error.\n"
            )));
        }
        out.extend(tokens.into_iter().map(|t| (t, true)));
    }
    Ok(out)
}

struct Parser<'s> {
    settings: Settings,
    xlog: Vec<String>,
    xlog_hook: Option<XlogHook<'s>>,
    ignore_unrecognized: bool,
    stop: Option<StopReason>,
    show_version: bool,
    sink: &'s mut dyn FnMut(Stream, &str),
}

impl Parser<'_> {
    /// Processes one option from the command line or the environment (`from_file`: out of
    /// a `-XX:VMOptionsFile`).
    fn process(&mut self, arg: &str, source: Source, from_file: bool) -> Result<(), ArgError> {
        if let Some(rest) = arg.strip_prefix("-XX:") {
            if let Some(size) = rest.strip_prefix("MaxHeapSize=") {
                // Parsed as -Xmx is, with its message (and echoed as any -XX: option).
                if self.settings.get(flag::PrintVMOptions) {
                    (self.sink)(Stream::Stdout, &format!("VM option '{rest}'\n"));
                }
                let bytes = parse_heap_size(size, arg, "Invalid maximum heap size")?;
                return self.set_size(flag::MaxHeapSize.info().name, bytes, arg);
            }
            return self.process_xx(rest, source);
        }
        if arg.starts_with("-Xlog") {
            match self.xlog_hook {
                Some(hook) => {
                    if hook(arg)? == XlogAction::Stop {
                        self.stop = Some(StopReason::XlogHelp);
                    }
                }
                None if arg == "-Xlog" || arg.starts_with("-Xlog:") => {
                    self.xlog.push(arg.to_owned())
                }
                None => {
                    return Err(ArgError::invalid(format!(
                        "Invalid -Xlog option '{arg}', see error log for details.\n"
                    )))
                }
            }
            return Ok(());
        }
        // -version and -showversion are the launcher's (and the embedder's, through the
        // options of VM creation); in the environment variable or an options file java's VM
        // does not know them.
        match arg {
            "-version" | "-showversion" if source == Source::Environment || from_file => {}
            "-version" => {
                self.stop = Some(StopReason::Version);
                return Ok(());
            }
            "-showversion" => {
                self.show_version = true;
                return Ok(());
            }
            "-Xrs" => {
                return self
                    .settings
                    .set_value(
                        flag_index(flag::ReduceSignalUsage.info().name),
                        Value::Bool(true),
                        crate::Origin::from(Source::CommandLine),
                    )
                    .map_err(ArgError::invalid);
            }
            _ => {}
        }
        if let Some(size) = arg.strip_prefix("-Xms") {
            let bytes = parse_size_option(size, arg, "Invalid initial heap size")?;
            self.set_size(flag::MinHeapSize.info().name, bytes, arg)?;
            return self.set_size(flag::InitialHeapSize.info().name, bytes, arg);
        }
        if let Some(size) = arg.strip_prefix("-Xmx") {
            let bytes = parse_heap_size(size, arg, "Invalid maximum heap size")?;
            return self.set_size(flag::MaxHeapSize.info().name, bytes, arg);
        }
        if let Some(size) = arg.strip_prefix("-Xmn") {
            let bytes = parse_heap_size(size, arg, "Invalid initial young generation size")?;
            self.set_size(flag::MaxNewSize.info().name, bytes, arg)?;
            return self.set_size(flag::NewSize.info().name, bytes, arg);
        }
        if let Some(size) = arg.strip_prefix("-Xss") {
            return self.process_xss(size, arg);
        }
        if self.ignore_unrecognized {
            return Ok(());
        }
        Err(ArgError::unrecognized(format!(
            "Unrecognized option: {arg}\n"
        )))
    }

    /// `-Xss<size>`: sets `ThreadStackSize` in K, rounding up.
    fn process_xss(&mut self, size: &str, arg: &str) -> Result<(), ArgError> {
        let bytes = parse_size_option(size, arg, "Invalid thread stack size")?;
        let max_bytes = M * K; // ThreadStackSize's range ends at 1M K
        if bytes > max_bytes {
            return Err(ArgError::invalid(format!(
                "Invalid thread stack size: {arg}\n\
                 The specified size exceeds the maximum representable size.\n"
            )));
        }
        let kilobytes = bytes.div_ceil(K);
        let index = flag_index(flag::ThreadStackSize.info().name);
        self.settings
            .set_value(
                index,
                Value::Int(kilobytes as i64),
                crate::Origin::from(Source::CommandLine),
            )
            .map_err(|range| {
                ArgError::invalid(format!("{range}Invalid thread stack size: {arg}\n"))
            })
    }

    /// Sets a size flag from one of the `-X` size options. These always record
    /// `{command line}`, wherever they came from, as HotSpot does.
    fn set_size(&mut self, name: &str, bytes: u64, arg: &str) -> Result<(), ArgError> {
        let index = flag_index(name);
        self.settings
            .set_value(
                index,
                Value::Uint(bytes),
                crate::Origin::from(Source::CommandLine),
            )
            .map_err(|message| {
                ArgError::invalid(format!("{message}Improperly specified VM option '{arg}'\n"))
            })
    }

    /// Processes what follows `-XX:` (or a token of a settings file), as HotSpot does: with
    /// `PrintVMOptions` on, the option is echoed first; then it is applied if it has one of
    /// the forms a flag takes (`+Name`/`-Name` for a bool, `Name=value`, `Name:=text` for a
    /// string); otherwise the message depends only on whether a flag of that name exists
    /// (locked, or used with the wrong form) or not (unrecognized, with a suggestion).
    fn process_xx(&mut self, arg: &str, source: Source) -> Result<(), ArgError> {
        if self.settings.get(flag::PrintVMOptions) {
            (self.sink)(Stream::Stdout, &format!("VM option '{arg}'\n"));
        }
        if source != Source::ConfigFile && matches!(arg, "+PrintVMOptions" | "-PrintVMOptions") {
            return Ok(()); // the pre-scan applied these
        }
        if arg.starts_with("Flags=") || arg.starts_with("VMOptionsFile=") {
            return Ok(()); // handled before everything else
        }
        // `IgnoreUnrecognizedVMOptions` is applied here like any flag (its value and origin
        // are recorded where it stands); whether unrecognized options are ignored was decided
        // by the pre-scan of the command line and the environment alone — a settings file
        // that sets it still has its own unrecognized options refused, as in HotSpot.
        if self.apply_xx(arg, source)? {
            return Ok(());
        }
        self.not_applied(arg)
    }

    /// The index of the flag `name` if it exists and may be set now (unlocked, or one of the
    /// unlock flags themselves).
    fn settable(&self, name: &str) -> Option<usize> {
        let valid = !name.is_empty()
            && name.len() <= 255
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return None;
        }
        let index = find_index(name)?;
        let info = &FLAGS[index];
        (info.is_unlocker() || self.settings.is_unlocked(info)).then_some(index)
    }

    /// Applies `arg` if it has a form its flag takes: `Ok(true)`; `Ok(false)` if it has no
    /// such form (the caller says why). A value outside the flag's range or refused by its
    /// constraint is an error here, with HotSpot's range message.
    fn apply_xx(&mut self, arg: &str, source: Source) -> Result<bool, ArgError> {
        let origin = crate::Origin::from(source);
        let bool_form = arg
            .strip_prefix('+')
            .map(|n| (true, n))
            .or_else(|| arg.strip_prefix('-').map(|n| (false, n)));
        if let Some((on, name)) = bool_form {
            let Some(index) = self.settable(name).filter(|&i| FLAGS[i].is_bool()) else {
                return Ok(false);
            };
            self.settings
                .set_value(index, Value::Bool(on), origin)
                .map_err(ArgError::invalid)?;
            return Ok(true);
        }
        let name_len = arg
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(arg.len());
        let (name, rest) = arg.split_at(name_len);
        let (value, reset) = if let Some(v) = rest.strip_prefix('=') {
            (v, false)
        } else if let Some(v) = rest.strip_prefix(":=") {
            (v, true)
        } else {
            return Ok(false);
        };
        let Some(index) = self.settable(name) else {
            return Ok(false);
        };
        let info = &FLAGS[index];
        if info.is_bool() || (reset && info.ty != FlagType::Ccstr) {
            return Ok(false);
        }
        let Some(parsed) = info.ty.parse(value) else {
            return Ok(false);
        };
        self.settings
            .set_value(index, parsed, origin)
            .map_err(|message| {
                // A constraint message without a newline stands alone, as HotSpot's
                // NativeMemoryTracking syntax error does.
                if message.ends_with('\n') {
                    ArgError::invalid(format!("{message}Improperly specified VM option '{arg}'\n"))
                } else {
                    ArgError::invalid(message)
                }
            })?;
        Ok(true)
    }

    /// Why `arg` was not applied: the flag named before any `=` is locked, or was given the
    /// wrong form; or there is no such flag — then nothing with `IgnoreUnrecognizedVMOptions`,
    /// else "Unrecognized" with a suggestion (printed without a newline, as HotSpot does),
    /// fatal unless the option is commented out (`-XX:#...`).
    fn not_applied(&mut self, arg: &str) -> Result<(), ArgError> {
        let plus_minus = arg.starts_with('+') || arg.starts_with('-');
        let shown = if plus_minus { &arg[1..] } else { arg };
        let name = shown.split('=').next().unwrap_or_default();
        if let Some(info) = find_index(name).map(|i| &FLAGS[i]) {
            if !self.settings.is_unlocked(info) {
                let unlock = info.kind.unlock_flag().unwrap_or_default();
                return Err(ArgError::invalid(format!(
                    "Error: VM option '{}' is {} and must be enabled via -XX:+{unlock}.\n\
                     Error: The unlock option must precede '{}'.\n",
                    info.name,
                    info.kind.word(),
                    info.name
                )));
            }
            return Err(ArgError::invalid(if info.is_bool() && !plus_minus {
                format!("Missing +/- setting for VM option '{shown}'\n")
            } else if !info.is_bool() && plus_minus {
                format!("Unexpected +/- setting in VM option '{shown}'\n")
            } else {
                format!("Improperly specified VM option '{shown}'\n")
            }));
        }
        if self.ignore_unrecognized {
            return Ok(());
        }
        let mut message = format!("Unrecognized VM option '{shown}'\n");
        if let Some(best) = suggest(name) {
            let (prefix, suffix) = if best.is_bool() {
                ("(+/-)", "")
            } else {
                ("", "=<value>")
            };
            message.push_str(&format!("Did you mean '{prefix}{}{suffix}'? ", best.name));
        }
        if arg.starts_with('#') {
            // Commented out: reported, never fatal.
            (self.sink)(Stream::Stderr, &message);
            return Ok(());
        }
        Err(ArgError::invalid(message))
    }
}

/// The flag whose name is most similar to `name`, if similar enough.
fn suggest(name: &str) -> Option<&'static crate::FlagInfo> {
    FLAGS
        .iter()
        .map(|f| (similarity(name, f.name), f))
        .filter(|(score, _)| *score >= SUGGESTION_THRESHOLD)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, f)| f)
}

/// Parses the size of `-Xmx`/`-Xmn`/`-XX:MaxHeapSize=`, which may not be 0.
fn parse_heap_size(size: &str, arg: &str, what: &str) -> Result<u64, ArgError> {
    Some(parse_size_option(size, arg, what)?)
        .filter(|&bytes| bytes > 0)
        .ok_or_else(|| ArgError::invalid(format!("{what}: {arg}\n")))
}

/// Parses the size of `-Xms`/`-Xmx`/`-Xmn`/`-Xss`.
fn parse_size_option(size: &str, arg: &str, what: &str) -> Result<u64, ArgError> {
    parse_unsigned(size).ok_or_else(|| ArgError::invalid(format!("{what}: {arg}\n")))
}

fn flag_index(name: &str) -> usize {
    find_index(name).expect("flag named by the parser exists in the table")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArgErrorKind, Origin};

    fn run(args: &[&str]) -> (Result<Parsed, ArgError>, Vec<(Stream, String)>) {
        run_with(args, ParseOptions::default())
    }

    fn run_with(
        args: &[&str],
        options: ParseOptions<'_>,
    ) -> (Result<Parsed, ArgError>, Vec<(Stream, String)>) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        let result = parse(&args, &options, &mut |s, t| out.push((s, t.to_string())));
        (result, out)
    }

    fn err(args: &[&str]) -> ArgError {
        run(args).0.expect_err("expected an error")
    }

    fn ok(args: &[&str]) -> Settings {
        run(args).0.expect("expected success").settings
    }

    #[test]
    fn bool_forms() {
        let s = ok(&["-XX:+AlwaysPreTouch", "-XX:-UseTransparentHugePages"]);
        assert!(s.get(flag::AlwaysPreTouch));
        assert_eq!(
            s.origin(flag::AlwaysPreTouch),
            Origin::from(Source::CommandLine)
        );
        assert_eq!(
            s.origin(flag::UseTransparentHugePages),
            Origin::from(Source::CommandLine)
        );
        let s = ok(&["-XX:+AlwaysPreTouch", "-XX:-AlwaysPreTouch"]);
        assert!(!s.get(flag::AlwaysPreTouch), "last one wins");
    }

    #[test]
    fn value_forms() {
        let s = ok(&[
            "-XX:PreTouchParallelChunkSize=64k",
            "-XX:ThreadStackSize=0x400",
            "-XX:ActiveProcessorCount=-2",
        ]);
        assert_eq!(s.get(flag::PreTouchParallelChunkSize), 65536);
        assert_eq!(s.get(flag::ThreadStackSize), 1024);
        assert_eq!(s.get(flag::ActiveProcessorCount), -2);
        let s = ok(&["-XX:NativeMemoryTracking:=summary"]);
        assert_eq!(s.get(flag::NativeMemoryTracking), "summary");
    }

    #[test]
    fn x_options() {
        let s = ok(&["-Xms64m", "-Xmx1g", "-Xss2m", "-Xmn16m"]);
        assert_eq!(s.get(flag::InitialHeapSize), 64 << 20);
        assert_eq!(s.get(flag::MinHeapSize), 64 << 20);
        assert_eq!(s.get(flag::MaxHeapSize), 1 << 30);
        assert_eq!(s.get(flag::ThreadStackSize), 2048);
        assert_eq!(s.get(flag::NewSize), 16 << 20);
        assert_eq!(s.get(flag::MaxNewSize), 16 << 20);
        assert_eq!(
            ok(&["-Xss1"]).get(flag::ThreadStackSize),
            1,
            "rounded up to 1K"
        );
        assert_eq!(ok(&["-Xss1025"]).get(flag::ThreadStackSize), 2);
        assert_eq!(ok(&["-Xss0"]).get(flag::ThreadStackSize), 0);
    }

    #[test]
    fn x_option_errors() {
        assert_eq!(
            err(&["-Xmx1q"]).message,
            "Invalid maximum heap size: -Xmx1q\n"
        );
        assert_eq!(err(&["-Xmx"]).message, "Invalid maximum heap size: -Xmx\n");
        assert_eq!(err(&["-Xms"]).message, "Invalid initial heap size: -Xms\n");
        assert_eq!(
            err(&["-Xss1q"]).message,
            "Invalid thread stack size: -Xss1q\n"
        );
        assert_eq!(
            err(&["-Xmn1q"]).message,
            "Invalid initial young generation size: -Xmn1q\n"
        );
        assert_eq!(
            err(&["-Xss2g"]).message,
            "Invalid thread stack size: -Xss2g\nThe specified size exceeds the maximum representable size.\n"
        );
        assert_eq!(
            err(&["-Xmx99999999999t"]).message,
            "Invalid maximum heap size: -Xmx99999999999t\n"
        );
        assert_eq!(
            err(&["-XX:MaxHeapSize=abc"]).message,
            "Invalid maximum heap size: -XX:MaxHeapSize=abc\n"
        );
        assert_eq!(
            err(&["-XX:MaxHeapSize=1.5"]).message,
            "Invalid maximum heap size: -XX:MaxHeapSize=1.5\n"
        );
    }

    #[test]
    fn unrecognized() {
        let e = err(&["-XX:+Foo"]);
        assert_eq!(e.message, "Unrecognized VM option 'Foo'\n");
        assert_eq!(e.kind, ArgErrorKind::InvalidOption);
        assert_eq!(
            err(&["-XX:Foo=1"]).message,
            "Unrecognized VM option 'Foo=1'\n"
        );
        assert_eq!(err(&["-XX:"]).message, "Unrecognized VM option ''\n");
        assert_eq!(
            err(&["-XX:Foo-Bar=1"]).message,
            "Unrecognized VM option 'Foo-Bar=1'\n"
        );
        assert_eq!(
            err(&["-XX:+Foo-Bar"]).message,
            "Unrecognized VM option 'Foo-Bar'\n"
        );
        // HotSpot looks up the text before '=' ("ThreadStackSize:"): no such flag, a close one.
        assert_eq!(
            err(&["-XX:ThreadStackSize:=1"]).message,
            "Unrecognized VM option 'ThreadStackSize:=1'\nDid you mean 'ThreadStackSize=<value>'? "
        );
        let e = err(&["-Xfoo"]);
        assert_eq!(e.message, "Unrecognized option: -Xfoo\n");
        assert_eq!(e.kind, ArgErrorKind::UnrecognizedOption);
        assert_eq!(e.kind.jni_code(), -1);
        assert_eq!(err(&["-foo"]).message, "Unrecognized option: -foo\n");
        assert_eq!(err(&["foo"]).message, "Unrecognized option: foo\n");
    }

    #[test]
    fn did_you_mean() {
        assert_eq!(
            err(&["-XX:+THPStackMitigation"]).message,
            "Unrecognized VM option 'THPStackMitigation'\nDid you mean '(+/-)DisableTHPStackMitigation'? "
        );
        assert_eq!(
            err(&["-XX:-THPStackMitigation"]).message,
            "Unrecognized VM option 'THPStackMitigation'\nDid you mean '(+/-)DisableTHPStackMitigation'? "
        );
        assert_eq!(
            err(&["-XX:+ThreadStackSiz"]).message,
            "Unrecognized VM option 'ThreadStackSiz'\nDid you mean 'ThreadStackSize=<value>'? "
        );
        assert_eq!(
            err(&["-XX:ThreadStackSiz=1"]).message,
            "Unrecognized VM option 'ThreadStackSiz=1'\nDid you mean 'ThreadStackSize=<value>'? "
        );
    }

    #[test]
    fn type_mismatches() {
        assert_eq!(
            err(&["-XX:AlwaysPreTouch=1"]).message,
            "Missing +/- setting for VM option 'AlwaysPreTouch=1'\n"
        );
        assert_eq!(
            err(&["-XX:AlwaysPreTouch"]).message,
            "Missing +/- setting for VM option 'AlwaysPreTouch'\n"
        );
        assert_eq!(
            err(&["-XX:+MaxHeapSize"]).message,
            "Unexpected +/- setting in VM option 'MaxHeapSize'\n"
        );
        assert_eq!(
            err(&["-XX:-MaxHeapSize"]).message,
            "Unexpected +/- setting in VM option 'MaxHeapSize'\n"
        );
        assert_eq!(
            err(&["-XX:MaxHeapSize"]).message,
            "Improperly specified VM option 'MaxHeapSize'\n"
        );
        // As HotSpot 17: the unlock flag is itself diagnostic, and locked until unlocked.
        assert_eq!(
            err(&["-XX:UnlockDiagnosticVMOptions"]).message,
            "Error: VM option 'UnlockDiagnosticVMOptions' is diagnostic and must be enabled via -XX:+UnlockDiagnosticVMOptions.\n\
             Error: The unlock option must precede 'UnlockDiagnosticVMOptions'.\n"
        );
        assert_eq!(
            err(&[
                "-XX:+UnlockDiagnosticVMOptions",
                "-XX:UnlockDiagnosticVMOptions"
            ])
            .message,
            "Missing +/- setting for VM option 'UnlockDiagnosticVMOptions'\n"
        );
        // The name before '=' is looked up: a bool with +/- and a value, a number with +/-.
        assert_eq!(
            err(&["-XX:+AlwaysPreTouch=1"]).message,
            "Improperly specified VM option 'AlwaysPreTouch=1'\n"
        );
        assert_eq!(
            err(&["-XX:-ParallelGCThreads=1"]).message,
            "Unexpected +/- setting in VM option 'ParallelGCThreads=1'\n"
        );
    }

    #[test]
    fn improper_values() {
        for (arg, shown) in [
            ("-XX:ThreadStackSize=abc", "ThreadStackSize=abc"),
            ("-XX:ThreadStackSize=", "ThreadStackSize="),
            ("-XX:ThreadStackSize=+1", "ThreadStackSize=+1"),
            (
                "-XX:ThreadStackSize=99999999999999999999",
                "ThreadStackSize=99999999999999999999",
            ),
            ("-XX:ActiveProcessorCount=abc", "ActiveProcessorCount=abc"),
            ("-XX:ParallelGCThreads=-1", "ParallelGCThreads=-1"),
            ("-XX:ParallelGCThreads=0x", "ParallelGCThreads=0x"),
        ] {
            assert_eq!(
                err(&[arg]).message,
                format!("Improperly specified VM option '{shown}'\n"),
                "{arg}"
            );
        }
    }

    #[test]
    fn values_wider_than_the_flag_wrap_as_in_hotspot_17() {
        let s = ok(&[
            "-XX:ActiveProcessorCount=4294967297",
            "-XX:ParallelGCThreads=4294967296",
        ]);
        assert_eq!(s.get(flag::ActiveProcessorCount), 1);
        assert_eq!(s.get(flag::ParallelGCThreads), 0);
        let s = ok(&["-XX:ActiveProcessorCount=2147483648"]);
        assert_eq!(s.get(flag::ActiveProcessorCount), i32::MIN);
        // intx: the magnitude wraps to a negative value, which the range then refuses.
        assert_eq!(
            err(&["-XX:ThreadStackSize=9223372036854775808"]).message,
            "intx ThreadStackSize=-9223372036854775808 is outside the allowed range [ 0 ... 1048576 ]\n\
             Improperly specified VM option 'ThreadStackSize=9223372036854775808'\n"
        );
    }

    #[test]
    fn ranges() {
        assert_eq!(
            err(&["-XX:PreTouchParallelChunkSize=1"]).message,
            "size_t PreTouchParallelChunkSize=1 is outside the allowed range [ 4096 ... 9223372036854775807 ]\n\
             Improperly specified VM option 'PreTouchParallelChunkSize=1'\n"
        );
        assert_eq!(
            err(&["-XX:ThreadStackSize=-1"]).message,
            "intx ThreadStackSize=-1 is outside the allowed range [ 0 ... 1048576 ]\n\
             Improperly specified VM option 'ThreadStackSize=-1'\n"
        );
        assert_eq!(
            err(&["-XX:ThreadStackSize=2m"]).message,
            "intx ThreadStackSize=2097152 is outside the allowed range [ 0 ... 1048576 ]\n\
             Improperly specified VM option 'ThreadStackSize=2m'\n"
        );
        ok(&[
            "-XX:PreTouchParallelChunkSize=4k",
            "-XX:PreTouchParallelChunkSize=9223372036854775807",
        ]);
    }

    #[test]
    fn nmt_syntax() {
        assert_eq!(
            err(&["-XX:NativeMemoryTracking=foo"]).message,
            "Syntax error, expecting -XX:NativeMemoryTracking=[off|summary|detail]"
        );
    }

    #[test]
    fn locked_flags() {
        let e = err(&["-XX:+PrintNMTStatistics"]);
        assert_eq!(
            e.message,
            "Error: VM option 'PrintNMTStatistics' is diagnostic and must be enabled via -XX:+UnlockDiagnosticVMOptions.\n\
             Error: The unlock option must precede 'PrintNMTStatistics'.\n"
        );
        assert_eq!(e.kind.jni_code(), -6);
        assert_eq!(
            err(&["-XX:PrintNMTStatistics=1"]).message,
            "Error: VM option 'PrintNMTStatistics' is diagnostic and must be enabled via -XX:+UnlockDiagnosticVMOptions.\n\
             Error: The unlock option must precede 'PrintNMTStatistics'.\n"
        );
        assert_eq!(
            err(&["-XX:+BackgroundPreTouch"]).message,
            "Error: VM option 'BackgroundPreTouch' is experimental and must be enabled via -XX:+UnlockExperimentalVMOptions.\n\
             Error: The unlock option must precede 'BackgroundPreTouch'.\n"
        );
        // The unlock must come first.
        err(&[
            "-XX:+DisableTHPStackMitigation",
            "-XX:+UnlockDiagnosticVMOptions",
        ]);
        let s = ok(&[
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:+DisableTHPStackMitigation",
        ]);
        assert!(s.get(flag::DisableTHPStackMitigation));
        let s = ok(&[
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+BackgroundPreTouch",
        ]);
        assert!(s.get(flag::BackgroundPreTouch));
    }

    #[test]
    fn ignore_unrecognized() {
        let s = ok(&[
            "-XX:+IgnoreUnrecognizedVMOptions",
            "-XX:+Foo",
            "-Xfoo",
            "-XX:+AlwaysPreTouch",
        ]);
        assert!(s.get(flag::AlwaysPreTouch));
        // Recorded as any flag is (java: true {command line}).
        assert!(s.get(flag::IgnoreUnrecognizedVMOptions));
        assert_eq!(
            s.origin(flag::IgnoreUnrecognizedVMOptions).source,
            Source::CommandLine
        );
        // Order does not matter: the pre-scan sees it; the last one wins.
        ok(&["-XX:+Foo", "-XX:+IgnoreUnrecognizedVMOptions"]);
        err(&[
            "-XX:+IgnoreUnrecognizedVMOptions",
            "-XX:-IgnoreUnrecognizedVMOptions",
            "-XX:+Foo",
        ]);
        // Locked flags and bad values still fail.
        err(&[
            "-XX:+IgnoreUnrecognizedVMOptions",
            "-XX:+PrintNMTStatistics",
        ]);
        err(&[
            "-XX:+IgnoreUnrecognizedVMOptions",
            "-XX:ThreadStackSize=abc",
        ]);
        let (r, _) = run_with(
            &["-XX:+Foo", "-foo"],
            ParseOptions {
                ignore_unrecognized: true,
                ..ParseOptions::default()
            },
        );
        r.unwrap();
    }

    #[test]
    fn commented_out_option_is_not_fatal() {
        let (r, out) = run(&["-XX:#+Foo"]);
        r.unwrap();
        assert_eq!(
            out,
            [(
                Stream::Stderr,
                "Unrecognized VM option '#+Foo'\n".to_string()
            )]
        );
    }

    #[test]
    fn print_vm_options_echoes() {
        let (r, out) = run(&["-XX:+PrintVMOptions", "-XX:+AlwaysPreTouch", "-Xmx64m"]);
        r.unwrap();
        assert_eq!(
            out,
            [
                (Stream::Stdout, "VM option '+PrintVMOptions'\n".to_string()),
                (Stream::Stdout, "VM option '+AlwaysPreTouch'\n".to_string()),
            ]
        );
    }

    #[test]
    fn environment_comes_first_and_is_announced() {
        let env = EnvOptions {
            name: "RTVM_OPTIONS",
            value: "-Xmx16m -XX:+AlwaysPreTouch",
        };
        let (r, out) = run_with(
            &["-Xmx64m"],
            ParseOptions {
                env: Some(env),
                ..ParseOptions::default()
            },
        );
        let s = r.unwrap().settings;
        assert_eq!(s.get(flag::MaxHeapSize), 64 << 20, "command line wins");
        assert!(s.get(flag::AlwaysPreTouch));
        assert_eq!(
            s.origin(flag::AlwaysPreTouch),
            Origin::from(Source::Environment)
        );
        assert_eq!(
            out[0],
            (
                Stream::Stderr,
                "Picked up RTVM_OPTIONS: -Xmx16m -XX:+AlwaysPreTouch\n".into()
            )
        );
        let env = EnvOptions {
            name: "RTVM_OPTIONS",
            value: "\"-Xmx16m",
        };
        let (r, out) = run_with(
            &[],
            ParseOptions {
                env: Some(env),
                ..ParseOptions::default()
            },
        );
        assert_eq!(r.unwrap_err().message, "Unmatched quote in RTVM_OPTIONS\n");
        assert_eq!(out.len(), 1, "announced before the error");
        // -X sizes record {command line} even from the environment, as HotSpot does.
        let env = EnvOptions {
            name: "RTVM_OPTIONS",
            value: "-Xmx16m",
        };
        let (r, _) = run_with(
            &[],
            ParseOptions {
                env: Some(env),
                ..ParseOptions::default()
            },
        );
        assert_eq!(
            r.unwrap().settings.origin(flag::MaxHeapSize),
            Origin::from(Source::CommandLine)
        );
    }

    #[test]
    fn xlog_collected_in_order() {
        let p = run(&["-Xlog", "-Xlog:gc+heap=debug", "-Xlogfoo"]).0;
        assert_eq!(
            p.unwrap_err().message,
            "Invalid -Xlog option '-Xlogfoo', see error log for details.\n"
        );
        let p = run(&["-Xlog", "-Xlog:gc+heap=debug"]).0.unwrap();
        assert_eq!(p.xlog, ["-Xlog", "-Xlog:gc+heap=debug"]);
    }

    #[test]
    fn xlog_hook_sees_options_in_order_and_can_stop() {
        let seen = std::cell::RefCell::new(Vec::new());
        let hook = |o: &str| {
            seen.borrow_mut().push(o.to_owned());
            match o {
                "-Xlog:help" => Ok(XlogAction::Stop),
                "-Xlog:bad" => Err(ArgError::invalid("bad\n")),
                _ => Ok(XlogAction::Continue),
            }
        };
        let options = ParseOptions {
            xlog: Some(&hook),
            ..ParseOptions::default()
        };
        let (r, _) = run_with(&["-Xlog:os", "-Xlog:help", "-XX:+NoSuchFlag"], options);
        assert_eq!(r.unwrap().stop, Some(StopReason::XlogHelp));
        assert_eq!(*seen.borrow(), ["-Xlog:os", "-Xlog:help"]);
        let (r, _) = run_with(&["-Xlog:bad", "-XX:+NoSuchFlag"], options);
        assert_eq!(
            r.unwrap_err().message,
            "bad\n",
            "the earlier -Xlog error wins"
        );
        let (r, _) = run_with(&["-XX:+NoSuchFlag", "-Xlog:help"], options);
        assert!(r.unwrap_err().message.starts_with("Unrecognized VM option"));
    }

    #[test]
    fn stopping_options() {
        let p = run(&["-XX:+NoSuchFlag", "-XX:+PrintFlagsInitial"])
            .0
            .unwrap();
        assert_eq!(
            p.stop,
            Some(StopReason::PrintFlagsInitial),
            "found by the pre-scan"
        );
        let p = run(&["-Xmx64m", "-version", "-XX:+NoSuchFlag"]).0.unwrap();
        assert_eq!(p.stop, Some(StopReason::Version));
        assert_eq!(p.settings.get(flag::MaxHeapSize), 64 << 20);
        assert!(run(&["-XX:+NoSuchFlag", "-version"]).0.is_err());
        let p = run(&["-showversion", "-Xrs"]).0.unwrap();
        assert!(p.show_version && p.stop.is_none());
        assert!(p.settings.get(flag::ReduceSignalUsage));
    }

    fn temp_file(name: &str, content: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rtvm-flags-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    #[test]
    fn vm_options_file() {
        let f = temp_file("vmo.txt", "-Xmx64m\n \"-XX:+AlwaysPreTouch\"\n");
        let arg = format!("-XX:VMOptionsFile={}", f.display());
        let s = ok(&[&arg, "-Xmx32m"]);
        assert_eq!(
            s.get(flag::MaxHeapSize),
            32 << 20,
            "spliced where it stands"
        );
        assert!(s.get(flag::AlwaysPreTouch));
        assert_eq!(
            s.origin(flag::AlwaysPreTouch),
            Origin::from(Source::CommandLine)
        );
        assert_eq!(
            err(&["-XX:VMOptionsFile=/nonexistent"]).message,
            "Could not open options file '/nonexistent'\n"
        );
        let nested = temp_file("nest.txt", &format!("{arg}\n"));
        let outer = format!("-XX:VMOptionsFile={}", nested.display());
        assert_eq!(
            err(&[&outer]).message,
            format!(
                "A VM options file may not refer to a VM options file. Specification of \
                 '-XX:VMOptionsFile=<file-name>' in the options file '{outer}' in options \
                 container 'cmd_line_args' is an error.\n"
            )
        );
        let unmatched = temp_file("unm.txt", "-Xmx64m \"-XX:+Alw\n");
        assert_eq!(
            err(&[&format!("-XX:VMOptionsFile={}", unmatched.display())]).message,
            format!("Unmatched quote in {}\n", unmatched.display())
        );
    }

    #[test]
    fn settings_file() {
        let f = temp_file("flags.txt", "+AlwaysPreTouch\n# comment\nMaxHeapSize=64m\n");
        let s = ok(&[&format!("-XX:Flags={}", f.display())]);
        assert!(s.get(flag::AlwaysPreTouch));
        assert_eq!(
            s.origin(flag::MaxHeapSize),
            Origin::from(Source::ConfigFile)
        );
        let s = ok(&[&format!("-XX:Flags={}", f.display()), "-Xmx32m"]);
        assert_eq!(
            s.get(flag::MaxHeapSize),
            32 << 20,
            "command line after settings file"
        );
        let bad = temp_file("bad.txt", "-XX:+Foo\n");
        assert_eq!(
            err(&[&format!("-XX:Flags={}", bad.display())]).message,
            "Unrecognized VM option 'XX:+Foo'\n"
        );
        assert_eq!(
            err(&["-XX:Flags=/nonexistent"]).message,
            "Could not open settings file /nonexistent\n"
        );
    }
}
