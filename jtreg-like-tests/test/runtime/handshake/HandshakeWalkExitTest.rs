/*
 * @test id=default
 * @summary HotSpot's HandshakeWalkExitTest in rtvm's terms, scaled to a few seconds: 50 rounds
 *          of 200 threads that start, poll and exit while a handshaker walks every live
 *          mutator (the operation checks where it runs: on the target below its spill when
 *          the target answered at its poll, else on the requester with the kernel's stack
 *          pointer of the blocked target on a stack the walk covers), under -XX:+SafepointALot
 *          -XX:+HandshakeALot -XX:GuaranteedSafepointInterval=20: exit 0, 10,000 threads, walks
 *          of both kinds, no failed walk, the stress ran
 * @requires os.family == "linux"
 * @run driver HandshakeWalkExitTest 50 200
 */

/*
 * @test id=full
 * @summary At HotSpot's scale: 100 rounds of 500 threads (about 20 s)
 * @key stress
 * @requires os.family == "linux"
 * @run main/manual HandshakeWalkExitTest 100 500
 */

use std::time::Duration;

use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    let (rounds, threads) = (args.first().map_or("50", String::as_str), args.get(1).map_or("200", String::as_str));
    let total: u64 = rounds.parse::<u64>().unwrap_or(0) * threads.parse::<u64>().unwrap_or(0);
    let out = ProcessTools::execute_within(
        ProcessTools::create_limited_test_vm(&[
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:+SafepointALot",
            "-XX:+HandshakeALot",
            "-XX:GuaranteedSafepointInterval=20",
            "-Xlog:safepoint,handshake",
            "-Xss256k",
            "ThreadStartExit",
            rounds,
            threads,
        ]),
        Duration::from_secs(300),
    )?;
    out.should_have_exit_value(0)?
        .should_contain(&format!("ThreadStartExit: started={total} "))?
        .should_not_contain("[warning]")?
        .should_not_contain("[error]")?;
    let walks = out.named_captures(r"\(at a poll (?P<poll>\d+), by the requester (?P<req>\d+), gone (?P<gone>\d+); kernel stack pointers checked (?P<kernel>\d+)\)")?;
    let w = walks.first().ok_or_else(|| TestFailure(format!("no walk counts:\n{}", out.stdout)))?;
    let n = |k: &str| w.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    check(n("req") > 0 && n("kernel") > 0, || format!("walks by the requester {}, kernel stack pointers checked {}", n("req"), n("kernel")))?;
    let stops = out.stdout.lines().filter(|l| l.contains("Safepoint \"None\", ")).count();
    let handshakes = out.stdout.lines().filter(|l| l.contains("Handshake \"HandshakeALot\", ")).count();
    check(stops > 0 && handshakes > 0, || format!("the stress hardly ran: {stops} stops, {handshakes} handshakes"))?;
    println!("{}; {stops} verified stops, {handshakes} verified handshakes", out.first_match("^ThreadStartExit:")?.unwrap_or_default());
    Ok(())
}
