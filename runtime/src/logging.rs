//! `-Xlog`: HotSpot's unified logging syntax on top of the `log` crate and `env_logger`.
//!
//! `-Xlog[:[selections][:[output][:[decorators][:output-options]]]]`
//!
//! * selections: `tag[+tag...][*][=level]`, comma separated, or `all`; without `*` only the
//!   exact tag set matches;
//! * outputs: `stdout` (the default), `stderr`, `file=<name>` or a bare file name (`%p` and
//!   `%t` expand to the pid and the start time), with `filecount=` and `filesize=` rotation;
//! * decorators: `time utctime uptime timemillis uptimemillis timenanos uptimenanos hostname
//!   pid tid level tags` (or their short names), or `none`; default `uptime,level,tags`.
//!
//! rtvm logs with `log` targets that spell a tag set (`pagesize`, `os+thread`, `gc+heap`).
//! One global [`log::Log`] dispatches each record to every output whose selection enables
//! its tag set at its level; each output is an `env_logger` logger with a custom format that
//! writes HotSpot's decorations, each field padded to the widest value seen so far.
//! Without any `-Xlog`, warnings and errors go to stdout, as in HotSpot.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use log::{Level, LevelFilter, Log, Metadata, Record};
use rtvm_os_linux::system;

/// Every tag rtvm knows, sorted.
pub const TAGS: &[&str] = &[
    "gc", "heap", "init", "logging", "nmt", "os", "pagesize", "startup", "thread",
];

/// Every tag set rtvm logs with; a `log` target is one of these.
pub const TAG_SETS: &[&str] = &[
    "gc+heap",
    "gc+init",
    "logging",
    "nmt",
    "os",
    "os+thread",
    "pagesize",
    "startup",
];

fn tag_set_index(target: &str) -> Option<usize> {
    TAG_SETS.iter().position(|t| *t == target)
}

fn tags_of(set: &str) -> Vec<&str> {
    set.split('+').collect()
}

/// A decorator, in HotSpot's fixed print order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decorator {
    Time,
    UtcTime,
    Uptime,
    TimeMillis,
    UptimeMillis,
    TimeNanos,
    UptimeNanos,
    Hostname,
    Pid,
    Tid,
    Level,
    Tags,
}

const DECORATORS: [(Decorator, &str, &str); 12] = [
    (Decorator::Time, "time", "t"),
    (Decorator::UtcTime, "utctime", "utc"),
    (Decorator::Uptime, "uptime", "u"),
    (Decorator::TimeMillis, "timemillis", "tm"),
    (Decorator::UptimeMillis, "uptimemillis", "um"),
    (Decorator::TimeNanos, "timenanos", "tn"),
    (Decorator::UptimeNanos, "uptimenanos", "un"),
    (Decorator::Hostname, "hostname", "hn"),
    (Decorator::Pid, "pid", "p"),
    (Decorator::Tid, "tid", "ti"),
    (Decorator::Level, "level", "l"),
    (Decorator::Tags, "tags", "tg"),
];

const DEFAULT_DECORATORS: [Decorator; 3] = [Decorator::Uptime, Decorator::Level, Decorator::Tags];

/// Where an output writes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Dest {
    Stdout,
    Stderr,
    File { path: String, count: u32, size: u64 },
}

impl Dest {
    fn name(&self) -> String {
        match self {
            Dest::Stdout => "stdout".into(),
            Dest::Stderr => "stderr".into(),
            Dest::File { path, .. } => format!("file={path}"),
        }
    }
}

/// One configured output.
#[derive(Clone, Debug)]
struct OutputSpec {
    dest: Dest,
    decorators: Vec<Decorator>,
    /// The enabled level per tag set (index into [`TAG_SETS`]).
    levels: Vec<LevelFilter>,
}

/// A parsed set of `-Xlog` options.
#[derive(Clone, Debug)]
pub struct LogSpec {
    outputs: Vec<OutputSpec>,
    /// Warnings found while parsing, logged (tag `logging`) once the outputs exist.
    warnings: Vec<String>,
}

/// What the `-Xlog` options ask for.
#[derive(Debug)]
pub enum XlogRequest {
    /// `-Xlog:help`: print the usage and exit.
    Help,
    /// Configure logging.
    Configure(LogSpec),
}

/// An invalid `-Xlog` option: `detail` is logged as `[error][logging]` on stdout, then the
/// VM fails with `Invalid -Xlog option '<option>', see error log for details.`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XlogError {
    /// The logging error line (`Invalid tag 'foo' in log selection.`).
    pub detail: String,
    /// The option as given.
    pub option: String,
}

impl XlogError {
    /// The message HotSpot prints on stderr.
    pub fn message(&self) -> String {
        format!(
            "Invalid -Xlog option '{}', see error log for details.\n",
            self.option
        )
    }
}

impl LogSpec {
    /// HotSpot's default: warnings and errors of every tag set to stdout.
    pub fn default_spec() -> LogSpec {
        LogSpec {
            outputs: vec![OutputSpec {
                dest: Dest::Stdout,
                decorators: DEFAULT_DECORATORS.to_vec(),
                levels: vec![LevelFilter::Warn; TAG_SETS.len()],
            }],
            warnings: Vec::new(),
        }
    }

    /// The most verbose level any output enables for `tag_set`.
    pub fn level_for(&self, tag_set: &str) -> LevelFilter {
        let Some(i) = tag_set_index(tag_set) else {
            return LevelFilter::Off;
        };
        self.outputs
            .iter()
            .map(|o| o.levels[i])
            .max()
            .unwrap_or(LevelFilter::Off)
    }
}

fn parse_level(word: &str) -> Option<LevelFilter> {
    Some(match word {
        "off" => LevelFilter::Off,
        "trace" => LevelFilter::Trace,
        "debug" => LevelFilter::Debug,
        "info" => LevelFilter::Info,
        "warning" => LevelFilter::Warn,
        "error" => LevelFilter::Error,
        _ => return None,
    })
}

/// One selection: the tag sets it matches and the level it sets.
struct Selection {
    matches: Vec<bool>,
    level: LevelFilter,
}

fn parse_selection(text: &str, warnings: &mut Vec<String>) -> Result<Selection, String> {
    let (tags_part, level) = match text.split_once('=') {
        Some((t, l)) => (
            t,
            parse_level(l).ok_or_else(|| format!("Invalid level '{l}' in log selection."))?,
        ),
        None => (text, LevelFilter::Info),
    };
    if tags_part == "all" {
        return Ok(Selection {
            matches: vec![true; TAG_SETS.len()],
            level,
        });
    }
    let (tags_part, wildcard) = match tags_part.strip_suffix('*') {
        Some(t) => (t, true),
        None => (tags_part, false),
    };
    let tags: Vec<&str> = tags_part.split('+').collect();
    for tag in &tags {
        if !TAGS.contains(tag) {
            return Err(format!("Invalid tag '{tag}' in log selection."));
        }
    }
    let matches: Vec<bool> = TAG_SETS
        .iter()
        .map(|set| {
            let set_tags = tags_of(set);
            let has_all = tags.iter().all(|t| set_tags.contains(t));
            if wildcard {
                has_all
            } else {
                has_all && set_tags.len() == tags.len()
            }
        })
        .collect();
    if !matches.iter().any(|&m| m) {
        let mut suggestions: Vec<String> = Vec::new();
        for tag in &tags {
            if TAG_SETS.iter().any(|s| tags_of(s).contains(tag)) {
                suggestions.push(format!("{tag}*"));
            }
        }
        for set in TAG_SETS {
            if tags.iter().any(|t| tags_of(set).contains(t))
                && !suggestions.contains(&set.to_string())
            {
                suggestions.push(set.to_string());
            }
        }
        let mut w = format!(
            "No tag set matches selection: {tags_part}{}.",
            if wildcard { "*" } else { "" }
        );
        if !suggestions.is_empty() {
            let _ = write!(
                w,
                " Did you mean any of the following? {}",
                suggestions.join(" ")
            );
        }
        warnings.push(w);
    }
    Ok(Selection { matches, level })
}

fn parse_decorators(text: &str) -> Result<Vec<Decorator>, String> {
    if text == "none" {
        return Ok(Vec::new());
    }
    let mut chosen = Vec::new();
    for word in text.split(',') {
        let d = DECORATORS
            .iter()
            .find(|(_, long, short)| *long == word || *short == word)
            .map(|(d, _, _)| *d)
            .ok_or_else(|| format!("Invalid decorator '{word}'."))?;
        if !chosen.contains(&d) {
            chosen.push(d);
        }
    }
    // Printed in HotSpot's fixed order whatever the order given.
    chosen.sort_by_key(|d| DECORATORS.iter().position(|(x, _, _)| x == d));
    Ok(chosen)
}

fn parse_output(text: &str, start_stamp: &str) -> Dest {
    match text {
        "" | "stdout" => Dest::Stdout,
        "stderr" => Dest::Stderr,
        _ => {
            let name = text.strip_prefix("file=").unwrap_or(text);
            let name = name.trim_matches('"');
            let path = name
                .replace("%p", &std::process::id().to_string())
                .replace("%t", start_stamp);
            Dest::File {
                path,
                count: 5,
                size: 20 * 1024 * 1024,
            }
        }
    }
}

fn parse_output_options(dest: &mut Dest, text: &str) -> Result<(), String> {
    let Dest::File { count, size, .. } = dest else {
        return Err("Output options for existing outputs are ignored.".into());
    };
    for opt in text.split(',') {
        match opt.split_once('=') {
            Some(("filecount", v)) => {
                *count = v
                    .parse()
                    .map_err(|_| format!("Invalid option '{opt}' for log file output."))?;
            }
            Some(("filesize", v)) => {
                *size = rtvm_flags::value::parse_unsigned(v)
                    .ok_or_else(|| format!("Invalid option '{opt}' for log file output."))?;
            }
            _ => return Err(format!("Invalid option '{opt}' for log file output.")),
        }
    }
    Ok(())
}

/// Splits `-Xlog:...` at colons that are not inside a quoted file name.
fn split_fields(rest: &str) -> Vec<&str> {
    let mut fields = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in rest.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ':' if !quoted => {
                fields.push(&rest[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    fields.push(&rest[start..]);
    fields
}

/// Parses the `-Xlog` options in order.
pub fn parse_xlog(options: &[String]) -> Result<XlogRequest, XlogError> {
    let stamp = {
        let t = system::calendar_now(false);
        format!(
            "{:04}-{:02}-{:02}_{:02}-{:02}-{:02}",
            t.year, t.month, t.day, t.hour, t.minute, t.second
        )
    };
    let mut spec = LogSpec::default_spec();
    for option in options {
        let err = |detail: String| XlogError {
            detail,
            option: option.clone(),
        };
        let rest = match option.strip_prefix("-Xlog") {
            Some("") => None,
            Some(r) => r
                .strip_prefix(':')
                .map(Some)
                .ok_or_else(|| err(format!("Invalid -Xlog option '{option}'.")))?,
            None => return Err(err(format!("Invalid -Xlog option '{option}'."))),
        };
        let Some(rest) = rest else {
            // -Xlog alone: all=info on stdout.
            apply(
                &mut spec,
                Dest::Stdout,
                None,
                &[Selection {
                    matches: vec![true; TAG_SETS.len()],
                    level: LevelFilter::Info,
                }],
            );
            continue;
        };
        match rest {
            "help" => return Ok(XlogRequest::Help),
            "disable" => {
                for o in &mut spec.outputs {
                    o.levels.fill(LevelFilter::Off);
                }
                continue;
            }
            "async" => {
                // Records are formatted on the logging thread and written with one write(2);
                // there is no intermediate buffer thread to enable.
                spec.warnings.push(
                    "-Xlog:async is accepted; rtvm always writes log lines synchronously.".into(),
                );
                continue;
            }
            _ => {}
        }
        let fields = split_fields(rest);
        if fields.len() > 4 {
            return Err(err(format!("Invalid -Xlog option '{option}'.")));
        }
        let mut selections = Vec::new();
        let sel_text = fields.first().copied().unwrap_or("");
        let sel_text = if sel_text.is_empty() { "all" } else { sel_text };
        for s in sel_text.split(',') {
            selections.push(parse_selection(s, &mut spec.warnings).map_err(err)?);
        }
        let mut dest = parse_output(fields.get(1).copied().unwrap_or(""), &stamp);
        let decorators = match fields.get(2) {
            Some(d) if !d.is_empty() => Some(parse_decorators(d).map_err(err)?),
            _ => None,
        };
        if let Some(opts) = fields.get(3).filter(|o| !o.is_empty()) {
            if let Err(e) = parse_output_options(&mut dest, opts) {
                if matches!(dest, Dest::File { .. }) {
                    return Err(err(e));
                }
                spec.warnings.push(e);
            }
        }
        apply(&mut spec, dest, decorators, &selections);
    }
    Ok(XlogRequest::Configure(spec))
}

fn apply(
    spec: &mut LogSpec,
    dest: Dest,
    decorators: Option<Vec<Decorator>>,
    selections: &[Selection],
) {
    let index = match spec
        .outputs
        .iter()
        .position(|o| o.dest.name() == dest.name())
    {
        Some(i) => i,
        None => {
            spec.outputs.push(OutputSpec {
                dest,
                decorators: DEFAULT_DECORATORS.to_vec(),
                levels: vec![LevelFilter::Off; TAG_SETS.len()],
            });
            spec.outputs.len() - 1
        }
    };
    let output = &mut spec.outputs[index];
    if let Some(d) = decorators {
        output.decorators = d;
    }
    for sel in selections {
        for (i, &m) in sel.matches.iter().enumerate() {
            if m {
                output.levels[i] = sel.level;
            }
        }
    }
}

/// The text of `-Xlog:help`.
pub fn help_text() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "-Xlog Usage: -Xlog[:[selections][:[output][:[decorators][:output-options]]]]"
    );
    let _ = writeln!(s, "\t where 'selections' are combinations of tags and levels of the form tag1[+tag2...][*][=level][,...]");
    let _ = writeln!(s, "\t NOTE: Unless wildcard (*) is specified, only log messages tagged with exactly the tags specified will be matched.");
    let _ = writeln!(s);
    let _ = writeln!(s, "Available log levels:");
    let _ = writeln!(s, " off, trace, debug, info, warning, error");
    let _ = writeln!(s);
    let _ = writeln!(s, "Available log decorators: ");
    let list: Vec<String> = DECORATORS
        .iter()
        .map(|(_, l, sh)| format!("{l} ({sh})"))
        .collect();
    let _ = writeln!(s, " {}", list.join(", "));
    let _ = writeln!(
        s,
        " Decorators can also be specified as 'none' for no decoration."
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "Available log tags:");
    let _ = writeln!(s, " {}", TAGS.join(", "));
    let _ = writeln!(
        s,
        " Specifying 'all' instead of a tag combination matches all tag combinations."
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "Tag sets rtvm logs with:");
    let _ = writeln!(s, " {}", TAG_SETS.join(", "));
    let _ = writeln!(s);
    let _ = writeln!(s, "Available log outputs:");
    let _ = writeln!(s, " stdout/stderr");
    let _ = writeln!(s, " file=<filename>");
    let _ = writeln!(s, "  If the filename contains %p and/or %t, they will expand to the VM's PID and startup timestamp, respectively.");
    let _ = writeln!(s, "  Additional output-options for file outputs:");
    let _ = writeln!(s, "   filesize=..  - Target byte size for log rotation (supports K/M/G suffix). If set to 0, log rotation will not trigger automatically.");
    let _ = writeln!(s, "   filecount=.. - Number of files to keep in rotation (not counting the active file). If set to 0, log rotation is disabled. This will cause existing log files to be overwritten.");
    let _ = writeln!(s);
    let _ = writeln!(s, "Some examples:");
    let _ = writeln!(s, " -Xlog");
    let _ = writeln!(s, "\t Log all messages up to 'info' level to stdout with 'uptime', 'levels' and 'tags' decorations.");
    let _ = writeln!(
        s,
        "\t (Equivalent to -Xlog:all=info:stdout:uptime,levels,tags)."
    );
    let _ = writeln!(s);
    let _ = writeln!(s, " -Xlog:pagesize");
    let _ = writeln!(
        s,
        "\t Log page size and transparent huge page decisions up to 'info' level to stdout."
    );
    let _ = writeln!(s);
    let _ = writeln!(s, " -Xlog:gc+heap=debug:file=heap.txt:uptime,tid");
    let _ = writeln!(s, "\t Log heap and pretouch messages up to 'debug' level to 'heap.txt' with 'uptime' and 'tid' decorations.");
    let _ = writeln!(s);
    let _ = writeln!(s, " -Xlog:os*=info,pagesize=off");
    let _ = writeln!(
        s,
        "\t Log messages tagged with at least 'os' up to 'info' level, and none tagged 'pagesize'."
    );
    let _ = writeln!(s);
    let _ = writeln!(s, " -Xlog:disable -Xlog:os+thread=debug:stderr");
    let _ = writeln!(s, "\t Turn off all logging, including warnings and errors,");
    let _ = writeln!(
        s,
        "\t and then enable thread start and exit messages up to 'debug' level on stderr."
    );
    s
}

/// A log file with HotSpot-style rotation: when it reaches `size` bytes it is renamed to
/// `<path>.<n>` (n cycling through `count` archives) and a new file is started.
struct RotatingFile {
    path: PathBuf,
    file: File,
    written: u64,
    count: u32,
    size: u64,
    next_archive: u32,
}

impl RotatingFile {
    fn open(path: &str, count: u32, size: u64) -> io::Result<RotatingFile> {
        let path = PathBuf::from(path);
        let file = File::create(&path)?;
        Ok(RotatingFile {
            path,
            file,
            written: 0,
            count,
            size,
            next_archive: 0,
        })
    }

    fn rotate(&mut self) -> io::Result<()> {
        let archive = PathBuf::from(format!("{}.{}", self.path.display(), self.next_archive));
        self.next_archive = (self.next_archive + 1) % self.count;
        std::fs::rename(&self.path, archive)?;
        self.file = File::create(&self.path)?;
        self.written = 0;
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.count > 0
            && self.size > 0
            && self.written > 0
            && self.written + buf.len() as u64 > self.size
        {
            self.rotate()?;
        }
        self.file.write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Widest value seen so far per decorator, for HotSpot's `[%-*s]` padding.
struct Padding([AtomicUsize; 12]);

/// One live output.
struct Output {
    logger: env_logger::Logger,
    levels: Vec<LevelFilter>,
}

/// The live configuration.
struct Config {
    outputs: Vec<Output>,
}

struct Dispatcher {
    config: RwLock<Option<Arc<Config>>>,
}

static DISPATCHER: Dispatcher = Dispatcher {
    config: RwLock::new(None),
};
static INSTALLED: OnceLock<bool> = OnceLock::new();

impl Log for Dispatcher {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        let Some(i) = tag_set_index(metadata.target()) else {
            return false;
        };
        let config = self.config.read().unwrap_or_else(|p| p.into_inner());
        config
            .as_ref()
            .is_some_and(|c| c.outputs.iter().any(|o| metadata.level() <= o.levels[i]))
    }

    fn log(&self, record: &Record<'_>) {
        let Some(i) = tag_set_index(record.target()) else {
            return;
        };
        let config = self
            .config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(config) = config else { return };
        for o in &config.outputs {
            if record.level() <= o.levels[i] {
                o.logger.log(record);
            }
        }
    }

    fn flush(&self) {
        if let Some(c) = self
            .config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            for o in &c.outputs {
                o.logger.flush();
            }
        }
    }
}

fn level_word(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warn => "warning",
        Level::Info => "info",
        Level::Debug => "debug",
        Level::Trace => "trace",
    }
}

fn decoration(d: Decorator, record: &Record<'_>, start: Instant) -> String {
    let up = start.elapsed();
    match d {
        Decorator::Time => system::calendar_now(false).iso8601(),
        Decorator::UtcTime => system::calendar_now(true).iso8601(),
        Decorator::Uptime => format!("{:.3}s", up.as_secs_f64()),
        Decorator::TimeMillis => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            format!("{}ms", now.as_millis())
        }
        Decorator::UptimeMillis => format!("{}ms", up.as_millis()),
        Decorator::TimeNanos => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            format!("{}ns", now.as_nanos())
        }
        Decorator::UptimeNanos => format!("{}ns", up.as_nanos()),
        Decorator::Hostname => system::hostname(),
        Decorator::Pid => std::process::id().to_string(),
        Decorator::Tid => system::current_tid().to_string(),
        Decorator::Level => level_word(record.level()).to_string(),
        Decorator::Tags => record.target().replace('+', ","),
    }
}

/// Formats one line: the decorations, each `[value]` padded to the widest seen, then the
/// message.
fn format_line(
    decorators: &[Decorator],
    padding: &Padding,
    record: &Record<'_>,
    start: Instant,
) -> String {
    let mut line = String::new();
    for &d in decorators {
        let value = decoration(d, record, start);
        let slot = &padding.0[d as usize];
        let width = slot
            .fetch_max(value.len(), Ordering::Relaxed)
            .max(value.len());
        let _ = write!(line, "[{value:<width$}]");
    }
    if !decorators.is_empty() {
        line.push(' ');
    }
    let _ = write!(line, "{}", record.args());
    line
}

fn build_output(spec: &OutputSpec, start: Instant) -> io::Result<Output> {
    let target = match &spec.dest {
        Dest::Stdout => env_logger::Target::Stdout,
        Dest::Stderr => env_logger::Target::Stderr,
        Dest::File { path, count, size } => {
            env_logger::Target::Pipe(Box::new(RotatingFile::open(path, *count, *size)?))
        }
    };
    let decorators = spec.decorators.clone();
    let padding = Arc::new(Padding(Default::default()));
    let logger = env_logger::Builder::new()
        .target(target)
        .write_style(env_logger::WriteStyle::Never)
        .filter_level(LevelFilter::Trace)
        .format(move |buf, record| {
            writeln!(buf, "{}", format_line(&decorators, &padding, record, start))
        })
        .build();
    Ok(Output {
        logger,
        levels: spec.levels.clone(),
    })
}

/// The logging configuration a VM owns (one VM per process at a time); dropping it
/// restores the default (warnings to stdout).
pub struct LogHandle {
    installed: bool,
}

impl std::fmt::Debug for LogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogHandle")
            .field("installed", &self.installed)
            .finish()
    }
}

impl LogHandle {
    /// Whether rtvm's dispatcher is the process's logger (an embedder may have installed
    /// their own first; rtvm's records then go to it).
    pub fn installed(&self) -> bool {
        self.installed
    }
}

impl Drop for LogHandle {
    fn drop(&mut self) {
        log::logger().flush();
        *DISPATCHER.config.write().unwrap_or_else(|p| p.into_inner()) = default_config();
        log::set_max_level(LevelFilter::Warn);
    }
}

fn default_config() -> Option<Arc<Config>> {
    let spec = LogSpec::default_spec();
    build_output(&spec.outputs[0], Instant::now())
        .ok()
        .map(|o| Arc::new(Config { outputs: vec![o] }))
}

/// Installs `spec` as the process's logging configuration, timing uptime from `start`.
/// Fails with a message naming the output that could not be opened.
pub fn install(spec: &LogSpec, start: Instant) -> Result<LogHandle, String> {
    let installed = *INSTALLED.get_or_init(|| log::set_logger(&DISPATCHER).is_ok());
    let mut outputs = Vec::new();
    for o in &spec.outputs {
        match build_output(o, start) {
            Ok(out) => outputs.push(out),
            Err(e) => {
                return Err(format!(
                    "Could not open log file '{}' ({e}).\n",
                    o.dest.name().trim_start_matches("file=")
                ))
            }
        }
    }
    let max = spec
        .outputs
        .iter()
        .flat_map(|o| o.levels.iter().copied())
        .max()
        .unwrap_or(LevelFilter::Off);
    *DISPATCHER.config.write().unwrap_or_else(|p| p.into_inner()) =
        Some(Arc::new(Config { outputs }));
    if installed {
        log::set_max_level(max);
    } else if spec
        .outputs
        .iter()
        .any(|o| o.levels.iter().any(|&l| l > LevelFilter::Warn))
    {
        eprintln!(
            "rtvm warning: another logger is installed in this process; -Xlog output goes to it"
        );
    }
    for w in &spec.warnings {
        log::warn!(target: "logging", "{w}");
    }
    Ok(LogHandle { installed })
}

/// Prints a logging error the way HotSpot does before it gives up on an `-Xlog` option:
/// `[0.000s][error][logging] <detail>` on stdout.
pub fn print_logging_error(detail: &str, start: Instant) {
    let mut out = io::stdout().lock();
    let _ = writeln!(
        out,
        "[{:.3}s][error][logging] {detail}",
        start.elapsed().as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(opts: &[&str]) -> Result<LogSpec, XlogError> {
        let opts: Vec<String> = opts.iter().map(|s| s.to_string()).collect();
        match parse_xlog(&opts)? {
            XlogRequest::Configure(spec) => Ok(spec),
            XlogRequest::Help => panic!("unexpected help"),
        }
    }

    #[test]
    fn default_is_warnings_to_stdout() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.outputs.len(), 1);
        assert_eq!(s.level_for("pagesize"), LevelFilter::Warn);
    }

    #[test]
    fn exact_and_wildcard_selections() {
        let s = parse(&["-Xlog:os"]).unwrap();
        assert_eq!(s.level_for("os"), LevelFilter::Info);
        assert_eq!(
            s.level_for("os+thread"),
            LevelFilter::Warn,
            "exact match only"
        );
        let s = parse(&["-Xlog:os*=debug"]).unwrap();
        assert_eq!(s.level_for("os+thread"), LevelFilter::Debug);
        assert_eq!(s.level_for("os"), LevelFilter::Debug);
        let s = parse(&["-Xlog:gc+heap=trace,pagesize"]).unwrap();
        assert_eq!(s.level_for("gc+heap"), LevelFilter::Trace);
        assert_eq!(s.level_for("pagesize"), LevelFilter::Info);
        let s = parse(&["-Xlog:heap+gc=debug"]).unwrap();
        assert_eq!(
            s.level_for("gc+heap"),
            LevelFilter::Debug,
            "tag order does not matter"
        );
        let s = parse(&["-Xlog"]).unwrap();
        assert!(TAG_SETS.iter().all(|t| s.level_for(t) == LevelFilter::Info));
        let s = parse(&["-Xlog:all=debug", "-Xlog:pagesize=off"]).unwrap();
        assert_eq!(
            s.level_for("pagesize"),
            LevelFilter::Off,
            "later selections win"
        );
        assert_eq!(s.level_for("os"), LevelFilter::Debug);
        let s = parse(&["-Xlog:disable"]).unwrap();
        assert!(TAG_SETS.iter().all(|t| s.level_for(t) == LevelFilter::Off));
        let s = parse(&["-Xlog:disable", "-Xlog:pagesize:stderr"]).unwrap();
        assert_eq!(s.level_for("pagesize"), LevelFilter::Info);
        assert_eq!(s.level_for("os"), LevelFilter::Off);
    }

    #[test]
    fn errors_match_hotspot() {
        let e = parse(&["-Xlog:foo"]).unwrap_err();
        assert_eq!(e.detail, "Invalid tag 'foo' in log selection.");
        assert_eq!(
            e.message(),
            "Invalid -Xlog option '-Xlog:foo', see error log for details.\n"
        );
        assert_eq!(
            parse(&["-Xlog:gc=bar"]).unwrap_err().detail,
            "Invalid level 'bar' in log selection."
        );
        assert_eq!(
            parse(&["-Xlog:gc::bogus"]).unwrap_err().detail,
            "Invalid decorator 'bogus'."
        );
        assert_eq!(
            parse(&["-Xlog:pagesize:stdout:uptime,bar"])
                .unwrap_err()
                .detail,
            "Invalid decorator 'bar'."
        );
        assert!(parse(&["-Xlog:pagesize:file=/tmp/x:uptime:filecount=x"]).is_err());
        assert!(parse(&["-Xlogx"]).is_err());
        assert!(parse(&["-Xlog:a:b:c:d:e"]).is_err());
    }

    #[test]
    fn unmatched_combination_warns() {
        let s = parse(&["-Xlog:gc+pagesize"]).unwrap();
        assert_eq!(s.warnings.len(), 1);
        assert!(
            s.warnings[0].starts_with("No tag set matches selection: gc+pagesize. Did you mean any of the following? gc* pagesize*"),
            "{}",
            s.warnings[0]
        );
    }

    #[test]
    fn decorators_in_fixed_order() {
        assert_eq!(
            parse_decorators("tags,uptime,l").unwrap(),
            vec![Decorator::Uptime, Decorator::Level, Decorator::Tags]
        );
        assert_eq!(parse_decorators("none").unwrap(), vec![]);
        assert_eq!(
            parse_decorators("ti,pid").unwrap(),
            vec![Decorator::Pid, Decorator::Tid]
        );
    }

    #[test]
    fn padding_grows_to_the_widest_value() {
        let padding = Padding(Default::default());
        let start = Instant::now();
        let decorators = [Decorator::Level, Decorator::Tags];
        let rec = |level, target| {
            let args = format_args!("m");
            format_line(
                &decorators,
                &padding,
                &Record::builder()
                    .level(level)
                    .target(target)
                    .args(args)
                    .build(),
                start,
            )
        };
        assert_eq!(rec(Level::Info, "pagesize"), "[info][pagesize] m");
        assert_eq!(rec(Level::Debug, "gc+heap"), "[debug][gc,heap ] m");
        assert_eq!(rec(Level::Info, "os"), "[info ][os      ] m");
    }

    #[test]
    fn file_names_expand() {
        let s = parse(&["-Xlog:pagesize:file=/tmp/rtvm-%p.log"]).unwrap();
        let Dest::File { path, count, size } = &s.outputs[1].dest else {
            panic!()
        };
        assert_eq!(path, &format!("/tmp/rtvm-{}.log", std::process::id()));
        assert_eq!((*count, *size), (5, 20 << 20));
        let s = parse(&["-Xlog:pagesize:rtvm.log::filecount=2,filesize=1k"]).unwrap();
        assert_eq!(
            s.outputs[1].dest,
            Dest::File {
                path: "rtvm.log".into(),
                count: 2,
                size: 1024
            }
        );
    }

    #[test]
    fn rotation() {
        let dir = std::env::temp_dir().join(format!("rtvm-log-rot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.log");
        let mut f = RotatingFile::open(path.to_str().unwrap(), 2, 10).unwrap();
        for _ in 0..5 {
            f.write_all(b"12345678\n").unwrap();
        }
        assert!(dir.join("x.log.0").exists() && dir.join("x.log.1").exists());
        assert!(std::fs::read(&path).unwrap().len() <= 10);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
