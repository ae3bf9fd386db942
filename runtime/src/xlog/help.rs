//! `-Xlog:help`, and the configuration dump `-Xlog:logging` shows once the VM is up — both in
//! HotSpot's words.

use std::fmt::Write as _;

use super::format::DECORATORS;
use super::tags::{LEVELS, RTVM_TAG_SETS, TAGS, TAG_SETS};

fn levels_line() -> String {
    LEVELS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

fn decorators_line() -> String {
    DECORATORS
        .iter()
        .map(|(_, l, s)| format!("{l} ({s})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text of `-Xlog:help`.
pub fn help_text() -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "-Xlog Usage: -Xlog[:[selections][:[output][:[decorators][:output-options]]]]"
    );
    let _ = writeln!(w, "\t where 'selections' are combinations of tags and levels of the form tag1[+tag2...][*][=level][,...]");
    let _ = writeln!(w, "\t NOTE: Unless wildcard (*) is specified, only log messages tagged with exactly the tags specified will be matched.");
    let _ = writeln!(w);
    let _ = writeln!(w, "Available log levels:");
    let _ = writeln!(w, " {}", levels_line());
    let _ = writeln!(w);
    let _ = writeln!(w, "Available log decorators: ");
    let _ = writeln!(w, " {}", decorators_line());
    let _ = writeln!(
        w,
        " Decorators can also be specified as 'none' for no decoration."
    );
    let _ = writeln!(w);
    let _ = writeln!(w, "Available log tags:");
    let _ = writeln!(w, " {}", TAGS.join(", "));
    let _ = writeln!(
        w,
        " Specifying 'all' instead of a tag combination matches all tag combinations."
    );
    let _ = writeln!(w);
    let _ = writeln!(w, "Described tag sets:");
    let _ = writeln!(w, " logging: Logging for the log framework itself");
    let _ = writeln!(w);
    let _ = writeln!(w, "Tag sets rtvm logs with:");
    let _ = writeln!(w, " {}", RTVM_TAG_SETS.join(", "));
    let _ = writeln!(w);
    let _ = writeln!(w, "Available log outputs:");
    let _ = writeln!(w, " stdout/stderr");
    let _ = writeln!(w, " file=<filename>");
    let _ = writeln!(w, "  If the filename contains %p and/or %t, they will expand to the JVM's PID and startup timestamp, respectively.");
    let _ = writeln!(w, "  Additional output-options for file outputs:");
    let _ = writeln!(w, "   filesize=..  - Target byte size for log rotation (supports K/M/G suffix). If set to 0, log rotation will not trigger automatically, but can be performed manually (see the VM.log DCMD).");
    let _ = writeln!(w, "   filecount=.. - Number of files to keep in rotation (not counting the active file). If set to 0, log rotation is disabled. This will cause existing log files to be overwritten.");
    let _ = writeln!(w);
    let _ = writeln!(w);
    let _ = writeln!(w, "Asynchronous logging (off by default):");
    let _ = writeln!(w, " -Xlog:async");
    let _ = writeln!(w, "  All log messages are written to an intermediate buffer first and will then be flushed to the corresponding log outputs by a standalone thread. Write operations at logsites are guaranteed non-blocking.");
    let _ = writeln!(w);
    let _ = writeln!(w, "Some examples:");
    for (example, lines) in [
        (" -Xlog", &["Log all messages up to 'info' level to stdout with 'uptime', 'levels' and 'tags' decorations.", "(Equivalent to -Xlog:all=info:stdout:uptime,levels,tags)."][..]),
        (" -Xlog:pagesize", &["Log messages tagged with 'pagesize' tag up to 'info' level to stdout, with default decorations."][..]),
        (" -Xlog:pagesize,os+thread", &["Log messages tagged either with 'pagesize' or 'os+thread' tags, both up to 'info' level, to stdout, with default decorations."][..]),
        (" -Xlog:gc+heap=debug", &["Log messages tagged with both 'gc' and 'heap' tags, up to 'debug' level, to stdout, with default decorations.", "(Messages tagged only with one of the two tags will not be logged.)"][..]),
        (" -Xlog:gc+heap=debug:file=heap.txt:none", &["Log messages tagged with 'gc' and 'heap' up to 'debug' level to file 'heap.txt' with no decorations."][..]),
        (" -Xlog:os=trace:file=ostrace.txt:uptimemillis,pid:filecount=5,filesize=1m", &["Log messages tagged with 'os' tag up to 'trace' level to a rotating fileset of 5 files of size 1MB,", "using the base name 'ostrace.txt', with 'uptimemillis' and 'pid' decorations."][..]),
        (" -Xlog:os::uptime,tid", &["Log messages tagged with 'os' tag up to 'info' level to output 'stdout', using 'uptime' and 'tid' decorations."][..]),
        (" -Xlog:os*=info,pagesize*=off", &["Log messages tagged with at least 'os' up to 'info' level, but turn off logging of messages tagged with 'pagesize'."][..]),
        (" -Xlog:disable -Xlog:os+thread=trace:threadtrace.txt", &["Turn off all logging, including warnings and errors,", "and then enable messages tagged with 'os' and 'thread' up to 'trace' level to file 'threadtrace.txt'."][..]),
    ] {
        let _ = writeln!(w, "{example}");
        for l in lines {
            let _ = writeln!(w, "\t {l}");
        }
        let _ = writeln!(w);
    }
    s
}

/// What HotSpot logs (tag set `logging`) once the VM is up: the vocabulary, then the
/// configuration of every output.
pub(crate) fn log_configuration(description: &[String]) {
    if !log::log_enabled!(target: "logging", log::Level::Info) {
        return;
    }
    log::info!(target: "logging", "Log configuration fully initialized.");
    log::info!(target: "logging", "Available log levels: {}", levels_line());
    log::info!(target: "logging", "Available log decorators: {}", decorators_line());
    log::info!(target: "logging", "Available log tags: {}", TAGS.join(", "));
    log::info!(target: "logging", "Described tag sets:");
    log::info!(target: "logging", " logging: Logging for the log framework itself");
    if log::log_enabled!(target: "logging", log::Level::Debug) {
        let mut sets: Vec<&str> = TAG_SETS.to_vec();
        sets.sort_unstable();
        log::debug!(target: "logging", "Available tag sets: , {}", sets.join(", "));
    }
    log::info!(target: "logging", "Log output configuration:");
    for line in description {
        log::info!(target: "logging", "{line}");
    }
}

/// `jcmd VM.log list`: the vocabulary and the configuration of every output, as HotSpot's
/// `LogConfiguration::describe` prints it.
pub(crate) fn listing(description: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Available log levels: {}", levels_line());
    let _ = writeln!(s, "Available log decorators: {}", decorators_line());
    let _ = writeln!(s, "Available log tags: {}", TAGS.join(", "));
    let _ = writeln!(s, "Described tag sets:");
    let _ = writeln!(s, " logging: Logging for the log framework itself");
    let _ = writeln!(s, "Log output configuration:");
    for line in description {
        let _ = writeln!(s, "{line}");
    }
    s
}
