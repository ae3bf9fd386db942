//! Test descriptions: the `@test` comments of a test file, parsed strictly.
//!
//! A description is a `/* ... */` comment whose first tag is `@test`. Tag arguments run to
//! the next tag. Supported: `@test [id=<id>]`, `@bug <n>+`, `@summary`, `@key`, `@requires`,
//! `@run main[/othervm][/manual][/timeout=N][/fail] [vm options] <Main> [args]`,
//! `@run driver[/timeout=N][/fail] <Main> [args]`, and `@author`/`@comment` (ignored).
//! Anything malformed is an error naming the file and line — never a silent skip.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::expr::Expr;

/// Default action timeout in seconds (jtreg's).
pub const DEFAULT_TIMEOUT: u64 = 120;

/// A malformed test description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderError {
    /// The file, relative to the test root.
    pub file: PathBuf,
    /// The 1-based line of the problem.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: Parse Exception: {}",
            self.file.display(),
            self.line,
            self.message
        )
    }
}

/// How an action runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionKind {
    /// `main`: the test VM runs the main with the action's VM options and `-vmoptions`.
    Main,
    /// `driver`: the test VM runs the main without `-vmoptions`; the main usually starts
    /// child VMs itself.
    Driver,
}

/// One `@run` action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// `main` or `driver`.
    pub kind: ActionKind,
    /// `/othervm` was given.
    pub othervm: bool,
    /// `/manual`: the test only runs with `jtreg -manual`.
    pub manual: bool,
    /// `/fail`: the action must fail.
    pub fail: bool,
    /// `/timeout=N` seconds (0 = none), before `-timeoutFactor`.
    pub timeout: u64,
    /// VM options given before the main.
    pub vm_options: Vec<String>,
    /// The main's name.
    pub main: String,
    /// The main's arguments.
    pub args: Vec<String>,
    /// The action as written (`main/othervm -Xss2m Foo 1`).
    pub text: String,
    /// Where it was written.
    pub line: usize,
}

impl Action {
    /// The action's name with options, as jtreg names sections (`main`, `driver`).
    pub fn section_name(&self) -> &'static str {
        match self.kind {
            ActionKind::Main => "main",
            ActionKind::Driver => "driver",
        }
    }
}

/// One `@test` description.
#[derive(Clone, Debug, PartialEq)]
pub struct TestDescription {
    /// The file, relative to the test root.
    pub file: PathBuf,
    /// The line of `@test`.
    pub line: usize,
    /// `id=` of the `@test` tag.
    pub id: Option<String>,
    /// `@bug` numbers.
    pub bugs: Vec<String>,
    /// `@summary`.
    pub summary: Option<String>,
    /// `@key` words.
    pub keys: Vec<String>,
    /// `@requires` expressions (all must hold), as written and parsed.
    pub requires: Vec<(String, Expr)>,
    /// The actions, in order.
    pub actions: Vec<Action>,
}

impl TestDescription {
    /// jtreg's test name: `runtime/os/Foo.rs` or `runtime/os/Foo.rs#ID`.
    pub fn name(&self) -> String {
        let file = self.file.to_string_lossy().replace('\\', "/");
        match &self.id {
            Some(id) => format!("{file}#{id}"),
            None => file,
        }
    }

    /// Whether any action is `/manual`.
    pub fn is_manual(&self) -> bool {
        self.actions.iter().any(|a| a.manual)
    }

    /// The keywords `-k:` expressions see: `@key` words, `bug<N>`, `manual`, and the
    /// action kinds (`othervm`, `driver`).
    pub fn keywords(&self) -> Vec<String> {
        let mut k: Vec<String> = self.keys.clone();
        k.extend(self.bugs.iter().map(|b| format!("bug{b}")));
        if self.is_manual() {
            k.push("manual".into());
        }
        if self.actions.iter().any(|a| a.othervm) {
            k.push("othervm".into());
        }
        if self.actions.iter().any(|a| a.kind == ActionKind::Driver) {
            k.push("driver".into());
        }
        k
    }
}

/// The outcome of parsing one `@test` block: a description, or the error for that test.
pub type Parsed = Result<TestDescription, HeaderError>;

/// A comment block and the line it starts on, with `*` margins removed.
struct Block {
    lines: Vec<(usize, String)>,
}

fn comment_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut rest = text;
    let mut offset_line = 1;
    while let Some(start) = rest.find("/*") {
        let before = &rest[..start];
        offset_line += before.matches('\n').count();
        let after = &rest[start + 2..];
        let Some(end) = after.find("*/") else { break };
        let body = &after[..end];
        let mut lines = Vec::new();
        for (i, raw) in body.split('\n').enumerate() {
            let t = raw.trim_start();
            let t = t
                .strip_prefix('*')
                .map(|x| x.strip_prefix('*').unwrap_or(x))
                .unwrap_or(t);
            lines.push((offset_line + i, t.trim().to_owned()));
        }
        offset_line += body.matches('\n').count();
        blocks.push(Block { lines });
        rest = &after[end + 2..];
    }
    blocks
}

/// Splits a block into tags: `(line, name, args)`.
fn tags(block: &Block) -> Vec<(usize, String, String)> {
    let mut out: Vec<(usize, String, String)> = Vec::new();
    for (line, text) in &block.lines {
        if let Some(rest) = text
            .strip_prefix('@')
            .filter(|r| r.starts_with(|c: char| c.is_ascii_alphabetic()))
        {
            let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            out.push((*line, name.to_owned(), args.trim().to_owned()));
        } else if let Some(last) = out.last_mut() {
            if !text.is_empty() {
                if !last.2.is_empty() {
                    last.2.push(' ');
                }
                last.2.push_str(text);
            }
        }
    }
    out
}

fn parse_action(text: &str, line: usize) -> Result<Action, String> {
    // Quotes group arguments as in an options file.
    let tokens = rtvm_flags::optfile::tokenize_options(text, "@run")
        .map_err(|e| e.message.trim_end().to_owned())?;
    let Some((head, rest)) = tokens.split_first() else {
        return Err("@run needs an action".into());
    };
    let mut parts = head.split('/');
    let kind = match parts.next() {
        Some("main") => ActionKind::Main,
        Some("driver") => ActionKind::Driver,
        Some(other) => {
            return Err(format!(
                "unsupported action '{other}' (rtvm-jtreg runs main and driver actions)"
            ))
        }
        None => unreachable!(),
    };
    let (mut othervm, mut manual, mut fail, mut timeout) = (false, false, false, None);
    for opt in parts {
        let dup = |seen: bool| {
            if seen {
                Err(format!("duplicate option '/{opt}'"))
            } else {
                Ok(())
            }
        };
        match opt.split_once('=') {
            None if opt == "othervm" => {
                dup(othervm)?;
                othervm = true
            }
            None if opt == "manual" => {
                dup(manual)?;
                manual = true
            }
            None if opt == "fail" => {
                dup(fail)?;
                fail = true
            }
            Some(("timeout", v)) => {
                dup(timeout.is_some())?;
                timeout = Some(v.parse::<u64>().map_err(|_| format!("bad timeout '{v}'"))?);
            }
            _ => {
                return Err(format!(
                    "invalid option '/{opt}' for action '{}'",
                    head.split('/').next().unwrap_or("")
                ))
            }
        }
    }
    if manual && timeout.is_some() {
        return Err("a /manual action cannot have a /timeout".into());
    }
    if kind == ActionKind::Driver && othervm {
        return Err("driver actions always run in their own VM; /othervm is not allowed".into());
    }
    let split = rest
        .iter()
        .position(|t| !t.starts_with('-'))
        .ok_or("no main given")?;
    let (vm_options, rest) = rest.split_at(split);
    if !vm_options.is_empty() && !(kind == ActionKind::Main && (othervm || manual)) {
        return Err(format!(
            "VM options {vm_options:?} need 'main/othervm' (a {} action takes none)",
            if kind == ActionKind::Main {
                "plain main"
            } else {
                "driver"
            }
        ));
    }
    let main = rest[0].clone();
    if !main.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || main.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(format!("invalid main name '{main}'"));
    }
    Ok(Action {
        kind,
        othervm,
        manual,
        fail,
        // Manual actions have no timeout, as in jtreg.
        timeout: timeout.unwrap_or(if manual { 0 } else { DEFAULT_TIMEOUT }),
        vm_options: vm_options.to_vec(),
        main,
        args: rest[1..].to_vec(),
        text: text.to_owned(),
        line,
    })
}

fn parse_block(file: &Path, block: &Block, valid_keys: &[String]) -> Parsed {
    let tags = tags(block);
    let (test_line, _, test_args) = tags[0].clone();
    let err = |line: usize, message: String| HeaderError {
        file: file.to_owned(),
        line,
        message,
    };
    let mut d = TestDescription {
        file: file.to_owned(),
        line: test_line,
        id: None,
        bugs: Vec::new(),
        summary: None,
        keys: Vec::new(),
        requires: Vec::new(),
        actions: Vec::new(),
    };
    for word in test_args.split_whitespace() {
        if let Some(id) = word.strip_prefix("id=") {
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
            {
                return Err(err(test_line, format!("invalid test id '{id}'")));
            }
            d.id = Some(id.to_owned());
        }
    }
    let mut seen_bug = false;
    for (line, name, args) in &tags[1..] {
        let line = *line;
        match name.as_str() {
            "test" => return Err(err(line, "a second @test in one description".into())),
            "bug" => {
                if seen_bug {
                    return Err(err(line, "@bug may appear only once".into()));
                }
                seen_bug = true;
                if args.is_empty() {
                    return Err(err(line, "@bug needs at least one bug id".into()));
                }
                for b in args.split_whitespace() {
                    if !b.chars().all(|c| c.is_ascii_digit()) {
                        return Err(err(line, format!("invalid bug id '{b}'")));
                    }
                    d.bugs.push(b.to_owned());
                }
            }
            "summary" => {
                if d.summary.is_some() {
                    return Err(err(line, "@summary may appear only once".into()));
                }
                d.summary = Some(args.clone());
            }
            "key" => {
                for k in args.split_whitespace() {
                    if !valid_keys.iter().any(|v| v == k) {
                        return Err(err(
                            line,
                            format!("invalid key '{k}': not listed in TEST.ROOT keys"),
                        ));
                    }
                    d.keys.push(k.to_owned());
                }
            }
            "requires" => {
                let e = Expr::parse(args)
                    .map_err(|e| err(line, format!("invalid @requires '{args}': {e}")))?;
                d.requires.push((args.clone(), e));
            }
            "run" => d.actions.push(
                parse_action(args, line).map_err(|m| err(line, format!("@run {args}: {m}")))?,
            ),
            "author" | "comment" => {}
            "library" | "modules" | "build" | "compile" | "clean" | "ignore" | "enablePreview" => {
                return Err(err(line, format!("@{name} is not supported by rtvm-jtreg (tests are compiled into the test VM)")));
            }
            other => return Err(err(line, format!("Invalid tag: @{other}"))),
        }
    }
    if d.actions.is_empty() {
        // jtreg's default action for a file without @run.
        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_owned();
        d.actions
            .push(parse_action(&format!("main {stem}"), test_line).map_err(|m| err(test_line, m))?);
    }
    Ok(d)
}

/// Parses every `@test` description of a file. An empty result means the file is not a test.
pub fn parse_descriptions(file: &Path, text: &str, valid_keys: &[String]) -> Vec<Parsed> {
    let mut out = Vec::new();
    for block in comment_blocks(text) {
        let first = block.lines.iter().find(|(_, t)| !t.is_empty());
        let is_test = first.is_some_and(|(_, t)| {
            t == "@test" || t.starts_with("@test ") || t.starts_with("@test\t")
        });
        if is_test {
            out.push(parse_block(file, &block, valid_keys));
        }
    }
    // Several descriptions in one file need distinct ids.
    if out.len() > 1 {
        let mut ids = std::collections::BTreeSet::new();
        for p in &mut out {
            if let Ok(d) = p {
                let id = d.id.clone().unwrap_or_default();
                if !ids.insert(id.clone()) {
                    *p = Err(HeaderError {
                        file: file.to_owned(),
                        line: d.line,
                        message: format!(
                            "duplicate test id '{id}' in a file with several @test descriptions"
                        ),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<Parsed> {
        parse_descriptions(
            Path::new("runtime/os/Foo.rs"),
            text,
            &["stress".to_string()],
        )
    }

    #[test]
    fn two_variants() {
        let src = r#"// leading comment
/*
 * @test id=ENABLED
 * @bug 8303215 8312182
 * @summary THPs must not form
 *          in thread stacks
 * @requires os.family == "linux"
 * @run driver Foo ENABLED
 */

/*
 * @test id=DISABLED
 * @bug 8312182
 * @key stress
 * @requires os.family == "linux"
 * @requires thp.mode == "always" | thp.mthp.always
 * @run main/manual -XX:+UnlockDiagnosticVMOptions Foo DISABLED "a b"
 */
pub fn main() {}
"#;
        let p = parse(src);
        assert_eq!(p.len(), 2);
        let a = p[0].as_ref().unwrap();
        assert_eq!(a.name(), "runtime/os/Foo.rs#ENABLED");
        assert_eq!(a.line, 3);
        assert_eq!(a.bugs, ["8303215", "8312182"]);
        assert_eq!(
            a.summary.as_deref(),
            Some("THPs must not form in thread stacks")
        );
        assert_eq!(a.actions[0].kind, ActionKind::Driver);
        assert_eq!(a.actions[0].args, ["ENABLED"]);
        assert!(!a.is_manual());
        let b = p[1].as_ref().unwrap();
        assert!(b.is_manual());
        assert_eq!(b.requires.len(), 2);
        assert_eq!(b.actions[0].vm_options, ["-XX:+UnlockDiagnosticVMOptions"]);
        assert_eq!(b.actions[0].args, ["DISABLED", "a b"]);
        assert_eq!(b.actions[0].line, 17);
        assert!(b.keywords().contains(&"manual".to_string()));
        assert!(b.keywords().contains(&"bug8312182".to_string()));
        assert!(b.keywords().contains(&"stress".to_string()));
    }

    #[test]
    fn othervm_options_and_timeouts() {
        let p = parse("/* @test\n * @run main/othervm/timeout=300/fail -Xss2m -XX:+AlwaysPreTouch Foo 1000\n */");
        let a = &p[0].as_ref().unwrap().actions[0];
        assert!(a.othervm && a.fail);
        assert_eq!(a.timeout, 300);
        assert_eq!(a.vm_options, ["-Xss2m", "-XX:+AlwaysPreTouch"]);
        assert_eq!(
            (a.main.as_str(), a.args.as_slice()),
            ("Foo", &["1000".to_string()][..])
        );
    }

    #[test]
    fn default_action() {
        let p = parse("/*\n * @test\n * @summary nothing to run\n */");
        let d = p[0].as_ref().unwrap();
        assert_eq!(d.actions[0].main, "Foo");
        assert_eq!(d.name(), "runtime/os/Foo.rs");
    }

    #[test]
    fn not_a_test() {
        assert!(parse("/* just a comment mentioning @test later */\nfn x() {}").is_empty());
        assert!(parse("// @test in a line comment\n").is_empty());
    }

    fn error_of(body: &str) -> HeaderError {
        let p = parse(body);
        p.into_iter()
            .next()
            .expect("one description")
            .expect_err("expected a header error")
    }

    #[test]
    fn errors_name_file_and_line() {
        let cases = [
            ("/*\n * @test\n * @bogus x\n */", 3, "Invalid tag: @bogus"),
            (
                "/*\n * @test\n * @run shell foo.sh\n */",
                3,
                "unsupported action 'shell'",
            ),
            (
                "/*\n * @test\n * @run main/othervm/what Foo\n */",
                3,
                "invalid option '/what'",
            ),
            (
                "/*\n * @test\n * @run main/manual/timeout=5 Foo\n */",
                3,
                "cannot have a /timeout",
            ),
            (
                "/*\n * @test\n * @run main -Xss2m Foo\n */",
                3,
                "need 'main/othervm'",
            ),
            (
                "/*\n * @test\n * @run driver -Xss2m Foo\n */",
                3,
                "need 'main/othervm'",
            ),
            (
                "/*\n * @test\n * @run main/timeout=x Foo\n */",
                3,
                "bad timeout",
            ),
            (
                "/*\n * @test\n * @run main/othervm -Xss2m\n */",
                3,
                "no main given",
            ),
            (
                "/*\n * @test\n * @run main 9Foo\n */",
                3,
                "invalid main name",
            ),
            ("/*\n * @test\n * @run\n */", 3, "@run needs an action"),
            (
                "/*\n * @test\n * @requires os.family ==\n */",
                3,
                "invalid @requires",
            ),
            ("/*\n * @test\n * @bug abc\n */", 3, "invalid bug id"),
            (
                "/*\n * @test\n * @bug 1\n * @bug 2\n */",
                4,
                "@bug may appear only once",
            ),
            (
                "/*\n * @test\n * @summary a\n * @summary b\n */",
                4,
                "@summary may appear only once",
            ),
            (
                "/*\n * @test\n * @key nope\n */",
                3,
                "not listed in TEST.ROOT keys",
            ),
            (
                "/*\n * @test\n * @library /test/lib\n */",
                3,
                "@library is not supported",
            ),
            ("/*\n * @test id=\n */", 2, "invalid test id"),
            (
                "/*\n * @test\n * @run main \"Foo\n */",
                3,
                "Unmatched quote in @run",
            ),
        ];
        for (src, line, want) in cases {
            let e = error_of(src);
            assert_eq!(e.line, line, "{src:?}: {e}");
            assert!(e.message.contains(want), "{src:?}: {e}");
            assert!(e
                .to_string()
                .starts_with(&format!("runtime/os/Foo.rs:{line}: Parse Exception: ")));
        }
    }

    #[test]
    fn duplicate_ids() {
        let p = parse("/* @test id=A */\n/* @test id=A */");
        assert!(p[0].is_ok());
        assert!(p[1]
            .as_ref()
            .unwrap_err()
            .message
            .contains("duplicate test id 'A'"));
    }
}
