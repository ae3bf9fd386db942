//! One selection of an `-Xlog` option: `tag1[+tag2...][*][=level]` or `all[=level]`, and
//! the suggestions HotSpot makes for a selection that matches no tag set.

use std::cmp::Ordering;

use log::LevelFilter;

use super::tags::{find_level, find_tag, fuzzy_level, fuzzy_tag, tag_set_tags, MAX_TAGS, TAG_SETS};

/// A parsed selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Selection {
    /// The tags as HotSpot names them, in the order given; empty for `all`.
    pub tags: Vec<&'static str>,
    /// `*`: tag sets with more tags match too (`all` is a wildcard without tags).
    pub wildcard: bool,
    /// The level it sets.
    pub level: LevelFilter,
}

impl Selection {
    /// `all=<level>`.
    pub fn all(level: LevelFilter) -> Selection {
        Selection {
            tags: Vec::new(),
            wildcard: true,
            level,
        }
    }

    /// Whether the selection picks the tag set with these tags.
    pub fn selects(&self, set: &[&str]) -> bool {
        (self.wildcard || self.tags.len() == set.len()) && self.tags.iter().all(|t| set.contains(t))
    }

    /// How many tag sets it picks.
    pub fn tag_sets_selected(&self) -> usize {
        tag_set_tags().iter().filter(|s| self.selects(s)).count()
    }

    /// `gc+heap*` (tags and wildcard), as HotSpot describes selections; `all` for `all`.
    pub fn describe_tags(&self) -> String {
        if self.tags.is_empty() {
            return "all".into();
        }
        format!(
            "{}{}",
            self.tags.join("+"),
            if self.wildcard { "*" } else { "" }
        )
    }

    /// Sørensen–Dice similarity of the two tag lists (shared tags over total tags).
    fn similarity(&self, other: &Selection) -> f64 {
        let shared = self.tags.iter().filter(|t| other.tags.contains(t)).count();
        2.0 * shared as f64 / (self.tags.len() + other.tags.len()) as f64
    }

    /// HotSpot's "Did you mean any of the following?" list for a selection that matches no
    /// tag set: the selection with a wildcard if that matches something, and up to five of the
    /// most similar tag sets (as wildcard selections where the wildcard adds tag sets), best
    /// first. Empty if nothing is similar enough.
    pub fn suggestions(&self) -> Vec<String> {
        const CAP: usize = 5;
        const REQUIRED: f64 = 0.3;
        let mut found: Vec<Selection> = Vec::new();
        if !self.wildcard {
            let wild = Selection {
                wildcard: true,
                ..self.clone()
            };
            if wild.tag_sets_selected() > 0 {
                found.push(wild);
            }
        }
        for tags in tag_set_tags() {
            let mut candidate = Selection {
                tags: tags.clone(),
                wildcard: true,
                level: self.level,
            };
            if candidate.tag_sets_selected() == 1 {
                candidate.wildcard = false;
            }
            let score = self.similarity(&candidate);
            if score < REQUIRED {
                continue;
            }
            if found.len() < CAP {
                found.push(candidate);
                continue;
            }
            // Replace the least similar suggestion so far (the first of equals) if this one
            // is strictly better.
            let (mut worst, mut worst_at) = (1.0, None);
            for (i, f) in found.iter().enumerate() {
                let s = self.similarity(f);
                if s < worst {
                    worst = s;
                    worst_at = Some(i);
                }
            }
            if let Some(i) = worst_at.filter(|_| score > worst) {
                found[i] = candidate;
            }
        }
        let order = |a: &Selection, b: &Selection| -> Ordering {
            let diff = self.similarity(b) - self.similarity(a);
            if diff.abs() > 1e-6 {
                return if diff < 0.0 {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
            }
            a.tags
                .len()
                .cmp(&b.tags.len())
                .then_with(|| b.tag_sets_selected().cmp(&a.tag_sets_selected()))
        };
        quicksort(&mut found, &order);
        found.iter().map(Selection::describe_tags).collect()
    }
}

/// The quicksort HotSpot sorts suggestions with (median of three, Hoare partition). It is not
/// stable; using the same one puts equally good suggestions in the same order as `java`.
fn quicksort<T: Clone>(items: &mut [T], order: &dyn Fn(&T, &T) -> Ordering) {
    let n = items.len();
    if n < 2 {
        return;
    }
    let (mid, last) = (n / 2, n - 1);
    if order(&items[0], &items[mid]) == Ordering::Greater {
        items.swap(0, mid);
    }
    if order(&items[0], &items[last]) == Ordering::Greater {
        items.swap(0, last);
    }
    if order(&items[mid], &items[last]) == Ordering::Greater {
        items.swap(mid, last);
    }
    if n < 4 {
        return;
    }
    let pivot = items[mid].clone();
    let (mut left, mut right) = (0, last);
    let split = loop {
        while order(&items[left], &pivot) == Ordering::Less {
            left += 1;
        }
        while order(&items[right], &pivot) == Ordering::Greater {
            right -= 1;
        }
        if left < right {
            items.swap(left, right);
            left += 1;
            right -= 1;
        } else {
            break right;
        }
    };
    let (first, second) = items.split_at_mut(split + 1);
    quicksort(first, order);
    quicksort(second, order);
}

/// Parses one selection; the error is HotSpot's line for it.
pub(crate) fn parse_selection(text: &str) -> Result<Selection, String> {
    let (tags_text, level) = match text.split_once('=') {
        Some((tags, level_text)) => {
            let level = find_level(level_text).ok_or_else(|| {
                let mut m = format!("Invalid level '{level_text}' in log selection.");
                if let Some(best) = fuzzy_level(level_text) {
                    m.push_str(&format!(" Did you mean '{best}'?"));
                }
                m
            })?;
            (tags, level)
        }
        None => (text, LevelFilter::Info),
    };
    if tags_text == "all" {
        return Ok(Selection::all(level));
    }
    let (tags_text, wildcard) = match tags_text.find('*') {
        Some(at) if at + 1 == tags_text.len() => (&tags_text[..at], true),
        _ => (tags_text, false),
    };
    let mut tags: Vec<&'static str> = Vec::new();
    for name in tags_text.split('+') {
        let tag = find_tag(name).ok_or_else(|| {
            let mut m = format!("Invalid tag '{name}' in log selection.");
            if let Some(best) = fuzzy_tag(name) {
                m.push_str(&format!(" Did you mean '{best}'?"));
            }
            m
        })?;
        if tags.len() == MAX_TAGS {
            // HotSpot names the selection by its first tag here.
            let first = tags_text.split('+').next().unwrap_or("");
            return Err(format!(
                "Too many tags in log selection '{first}' (can only have up to {MAX_TAGS} tags)."
            ));
        }
        tags.push(tag);
    }
    if let Some(dup) = tags
        .iter()
        .enumerate()
        .find(|(i, t)| tags[..*i].contains(t))
        .map(|(_, t)| *t)
    {
        return Err(format!("Log selection contains duplicates of tag {dup}."));
    }
    Ok(Selection {
        tags,
        wildcard,
        level,
    })
}

/// The number of tag sets, for callers that index by tag set.
pub(crate) fn tag_set_count() -> usize {
    TAG_SETS.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(text: &str) -> Selection {
        parse_selection(text).unwrap()
    }

    #[test]
    fn hotspot_messages() {
        for (input, message) in [
            ("gcc", "Invalid tag 'gcc' in log selection."),
            (
                "pagsize",
                "Invalid tag 'pagsize' in log selection. Did you mean 'pagesize'?",
            ),
            (
                "all*",
                "Invalid tag 'all' in log selection. Did you mean 'alloc'?",
            ),
            ("ALL", "Invalid tag 'ALL' in log selection."),
            ("gc*x", "Invalid tag 'gc*x' in log selection."),
            ("", "Invalid tag '' in log selection."),
            ("gc+", "Invalid tag '' in log selection."),
            ("=debug", "Invalid tag '' in log selection."),
            ("gc=", "Invalid level '' in log selection."),
            (
                "gc=infoo",
                "Invalid level 'infoo' in log selection. Did you mean 'info'?",
            ),
            ("gc+gc", "Log selection contains duplicates of tag gc."),
            (
                "gc+os+heap+thread+pagesize+nmt",
                "Too many tags in log selection 'gc' (can only have up to 5 tags).",
            ),
        ] {
            assert_eq!(parse_selection(input).unwrap_err(), message, "{input}");
        }
    }

    #[test]
    fn case_and_matching() {
        let s = sel("OS+Thread=DEBUG");
        assert_eq!(
            (s.tags.clone(), s.level),
            (vec!["os", "thread"], LevelFilter::Debug)
        );
        assert!(s.selects(&["os", "thread"]) && s.selects(&["thread", "os"]));
        assert!(!s.selects(&["os"]) && !s.selects(&["os", "thread", "timer"]));
        let w = sel("os*");
        assert!(w.selects(&["os"]) && w.selects(&["os", "thread", "timer"]));
        assert!(sel("all=off").selects(&["gc", "heap"]));
        assert_eq!(sel("gc").level, LevelFilter::Info);
    }

    /// Suggestions `java` 17 printed for these selections (`-Xlog:<sel> -version`).
    #[test]
    fn suggestions_match_hotspot() {
        for (input, java) in [
            (
                "gc+pagesize",
                "gc* pagesize gc+ref* gc+director gc+compaction",
            ),
            ("os+heap", "os* os+thread* cds+heap* os+container os+cpu"),
            (
                "thread",
                "thread* os+thread* thread+smr logging+thread thread+table",
            ),
            (
                "gc+heap+pagesize",
                "gc+heap* gc+heap+region gc+heap+verify gc+heap+numa gc+heap+exit",
            ),
            (
                "pagesize+thread",
                "pagesize os+thread* logging+thread thread+smr thread+table",
            ),
            (
                "safepoint+gc",
                "gc* safepoint* gc+director safepoint+stats safepoint+cleanup",
            ),
            ("exit", "exit* gc+heap+exit gc+remset+exit"),
            ("nmt+os", "os* nmt os+thread* os+container os+cpu"),
        ] {
            let s = sel(input);
            assert_eq!(s.tag_sets_selected(), 0, "{input}");
            assert_eq!(s.suggestions().join(" "), java, "{input}");
        }
    }
}
