//! The logging configuration: outputs, their levels per tag set and their decorators, built
//! from `-Xlog` options one at a time, in order, with HotSpot's messages.
//!
//! `-Xlog[:[selections][:[output][:[decorators][:output-options]]]]`

use log::LevelFilter;

use super::file::{FileOptions, LogFile};
use super::format::{describe_decorators, parse_decorators, Decorator, DEFAULT_DECORATORS};
use super::output::{output_name, path_of, replace, split_fields, OutputName};
use super::selection::{parse_selection, tag_set_count, Selection};
use super::tags::{level_name, tag_set_index, tag_set_tags, LEVELS};

/// The most selections one `-Xlog` option may have.
pub(crate) const MAX_SELECTIONS: usize = 320;

/// A file output's file, shared by the configuration and the logger writing to it (so a
/// running VM can rotate it: `jcmd VM.log rotate`).
pub(crate) type SharedFile = std::sync::Arc<std::sync::Mutex<LogFile>>;

/// Where an output writes.
#[derive(Debug)]
pub(crate) enum Dest {
    Stdout,
    Stderr,
    File(SharedFile, FileOptions),
}

/// One output.
#[derive(Debug)]
pub(crate) struct OutputConfig {
    /// `stdout`, `stderr` or `file=<path>`.
    pub name: String,
    pub dest: Dest,
    pub decorators: Vec<Decorator>,
    /// The level per tag set, by index into the tag sets.
    pub levels: Vec<LevelFilter>,
    /// Configured while the VM runs (`jcmd VM.log`): the listing says `(reconfigured)`.
    pub reconfigured: bool,
}

impl OutputConfig {
    fn new(name: String, dest: Dest, level: LevelFilter) -> OutputConfig {
        OutputConfig {
            name,
            dest,
            decorators: DEFAULT_DECORATORS.to_vec(),
            levels: vec![level; tag_set_count()],
            reconfigured: false,
        }
    }
}

/// A message about the configuration itself (tag set `logging`), and the outputs it goes to
/// with the decorators they had when it arose — HotSpot logs it right then.
#[derive(Clone, Debug)]
pub(crate) struct Notice {
    pub level: log::Level,
    pub text: String,
    pub to: Vec<(String, Vec<Decorator>)>,
}

/// A logging configuration.
#[derive(Debug)]
pub struct LogConfig {
    pub(crate) outputs: Vec<OutputConfig>,
    pub(crate) notices: Vec<Notice>,
    /// `-Xlog:async`.
    pub(crate) async_mode: bool,
    /// The `%t` of file names: the VM's start time.
    stamp: String,
}

/// What an `-Xlog` option asks for besides configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XlogStep {
    /// Go on.
    Continue,
    /// `-Xlog:help`: print the usage and stop.
    Help,
}

/// An invalid `-Xlog` option: `details` are logged as `[error][logging]` lines on stdout,
/// then the VM fails with `Invalid -Xlog option '<option>', see error log for details.`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XlogError {
    /// The error lines (none for a malformed `-Xlog...` word).
    pub details: Vec<String>,
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

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig::new()
    }
}

impl LogConfig {
    /// HotSpot's default: warnings and errors of every tag set to stdout; stderr off.
    pub fn new() -> LogConfig {
        let t = rtvm_os_linux::system::calendar_now(false);
        LogConfig {
            outputs: vec![
                OutputConfig::new("stdout".into(), Dest::Stdout, LevelFilter::Warn),
                OutputConfig::new("stderr".into(), Dest::Stderr, LevelFilter::Off),
            ],
            notices: Vec::new(),
            async_mode: false,
            stamp: format!(
                "{:04}-{:02}-{:02}_{:02}-{:02}-{:02}",
                t.year, t.month, t.day, t.hour, t.minute, t.second
            ),
        }
    }

    /// The most verbose level any output enables for `tag_set` (`os+thread`).
    #[cfg(any(test, feature = "testing"))]
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

    /// The most verbose level enabled anywhere.
    pub(crate) fn max_level(&self) -> LevelFilter {
        self.outputs
            .iter()
            .flat_map(|o| o.levels.iter().copied())
            .max()
            .unwrap_or(LevelFilter::Off)
    }

    /// Records a `logging` message for the outputs that show it now.
    fn notice(&mut self, level: log::Level, text: String) {
        let logging = tag_set_index("logging").unwrap_or(0);
        let to = self
            .outputs
            .iter()
            .filter(|o| level <= o.levels[logging])
            .map(|o| (o.name.clone(), o.decorators.clone()))
            .collect();
        self.notices.push(Notice { level, text, to });
    }

    /// Applies one `-Xlog` option (as given: `-Xlog`, `-Xlog:gc=debug:file=gc.log`, ...).
    pub fn apply(&mut self, option: &str) -> Result<XlogStep, XlogError> {
        self.apply_bytes(option.as_bytes())
    }

    /// [`apply`](LogConfig::apply) on the option's bytes as the OS gave them: a file name that
    /// is not UTF-8 is used as given (messages show its bad bytes as U+FFFD).
    pub fn apply_bytes(&mut self, option: &[u8]) -> Result<XlogStep, XlogError> {
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let err = |details: Vec<String>| XlogError {
            details,
            option: lossy(option),
        };
        let rest = match option.strip_prefix(b"-Xlog") {
            Some(b"") => {
                self.configure(
                    OutputName::Named("stdout".into()),
                    Some(DEFAULT_DECORATORS.to_vec()),
                    &[Selection::all(LevelFilter::Info)],
                    None,
                )
                .map_err(|d| err(vec![d]))?;
                return Ok(XlogStep::Continue);
            }
            Some(r) => r.strip_prefix(b":").ok_or_else(|| err(Vec::new()))?,
            None => return Err(err(Vec::new())),
        };
        match rest {
            b"help" => return Ok(XlogStep::Help),
            b"disable" => {
                self.disable();
                return Ok(XlogStep::Continue);
            }
            b"async" => {
                self.async_mode = true;
                return Ok(XlogStep::Continue);
            }
            _ => {}
        }
        let (fields, excess) = split_fields(rest).map_err(|d| err(vec![d]))?;
        if let Some(excess) = excess {
            self.notice(
                log::Level::Warn,
                format!("Ignoring excess -Xlog options: \"{}\"", lossy(excess)),
            );
        }
        let field = |i: usize| fields.get(i).copied().unwrap_or(b"");
        let decorators = lossy(field(2));
        let options = Some(lossy(field(3))).filter(|o| !o.is_empty());
        self.apply_parts(
            &lossy(field(0)),
            field(1),
            Some(&decorators),
            options.as_deref(),
        )
        .map_err(err)?;
        Ok(XlogStep::Continue)
    }

    /// Marks the output named `name` as configured while the VM runs.
    pub(crate) fn mark_reconfigured(&mut self, name: &str) {
        if let Some(o) = self.outputs.iter_mut().find(|o| o.name == name) {
            o.reconfigured = true;
        }
    }

    /// One configuration step from its parts, as `-Xlog` and `jcmd VM.log` give them: the
    /// selections (`all` at `info` if empty), the output (`stdout` if empty), the decorators
    /// (`None`: an existing output keeps its own, a new one gets the default), the output
    /// options. Returns the output's name; `Err` holds the error lines.
    pub(crate) fn apply_parts(
        &mut self,
        what: &str,
        output: &[u8],
        decorators: Option<&str>,
        options: Option<&str>,
    ) -> Result<String, Vec<String>> {
        let what = if what.is_empty() { "all" } else { what };
        let texts: Vec<&str> = what.split(',').collect();
        if texts.len() > MAX_SELECTIONS {
            return Err(vec![format!(
                "Can not have more than {MAX_SELECTIONS} log selections in a single configuration."
            )]);
        }
        let mut selections = Vec::with_capacity(texts.len());
        for t in texts {
            selections.push(parse_selection(t).map_err(|d| vec![d])?);
        }
        for s in &selections {
            if s.tag_sets_selected() == 0 {
                let mut w = format!("No tag set matches selection: {}. ", s.describe_tags());
                let suggestions = s.suggestions();
                if !suggestions.is_empty() {
                    w.push_str(&format!(
                        "Did you mean any of the following? {}",
                        suggestions.join(" ")
                    ));
                }
                self.notice(log::Level::Warn, w);
            }
        }
        let decorators = match decorators {
            Some(d) => Some(parse_decorators(d).map_err(|d| vec![d])?),
            None => None,
        };
        let names: Vec<String> = self.outputs.iter().map(|o| o.name.clone()).collect();
        let name = output_name(output, &names).map_err(|d| vec![d])?;
        let shown = self.expand(&name).display();
        self.configure(name, decorators, &selections, options)
            .map_err(|d| {
                vec![
                    d,
                    format!(
                        "Initialization of output '{shown}' using options '{}' failed.",
                        options.unwrap_or("(null)")
                    ),
                ]
            })?;
        Ok(shown)
    }

    /// Applies `selections` (and decorators) to the output `name`, creating a file output if
    /// it does not exist yet. A file output left with every tag set off is closed and
    /// dropped from the configuration, as HotSpot does.
    fn configure(
        &mut self,
        name: OutputName,
        decorators: Option<Vec<Decorator>>,
        selections: &[Selection],
        options: Option<&str>,
    ) -> Result<(), String> {
        let name = self.expand(&name);
        let shown = name.display();
        let index = match self.outputs.iter().position(|o| o.name == shown) {
            Some(i) => {
                if options.is_some() {
                    // Logged with the output's new decorators, after the change, as HotSpot does.
                    self.apply_to(i, decorators, selections);
                    self.notice(
                        log::Level::Warn,
                        "Output options for existing outputs are ignored.".into(),
                    );
                    self.drop_if_off(i);
                    return Ok(());
                }
                i
            }
            None => {
                let OutputName::File(file) = &name else {
                    // stdout and stderr always exist, and an index names an existing output.
                    return Err(format!("Invalid output '{shown}'"));
                };
                let file_options = match options {
                    Some(o) => FileOptions::parse(o)?,
                    None => FileOptions::default(),
                };
                let mut traces = Vec::new();
                let log_file = LogFile::open(&path_of(file), file_options, &mut |t| traces.push(t));
                for t in traces {
                    self.notice(log::Level::Trace, t);
                }
                self.outputs.push(OutputConfig::new(
                    shown,
                    Dest::File(
                        std::sync::Arc::new(std::sync::Mutex::new(log_file?)),
                        file_options,
                    ),
                    LevelFilter::Off,
                ));
                self.outputs.len() - 1
            }
        };
        self.apply_to(index, decorators, selections);
        self.drop_if_off(index);
        Ok(())
    }

    /// Drops the file output at `index` if every tag set is off for it.
    fn drop_if_off(&mut self, index: usize) {
        let o = &self.outputs[index];
        if matches!(o.dest, Dest::File(..)) && o.levels.iter().all(|l| *l == LevelFilter::Off) {
            self.outputs.remove(index);
        }
    }

    fn apply_to(
        &mut self,
        index: usize,
        decorators: Option<Vec<Decorator>>,
        selections: &[Selection],
    ) {
        let output = &mut self.outputs[index];
        if let Some(d) = decorators {
            output.decorators = d;
        }
        for (i, tags) in tag_set_tags().iter().enumerate() {
            if let Some(s) = selections.iter().rev().find(|s| s.selects(tags)) {
                output.levels[i] = s.level;
            }
        }
    }

    /// `-Xlog:disable`: every output off, file outputs closed.
    pub(crate) fn disable(&mut self) {
        self.outputs.retain(|o| !matches!(o.dest, Dest::File(..)));
        for o in &mut self.outputs {
            o.levels.fill(LevelFilter::Off);
        }
    }

    /// Expands `%p` and `%t` in a file output's name.
    fn expand(&self, name: &OutputName) -> OutputName {
        match name {
            OutputName::Named(_) => name.clone(),
            OutputName::File(f) => {
                let f = replace(f, b"%p", std::process::id().to_string().as_bytes());
                OutputName::File(replace(&f, b"%t", self.stamp.as_bytes()))
            }
        }
    }

    /// The configuration dump of `-Xlog:logging`: one line per output,
    /// ` #0: stdout all=warning,logging=info uptime,level,tags`.
    pub(crate) fn describe(&self) -> Vec<String> {
        self.outputs
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let mut line = format!(
                    " #{i}: {} {} {}",
                    o.name,
                    config_string(&o.levels),
                    describe_decorators(&o.decorators)
                );
                if let Dest::File(_, options) = &o.dest {
                    line.push_str(&format!(
                        " {},async={}",
                        options.describe(),
                        self.async_mode
                    ));
                }
                if o.reconfigured {
                    line.push_str(" (reconfigured)");
                }
                line
            })
            .collect()
    }
}

/// The shortest description of an output's levels: `all=<most common level>`, then, greedily,
/// the selections that fix the most tag sets at their level without touching others (fewer
/// tags first among equals).
fn config_string(levels: &[LevelFilter]) -> String {
    let sets = tag_set_tags();
    // The most common level; among equals the first in HotSpot's order (off first).
    let count = |l: LevelFilter| levels.iter().filter(|x| **x == l).count();
    let mut common = LevelFilter::Off;
    for (_, l) in LEVELS {
        if count(l) > count(common) {
            common = l;
        }
    }
    let mut parts = vec![format!("all={}", level_name(common))];
    let mut deviating: Vec<usize> = (0..sets.len()).filter(|&i| levels[i] != common).collect();
    // Candidates: every tag set exactly, and every subset of its tags with a wildcard.
    let mut candidates: Vec<Selection> = Vec::new();
    for &i in &deviating {
        let tags = &sets[i];
        for mask in 1u32..(1 << tags.len()) {
            let subset: Vec<&'static str> = tags
                .iter()
                .enumerate()
                .filter(|(b, _)| mask & (1 << b) != 0)
                .map(|(_, t)| *t)
                .collect();
            for wildcard in [false, true] {
                if !wildcard && subset.len() != tags.len() {
                    continue;
                }
                let s = Selection {
                    tags: subset.clone(),
                    wildcard,
                    level: levels[i],
                };
                if !candidates.contains(&s) {
                    candidates.push(s);
                }
            }
        }
    }
    while !deviating.is_empty() {
        let mut best: Option<(i64, &Selection)> = None;
        for c in &candidates {
            let gained = deviating
                .iter()
                .filter(|&&i| c.selects(&sets[i]) && levels[i] == c.level)
                .count() as i64;
            if gained == 0 || best.is_some_and(|(b, _)| gained < b) {
                continue;
            }
            let wrong = sets
                .iter()
                .enumerate()
                .filter(|(i, s)| c.selects(s) && levels[*i] != c.level)
                .count() as i64;
            let score = gained - wrong;
            let better = match best {
                None => score > 0,
                Some((b, bs)) => score > b || (score == b && c.tags.len() < bs.tags.len()),
            };
            if better {
                best = Some((score, c));
            }
        }
        let Some((_, chosen)) = best else {
            // Nothing covers without side effects: name the remaining tag sets exactly.
            for &i in &deviating {
                parts.push(format!("{}={}", sets[i].join("+"), level_name(levels[i])));
            }
            break;
        };
        parts.push(format!(
            "{}={}",
            chosen.describe_tags(),
            level_name(chosen.level)
        ));
        let chosen = chosen.clone();
        deviating.retain(|&i| !(chosen.selects(&sets[i]) && levels[i] == chosen.level));
        candidates.retain(|c| c != &chosen);
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(options: &[&str]) -> Result<LogConfig, XlogError> {
        let mut c = LogConfig::new();
        for o in options {
            c.apply(o)?;
        }
        Ok(c)
    }

    fn error(option: &str) -> Vec<String> {
        config(&[option]).unwrap_err().details
    }

    #[test]
    fn selections_and_levels() {
        let c = config(&["-Xlog:os"]).unwrap();
        assert_eq!(c.level_for("os"), LevelFilter::Info);
        assert_eq!(
            c.level_for("os+thread"),
            LevelFilter::Warn,
            "exact match only"
        );
        let c = config(&["-Xlog:OS*=DEBUG"]).unwrap();
        assert_eq!(c.level_for("os+thread"), LevelFilter::Debug);
        let c = config(&["-Xlog:all=debug", "-Xlog:pagesize=off"]).unwrap();
        assert_eq!(c.level_for("pagesize"), LevelFilter::Off);
        assert_eq!(c.level_for("os"), LevelFilter::Debug);
        let c = config(&["-Xlog"]).unwrap();
        assert_eq!(c.level_for("gc+heap"), LevelFilter::Info);
        let c = config(&["-Xlog:"]).unwrap();
        assert_eq!(c.level_for("gc+heap"), LevelFilter::Info);
        let c = config(&["-Xlog:os=debug,os=info"]).unwrap();
        assert_eq!(
            c.level_for("os"),
            LevelFilter::Info,
            "the last selection wins"
        );
        let c = config(&["-Xlog:disable", "-Xlog:pagesize:stderr"]).unwrap();
        assert_eq!(c.level_for("pagesize"), LevelFilter::Info);
        assert_eq!(c.level_for("os"), LevelFilter::Off);
    }

    #[test]
    fn errors_match_hotspot() {
        assert_eq!(
            error("-Xlog:os:foo=bar"),
            ["Unsupported log output type: foo=bar"]
        );
        assert_eq!(
            error("-Xlog:os:file=\"q.log"),
            ["Missing terminating quote in -Xlog option 'file=\"q.log'"]
        );
        assert_eq!(
            error("-Xlog:gc:file=a\"b\".log"),
            ["Output name can not be partially quoted. Either surround the whole name with quotation marks, or do not use quotation marks at all."]
        );
        let dir = std::env::temp_dir().join(format!("rtvm-xlog-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let q = dir.join("q.log");
        assert_eq!(
            error(&format!("-Xlog:os:file={}::filecount=x", q.display())),
            [
                "Invalid option: filecount must be in range [0, 1000]".to_string(),
                format!(
                    "Initialization of output 'file={}' using options 'filecount=x' failed.",
                    q.display()
                )
            ]
        );
        assert_eq!(
            error("-Xlog:os:file=/nonexistent/q.log"),
            [
                "Error opening log file '/nonexistent/q.log': No such file or directory",
                "Initialization of output 'file=/nonexistent/q.log' using options '(null)' failed."
            ]
        );
        let many = format!("-Xlog:{}", vec!["os"; 321].join(","));
        assert_eq!(
            error(&many),
            ["Can not have more than 320 log selections in a single configuration."]
        );
        config(&[&format!("-Xlog:{}", vec!["os"; 320].join(","))]).unwrap();
        let e = config(&["-Xlogfoo"]).unwrap_err();
        assert!(e.details.is_empty());
        assert_eq!(
            e.message(),
            "Invalid -Xlog option '-Xlogfoo', see error log for details.\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn notices() {
        let c = config(&["-Xlog:os:stdout:uptime:foo:bar"]).unwrap();
        let texts: Vec<_> = c.notices.iter().map(|n| n.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "Ignoring excess -Xlog options: \"bar\"",
                "Output options for existing outputs are ignored."
            ]
        );
        assert_eq!(c.notices[0].to[0].1, DEFAULT_DECORATORS.to_vec());
        assert_eq!(
            c.notices[1].to[0].1,
            vec![Decorator::Uptime],
            "after the change"
        );
        let c = config(&["-Xlog:gc+pagesize:stderr"]).unwrap();
        assert_eq!(
            c.notices[0].text,
            "No tag set matches selection: gc+pagesize. Did you mean any of the following? gc* pagesize gc+ref* gc+director gc+compaction"
        );
        assert_eq!(
            c.notices[0].to[0].0, "stdout",
            "logged where warnings went then"
        );
    }

    #[test]
    fn configuration_dump() {
        let c = config(&["-Xlog:logging=debug"]).unwrap();
        assert_eq!(
            c.describe(),
            [
                " #0: stdout all=warning,logging=debug uptime,level,tags",
                " #1: stderr all=off uptime,level,tags"
            ]
        );
        let c = config(&["-Xlog:gc*=trace,pagesize=off:stderr:none"]).unwrap();
        assert_eq!(c.describe()[1], " #1: stderr all=off,gc*=trace none");
        let c = config(&["-Xlog:gc", "-Xlog:logging=debug"]).unwrap();
        assert_eq!(
            c.describe()[0],
            " #0: stdout all=warning,logging=debug,gc=info uptime,level,tags"
        );
        let c = config(&["-Xlog"]).unwrap();
        assert_eq!(c.describe()[0], " #0: stdout all=info uptime,level,tags");
        let c = config(&["-Xlog:disable", "-Xlog:logging"]).unwrap();
        assert_eq!(
            c.describe()[0],
            " #0: stdout all=off,logging=info uptime,level,tags"
        );
    }
}
