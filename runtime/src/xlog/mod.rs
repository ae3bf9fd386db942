//! `-Xlog`: HotSpot's unified logging on top of the `log` crate and `env_logger`.
//!
//! `-Xlog[:[selections][:[output][:[decorators][:output-options]]]]`
//!
//! | file | what |
//! | --- | --- |
//! | `tags` | HotSpot 17's tags and tag sets (`hotspot_tags`, generated), levels, fuzzy matching |
//! | `selection` | one selection (`gc+heap*=debug`) and HotSpot's suggestions for unmatched ones |
//! | `config` | the configuration: outputs, levels per tag set, decorators, built option by option |
//! | `output` | an option's fields and the output it names (`stdout`, `#2`, a file name's bytes) |
//! | `file` | file outputs: opening, rotation, the non-regular-file rules |
//! | `format` | decorators and the line format |
//! | `dispatch` | the process's logger, `-Xlog:async`, install and restore |
//! | `help` | `-Xlog:help` and the configuration dump |
//!
//! Every tag and tag set HotSpot 17 knows is accepted: an operator's `-Xlog:gc+ergo` or
//! `-Xlog:safepoint` configures a tag set rtvm may never log with, exactly as in HotSpot, and
//! a valid selection that matches no tag set only warns. rtvm logs with `log` targets that
//! spell a tag set (`pagesize`, `os+thread`, `gc+heap`). Without any `-Xlog`, warnings and
//! errors go to stdout, as in HotSpot.

mod config;
mod dispatch;
mod file;
mod format;
mod help;
mod hotspot_tags;
mod output;
mod selection;
mod tags;

pub use config::{LogConfig, XlogError, XlogStep};
pub(crate) use dispatch::LogControl;
pub(crate) use dispatch::{install, LogHandle};
pub use help::help_text;
pub(crate) use help::{listing, log_configuration};
#[cfg(feature = "testing")]
pub use tags::{RTVM_TAG_SETS, TAGS, TAG_SETS};

use crate::output::{Output, Stream};

/// Prints the `[error][logging]` lines of a failed `-Xlog` option on stdout, as HotSpot does
/// before it gives up on the option.
pub(crate) fn print_error(e: &XlogError, output: &Output, start: std::time::Instant) {
    for d in &e.details {
        output.write(
            Stream::Stdout,
            &format!(
                "[{:.3}s][error][logging] {d}\n",
                start.elapsed().as_secs_f64()
            ),
        );
    }
}

/// Parses `-Xlog` options in order (for tools and tests): the configuration, or the first
/// error; `Ok(None)` for `-Xlog:help`.
#[cfg(any(test, feature = "testing"))]
pub fn parse_xlog(options: &[String]) -> Result<Option<LogConfig>, XlogError> {
    let mut config = LogConfig::new();
    for o in options {
        if config.apply(o)? == XlogStep::Help {
            return Ok(None);
        }
    }
    Ok(Some(config))
}
