//! `-XX:+PrintFlagsFinal`, `-XX:+PrintFlagsInitial`, `-XX:+PrintFlagsRanges` and
//! `-XX:+PrintCommandLineFlags`, in HotSpot's column layout.
//!
//! Columns (0-based) of a `PrintFlagsFinal` line: the type right-justified in 9, the name
//! at 10, ` = ` at 50, the value at 53, the kind braces right-justified to end at 103, the
//! origin braces at 105. A field that overflows its column is followed by one space.

use std::io::{self, Write};

use crate::{FlagInfo, FlagType, Settings, Value, FLAGS};

/// Which values a flag listing shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintWhich {
    /// The table defaults (`-XX:+PrintFlagsInitial`).
    Initial,
    /// The final values (`-XX:+PrintFlagsFinal`).
    Final,
}

const NAME_COL: usize = 10;
const EQUALS_COL: usize = 50;
const KIND_END_COL: usize = 104;
const RANGE_COL: usize = 61;
const RANGE_KIND_END_COL: usize = 157;

/// Pads `line` with spaces to `col`, or adds one space if it is already there or past it.
fn fill_to(line: &mut String, col: usize) {
    if line.len() < col {
        line.extend(std::iter::repeat_n(' ', col - line.len()));
    } else {
        line.push(' ');
    }
}

/// Appends `text` right-justified so that it ends just before `end_col`.
fn right_justify(line: &mut String, text: &str, end_col: usize) {
    let start = end_col.saturating_sub(text.len());
    fill_to(line, start);
    line.push_str(text);
}

/// Unlocked flags, sorted by name as `strcmp` sorts them.
fn listed(settings: &Settings) -> Vec<(usize, &'static FlagInfo)> {
    let mut flags: Vec<_> = FLAGS
        .iter()
        .enumerate()
        .filter(|(_, f)| settings.is_unlocked(f))
        .collect();
    flags.sort_by(|a, b| a.1.name.as_bytes().cmp(b.1.name.as_bytes()));
    flags
}

fn kind_braces(info: &FlagInfo) -> String {
    format!("{{{}}}", info.kind.label(info.platform_dependent))
}

/// Prints the flag listing: `[Global flags]` and one line per unlocked flag.
pub fn print_flags(out: &mut dyn Write, settings: &Settings, which: PrintWhich) -> io::Result<()> {
    let mut text = String::from("[Global flags]\n");
    let values: Vec<(&FlagInfo, &Value, crate::Origin)> = settings.iter().collect();
    for (index, info) in listed(settings) {
        let (value, origin) = match which {
            PrintWhich::Final => (values[index].1, values[index].2),
            PrintWhich::Initial => (&info.default, crate::Origin::DEFAULT),
        };
        let mut line = format!("{:>9} {}", info.ty.name(), info.name);
        debug_assert!(line.len() >= NAME_COL);
        if line.len() < EQUALS_COL {
            fill_to(&mut line, EQUALS_COL);
        }
        line.push_str(" = ");
        line.push_str(&value.display());
        right_justify(&mut line, &kind_braces(info), KIND_END_COL);
        line.push_str(&format!(" {{{origin}}}\n"));
        text.push_str(&line);
    }
    out.write_all(text.as_bytes())
}

/// Prints `[Global flags ranges]`: every unlocked numeric flag with its range, or blanks
/// where it has none.
pub fn print_flags_ranges(out: &mut dyn Write, settings: &Settings) -> io::Result<()> {
    let mut text = String::from("[Global flags ranges]\n");
    for (_, info) in listed(settings) {
        if matches!(info.ty, FlagType::Bool | FlagType::Ccstr) {
            continue;
        }
        let mut line = format!("{:>9} {}", info.ty.name(), info.name);
        fill_to(&mut line, RANGE_COL);
        match info.printed_range() {
            Some((min, max)) => line.push_str(&format!(
                "[ {:<25} ... {:>25} ]",
                min.display_range_bound(),
                max.display_range_bound()
            )),
            None => line.push_str(&format!("[ {:<25} ... {:>25} ]", "", "")),
        }
        right_justify(&mut line, &kind_braces(info), RANGE_KIND_END_COL);
        let origin = settings
            .origin_by_name(info.name)
            .unwrap_or(crate::Origin::DEFAULT);
        line.push_str(&format!(" {{{origin}}}\n"));
        text.push_str(&line);
    }
    out.write_all(text.as_bytes())
}

/// Prints `-XX:+PrintCommandLineFlags`: every flag that is not at its untouched default,
/// sorted, on one line with a trailing space.
pub fn print_command_line_flags(out: &mut dyn Write, settings: &Settings) -> io::Result<()> {
    let mut set: Vec<_> = settings
        .iter()
        .filter(|(_, _, origin)| !origin.is_default())
        .collect();
    set.sort_by(|a, b| a.0.name.as_bytes().cmp(b.0.name.as_bytes()));
    let mut line = String::new();
    for (info, value, _) in set {
        match value {
            Value::Bool(on) => line.push_str(&format!(
                "-XX:{}{} ",
                if *on { '+' } else { '-' },
                info.name
            )),
            other => line.push_str(&format!("-XX:{}={} ", info.name, other.display())),
        }
    }
    line.push('\n');
    out.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{flag, Source};

    fn final_lines(settings: &Settings) -> Vec<String> {
        let mut out = Vec::new();
        print_flags(&mut out, settings, PrintWhich::Final).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn final_layout_matches_hotspot_columns() {
        let lines = final_lines(&Settings::defaults());
        assert_eq!(lines[0], "[Global flags]");
        let find = |name: &str| {
            lines
                .iter()
                .find(|l| l.split_whitespace().nth(1) == Some(name))
                .unwrap_or_else(|| panic!("{name} not listed"))
                .clone()
        };
        // Lines copied from `java -XX:+PrintFlagsFinal -version` (OpenJDK 17.0.15).
        assert_eq!(
            find("AlwaysPreTouch"),
            "     bool AlwaysPreTouch                           = false                                     {product} {default}"
        );
        assert_eq!(
            find("ThreadStackSize"),
            format!(
                "     intx ThreadStackSize                          = {:<4}                                   {{pd product}} {{default}}",
                flag::ThreadStackSize.info().default.display()
            )
        );
        assert_eq!(
            find("PreTouchParallelChunkSize"),
            "   size_t PreTouchParallelChunkSize                = 4194304                                {pd product} {default}"
        );
        assert_eq!(
            find("NativeMemoryTracking"),
            "    ccstr NativeMemoryTracking                     = off                                       {product} {default}"
        );
        assert_eq!(
            find("ActiveProcessorCount"),
            "      int ActiveProcessorCount                     = -1                                        {product} {default}"
        );
        assert!(
            !lines
                .iter()
                .any(|l| l.contains("DisableTHPStackMitigation")),
            "locked flags hidden"
        );
    }

    #[test]
    fn listing_is_sorted_and_unlocking_shows_more() {
        let lines = final_lines(&Settings::defaults());
        let names: Vec<_> = lines[1..]
            .iter()
            .map(|l| l.split_whitespace().nth(1).unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        let mut s = Settings::defaults();
        s.set(flag::UnlockDiagnosticVMOptions, true, Source::CommandLine)
            .unwrap();
        let lines = final_lines(&s);
        let line = lines
            .iter()
            .find(|l| l.contains(" DisableTHPStackMitigation "))
            .unwrap();
        assert!(line.ends_with("{diagnostic} {default}"), "{line}");
        assert_eq!(
            line.find("{diagnostic}").unwrap() + "{diagnostic}".len(),
            104
        );
        assert!(!lines.iter().any(|l| l.contains("BackgroundPreTouch")));
    }

    #[test]
    fn long_values_keep_the_columns() {
        let mut s = Settings::defaults();
        s.set(flag::MaxNewSize, usize::MAX, Source::CommandLine)
            .unwrap();
        s.set(flag::NewSize, 1 << 20, Source::CommandLine).unwrap();
        let lines = final_lines(&s);
        let line = lines.iter().find(|l| l.contains(" MaxNewSize ")).unwrap();
        assert!(line.contains("= 18446744073709551615"), "{line}");
        assert!(line.ends_with("{product} {command line}"), "{line}");
    }

    #[test]
    fn ranges_layout() {
        let mut out = Vec::new();
        print_flags_ranges(&mut out, &Settings::defaults()).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines[0], "[Global flags ranges]");
        let find = |name: &str| {
            *lines
                .iter()
                .find(|l| l.split_whitespace().nth(1) == Some(name))
                .unwrap()
        };
        // From `java -XX:+PrintFlagsRanges -version`.
        assert_eq!(
            find("ActiveProcessorCount"),
            "      int ActiveProcessorCount                               [                           ...                           ]                            {product} {default}"
        );
        assert_eq!(
            find("PreTouchParallelChunkSize"),
            "   size_t PreTouchParallelChunkSize                          [ 4096                      ...       9223372036854775807 ]                         {pd product} {default}"
        );
        assert_eq!(
            find("ThreadStackSize"),
            "     intx ThreadStackSize                                    [ 0                         ...                   1048576 ]                         {pd product} {default}"
        );
        assert!(!text.contains("AlwaysPreTouch "), "bools omitted");
        assert!(!text.contains("NativeMemoryTracking"), "ccstr omitted");
    }

    #[test]
    fn command_line_flags() {
        let mut s = Settings::defaults();
        s.set(flag::MaxHeapSize, 64 << 20, Source::CommandLine)
            .unwrap();
        s.set(flag::AlwaysPreTouch, true, Source::CommandLine)
            .unwrap();
        s.set(flag::DisableTHPStackMitigation, false, Source::Internal)
            .unwrap();
        s.set_ergo(flag::InitialHeapSize, 1 << 20).unwrap();
        let mut out = Vec::new();
        print_command_line_flags(&mut out, &s).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "-XX:+AlwaysPreTouch -XX:-DisableTHPStackMitigation -XX:InitialHeapSize=1048576 -XX:MaxHeapSize=67108864 \n"
        );
    }
}
