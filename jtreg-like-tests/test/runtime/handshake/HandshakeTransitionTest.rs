/*
 * @test id=native-calls
 * @summary HotSpot's HandshakeTransitionTest in rtvm's terms, at its scale: 64 threads each make
 *          2000 1-ms blocking calls inside safe regions (HotSpot's native calls), polling after
 *          each, under -XX:+SafepointALot -XX:+HandshakeALot -XX:GuaranteedSafepointInterval=20
 *          (every stop and handshake verified; a failed check is a fatal error): exit 0, every
 *          call counted, JOINED, and the stress ran — its -Xlog:safepoint and -Xlog:handshake
 *          lines, whose shapes are java 17's under the same flags
 * @requires os.family == "linux"
 * @run driver HandshakeTransitionTest native-calls
 */

/*
 * @test id=busy
 * @summary The same with no sleep in the region (a yield), 4000 calls per thread and 500 polled
 *          steps of work between the calls, so that stops and handshakes find the threads at their polls too (the
 *          comparison with java is the other variant's)
 * @requires os.family == "linux"
 * @run driver HandshakeTransitionTest busy
 */

use std::collections::BTreeSet;
use std::time::Duration;

use rtvm_jtreg::testlib::*;

const FLAGS: &[&str] = &[
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:+SafepointALot",
    "-XX:+HandshakeALot",
    "-XX:GuaranteedSafepointInterval=20",
    "-Xlog:safepoint,handshake",
];

/// HotSpot's program, with `Thread.sleep` (a native method in 17) as the native call.
const JAVA: &str = r#"public class HandshakeTransition implements Runnable {
    static int loops;
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        loops = Integer.parseInt(args[1]);
        Thread[] threads = new Thread[n];
        for (int i = 0; i < n; i++) {
            threads[i] = new Thread(new HandshakeTransition());
            threads[i].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        System.out.println("JOINED");
    }
    public void run() {
        try {
            for (int i = 0; i < loops; i++) {
                Thread.sleep(1);
            }
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }
}
"#;

/// The distinct shapes of the per-operation `[info]` lines of `tag` (`Safepoint "…", …`,
/// `Handshake "…", …`) in `out`'s stdout.
fn shapes(out: &OutputAnalyzer, tag: &str) -> BTreeSet<String> {
    let marker = format!("][{tag}]");
    let operation = if tag == "safepoint" { "] Safepoint \"" } else { "] Handshake \"" };
    out.stdout
        .lines()
        .filter(|l| l.contains(&marker) && l.contains(operation))
        .map(line_shape)
        .filter(|l| l.starts_with("[info]"))
        .collect()
}

fn count(out: &OutputAnalyzer, text: &str) -> usize {
    out.stdout.lines().filter(|l| l.contains(text)).count()
}

fn run(threads: usize, args: &[&str], compare: bool) -> TestResult {
    let mut all: Vec<&str> = FLAGS.to_vec();
    all.push("NativeTransitions");
    all.extend_from_slice(args);
    let out = ProcessTools::execute_within(ProcessTools::create_limited_test_vm(&all), Duration::from_secs(120))?;
    out.should_have_exit_value(0)?.stdout_should_contain("JOINED")?;
    let calls: u64 = args[1].parse().map_err(|_| TestFailure("calls".into()))?;
    out.should_contain(&format!("NativeTransitions: threads={threads} calls={calls} total={} in ", threads as u64 * calls))?;
    // No stop or handshake of the stress thread gave up (it logs a warning then).
    out.should_not_contain("[warning]")?.should_not_contain("[error]")?;
    let stops = count(&out, "Safepoint \"None\", Time since last: ");
    let handshakes = count(&out, "Handshake \"HandshakeALot\", Targeted threads: 1, ");
    let at_poll = count(&out, "Handshake \"HandshakeALot\", Targeted threads: 1, Executed by requesting thread: 0,");
    // The stress stops the world every 20 ms and handshakes the threads in turn: what it
    // did is measured against how long the threads ran (a fast run is short), with room
    // for a loaded machine that delays the stress thread.
    let ran_ms: u64 = out
        .first_match("^NativeTransitions:")?
        .and_then(|l| l.split(" in ").nth(1)?.strip_suffix(" ms")?.trim().parse().ok())
        .ok_or_else(|| TestFailure("no run time in the NativeTransitions line".into()))?;
    let expected = (ran_ms / 20) as usize;
    check(stops >= 2.max(expected / 4) && handshakes >= threads, || format!("the stress hardly ran: {stops} stops (about {expected} in {ran_ms} ms), {handshakes} handshakes"))?;
    println!("{}: {stops} verified stops, {handshakes} verified handshakes ({at_poll} run by the target at its poll)", out.first_match("^NativeTransitions:")?.unwrap_or_default());

    if !compare {
        return Ok(());
    }
    let Some(cp) = JavaTools::compile("HandshakeTransition", JAVA)? else {
        return Ok(());
    };
    let mut java: Vec<&str> = FLAGS.to_vec();
    java.extend_from_slice(&["-cp", &cp, "HandshakeTransition", "16", "100"]);
    let theirs = JavaTools::execute(&java)?.ok_or_else(|| TestFailure("java vanished".into()))?;
    theirs.should_have_exit_value(0)?.stdout_should_contain("JOINED")?;
    for tag in ["safepoint", "handshake"] {
        let (ours, java) = (shapes(&out, tag), shapes(&theirs, tag));
        let missing: Vec<&String> = ours.difference(&java).collect();
        check(!ours.is_empty() && missing.is_empty(), || format!("-Xlog:{tag} lines java 17 does not print under the same flags: {missing:#?}\njava's: {java:#?}"))?;
        println!("-Xlog:{tag}: {ours:?}, as java");
    }
    Ok(())
}

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("native-calls") => run(64, &["64", "2000", "1000"], true),
        Some("busy") => run(16, &["16", "4000", "0", "500"], false),
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
