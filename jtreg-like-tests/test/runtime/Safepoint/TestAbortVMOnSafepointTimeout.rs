/*
 * @test id=blocked-in-libc
 * @bug 8219584 8227528
 * @summary HotSpot's TestAbortVMOnSafepointTimeout in rtvm's terms: under -XX:+SafepointTimeout
 *          -XX:+SafepointALot -XX:+AbortVMOnSafepointTimeout -XX:SafepointTimeoutDelay=50
 *          -XX:GuaranteedSafepointInterval=1, a thread blocked in the C library outside a safe
 *          region (the stop signal never stops a thread there) is reported in java 17's lines —
 *          "Timed out while spinning to reach a safepoint.", the thread by name with what /proc
 *          says of it and where the signal found it (in the C library, at a system call) — and
 *          the VM ends with a fatal error naming
 *          the stop: by SIGABRT, or with exit 1 under -XX:-CreateCoredumpOnCrash
 * @requires os.family == "linux"
 * @run driver TestAbortVMOnSafepointTimeout blocked-in-libc
 */

/*
 * @test id=no-stop-section
 * @summary The same for a thread spinning inside a no-stop section (NoAsyncStop): reported
 *          running, inside the section
 * @requires os.family == "linux"
 * @run driver TestAbortVMOnSafepointTimeout no-stop-section
 */

/*
 * @test id=polling
 * @summary The negative: with the same flags a thread that polls is stopped every interval
 *          (hundreds of stops in 2 s, -Xlog:safepoint) and nothing times out: exit 0. The
 *          delay is 1 s here: on a loaded 2-CPU machine a runnable thread may wait longer
 *          than 50 ms for a CPU — hundreds of ms when the machine is overloaded — and a thread that
 *          does not run reaches no poll (java alike: its polling loops time out at 50 ms then)
 * @requires os.family == "linux"
 * @run driver TestAbortVMOnSafepointTimeout polling
 */

/*
 * @test id=java
 * @summary Side by side with java 17 running HotSpot's own case (a counted int loop compiled
 *          without a safepoint poll: -Xcomp -XX:-UseCountedLoopSafepoints
 *          -XX:LoopStripMiningIter=0): the report's lines have the same shapes in the same order
 *          (the thread's own line and the line under it aside), both print a fatal error
 *          header, and both end the same way — SIGABRT by default, exit 1 with
 *          -XX:-CreateCoredumpOnCrash
 * @requires os.family == "linux"
 * @run driver TestAbortVMOnSafepointTimeout java
 */

use std::process::Command;
use std::time::Duration;

use rtvm_jtreg::testlib::*;

const FLAGS: &[&str] = &[
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:+SafepointTimeout",
    "-XX:+SafepointALot",
    "-XX:+AbortVMOnSafepointTimeout",
    "-XX:SafepointTimeoutDelay=50",
    "-XX:GuaranteedSafepointInterval=1",
];

/// HotSpot's case: a counted loop C2 compiles without a poll.
const SPIN_LOOP: &str = r#"public class SpinLoop {
    public static void main(String[] args) {
        System.out.println("This message would occur after some time with result " + loop(3));
    }
    static int loop(int x) {
        int sum = 0;
        if (x != 0) {
            for (int y = 1; y < Integer.MAX_VALUE; ++y) {
                if (y % x == 0) ++sum;
            }
        }
        return sum;
    }
}
"#;

/// What makes java 17 compile `SpinLoop.loop` without a safepoint poll (HotSpot's test).
const NO_POLL_IN_LOOP: &[&str] = &[
    "-XX:-TieredCompilation",
    "-XX:-UseCountedLoopSafepoints",
    "-XX:LoopStripMiningIter=0",
    "-XX:LoopUnrollLimit=0",
    "-XX:CompileCommand=quiet",
    "-XX:CompileCommand=compileonly,SpinLoop::loop",
    "-Xcomp",
    "-Xms64m",
];

/// `program args`, with core dumps off (an abort must not leave a core in the scratch
/// directory).
fn no_core(program: &str, args: &[&str]) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", "ulimit -c 0 && exec \"$0\" \"$@\"", program]).args(args);
    c
}

fn straggler(extra: &[&str], mode: &str) -> Result<OutputAnalyzer, TestFailure> {
    let mut args: Vec<&str> = FLAGS.to_vec();
    args.extend_from_slice(extra);
    args.extend_from_slice(&["StopStraggler", mode, "30"]);
    let mut c = no_core(&test_vm(), &args);
    c.env_remove("RTVM_OPTIONS");
    ProcessTools::execute_within(c, Duration::from_secs(60))
}

/// The report's lines (`-Xlog:safepoint` warnings on stdout), as shapes.
fn report(out: &OutputAnalyzer) -> Vec<String> {
    out.stdout
        .lines()
        .filter(|l| l.contains("[warning][safepoint]"))
        .map(line_shape)
        .collect()
}

/// The report java 17 prints, in order; the thread's line and the line under it (java: the
/// thread's state; rtvm: what the kernel says of it) are checked apart.
const REPORT: &[&str] = &[
    "[warning][safepoint] ",
    "[warning][safepoint] # SafepointSynchronize::begin: Timeout detected:",
    "[warning][safepoint] # SafepointSynchronize::begin: Timed out while spinning to reach a safepoint.",
    "[warning][safepoint] # SafepointSynchronize::begin: Threads which did not reach the safepoint:",
    "THREAD",
    "STATE",
    "[warning][safepoint] ",
    "[warning][safepoint] # SafepointSynchronize::begin: (End of list)",
];

fn check_report(out: &OutputAnalyzer, thread: &str) -> TestResult {
    let lines = report(out);
    check(lines.len() == REPORT.len(), || format!("the report has {} lines, not {}: {lines:#?}\n{}", lines.len(), REPORT.len(), out.stdout))?;
    for (l, want) in lines.iter().zip(REPORT) {
        match *want {
            "THREAD" => check(
                l.starts_with(&format!("[warning][safepoint] # \"{thread}\" #N ")) && l.contains(" nid=0xADDR runnable"),
                || format!("the thread line: {l}"),
            )?,
            "STATE" => check(l.starts_with("[warning][safepoint]    "), || format!("the line under the thread's: {l}"))?,
            _ => check(l == want, || format!("'{l}' where java prints '{want}'"))?,
        }
    }
    Ok(())
}

fn check_fatal(out: &OutputAnalyzer) -> TestResult {
    out.should_contain("# A fatal error has been detected by rtvm:")?
        .should_contain("#  fatal error: Safepoint sync time longer than 50ms detected when executing None.")?
        .should_not_contain("StopStraggler:")?;
    Ok(())
}

fn aborts(mode: &str, kernel: &[&str]) -> TestResult {
    // The default: the straggler gets SIGABRT (a core would show its stack).
    let out = straggler(&[], mode)?;
    check(out.signal == Some(6), || format!("{mode}: expected death by SIGABRT, got exit {} signal {:?}\n{}{}", out.exit, out.signal, out.stdout, out.stderr))?;
    check_report(&out, "Straggler")?;
    check_fatal(&out)?;
    // What /proc says (a state letter and its word), then what the signal found.
    let state = out.first_match(r"^\[[^]]*\]\[warning\]\[safepoint\]    Kernel: [A-Za-z] \([a-z ]+\)")?.unwrap_or_default();
    check(!state.is_empty(), || format!("no kernel line with a /proc state:\n{}", out.stdout))?;
    for k in kernel {
        check(state.contains(k), || format!("'{k}' missing from the straggler's kernel line: {state}"))?;
    }
    println!("{mode}: {state}");
    // Without core dumps: exit 1, as java.
    let out = straggler(&["-XX:-CreateCoredumpOnCrash"], mode)?;
    out.should_have_exit_value(1)?;
    check(out.signal.is_none(), || format!("a signal death: {:?}", out.signal))?;
    check_report(&out, "Straggler")?;
    check_fatal(&out)?;
    Ok(())
}

fn polling() -> TestResult {
    let mut args: Vec<&str> = FLAGS.to_vec();
    args.extend_from_slice(&["-XX:SafepointTimeoutDelay=1000", "-Xlog:safepoint", "StopStraggler", "polling", "2"]);
    let out = ProcessTools::execute_within(ProcessTools::create_limited_test_vm(&args), Duration::from_secs(60))?;
    out.should_have_exit_value(0)?
        .should_match(r"^StopStraggler: polling for 2 s \(\d+ polls\): done$")?
        .should_not_contain("Timed out while spinning")?
        .should_not_contain("fatal error")?;
    let stops = out.stdout.lines().filter(|l| l.contains("[info][safepoint] Safepoint \"None\", ")).count();
    // Every 1 ms nominally; a loaded 2-CPU machine gives far fewer, never none.
    check(stops >= 5, || format!("only {stops} stops in 2 s:\n{}", out.stdout))?;
    println!("polling: {stops} stops in 2 s, no timeout");
    Ok(())
}

fn java() -> TestResult {
    let Some(cp) = JavaTools::compile("SpinLoop", SPIN_LOOP)? else {
        return Ok(());
    };
    let run_java = |extra: &[&str]| -> Result<OutputAnalyzer, TestFailure> {
        let mut args: Vec<&str> = FLAGS.to_vec();
        args.extend_from_slice(NO_POLL_IN_LOOP);
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-cp", &cp, "SpinLoop"]);
        let mut c = no_core("java", &args);
        c.env_remove("JAVA_TOOL_OPTIONS").current_dir(&cp);
        ProcessTools::execute_within(c, Duration::from_secs(120))
    };
    let theirs = run_java(&[])?;
    theirs.should_contain("Timed out while spinning to reach a safepoint.")?
        .should_contain("# A fatal error has been detected by the Java Runtime Environment:")?
        .should_not_contain("This message would occur")?;
    check_report(&theirs, "main")?;
    let ours = straggler(&[], "blocked-in-libc")?;
    check_report(&ours, "Straggler")?;
    check(ours.signal == theirs.signal && ours.signal == Some(6), || format!("java ended with exit {} signal {:?}, rtvm with exit {} signal {:?}", theirs.exit, theirs.signal, ours.exit, ours.signal))?;
    let theirs = run_java(&["-XX:-CreateCoredumpOnCrash"])?;
    let ours = straggler(&["-XX:-CreateCoredumpOnCrash"], "blocked-in-libc")?;
    check(theirs.exit == 1 && ours.exit == 1, || format!("-XX:-CreateCoredumpOnCrash: java exit {}, rtvm exit {}", theirs.exit, ours.exit))?;
    // What differs, by design: java kills the straggler with SIGILL so its crash report shows
    // the thread's Java frames (on stdout, with an hs_err file); rtvm writes its fatal error
    // on fd 2 and sends the straggler SIGABRT (its core shows the stack).
    println!(
        "java: {} / rtvm: {}",
        theirs.first_match("^#  SIGILL")?.unwrap_or_default(),
        ours.first_match("^#  fatal error:")?.unwrap_or_default()
    );
    Ok(())
}

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        // The thread may be between two sleeps (running) when the report is made; where the
        // signal found it stays.
        Some("blocked-in-libc") => aborts("blocked-in-libc", &["libc", "at a system call", "put blocking calls in a safe region"]),
        Some("no-stop-section") => aborts("no-stop-section", &["inside a no-stop section"]),
        Some("polling") => polling(),
        Some("java") => java(),
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
