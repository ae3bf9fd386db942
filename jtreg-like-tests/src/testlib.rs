//! What test mains use: `ProcessTools`/`OutputAnalyzer`-style helpers to start child test
//! VMs and check what they print, skips, and failures.
//!
//! ```no_run
//! use rtvm_jtreg::testlib::*;
//!
//! // A test file's `pub fn main` has this signature.
//! pub fn run(_vm: &rtvm::Vm, _args: &[String]) -> TestResult {
//!     let out = ProcessTools::execute_test_vm(&["-XX:+Foo", "-version"])?;
//!     out.should_contain("Unrecognized VM option 'Foo'")?.should_have_exit_value(1)?;
//!     Ok(())
//! }
//! ```

use std::fmt;
use std::process::{Command, Stdio};

pub use rtvm::Vm;
pub use rtvm_launcher::{Exit, MainResult as TestResult};

pub use crate::cgroup::MemoryCgroup;

use regex::Regex;

/// The exit status a test VM uses for a skipped test (with `jtreg.SkippedException: <reason>`
/// on stderr).
pub const SKIP_STATUS: i32 = 95;

/// The environment variable holding the path of the test VM binary (set by the runner).
pub const TESTVM_ENV: &str = "RTVM_TESTVM";
/// The environment variable holding the run's `-vmoptions` (jtreg's `TESTVMOPTS`).
pub const VMOPTS_ENV: &str = "TESTVMOPTS";
/// The test source directory (jtreg's `TESTSRC`).
pub const TESTSRC_ENV: &str = "TESTSRC";

/// Skips the test with a reason (jtreg's `SkippedException`): counted as passed and skipped.
pub fn skip(reason: impl Into<String>) -> TestResult {
    Err(Box::new(Exit {
        status: SKIP_STATUS,
        message: Some(format!("jtreg.SkippedException: {}", reason.into())),
    }))
}

/// A tool the test needs (`cc`, `java`, `valgrind`): `Ok` when `present`; otherwise the test
/// is skipped naming it — or fails, when `RTVM_CI` says this is a CI machine, which has the
/// tool (a check silently lost there is a defect).
pub fn require_tool(tool: &str, present: bool) -> TestResult {
    if present {
        return Ok(());
    }
    if std::env::var_os(rtvm_testkit::CI_ENV).is_some() {
        return Err(Box::new(TestFailure(format!(
            "{tool} is not installed, and {} is set: CI machines have it",
            rtvm_testkit::CI_ENV
        ))));
    }
    skip(format!("{tool} is not installed"))
}

/// A test failure (jtreg's `RuntimeException`), with its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestFailure(pub String);

impl fmt::Display for TestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "java.lang.RuntimeException: {}", self.0)
    }
}

impl std::error::Error for TestFailure {}

/// Fails the test unless `cond` holds.
pub fn check(cond: bool, message: impl FnOnce() -> String) -> Result<(), TestFailure> {
    if cond {
        Ok(())
    } else {
        Err(TestFailure(message()))
    }
}

/// The `-vmoptions` of the run (from `TESTVMOPTS`).
pub fn test_vm_options() -> Vec<String> {
    std::env::var(VMOPTS_ENV)
        .map(|v| v.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The test VM binary.
pub fn test_vm() -> String {
    std::env::var(TESTVM_ENV).unwrap_or_else(|_| {
        std::env::args()
            .next()
            .unwrap_or_else(|| "rtvm-testvm".into())
    })
}

/// Starting child test VMs.
#[derive(Debug)]
pub struct ProcessTools;

impl ProcessTools {
    /// A command for a child test VM with the run's `-vmoptions` first, then `args`
    /// (`createTestJavaProcessBuilder`).
    pub fn create_test_vm(args: &[&str]) -> Command {
        let mut c = Command::new(test_vm());
        c.args(test_vm_options()).args(args);
        c
    }

    /// A command for a child test VM with only `args` (`createLimitedTestJavaProcessBuilder`;
    /// pair with `@requires vm.flagless`).
    pub fn create_limited_test_vm(args: &[&str]) -> Command {
        let mut c = Command::new(test_vm());
        c.args(args);
        c
    }

    /// Runs a child test VM with only `args`, under soft resource limits it sets on itself
    /// before anything else (`limits`: `as=2g,data=256m,nproc=…,nofile=…`).
    pub fn execute_with_rlimits(
        limits: &str,
        args: &[&str],
    ) -> Result<OutputAnalyzer, TestFailure> {
        let mut c = Self::create_limited_test_vm(args);
        c.env(crate::RLIMITS_ENV, limits);
        Self::execute(c)
    }

    /// Runs a command to completion and captures both streams.
    pub fn execute(mut command: Command) -> Result<OutputAnalyzer, TestFailure> {
        let line = describe(&command);
        println!("Command line: [{line}]");
        let out = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| TestFailure(format!("cannot start [{line}]: {e}")))?;
        use std::os::unix::process::ExitStatusExt;
        let exit = out
            .status
            .code()
            .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
        Ok(OutputAnalyzer {
            command: line,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            exit,
            signal: out.status.signal(),
        })
    }

    /// Starts a command and returns at once; its stdout can be watched line by line while it
    /// runs (e.g. to read `/proc/<pid>/smaps` while a child VM holds its threads).
    pub fn start(mut command: Command) -> Result<RunningProcess, TestFailure> {
        let line = describe(&command);
        println!("Command line: [{line}]");
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| TestFailure(format!("cannot start [{line}]: {e}")))?;
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        let out_thread = std::thread::spawn(move || {
            use std::io::BufRead;
            let mut all = String::new();
            for l in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                all.push_str(&l);
                all.push('\n');
                let _ = tx.send(l);
            }
            all
        });
        let err_thread = std::thread::spawn(move || {
            use std::io::Read;
            let mut v = Vec::new();
            let _ = stderr.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        });
        Ok(RunningProcess {
            child,
            command: line,
            lines: rx,
            out_thread,
            err_thread,
        })
    }

    /// Runs a command like [`execute`](ProcessTools::execute), but kills it (and fails) if it
    /// has not ended within `limit`: for checks that something ends promptly, not only that
    /// it ends.
    pub fn execute_within(
        command: Command,
        limit: std::time::Duration,
    ) -> Result<OutputAnalyzer, TestFailure> {
        let start = std::time::Instant::now();
        let mut running = Self::start(command)?;
        loop {
            match running.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if start.elapsed() > limit => {
                    let _ = running.child.kill();
                    let out = running.finish()?;
                    return Err(out.fail(format!(
                        "did not end within {limit:?} (killed after {:?})",
                        start.elapsed()
                    )));
                }
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
                Err(e) => return Err(TestFailure(format!("waiting: {e}"))),
            }
        }
        let out = running.finish()?;
        println!("ended after {:?}", start.elapsed());
        Ok(out)
    }

    /// `create_test_vm` + `execute`.
    pub fn execute_test_vm(args: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
        Self::execute(Self::create_test_vm(args))
    }

    /// `create_limited_test_vm` + `execute`.
    pub fn execute_limited_test_vm(args: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
        Self::execute(Self::create_limited_test_vm(args))
    }
}

/// `java`, the reference VM, where it is installed: tests compare with it rather than with
/// a recorded string.
#[derive(Debug)]
pub struct JavaTools;

impl JavaTools {
    /// Whether `java -version` runs here. With `RTVM_CI` set a missing java fails the test
    /// (a panic): CI machines have it, and a comparison silently lost there is a defect.
    pub fn available() -> bool {
        static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let available = *AVAILABLE.get_or_init(|| {
            Command::new("java")
                .arg("-version")
                .env_remove("JAVA_TOOL_OPTIONS")
                .output()
                .is_ok_and(|o| o.status.success())
        });
        assert!(
            available || std::env::var_os(rtvm_testkit::CI_ENV).is_none(),
            "java is not installed, and {} is set: CI machines have it",
            rtvm_testkit::CI_ENV
        );
        available
    }

    /// Runs `java args` (without `JAVA_TOOL_OPTIONS`); `None`, with the reason printed, when
    /// `java` is not installed.
    pub fn execute(args: &[&str]) -> Result<Option<OutputAnalyzer>, TestFailure> {
        if !Self::available() {
            println!(
                "java is not installed here: compared with HotSpot 17's recorded behaviour only"
            );
            return Ok(None);
        }
        let mut java = Command::new("java");
        java.args(args).env_remove("JAVA_TOOL_OPTIONS");
        ProcessTools::execute(java).map(Some)
    }
}

impl JavaTools {
    /// Compiles `source`, the Java source of the public class `class`, with `javac` into the
    /// directory `java-<class>` of the working directory (the test's scratch directory) and
    /// returns that directory, for `-cp`; `None`, with the reason printed, when `java` or
    /// `javac` is not installed (with `RTVM_CI` set a missing java fails, see
    /// [`available`](Self::available)).
    pub fn compile(class: &str, source: &str) -> Result<Option<String>, TestFailure> {
        if !Self::available() || crate::service::jdk_tool("javac").is_none() {
            println!("java (javac) is not installed here: {class} not compiled, not compared");
            return Ok(None);
        }
        let dir = std::env::current_dir()
            .map_err(|e| TestFailure(format!("the working directory: {e}")))?
            .join(format!("java-{class}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| TestFailure(format!("{}: {e}", dir.display())))?;
        let file = dir.join(format!("{class}.java"));
        std::fs::write(&file, source)
            .map_err(|e| TestFailure(format!("{}: {e}", file.display())))?;
        let dir = dir.display().to_string();
        let out = crate::service::tool(
            "javac",
            &["-nowarn", "-d", &dir, &file.display().to_string()],
        )?;
        out.should_have_exit_value(0)?;
        Ok(Some(dir))
    }
}

/// A log line's shape, to compare rtvm's with java's: the decorations' uptime dropped,
/// hexadecimal numbers `0xADDR`, every other run of digits `N`, text in double quotes kept as it is
/// (`[warning][safepoint] # "Straggler" #N nid=0xADDR runnable`).
pub fn line_shape(line: &str) -> String {
    static HEX: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let hex = HEX.get_or_init(|| Regex::new("0x[0-9a-fA-F]+").expect("a valid pattern"));
    let line = uptime().replace(line, "");
    let line = hex.replace_all(&line, "\u{1}");
    let mut s = String::new();
    let (mut quoted, mut digits) = (false, false);
    for ch in line.chars() {
        if ch == '"' {
            quoted = !quoted;
        }
        if !quoted && ch.is_ascii_digit() {
            if !digits {
                s.push('N');
            }
            digits = true;
            continue;
        }
        digits = false;
        s.push(ch);
    }
    // -Xlog pads the level to the widest one seen on the output (`[info   ]`).
    s.replace('\u{1}', "0xADDR")
        .replace("[info   ]", "[info]")
        .replace("[info ]", "[info]")
}

/// `pattern` compiled in multi-line mode, as Java's `Pattern.MULTILINE`.
fn multi_line(pattern: &str) -> Result<Regex, TestFailure> {
    Regex::new(&format!("(?m){pattern}"))
        .map_err(|e| TestFailure(format!("invalid regular expression '{pattern}': {e}")))
}

/// One command line run through the test VM and through `java`, for [`same_as_java`].
#[derive(Clone, Debug, Default)]
pub struct SideBySide<'a> {
    /// The options (and main or `-version`), the same for both.
    pub args: &'a [&'a str],
    /// The options environment variable: `RTVM_OPTIONS` for the test VM, `JAVA_TOOL_OPTIONS`
    /// for java.
    pub env: Option<&'a str>,
    /// Text each run's output must contain (checked even when java is absent).
    pub expect: &'a [&'a str],
}

/// A run's output with what legitimately differs between the VMs made equal: the version
/// banner, the VM's name ("Java Virtual Machine", "Java Runtime Environment", "OpenJDK
/// 64-Bit Server VM"), the options
/// variable's name, addresses.
pub fn normalized(out: &OutputAnalyzer) -> (i32, String, String) {
    let norm = |text: &str| -> String {
        // A banner may continue a line ("Did you mean ...? " has no newline).
        let text = banner().replace_all(text, "");
        text.lines()
            .filter(|l| {
                !(l.starts_with("openjdk version")
                    || l.starts_with("OpenJDK Runtime Environment")
                    || l.starts_with("OpenJDK 64-Bit Server VM (build")
                    || l.starts_with("rtvm version")
                    || l.starts_with("rtvm Runtime Environment")
                    || l.starts_with("rtvm 64-Bit VM"))
            })
            .map(|l| {
                let l = l
                    .replace("Java Virtual Machine", "virtual machine")
                    .replace("Java Runtime Environment", "rtvm Runtime Environment")
                    .replace("OpenJDK 64-Bit Server VM warning", "rtvm warning")
                    .replace("JAVA_TOOL_OPTIONS", "RTVM_OPTIONS");
                let l = hex_addresses().replace_all(&l, "0xADDR");
                uptime().replace_all(&l, "[${1}s]").into_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    (out.exit, norm(&out.stdout), norm(&out.stderr))
}

fn banner() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r#"(?m)(openjdk|rtvm) version "[^"]*".*$"#).expect("a valid pattern")
    })
}

/// The `-Xlog` uptime decoration (`[0.002s]`), which differs from run to run.
fn uptime() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\[\d+\.\d+(m?)s\]").expect("a valid pattern"))
}

fn hex_addresses() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| Regex::new("0x[0-9a-f]{8,16}").expect("a valid pattern"))
}

/// Runs `case` through the test VM and, where it is installed, `java`: the outputs must be
/// the same after [`normalized`], and each contain `case.expect`. Returns the test VM's run.
pub fn same_as_java(case: &SideBySide<'_>) -> Result<OutputAnalyzer, TestFailure> {
    let mut ours = ProcessTools::create_limited_test_vm(case.args);
    ours.env_remove("RTVM_OPTIONS");
    if let Some(v) = case.env {
        ours.env("RTVM_OPTIONS", v);
    }
    let ours = ProcessTools::execute(ours)?;
    for e in case.expect {
        ours.should_contain(e)?;
    }
    if !JavaTools::available() {
        println!(
            "java is not installed here: {:?} checked against its expected text only",
            case.args
        );
        return Ok(ours);
    }
    let mut java = Command::new("java");
    java.args(case.args).env_remove("JAVA_TOOL_OPTIONS");
    if let Some(v) = case.env {
        java.env("JAVA_TOOL_OPTIONS", v);
    }
    let theirs = ProcessTools::execute(java)?;
    let (a, b) = (normalized(&ours), normalized(&theirs));
    check(a == b, || {
        format!(
            "{:?} (env {:?}) differs from java:\n  rtvm: {a:?}\n  java: {b:?}",
            case.args, case.env
        )
    })?;
    Ok(ours)
}

fn describe(c: &Command) -> String {
    let mut s = c.get_program().to_string_lossy().into_owned();
    for a in c.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// A child that is still running.
#[derive(Debug)]
pub struct RunningProcess {
    child: std::process::Child,
    command: String,
    lines: std::sync::mpsc::Receiver<String>,
    out_thread: std::thread::JoinHandle<String>,
    err_thread: std::thread::JoinHandle<String>,
}

impl RunningProcess {
    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until a stdout line contains `needle` and returns it; fails after `timeout` or
    /// when the child's stdout ends first.
    pub fn wait_for_line(
        &mut self,
        needle: &str,
        timeout: std::time::Duration,
    ) -> Result<String, TestFailure> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return Ok(l),
                Ok(_) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    return Err(TestFailure(format!(
                        "no line with '{needle}' within {timeout:?} from [{}]",
                        self.command
                    )))
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(TestFailure(format!(
                        "[{}] ended without printing '{needle}'",
                        self.command
                    )))
                }
            }
        }
    }

    /// Whether the child is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the child (`SIGKILL`); [`finish`](RunningProcess::finish) still collects what
    /// it printed.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Waits for the child to end and returns its whole output.
    pub fn finish(mut self) -> Result<OutputAnalyzer, TestFailure> {
        let status = self
            .child
            .wait()
            .map_err(|e| TestFailure(format!("waiting for [{}]: {e}", self.command)))?;
        let stdout = self.out_thread.join().unwrap_or_default();
        let stderr = self.err_thread.join().unwrap_or_default();
        use std::os::unix::process::ExitStatusExt;
        let exit = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        Ok(OutputAnalyzer {
            command: self.command,
            stdout,
            stderr,
            exit,
            signal: status.signal(),
        })
    }
}

/// The output of a finished child: both streams kept apart, the exit value, and checks
/// whose failure message shows everything (`OutputAnalyzer`).
#[derive(Clone, Debug)]
pub struct OutputAnalyzer {
    /// The command line.
    pub command: String,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// The exit value (128 + signal for a signal death, as a shell reports it).
    pub exit: i32,
    /// The signal that ended the process, if one did.
    pub signal: Option<i32>,
}

impl OutputAnalyzer {
    fn fail(&self, what: String) -> TestFailure {
        TestFailure(format!(
            "{what}\n command: [{}];\n stdout: [{}];\n stderr: [{}]\n exitValue = {}",
            self.command, self.stdout, self.stderr, self.exit
        ))
    }

    /// Both streams.
    pub fn output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// `s` occurs in stdout or stderr.
    pub fn should_contain(&self, s: &str) -> Result<&Self, TestFailure> {
        if self.stdout.contains(s) || self.stderr.contains(s) {
            Ok(self)
        } else {
            Err(self.fail(format!("'{s}' missing from stdout/stderr")))
        }
    }

    /// `s` occurs in neither stream.
    pub fn should_not_contain(&self, s: &str) -> Result<&Self, TestFailure> {
        if self.stdout.contains(s) {
            Err(self.fail(format!("'{s}' found in stdout")))
        } else if self.stderr.contains(s) {
            Err(self.fail(format!("'{s}' found in stderr")))
        } else {
            Ok(self)
        }
    }

    /// `s` occurs in stdout.
    pub fn stdout_should_contain(&self, s: &str) -> Result<&Self, TestFailure> {
        if self.stdout.contains(s) {
            Ok(self)
        } else {
            Err(self.fail(format!("'{s}' missing from stdout")))
        }
    }

    /// `s` occurs in stderr.
    pub fn stderr_should_contain(&self, s: &str) -> Result<&Self, TestFailure> {
        if self.stderr.contains(s) {
            Ok(self)
        } else {
            Err(self.fail(format!("'{s}' missing from stderr")))
        }
    }

    /// The regular expression matches somewhere in stdout or in stderr (`shouldMatch`:
    /// multi-line mode, so `^` and `$` match at line boundaries).
    pub fn should_match(&self, pattern: &str) -> Result<&Self, TestFailure> {
        match self.first_match(pattern)? {
            Some(_) => Ok(self),
            None => Err(self.fail(format!("regex '{pattern}' not found in stdout/stderr"))),
        }
    }

    /// The line (stderr first, as `OutputAnalyzer.firstMatch`) where the regular expression
    /// first matches.
    pub fn first_match(&self, pattern: &str) -> Result<Option<String>, TestFailure> {
        let re = multi_line(pattern)?;
        for text in [&self.stderr, &self.stdout] {
            if let Some(m) = re.find(text) {
                let start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
                let end = text[m.start()..]
                    .find('\n')
                    .map_or(text.len(), |i| m.start() + i);
                return Ok(Some(text[start..end].to_owned()));
            }
        }
        Ok(None)
    }

    /// The named groups (`(?P<name>...)`) of every match of the regular expression in
    /// stdout, then stderr: one map per match, of the groups that took part.
    pub fn named_captures(
        &self,
        pattern: &str,
    ) -> Result<Vec<std::collections::HashMap<String, String>>, TestFailure> {
        let re = multi_line(pattern)?;
        let names: Vec<&str> = re.capture_names().flatten().collect();
        Ok(re
            .captures_iter(&self.stdout)
            .chain(re.captures_iter(&self.stderr))
            .map(|c| {
                names
                    .iter()
                    .filter_map(|n| Some((n.to_string(), c.name(n)?.as_str().to_owned())))
                    .collect()
            })
            .collect())
    }

    /// The exit value is `n`.
    pub fn should_have_exit_value(&self, n: i32) -> Result<&Self, TestFailure> {
        if self.exit == n {
            Ok(self)
        } else {
            Err(self.fail(format!(
                "Expected to get exit value of [{n}], exit value is [{}]",
                self.exit
            )))
        }
    }

    /// The exit value is not `n`.
    pub fn should_not_have_exit_value(&self, n: i32) -> Result<&Self, TestFailure> {
        if self.exit != n {
            Ok(self)
        } else {
            Err(self.fail(format!("Unexpected to get exit value of [{n}]")))
        }
    }

    /// The value after `key=` on the first line containing `prefix` (e.g. the `VmRSS=`
    /// of an `IdleThreads:` line).
    pub fn field(&self, prefix: &str, key: &str) -> Result<String, TestFailure> {
        let line = self
            .stdout
            .lines()
            .find(|l| l.contains(prefix))
            .ok_or_else(|| self.fail(format!("no line containing '{prefix}'")))?;
        let pat = format!("{key}=");
        let at = line
            .find(&pat)
            .ok_or_else(|| self.fail(format!("no '{pat}' in '{line}'")))?;
        Ok(line[at + pat.len()..]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_owned())
    }

    /// A numeric field, see [`field`](Self::field).
    pub fn number(&self, prefix: &str, key: &str) -> Result<u64, TestFailure> {
        let v = self.field(prefix, key)?;
        v.parse()
            .map_err(|_| self.fail(format!("'{key}={v}' is not a number")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oa() -> OutputAnalyzer {
        OutputAnalyzer {
            command: "vm -version".into(),
            stdout: "IdleThreads: threads=3 VmRSS=1234 kB Threads=7\n".into(),
            stderr: "Unrecognized VM option 'Foo'\n".into(),
            exit: 1,
            signal: None,
        }
    }

    #[test]
    fn checks() {
        let o = oa();
        assert!(o.should_contain("Unrecognized").is_ok());
        assert!(o.stderr_should_contain("Unrecognized").is_ok());
        assert!(o.stdout_should_contain("Unrecognized").is_err());
        assert!(o
            .should_not_contain("Foo")
            .unwrap_err()
            .0
            .contains("'Foo' found in stderr"));
        assert!(o.should_match("VmRSS=[0-9]+ kB").is_ok());
        assert!(o.should_match("VmRSS=x").is_err());
        assert!(o.should_match("^IdleThreads: threads=3 ").is_ok());
        assert!(
            o.should_match("^threads=3").is_err(),
            "anchored at the line start"
        );
        assert!(o.should_match("Threads=7$").is_ok());
        assert!(o.should_match("Threads=$").is_err());
        assert_eq!(
            o.first_match("option '.*'").unwrap().as_deref(),
            Some("Unrecognized VM option 'Foo'")
        );
        assert!(o.should_have_exit_value(1).is_ok());
        let e = o.should_have_exit_value(0).unwrap_err().0;
        assert!(
            e.contains("Expected to get exit value of [0]")
                && e.contains("command: [vm -version]")
                && e.contains("exitValue = 1"),
            "{e}"
        );
        assert_eq!(o.number("IdleThreads:", "VmRSS").unwrap(), 1234);
        assert_eq!(o.number("IdleThreads:", "Threads").unwrap(), 7);
        assert!(o.number("IdleThreads:", "Nope").is_err());
    }

    #[test]
    fn line_shapes() {
        assert_eq!(
            line_shape("[0.126s][warning][safepoint] # \"main\" #1 prio=5 tid=0x00007f31c80182e0 nid=0x179f runnable"),
            "[warning][safepoint] # \"main\" #N prio=N tid=0xADDR nid=0xADDR runnable"
        );
        assert_eq!(
            line_shape("[1.5s][info ][handshake] Handshake \"HandshakeALot\", Targeted threads: 12, Total: 3 ns"),
            "[info][handshake] Handshake \"HandshakeALot\", Targeted threads: N, Total: N ns"
        );
    }

    #[test]
    fn skip_carries_the_reason() {
        let e = skip("THP mode is madvise").unwrap_err();
        let exit = e.downcast::<Exit>().unwrap();
        assert_eq!(exit.status, SKIP_STATUS);
        assert_eq!(
            exit.message.as_deref(),
            Some("jtreg.SkippedException: THP mode is madvise")
        );
    }
}
