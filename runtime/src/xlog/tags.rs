//! Tags, tag sets and levels: HotSpot 17's whole vocabulary, so that an operator's existing
//! `-Xlog` lines are understood — and answered as HotSpot answers them — whatever rtvm
//! itself logs with.
//!
//! rtvm logs with `log` targets that spell a HotSpot tag set (`pagesize`, `os+thread`,
//! `gc+heap`); [`RTVM_TAG_SETS`] lists them and a unit test checks that every target in the
//! sources is one of them and one of HotSpot's.

use std::collections::HashMap;
use std::sync::OnceLock;

use log::LevelFilter;

pub use super::hotspot_tags::{TAGS, TAG_SETS};

/// The tag sets rtvm logs with (each one of HotSpot's), its MMTk binding (`rtvm-mmtk`:
/// `gc`, `gc+heap`, `gc+heap+exit`) included.
pub const RTVM_TAG_SETS: &[&str] = &[
    "attach",
    "gc",
    "gc+ergo",
    "gc+heap",
    "gc+heap+coops",
    "gc+heap+exit",
    "gc+init",
    "gc+task",
    "handshake",
    "logging",
    "nmt",
    "os",
    "os+container",
    "os+thread",
    "pagesize",
    "perf+memops",
    "safepoint",
    "startuptime",
    "trimnative",
];

/// The most tags a selection may name (HotSpot's `LogTag::MaxTags`).
pub const MAX_TAGS: usize = 5;

/// The tags of every tag set, by index into [`TAG_SETS`].
pub(crate) fn tag_set_tags() -> &'static [Vec<&'static str>] {
    static TAGS_OF: OnceLock<Vec<Vec<&'static str>>> = OnceLock::new();
    TAGS_OF.get_or_init(|| TAG_SETS.iter().map(|s| s.split('+').collect()).collect())
}

/// The index of the tag set a `log` target names (`os+thread`), if it is one.
pub(crate) fn tag_set_index(target: &str) -> Option<usize> {
    static INDEX: OnceLock<HashMap<&'static str, usize>> = OnceLock::new();
    INDEX
        .get_or_init(|| TAG_SETS.iter().enumerate().map(|(i, s)| (*s, i)).collect())
        .get(target)
        .copied()
}

/// The tag named `name`, compared without regard to case (HotSpot's `LogTag::from_string`).
pub(crate) fn find_tag(name: &str) -> Option<&'static str> {
    TAGS.iter().copied().find(|t| t.eq_ignore_ascii_case(name))
}

/// The closest tag to a mistyped name, if any is close enough (bigram similarity of at
/// least 0.5; among equals the last one, as HotSpot's `LogTag::fuzzy_match`).
pub(crate) fn fuzzy_tag(name: &str) -> Option<&'static str> {
    fuzzy(TAGS.iter().copied(), name)
}

fn fuzzy<'a>(candidates: impl Iterator<Item = &'a str>, name: &str) -> Option<&'a str> {
    let mut best = 0.5;
    let mut found = None;
    for c in candidates {
        let score = rtvm_flags::similarity(c, name);
        if score >= best {
            best = score;
            found = Some(c);
        }
    }
    found
}

/// The levels, in HotSpot's order.
pub const LEVELS: [(&str, LevelFilter); 6] = [
    ("off", LevelFilter::Off),
    ("trace", LevelFilter::Trace),
    ("debug", LevelFilter::Debug),
    ("info", LevelFilter::Info),
    ("warning", LevelFilter::Warn),
    ("error", LevelFilter::Error),
];

/// A level by name, without regard to case.
pub(crate) fn find_level(name: &str) -> Option<LevelFilter> {
    LEVELS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, l)| *l)
}

/// The closest level to a mistyped name.
pub(crate) fn fuzzy_level(name: &str) -> Option<&'static str> {
    fuzzy(LEVELS.iter().map(|(n, _)| *n), name)
}

/// A level's name as HotSpot prints it.
pub fn level_name(level: LevelFilter) -> &'static str {
    LEVELS
        .iter()
        .find(|(_, l)| *l == level)
        .map_or("off", |(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtvm_tag_sets_are_hotspots() {
        for set in RTVM_TAG_SETS {
            assert!(
                tag_set_index(set).is_some(),
                "{set} is not a HotSpot tag set"
            );
        }
        assert_eq!(tag_set_tags().len(), TAG_SETS.len());
        for tags in tag_set_tags() {
            assert!(!tags.is_empty() && tags.len() <= MAX_TAGS);
            assert!(tags.iter().all(|t| TAGS.contains(t)), "{tags:?}");
        }
    }

    #[test]
    fn every_log_target_in_the_sources_is_a_known_tag_set() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut files = vec![std::path::PathBuf::from(root)];
        let mut seen = 0;
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for (i, _) in text.match_indices("target: \"") {
                let rest = &text[i + "target: \"".len()..];
                let target = &rest[..rest.find('"').unwrap()];
                seen += 1;
                assert!(
                    RTVM_TAG_SETS.contains(&target),
                    "{}: log target '{target}' is not in RTVM_TAG_SETS",
                    p.display()
                );
            }
        }
        assert!(seen > 20, "found only {seen} log targets");
    }

    #[test]
    fn lookups_ignore_case_and_suggest() {
        assert_eq!(find_tag("PAGESIZE"), Some("pagesize"));
        assert_eq!(find_tag("nosuch"), None);
        assert_eq!(fuzzy_tag("pagsize"), Some("pagesize"));
        assert_eq!(fuzzy_tag("all"), Some("alloc"));
        assert_eq!(fuzzy_tag("gcc"), None);
        assert_eq!(find_level("DEBUG"), Some(LevelFilter::Debug));
        assert_eq!(fuzzy_level("infoo"), Some("info"));
        assert_eq!(level_name(LevelFilter::Warn), "warning");
    }
}
