//! A test suite: the directory holding `TEST.ROOT`, its groups, and test discovery.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::header::{parse_descriptions, Parsed};

/// A problem with the suite or with what was asked of it (jtreg's "bad arguments").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuiteError(pub String);

impl std::fmt::Display for SuiteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads a Java properties file: `key=value` or `key: value`, `#`/`!` comments, a trailing
/// `\` continues a line.
pub fn read_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut logical = String::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if logical.is_empty() && (line.starts_with('#') || line.starts_with('!') || line.is_empty())
        {
            continue;
        }
        if let Some(cont) = line.strip_suffix('\\') {
            logical.push_str(cont);
            continue;
        }
        logical.push_str(line);
        let entry = std::mem::take(&mut logical);
        let cut = entry.find(['=', ':']).unwrap_or(entry.len());
        let key = entry[..cut].trim().to_owned();
        let value = entry.get(cut + 1..).unwrap_or("").trim().to_owned();
        if !key.is_empty() {
            out.insert(key, value);
        }
    }
    out
}

/// An opened suite.
#[derive(Clone, Debug)]
pub struct Suite {
    /// The root directory (holding `TEST.ROOT`).
    pub root: PathBuf,
    /// `keys=` of `TEST.ROOT`.
    pub keys: Vec<String>,
    /// Groups from the files named by `groups=`.
    pub groups: BTreeMap<String, Vec<String>>,
}

/// One test found in the suite: its description or the parse error for it.
#[derive(Clone, Debug)]
pub struct Found {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// The description, or why it is malformed.
    pub parsed: Parsed,
}

impl Found {
    /// The test's name (`dir/File.rs#id`), also for a malformed one.
    pub fn name(&self, root: &Path) -> String {
        match &self.parsed {
            Ok(d) => d.name(),
            Err(_) => self
                .path
                .strip_prefix(root)
                .unwrap_or(&self.path)
                .to_string_lossy()
                .replace('\\', "/"),
        }
    }
}

impl Suite {
    /// Finds the suite containing `path` (walking up to the directory with `TEST.ROOT`).
    pub fn containing(path: &Path) -> Result<Suite, SuiteError> {
        let abs = std::fs::canonicalize(path)
            .map_err(|e| SuiteError(format!("cannot read {}: {e}", path.display())))?;
        let mut dir = if abs.is_dir() {
            abs.as_path()
        } else {
            abs.parent().unwrap_or(&abs)
        };
        loop {
            if dir.join("TEST.ROOT").is_file() {
                return Suite::open(dir);
            }
            dir = dir.parent().ok_or_else(|| {
                SuiteError(format!("no TEST.ROOT found above {}", path.display()))
            })?;
        }
    }

    /// Opens the suite rooted at `root`.
    pub fn open(root: &Path) -> Result<Suite, SuiteError> {
        let text = std::fs::read_to_string(root.join("TEST.ROOT"))
            .map_err(|e| SuiteError(format!("cannot read {}/TEST.ROOT: {e}", root.display())))?;
        let props = read_properties(&text);
        let keys = props
            .get("keys")
            .map(|k| k.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        let mut groups = BTreeMap::new();
        for file in props
            .get("groups")
            .map(|g| g.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            let (name, optional) = match file.strip_prefix('[').and_then(|f| f.strip_suffix(']')) {
                Some(f) => (f, true),
                None => (file, false),
            };
            match std::fs::read_to_string(root.join(name)) {
                Ok(t) => {
                    for (k, v) in read_properties(&t) {
                        groups.insert(k, v.split_whitespace().map(str::to_owned).collect());
                    }
                }
                Err(_) if optional => {}
                Err(e) => return Err(SuiteError(format!("cannot read group file {name}: {e}"))),
            }
        }
        Ok(Suite {
            root: root.to_owned(),
            keys,
            groups,
        })
    }

    /// The test files a group names (entries: paths, `-path` exclusions, `:group`).
    pub fn group_files(&self, group: &str) -> Result<BTreeSet<PathBuf>, SuiteError> {
        let mut seen = BTreeSet::new();
        self.expand_group(group, &mut seen)
    }

    fn expand_group(
        &self,
        group: &str,
        seen: &mut BTreeSet<String>,
    ) -> Result<BTreeSet<PathBuf>, SuiteError> {
        if !seen.insert(group.to_owned()) {
            return Err(SuiteError(format!("group {group} includes itself")));
        }
        let entries = self
            .groups
            .get(group)
            .ok_or_else(|| SuiteError(format!("unknown group: {group}")))?;
        let mut include = BTreeSet::new();
        let mut exclude = BTreeSet::new();
        for e in entries {
            if let Some(g) = e.strip_prefix(':') {
                include.extend(self.expand_group(g, seen)?);
            } else if let Some(p) = e.strip_prefix('-') {
                exclude.extend(self.files_under(&self.root.join(p.trim_start_matches('/')))?);
            } else {
                include.extend(self.files_under(&self.root.join(e.trim_start_matches('/')))?);
            }
        }
        Ok(include.difference(&exclude).cloned().collect())
    }

    /// Every `.rs` file at or under `path`, sorted.
    pub fn files_under(&self, path: &Path) -> Result<BTreeSet<PathBuf>, SuiteError> {
        let mut out = BTreeSet::new();
        let meta = std::fs::metadata(path)
            .map_err(|e| SuiteError(format!("cannot read {}: {e}", path.display())))?;
        if meta.is_file() {
            out.insert(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()));
            return Ok(out);
        }
        let mut stack = vec![path.to_owned()];
        while let Some(dir) = stack.pop() {
            let entries = std::fs::read_dir(&dir)
                .map_err(|e| SuiteError(format!("cannot read {}: {e}", dir.display())))?;
            for entry in entries.flatten() {
                let p = entry.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.insert(std::fs::canonicalize(&p).unwrap_or(p));
                }
            }
        }
        Ok(out)
    }

    /// Resolves command-line test arguments (files, directories, `:group`s) to files.
    pub fn select(&self, args: &[String]) -> Result<BTreeSet<PathBuf>, SuiteError> {
        let mut files = BTreeSet::new();
        for a in args {
            if let Some(g) = a.strip_prefix(':') {
                files.extend(self.group_files(g)?);
            } else {
                let p = Path::new(a);
                let p = if p.exists() {
                    p.to_owned()
                } else {
                    self.root.join(a)
                };
                files.extend(self.files_under(&p)?);
            }
        }
        Ok(files)
    }

    /// Parses the descriptions of `files` (files that hold none are not tests).
    pub fn discover(&self, files: &BTreeSet<PathBuf>) -> Result<Vec<Found>, SuiteError> {
        let mut out = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(path)
                .map_err(|e| SuiteError(format!("cannot read {}: {e}", path.display())))?;
            let rel = path.strip_prefix(&self.root).unwrap_or(path);
            for parsed in parse_descriptions(rel, &text, &self.keys) {
                out.push(Found {
                    path: path.clone(),
                    parsed,
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties() {
        let p = read_properties("# c\nkeys=stress headful \\\n  manual\ngroups: TEST.groups [opt.groups]\n\n! x\nempty=\n");
        assert_eq!(p["keys"], "stress headful manual");
        assert_eq!(p["groups"], "TEST.groups [opt.groups]");
        assert_eq!(p["empty"], "");
    }
}
