//! Running tests: selection (`@requires`, manual/automatic, `-k:`), actions in fresh test
//! VM processes with timeouts, `.jtr` records, the summary and jtreg's exit codes.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::expr::Expr;
use crate::header::{Action, ActionKind, TestDescription};
use crate::props::Props;
use crate::suite::{Found, Suite};
use crate::testlib::{SKIP_STATUS, TESTSRC_ENV, TESTVM_ENV, VMOPTS_ENV};

/// Which tests a run selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Automatic tests only (the default; `-a`).
    Automatic,
    /// Manual tests only (`-m`).
    Manual,
}

/// How to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The test VM binary (the runner passes it to tests in `RTVM_TESTVM`).
    pub test_vm: PathBuf,
    /// `-vmoptions`: added to every `main` action and given to drivers in `TESTVMOPTS`.
    pub vm_options: Vec<String>,
    /// `-timeoutFactor`.
    pub timeout_factor: f64,
    /// Work directory (`.jtr` files, `scratch/`).
    pub work_dir: PathBuf,
    /// Report directory (`text/summary.txt`).
    pub report_dir: PathBuf,
    /// Automatic or manual.
    pub mode: Mode,
    /// `-k:` expression.
    pub keywords: Option<Expr>,
    /// `-conc:` tests at once.
    pub concurrency: usize,
    /// `-verbose:summary`: a line per test.
    pub verbose: bool,
}

/// How a test ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Every action did what it should.
    Passed(String),
    /// The test skipped itself (counts as passed and skipped).
    Skipped(String),
    /// An action failed.
    Failed(String),
    /// The test could not be run properly (malformed header, timeout, missing main).
    Error(String),
    /// A `@requires` was false.
    NotRun(String),
    /// Filtered by mode or `-k:`.
    Filtered,
}

impl Status {
    /// jtreg's status text (`Passed. Execution successful`).
    pub fn text(&self) -> String {
        match self {
            Status::Passed(m) => format!("Passed. {m}"),
            Status::Skipped(m) => format!("Passed. Skipped: {m}"),
            Status::Failed(m) => format!("Failed. {m}"),
            Status::Error(m) => format!("Error. {m}"),
            Status::NotRun(m) => format!("Not run. Test does not meet platform requirements: {m}"),
            Status::Filtered => "Not run. Filtered".into(),
        }
    }
}

/// One test's result.
#[derive(Clone, Debug)]
pub struct TestOutcome {
    /// The test name.
    pub name: String,
    /// How it ended.
    pub status: Status,
    /// The `.jtr` record, if one was written.
    pub jtr: Option<PathBuf>,
    /// Wall time.
    pub elapsed: Duration,
}

/// Whether a found test is selected by mode and keywords.
pub fn selected(found: &Found, cfg: &RunConfig) -> bool {
    let Ok(d) = &found.parsed else { return true }; // malformed tests are reported, never skipped
    let mode_ok = match cfg.mode {
        Mode::Automatic => !d.is_manual(),
        Mode::Manual => d.is_manual(),
    };
    let kw = d.keywords();
    let kw_ok = cfg.keywords.as_ref().is_none_or(|e| {
        e.eval_bool(&|n| Some((kw.iter().any(|k| k == n)).to_string()))
            .unwrap_or(false)
    });
    mode_ok && kw_ok
}

/// Evaluates a test's `@requires`; `Ok(None)` when all hold, `Ok(Some(expr))` for the first
/// that does not, `Err` for one that cannot be evaluated.
pub fn check_requires(d: &TestDescription, props: &Props) -> Result<Option<String>, String> {
    for (src, e) in &d.requires {
        match e.eval_bool(&|n| props.get(n)) {
            Ok(true) => {}
            Ok(false) => return Ok(Some(src.clone())),
            Err(err) => return Err(format!("invalid @requires '{src}': {err}")),
        }
    }
    Ok(None)
}

/// What one action produced.
struct ActionRun {
    command: Vec<String>,
    stdout: String,
    stderr: String,
    status: Status,
    started: SystemTime,
    elapsed: Duration,
}

fn run_action(
    a: &Action,
    d: &TestDescription,
    suite: &Suite,
    cfg: &RunConfig,
    scratch: &Path,
) -> ActionRun {
    let mut command: Vec<String> = vec![cfg.test_vm.to_string_lossy().into_owned()];
    if a.kind == ActionKind::Main {
        command.extend(cfg.vm_options.iter().cloned());
    }
    command.extend(a.vm_options.iter().cloned());
    command.push(a.main.clone());
    command.extend(a.args.iter().cloned());
    let started = SystemTime::now();
    let start = Instant::now();
    let test_src = suite.root.join(d.file.parent().unwrap_or(Path::new("")));
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .current_dir(scratch)
        .env(TESTVM_ENV, &cfg.test_vm)
        .env(VMOPTS_ENV, cfg.vm_options.join(" "))
        .env(TESTSRC_ENV, &test_src)
        .env("TESTROOT", &suite.root)
        .env_remove("RTVM_OPTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return ActionRun {
                command,
                stdout: String::new(),
                stderr: String::new(),
                status: Status::Error(format!(
                    "Cannot start the test VM {}: {e}",
                    cfg.test_vm.display()
                )),
                started,
                elapsed: start.elapsed(),
            }
        }
    };
    let mut out_pipe = child.stdout.take().expect("piped");
    let mut err_pipe = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let limit =
        (a.timeout > 0).then(|| Duration::from_secs_f64(a.timeout as f64 * cfg.timeout_factor));
    let mut timed_out = false;
    let exit = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        if limit.is_some_and(|l| start.elapsed() > l) {
            timed_out = true;
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    let elapsed = start.elapsed();
    use std::os::unix::process::ExitStatusExt;
    let status = if timed_out {
        Status::Error(format!(
            "Program `{}' timed out (timeout set to {}ms, elapsed time including timeout handling was {}ms).",
            command[0],
            limit.map_or(0, |l| l.as_millis()),
            elapsed.as_millis()
        ))
    } else {
        match exit {
            None => Status::Error("Lost track of the test VM process".into()),
            Some(s) => {
                let code = s.code();
                let skipped =
                    code == Some(SKIP_STATUS) && stderr.contains("jtreg.SkippedException:");
                let ok = code == Some(0);
                let describe = || match (code, s.signal()) {
                    (Some(c), _) => format!("exit code: {c}"),
                    (None, Some(sig)) => format!("exit code: {} (signal {sig})", 128 + sig),
                    (None, None) => "unknown exit".into(),
                };
                if skipped {
                    let reason = stderr
                        .lines()
                        .find_map(|l| {
                            l.split_once("jtreg.SkippedException: ")
                                .map(|(_, r)| r.to_owned())
                        })
                        .unwrap_or_default();
                    Status::Skipped(format!("jtreg.SkippedException: {reason}"))
                } else if a.fail {
                    if ok {
                        Status::Failed("Execution passed unexpectedly".into())
                    } else {
                        Status::Passed(format!("Execution failed as expected [{}]", describe()))
                    }
                } else if ok {
                    Status::Passed("Execution successful".into())
                } else if let Some(e) = stderr
                    .lines()
                    .find(|l| l.starts_with("Exception in thread \"main\" "))
                {
                    Status::Failed(format!(
                        "Execution failed: `main' threw exception: {}",
                        &e["Exception in thread \"main\" ".len()..]
                    ))
                } else {
                    Status::Failed(format!("Unexpected exit from test [{}]", describe()))
                }
            }
        }
    };
    ActionRun {
        command,
        stdout,
        stderr,
        status,
        started,
        elapsed,
    }
}

fn fmt_elapsed(d: Duration) -> String {
    let ms = d.as_millis();
    format!(
        "{ms} {}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

fn fmt_time(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    format!("{secs}")
}

/// Escapes like `.jtr` files: `\` and non-ASCII characters.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' | '\t' => out.push(c),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
        }
    }
    out
}

fn section(out: &mut String, name: &str, body: &str) {
    let lines = body.lines().count();
    let _ = writeln!(out, "----------{name}:({lines}/{})----------", body.len());
    out.push_str(&escape(body));
    if !body.is_empty() && !body.ends_with('\n') {
        out.push('\n');
    }
}

/// Where a test's `.jtr` goes: the source path mirrored, `_<id>` appended.
pub fn jtr_path(work: &Path, d: &TestDescription) -> PathBuf {
    let mut p = work.join(&d.file);
    let stem = p
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("test")
        .to_owned();
    let name = match &d.id {
        Some(id) => format!("{stem}_{id}.jtr"),
        None => format!("{stem}.jtr"),
    };
    p.set_file_name(name);
    p
}

fn write_jtr(
    path: &Path,
    d: &TestDescription,
    suite: &Suite,
    props: &Props,
    runs: &[ActionRun],
    status: &Status,
    elapsed: Duration,
) {
    let mut s = String::new();
    let _ = writeln!(s, "#Test Results (version 2)");
    let _ = writeln!(s, "#-----testdescription-----");
    let _ = writeln!(s, "$file={}", suite.root.join(&d.file).display());
    let _ = writeln!(s, "$root={}", suite.root.display());
    if let Some(id) = &d.id {
        let _ = writeln!(s, "id={id}");
    }
    let _ = writeln!(s, "keywords={}", d.keywords().join(" "));
    let runs_text: Vec<String> = d
        .actions
        .iter()
        .map(|a| format!("USER_SPECIFIED {}", a.text))
        .collect();
    let _ = writeln!(s, "run={}", runs_text.join("\\n"));
    let reqs: Vec<&str> = d.requires.iter().map(|(r, _)| r.as_str()).collect();
    if !reqs.is_empty() {
        let _ = writeln!(s, "requires={}", reqs.join(" & "));
    }
    let _ = writeln!(
        s,
        "source={}",
        d.file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    if let Some(t) = &d.summary {
        let _ = writeln!(s, "title={t}");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "#-----environment-----");
    for (k, v) in props.entries() {
        let _ = writeln!(s, "{k}={v}");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "#-----testresult-----");
    let _ = writeln!(s, "elapsed={}", fmt_elapsed(elapsed));
    let _ = writeln!(s, "environment=regtest");
    let _ = writeln!(s, "execStatus={}", status.text());
    let _ = writeln!(s, "harnessVersion=rtvm-jtreg {}", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(s, "test={}", d.name());
    let _ = writeln!(s);
    for (run, action) in runs.iter().zip(&d.actions) {
        let _ = writeln!(s, "#section:{}", action.section_name());
        let messages = format!(
            "command: {}\nreason: User specified action: run {}\nstarted: {}\nCommand line: [{}]\nelapsed time (seconds): {:.3}\n",
            action.section_name(),
            action.text,
            fmt_time(run.started),
            run.command.join(" "),
            run.elapsed.as_secs_f64()
        );
        section(&mut s, "messages", &messages);
        section(&mut s, "System.out", &run.stdout);
        section(&mut s, "System.err", &run.stderr);
        section(
            &mut s,
            "rerun",
            &format!(
                "cd {} && \\\n{}\n",
                suite.root.display(),
                run.command.join(" ")
            ),
        );
        let _ = writeln!(s, "result: {}", run.status.text());
        let _ = writeln!(s);
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "test result: {}", status.text());
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(path, s);
}

/// Runs one found test (selection already done). Writes its `.jtr`.
pub fn run_test(
    found: &Found,
    suite: &Suite,
    cfg: &RunConfig,
    props: &Props,
    scratch: &Path,
    main_exists: &dyn Fn(&str) -> bool,
) -> TestOutcome {
    let start = Instant::now();
    let d = match &found.parsed {
        Ok(d) => d,
        Err(e) => {
            return TestOutcome {
                name: found.name(&suite.root),
                status: Status::Error(e.to_string()),
                jtr: None,
                elapsed: start.elapsed(),
            };
        }
    };
    let name = d.name();
    let status = match check_requires(d, props) {
        Err(m) => Some(Status::Error(m)),
        Ok(Some(failed)) => Some(Status::NotRun(failed)),
        Ok(None) => d.actions.iter().find(|a| !main_exists(&a.main)).map(|a| {
            Status::Error(format!(
                "main '{}' is not registered in the test VM (line {})",
                a.main, a.line
            ))
        }),
    };
    if let Some(status) = status {
        let jtr = jtr_path(&cfg.work_dir, d);
        if !matches!(status, Status::NotRun(_)) {
            write_jtr(&jtr, d, suite, props, &[], &status, start.elapsed());
        }
        return TestOutcome {
            name,
            status,
            jtr: Some(jtr),
            elapsed: start.elapsed(),
        };
    }
    let _ = std::fs::remove_dir_all(scratch);
    let _ = std::fs::create_dir_all(scratch);
    let mut runs = Vec::new();
    let mut status = Status::Passed("Execution successful".into());
    for a in &d.actions {
        let r = run_action(a, d, suite, cfg, scratch);
        let s = r.status.clone();
        runs.push(r);
        match s {
            Status::Passed(_) => status = Status::Passed("Execution successful".into()),
            other => {
                status = other;
                break;
            }
        }
    }
    let jtr = jtr_path(&cfg.work_dir, d);
    write_jtr(&jtr, d, suite, props, &runs, &status, start.elapsed());
    TestOutcome {
        name,
        status,
        jtr: Some(jtr),
        elapsed: start.elapsed(),
    }
}

/// Counts per status and jtreg's summary line and exit code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Passed (including skipped).
    pub passed: usize,
    /// Skipped (also counted in `passed`).
    pub skipped: usize,
    /// Failed.
    pub failed: usize,
    /// Error.
    pub error: usize,
    /// `@requires` false.
    pub not_run: usize,
    /// Filtered by mode or keywords.
    pub filtered: usize,
}

impl Summary {
    /// Tallies outcomes.
    pub fn of(outcomes: &[TestOutcome]) -> Summary {
        let mut s = Summary::default();
        for o in outcomes {
            match o.status {
                Status::Passed(_) => s.passed += 1,
                Status::Skipped(_) => {
                    s.passed += 1;
                    s.skipped += 1
                }
                Status::Failed(_) => s.failed += 1,
                Status::Error(_) => s.error += 1,
                Status::NotRun(_) => s.not_run += 1,
                Status::Filtered => s.filtered += 1,
            }
        }
        s
    }

    /// `Test results: passed: N; failed: M; error: K; ...` with zero counts omitted.
    pub fn line(&self) -> String {
        if self.passed + self.failed + self.error + self.not_run == 0 {
            return "Test results: no tests selected".into();
        }
        let mut parts = Vec::new();
        for (n, label) in [
            (self.passed, "passed"),
            (self.failed, "failed"),
            (self.error, "error"),
            (self.skipped, "skipped"),
            (self.not_run, "did not meet platform requirements"),
            (self.filtered, "did not match keywords"),
        ] {
            if n > 0 {
                parts.push(format!("{label}: {n}"));
            }
        }
        format!("Test results: {}", parts.join("; "))
    }

    /// jtreg's exit code: 3 for errors, 2 for failures, 1 when no test ran, else 0.
    pub fn exit_code(&self) -> i32 {
        if self.error > 0 {
            3
        } else if self.failed > 0 {
            2
        } else if self.passed == 0 {
            1
        } else {
            0
        }
    }
}

/// Runs every found test with `cfg.concurrency` workers; outcomes in input order.
pub fn run_all(
    found: &[Found],
    suite: &Suite,
    cfg: &RunConfig,
    props: &Props,
    main_exists: &(dyn Fn(&str) -> bool + Sync),
) -> Vec<TestOutcome> {
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<TestOutcome>>> = Mutex::new(vec![None; found.len()]);
    std::thread::scope(|s| {
        for worker in 0..cfg.concurrency.max(1) {
            let (next, results) = (&next, &results);
            s.spawn(move || {
                let scratch = cfg.work_dir.join("scratch").join(worker.to_string());
                loop {
                    let i = {
                        let mut n = next.lock().unwrap_or_else(|p| p.into_inner());
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(f) = found.get(i) else { break };
                    let outcome = if selected(f, cfg) {
                        run_test(f, suite, cfg, props, &scratch, main_exists)
                    } else {
                        TestOutcome {
                            name: f.name(&suite.root),
                            status: Status::Filtered,
                            jtr: None,
                            elapsed: Duration::ZERO,
                        }
                    };
                    if (cfg.verbose
                        || matches!(outcome.status, Status::Failed(_) | Status::Error(_)))
                        && !matches!(outcome.status, Status::Filtered)
                    {
                        println!(
                            "{}: {}  {}",
                            verdict(&outcome.status),
                            outcome.name,
                            outcome.status.text()
                        );
                    }
                    results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(outcome);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

fn verdict(s: &Status) -> &'static str {
    match s {
        Status::Passed(_) | Status::Skipped(_) => "Passed",
        Status::Failed(_) => "FAILED",
        Status::Error(_) => "Error",
        Status::NotRun(_) | Status::Filtered => "Not run",
    }
}

/// Writes `text/summary.txt` under the report directory.
pub fn write_report(report_dir: &Path, outcomes: &[TestOutcome]) -> std::io::Result<PathBuf> {
    let dir = report_dir.join("text");
    std::fs::create_dir_all(&dir)?;
    let mut s = String::new();
    for o in outcomes.iter().filter(|o| o.status != Status::Filtered) {
        let _ = writeln!(s, "{}  {}", o.name, o.status.text());
    }
    let path = dir.join("summary.txt");
    std::fs::write(&path, s)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines_and_codes() {
        let mk = |status| TestOutcome {
            name: "t".into(),
            status,
            jtr: None,
            elapsed: Duration::ZERO,
        };
        let s = Summary::of(&[
            mk(Status::Passed("x".into())),
            mk(Status::Failed("y".into())),
            mk(Status::Error("z".into())),
        ]);
        assert_eq!(s.line(), "Test results: passed: 1; failed: 1; error: 1");
        assert_eq!(s.exit_code(), 3);
        let s = Summary::of(&[
            mk(Status::Passed("x".into())),
            mk(Status::Skipped("r".into())),
        ]);
        assert_eq!(s.line(), "Test results: passed: 2; skipped: 1");
        assert_eq!(s.exit_code(), 0);
        let s = Summary::of(&[mk(Status::Failed("y".into()))]);
        assert_eq!(s.exit_code(), 2);
        assert_eq!(Summary::of(&[]).line(), "Test results: no tests selected");
        assert_eq!(Summary::of(&[]).exit_code(), 1);
        let s = Summary::of(&[mk(Status::NotRun("r".into()))]);
        assert_eq!(
            s.line(),
            "Test results: did not meet platform requirements: 1"
        );
        assert_eq!(s.exit_code(), 1);
    }

    #[test]
    fn escapes() {
        assert_eq!(escape("a\\b é\n"), "a\\\\b \\u00e9\n");
        assert_eq!(
            fmt_elapsed(Duration::from_millis(3_723_004)),
            "3723004 1:02:03.004"
        );
    }
}
