/*
 * @test id=blocked-in-libc
 * @bug 8262454 8267651
 * @summary HotSpot's HandshakeTimeoutTest in rtvm's terms: under -XX:+HandshakeALot
 *          -XX:GuaranteedSafepointInterval=10 -XX:HandshakeTimeout=50
 *          -XX:-CreateCoredumpOnCrash a thread blocked in the C library outside a safe region
 *          cannot be handshaked: java 17's error lines ("Handshake timeout:
 *          HandshakeALot(0x…), pending threads: 1", "… has not cleared handshake op: 0x…") name
 *          it, a line says what /proc says of it, then a fatal error "Handshake timeout" and
 *          exit 1 (SIGABRT with core dumps on)
 * @requires os.family == "linux"
 * @run driver HandshakeTimeoutTest blocked-in-libc
 */

/*
 * @test id=no-stop-section
 * @summary The same for a thread spinning inside a no-stop section
 * @requires os.family == "linux"
 * @run driver HandshakeTimeoutTest no-stop-section
 */

/*
 * @test id=polling
 * @summary The negative: with the same flags a thread that polls answers every handshake
 *          (-Xlog:handshake) and nothing times out: exit 0. The limit is 1 s here: on a
 *          loaded 2-CPU machine a runnable thread may wait longer than 50 ms for a CPU (hundreds
 *          of ms when the machine is overloaded)
 * @requires os.family == "linux"
 * @run driver HandshakeTimeoutTest polling
 */

/*
 * @test id=java
 * @summary Side by side with java 17 (a counted loop compiled without a poll): the timeout's
 *          first line has java's shape, the second ends as java's, both exit 1
 * @requires os.family == "linux"
 * @run driver HandshakeTimeoutTest java
 */

use std::process::Command;
use std::time::Duration;

use rtvm_jtreg::testlib::*;

const FLAGS: &[&str] = &[
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:+HandshakeALot",
    "-XX:GuaranteedSafepointInterval=10",
    "-XX:HandshakeTimeout=50",
];

const SPIN_LOOP: &str = r#"public class HandshakeSpin {
    public static void main(String[] args) {
        System.out.println("not reached: " + loop(3));
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

fn straggler(extra: &[&str], mode: &str, seconds: &str) -> Result<OutputAnalyzer, TestFailure> {
    let mut args: Vec<&str> = FLAGS.to_vec();
    args.extend_from_slice(extra);
    args.extend_from_slice(&["StopStraggler", mode, seconds]);
    let mut c = Command::new("sh");
    c.args(["-c", "ulimit -c 0 && exec \"$0\" \"$@\""]).arg(test_vm()).args(&args);
    c.env_remove("RTVM_OPTIONS");
    ProcessTools::execute_within(c, Duration::from_secs(60))
}

/// The `[error][handshake]` lines, as shapes.
fn errors(out: &OutputAnalyzer) -> Vec<String> {
    out.stdout
        .lines()
        .filter(|l| l.contains("[error][handshake]"))
        .map(line_shape)
        .collect()
}

const FIRST: &str = "[error][handshake] Handshake timeout: HandshakeALot(0xADDR), pending threads: N";
const SECOND_ENDS: &str = " has not cleared handshake op: 0xADDR";

fn times_out(mode: &str, kernel: &str) -> TestResult {
    let out = straggler(&["-XX:-CreateCoredumpOnCrash"], mode, "30")?;
    out.should_have_exit_value(1)?
        .should_contain("#  fatal error: Handshake timeout")?
        .should_not_contain("StopStraggler:")?;
    let e = errors(&out);
    check(e.len() == 3, || format!("{} error lines: {e:#?}", e.len()))?;
    check(e[0] == FIRST, || format!("'{}' where java prints '{FIRST}'", e[0]))?;
    check(e[1].starts_with("[error][handshake] Thread \"Straggler\" (tid N)") && e[1].ends_with(SECOND_ENDS), || format!("the second line: {}", e[1]))?;
    check(e[2].starts_with("[error][handshake]    Kernel: ") && e[2].contains(kernel), || format!("the kernel's line: {}", e[2]))?;
    // The op named in both lines is the same.
    let ops: Vec<String> = out.named_captures(r"(?P<op>0x[0-9a-f]{16})(\), pending| *$)")?.into_iter().filter_map(|m| m.get("op").cloned()).collect();
    check(ops.len() == 2 && ops[0] == ops[1], || format!("the operation's addresses: {ops:?}"))?;
    println!("{mode}: {}", out.first_match("has not cleared")?.unwrap_or_default());
    // With core dumps on (the default) the thread that did not answer gets SIGABRT.
    let out = straggler(&[], mode, "30")?;
    check(out.signal == Some(6), || format!("expected death by SIGABRT, got exit {} signal {:?}", out.exit, out.signal))?;
    out.should_contain("has not cleared handshake op")?;
    Ok(())
}

fn polling() -> TestResult {
    let mut args: Vec<&str> = FLAGS.to_vec();
    args.extend_from_slice(&["-XX:HandshakeTimeout=1000", "-Xlog:handshake", "StopStraggler", "polling", "1"]);
    let out = ProcessTools::execute_within(ProcessTools::create_limited_test_vm(&args), Duration::from_secs(60))?;
    out.should_have_exit_value(0)?
        .should_contain("StopStraggler: polling for 1 s")?
        .should_not_contain("Handshake timeout")?;
    let handshakes = out.stdout.lines().filter(|l| l.contains("Handshake \"HandshakeALot\", Targeted threads: 1")).count();
    check(handshakes >= 3, || format!("only {handshakes} handshakes in 1 s:\n{}", out.stdout))?;
    println!("polling: {handshakes} handshakes in 1 s, none timed out");
    Ok(())
}

fn java() -> TestResult {
    let Some(cp) = JavaTools::compile("HandshakeSpin", SPIN_LOOP)? else {
        return Ok(());
    };
    let mut args: Vec<&str> = FLAGS.to_vec();
    args.extend_from_slice(&[
        "-XX:-CreateCoredumpOnCrash",
        "-XX:-TieredCompilation",
        "-XX:-UseCountedLoopSafepoints",
        "-XX:LoopStripMiningIter=0",
        "-XX:LoopUnrollLimit=0",
        "-XX:CompileCommand=quiet",
        "-XX:CompileCommand=compileonly,HandshakeSpin::loop",
        "-Xcomp",
        "-cp",
        &cp,
        "HandshakeSpin",
    ]);
    let mut c = Command::new("java");
    c.args(&args).env_remove("JAVA_TOOL_OPTIONS").current_dir(&cp);
    let theirs = ProcessTools::execute_within(c, Duration::from_secs(120))?;
    theirs.should_have_exit_value(1)?.should_not_contain("not reached")?;
    let java = errors(&theirs);
    check(java.len() == 2 && java[0] == FIRST && java[1].ends_with(SECOND_ENDS), || format!("java's lines: {java:#?}"))?;
    let ours = straggler(&["-XX:-CreateCoredumpOnCrash"], "blocked-in-libc", "30")?;
    ours.should_have_exit_value(1)?;
    let rtvm = errors(&ours);
    check(rtvm.first() == java.first() && rtvm.get(1).is_some_and(|l| l.ends_with(SECOND_ENDS)), || format!("rtvm: {rtvm:#?}\njava: {java:#?}"))?;
    // By design: java names the thread by its address and kills it with SIGILL for its crash
    // report; rtvm names it, adds what the kernel says of it, and writes a fatal error.
    println!("java: {}\nrtvm: {}", java[1], rtvm[1]);
    Ok(())
}

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("blocked-in-libc") => times_out("blocked-in-libc", "at a system call"),
        Some("no-stop-section") => times_out("no-stop-section", "inside a no-stop section"),
        Some("polling") => polling(),
        Some("java") => java(),
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
