//! Decorators and the line format: `[0.012s][info][pagesize] ...`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use log::{Level, Record};
use rtvm_os_linux::system;

/// A decorator, in HotSpot's fixed print order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decorator {
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

/// Every decorator with its long and short name, in print order.
pub(crate) const DECORATORS: [(Decorator, &str, &str); 12] = [
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

/// `uptime,level,tags`.
pub(crate) const DEFAULT_DECORATORS: [Decorator; 3] =
    [Decorator::Uptime, Decorator::Level, Decorator::Tags];

/// Parses a decorators field: empty means the default, `none` none, else a comma list of
/// long or short names in any case; printed in HotSpot's fixed order whatever the order given.
pub(crate) fn parse_decorators(text: &str) -> Result<Vec<Decorator>, String> {
    if text.is_empty() {
        return Ok(DEFAULT_DECORATORS.to_vec());
    }
    if text.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let mut chosen = Vec::new();
    for word in text.split(',') {
        let d = DECORATORS
            .iter()
            .find(|(_, long, short)| {
                long.eq_ignore_ascii_case(word) || short.eq_ignore_ascii_case(word)
            })
            .map(|(d, _, _)| *d)
            .ok_or_else(|| format!("Invalid decorator '{word}'."))?;
        if !chosen.contains(&d) {
            chosen.push(d);
        }
    }
    chosen.sort_by_key(|d| DECORATORS.iter().position(|(x, _, _)| x == d));
    Ok(chosen)
}

/// `uptime,level,tags` or `none`, as the configuration dump prints decorators.
pub(crate) fn describe_decorators(decorators: &[Decorator]) -> String {
    if decorators.is_empty() {
        return "none".into();
    }
    decorators
        .iter()
        .filter_map(|d| {
            DECORATORS
                .iter()
                .find(|(x, _, _)| x == d)
                .map(|(_, l, _)| *l)
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Widest value seen so far per decorator, for HotSpot's `[%-*s]` padding (per output).
#[derive(Debug, Default)]
pub(crate) struct Padding([AtomicUsize; 12]);

fn level_word(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warn => "warning",
        Level::Info => "info",
        Level::Debug => "debug",
        Level::Trace => "trace",
    }
}

fn wall_clock() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

fn decoration(d: Decorator, level: Level, target: &str, start: Instant) -> String {
    let up = start.elapsed();
    match d {
        Decorator::Time => system::calendar_now(false).iso8601(),
        Decorator::UtcTime => system::calendar_now(true).iso8601(),
        Decorator::Uptime => format!("{:.3}s", up.as_secs_f64()),
        Decorator::TimeMillis => format!("{}ms", wall_clock().as_millis()),
        Decorator::UptimeMillis => format!("{}ms", up.as_millis()),
        Decorator::TimeNanos => format!("{}ns", wall_clock().as_nanos()),
        Decorator::UptimeNanos => format!("{}ns", up.as_nanos()),
        Decorator::Hostname => system::hostname(),
        Decorator::Pid => std::process::id().to_string(),
        Decorator::Tid => system::current_tid().to_string(),
        Decorator::Level => level_word(level).to_string(),
        Decorator::Tags => target.replace('+', ","),
    }
}

/// One line: the decorations, each `[value]` padded to the widest value seen on this output,
/// then the message (no newline).
pub(crate) fn format_line(
    decorators: &[Decorator],
    padding: &Padding,
    level: Level,
    target: &str,
    message: &std::fmt::Arguments<'_>,
    start: Instant,
) -> String {
    let mut line = String::new();
    for &d in decorators {
        let value = decoration(d, level, target, start);
        let slot = &padding.0[d as usize];
        let width = slot
            .fetch_max(value.len(), Ordering::Relaxed)
            .max(value.len());
        let _ = write!(line, "[{value:<width$}]");
    }
    if !decorators.is_empty() {
        line.push(' ');
    }
    let _ = write!(line, "{message}");
    line
}

/// [`format_line`] for a `log` record.
pub(crate) fn format_record(
    decorators: &[Decorator],
    padding: &Padding,
    record: &Record<'_>,
    start: Instant,
) -> String {
    format_line(
        decorators,
        padding,
        record.level(),
        record.target(),
        record.args(),
        start,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decorators_in_fixed_order_any_case() {
        assert_eq!(
            parse_decorators("tags,UpTime,l").unwrap(),
            DEFAULT_DECORATORS.to_vec()
        );
        assert_eq!(parse_decorators("NONE").unwrap(), vec![]);
        assert_eq!(parse_decorators("").unwrap(), DEFAULT_DECORATORS.to_vec());
        assert_eq!(
            parse_decorators("TiD,pid").unwrap(),
            vec![Decorator::Pid, Decorator::Tid]
        );
        assert_eq!(
            parse_decorators("uptime,").unwrap_err(),
            "Invalid decorator ''."
        );
        assert_eq!(
            parse_decorators("bogus").unwrap_err(),
            "Invalid decorator 'bogus'."
        );
        assert_eq!(
            describe_decorators(&DEFAULT_DECORATORS),
            "uptime,level,tags"
        );
        assert_eq!(describe_decorators(&[]), "none");
    }

    #[test]
    fn padding_grows_to_the_widest_value() {
        let padding = Padding::default();
        let start = Instant::now();
        let decorators = [Decorator::Level, Decorator::Tags];
        let line = |level, target| {
            format_line(
                &decorators,
                &padding,
                level,
                target,
                &format_args!("m"),
                start,
            )
        };
        assert_eq!(line(Level::Info, "pagesize"), "[info][pagesize] m");
        assert_eq!(line(Level::Debug, "gc+heap"), "[debug][gc,heap ] m");
        assert_eq!(line(Level::Info, "os"), "[info ][os      ] m");
    }
}
