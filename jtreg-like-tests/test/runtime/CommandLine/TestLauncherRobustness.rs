/*
 * @test id=non-utf8
 * @summary Arguments, RTVM_OPTIONS and options files with bytes that are not UTF-8 are read
 *          as bytes and reported with the message their text earns (lossily printed), exit 1
 *          — never a panic, never silently dropped, never "Could not open"
 * @requires os.family == "linux"
 * @run driver TestLauncherRobustness non-utf8
 */

/*
 * @test id=unbounded-files
 * @summary /dev/zero as an options file is read as HotSpot reads it (its st_size: nothing),
 *          as a settings file with a bound; a directory is "Could not read"; compared with java
 * @requires os.family == "linux"
 * @run driver TestLauncherRobustness unbounded-files
 */

/*
 * @test id=broken-outputs
 * @summary -version, -help and --help into a full disk or a closed pipe end quietly with
 *          java's status; IdleThreads with a failing stdout or a hold that is no duration
 *          exits 1 within seconds, its threads stopped
 * @requires os.family == "linux"
 * @run driver TestLauncherRobustness broken-outputs
 */

/*
 * @test id=absurd-counts
 * @summary IdleThreads with a count no machine can start ends with the thread-creation
 *          error of the thread that failed, every started thread stopped — no 16 TB
 *          allocation, no capacity overflow
 * @requires os.family == "linux"
 * @run driver TestLauncherRobustness absurd-counts
 */

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use rtvm_jtreg::testlib::*;

fn bytes(b: &[u8]) -> OsString {
    OsString::from_vec(b.to_vec())
}

fn vm(args: &[OsString]) -> Command {
    let mut c = Command::new(test_vm());
    c.args(args).env_remove("RTVM_OPTIONS");
    c
}

fn non_utf8() -> TestResult {
    let out = ProcessTools::execute(vm(&[bytes(b"-XX:+Fo\xffo"), "-version".into()]))?;
    out.should_have_exit_value(1)?
        .stderr_should_contain("Unrecognized VM option 'Fo\u{FFFD}o'")?
        .should_not_contain("panicked")?;
    let out = ProcessTools::execute(vm(&[bytes(b"-Xfoo\xfe"), "-version".into()]))?;
    out.should_have_exit_value(1)?.stderr_should_contain("Unrecognized option: -Xfoo\u{FFFD}")?;
    let out = ProcessTools::execute(vm(&["IdleThreads".into(), bytes(b"1\xff")]))?;
    out.should_have_exit_value(1)?.stderr_should_contain("usage: IdleThreads")?;
    let out = ProcessTools::execute(vm(&[bytes(b"Main\xff")]))?;
    out.should_have_exit_value(1)?.stderr_should_contain("Error: Could not find or load main class Main\u{FFFD}")?;

    let mut c = vm(&["-version".into()]);
    c.env("RTVM_OPTIONS", bytes(b"-Xmx64m -XX:+Fo\xffo"));
    let out = ProcessTools::execute(c)?;
    out.should_have_exit_value(1)?
        .stderr_should_contain("Picked up RTVM_OPTIONS: -Xmx64m -XX:+Fo\u{FFFD}o")?
        .stderr_should_contain("Unrecognized VM option 'Fo\u{FFFD}o'")?;

    std::fs::write("bad.opts", b"-Xmx64m \xff\xfe")?;
    let out = ProcessTools::execute(vm(&["-XX:VMOptionsFile=bad.opts".into(), "-version".into()]))?;
    out.should_have_exit_value(1)?
        .stderr_should_contain("Unrecognized option: \u{FFFD}\u{FFFD}")?
        .should_not_contain("Could not open")?;
    std::fs::write("bad.flags", b"+Fo\xffo\n")?;
    let out = ProcessTools::execute(vm(&["-XX:Flags=bad.flags".into(), "-version".into()]))?;
    out.should_have_exit_value(1)?
        .stderr_should_contain("Unrecognized VM option 'Fo\u{FFFD}o'")?
        .should_not_contain("Could not open")?;
    Ok(())
}

/// The same command line through `java` and the test VM: same exit status, and each of
/// `lines` in both outputs.
fn same_as_java(args: &[&str], lines: &[&str]) -> TestResult {
    let ours = ProcessTools::execute_within(ProcessTools::create_limited_test_vm(args), Duration::from_secs(20))?;
    for l in lines {
        ours.should_contain(l)?;
    }
    let Some(theirs) = JavaTools::execute(args)? else {
        return Ok(());
    };
    for l in lines {
        theirs.should_contain(l)?;
    }
    check(ours.exit == theirs.exit, || format!("exit {} here, {} with java: {args:?}", ours.exit, theirs.exit))?;
    Ok(())
}

fn unbounded_files() -> TestResult {
    // java reads st_size bytes of an options file: /dev/zero has none.
    same_as_java(&["-XX:VMOptionsFile=/dev/zero", "-version"], &[])?;
    // A settings file is read to its end, but /dev/zero never ends: rtvm stops at 1 MiB, java
    // at its 1023-character token buffer; both see one empty option.
    same_as_java(&["-XX:Flags=/dev/zero", "-version"], &["Unrecognized VM option ''"])?;
    same_as_java(&["-XX:VMOptionsFile=.", "-version"], &["Could not read options file '.'"])?;
    same_as_java(&["-XX:Flags=.", "-version"], &[])?;
    same_as_java(&["-XX:VMOptionsFile=/nonexistent", "-version"], &["Could not open options file '/nonexistent'"])?;
    Ok(())
}

/// Runs the test VM with stdout or stderr going to `/dev/full`, or to a pipe nobody reads.
fn broken(args: &[&str], stdout: bool, full: bool) -> Result<i32, TestFailure> {
    let mut c = ProcessTools::create_limited_test_vm(args);
    let sink = || -> Result<Stdio, TestFailure> {
        if full {
            Ok(std::fs::OpenOptions::new().write(true).open("/dev/full").map_err(|e| TestFailure(e.to_string()))?.into())
        } else {
            Ok(Stdio::piped())
        }
    };
    if stdout {
        c.stdout(sink()?).stderr(Stdio::piped());
    } else {
        c.stderr(sink()?).stdout(Stdio::piped());
    }
    let mut child = c.spawn().map_err(|e| TestFailure(e.to_string()))?;
    // A closed pipe: the reading end goes away before anything is written.
    drop(child.stdout.take());
    drop(child.stderr.take());
    let start = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().map_err(|e| TestFailure(e.to_string()))? {
            use std::os::unix::process::ExitStatusExt;
            check(s.signal().is_none(), || format!("{args:?} died of signal {:?}", s.signal()))?;
            return Ok(s.code().unwrap_or(-1));
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            return Err(TestFailure(format!("{args:?} hung with a broken output")));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn broken_outputs() -> TestResult {
    for full in [true, false] {
        // As java: output it cannot write is dropped, the status stays 0.
        check(broken(&["-version"], false, full)? == 0, || "-version".into())?;
        check(broken(&["-help"], false, full)? == 0, || "-help".into())?;
        check(broken(&["--help"], true, full)? == 0, || "--help".into())?;
        // The main's own output failing is the main's failure: exit 1, threads stopped.
        let code = broken(&["-Xmx64m", "IdleThreads", "2"], true, full)?;
        check(code == 1, || format!("IdleThreads into a broken stdout exited {code}"))?;
    }
    let out = ProcessTools::execute_within(ProcessTools::create_limited_test_vm(&["IdleThreads", "2", "1e20"]), Duration::from_secs(20))?;
    out.should_have_exit_value(1)?.stderr_should_contain("usage: IdleThreads <count> [<hold-seconds>]")?;
    for hold in ["-1", "NaN", "inf"] {
        let out = ProcessTools::execute_within(ProcessTools::create_limited_test_vm(&["IdleThreads", "2", hold]), Duration::from_secs(20))?;
        out.should_have_exit_value(1)?;
    }
    Ok(())
}

fn absurd_counts() -> TestResult {
    for count in ["1000000000000", "18446744073709551615"] {
        // An address-space limit makes the machine's end come after a few hundred threads
        // instead of ~16,000 (vm.max_map_count); before the fix both counts died at start-up.
        let mut c = ProcessTools::create_limited_test_vm(&["-Xmx32m", "-Xss256k", "IdleThreads", count]);
        c.env(rtvm_jtreg::RLIMITS_ENV, "as=2g");
        let out = ProcessTools::execute_within(c, Duration::from_secs(100))?;
        out.should_have_exit_value(1)?
            .should_match(&format!(
                "Exception in thread \"main\" Failed to start thread \"Idle#[0-9]+\" - [a-z_]+ failed \\([A-Z]+\\) for attributes: .*\\([0-9]+ of {count} threads had started; all stopped\\)"
            ))?
            .should_not_contain("panicked")?
            .should_not_contain("memory allocation")?;
    }
    let out = ProcessTools::execute(ProcessTools::create_limited_test_vm(&["IdleThreads", "18446744073709551616"]))?;
    out.should_have_exit_value(1)?.stderr_should_contain("usage: IdleThreads")?;
    Ok(())
}

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("non-utf8") => non_utf8(),
        Some("unbounded-files") => unbounded_files(),
        Some("broken-outputs") => broken_outputs(),
        Some("absurd-counts") => absurd_counts(),
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
