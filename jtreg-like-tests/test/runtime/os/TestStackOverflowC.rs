/*
 * @test id=frame-4k
 * @summary A C thread body without stack-clash protection (-O0 -fno-stack-clash-protection)
 *          overflowing with 4 KiB frames is stopped by the 16 KiB guard zone: the overflow
 *          report names the thread and its zone, the exit is abnormal, and the TLS canary of
 *          the VM thread whose stack lies directly below stays intact
 * @requires os.family == "linux"
 * @run driver TestStackOverflowC 4
 */

/*
 * @test id=frame-8k
 * @summary The same with 8 KiB frames (they ran through the old 4 KiB guard and the signal
 *          stack into the neighbour's TLS, and the process exited 0)
 * @requires os.family == "linux"
 * @run driver TestStackOverflowC 8
 */

/*
 * @test id=frame-12k
 * @summary The same with 12 KiB frames
 * @requires os.family == "linux"
 * @run driver TestStackOverflowC 12
 */

/*
 * @test id=frame-15k
 * @summary The same with 15 KiB frames, the largest the default 16 KiB guard zone stops
 * @requires os.family == "linux"
 * @run driver TestStackOverflowC 15
 */

/*
 * @test id=yellow7-24k
 * @summary With -XX:StackYellowPages=7 (a 36 KiB guard zone) 24 KiB frames are stopped too
 *          (they faulted with the stack pointer inside the old signal stack: a bare SIGSEGV)
 * @requires os.family == "linux"
 * @run driver TestStackOverflowC 24 -XX:StackYellowPages=7
 */

use std::path::Path;

use rtvm_jtreg::ctools::{self, Install, Link};
use rtvm_jtreg::testlib::*;

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    let Some(frame_kib) = args.first() else {
        return Err(TestFailure("usage: TestStackOverflowC <frame KiB> [VM options...]".into()).into());
    };
    let missing = ctools::missing_tools();
    require_tool(&missing.join(", "), missing.is_empty())?;
    let src = std::env::var(TESTSRC_ENV).map_err(|_| TestFailure("TESTSRC is not set".into()))?;
    let install = Install::new(Path::new("rtvm-prefix"), env!("CARGO")).map_err(TestFailure)?;
    install
        .compile(
            &Path::new(&src).join("StackOverflowC.c"),
            Path::new("StackOverflowC"),
            Link::Shared,
            &["-O0", "-fno-stack-clash-protection"],
        )
        .map_err(TestFailure)?;
    let mut cmd = ctools::command(Path::new("./StackOverflowC"));
    cmd.arg(frame_kib).args(["-Xmx32m", "-Xss512k"]).args(&args[1..]);
    let out = ProcessTools::execute_within(cmd, std::time::Duration::from_secs(60))?;
    out.should_not_contain("CANARY CORRUPTED")?.should_not_contain("NOT ADJACENT")?;
    out.stdout_should_contain("TLS canary at")?.stdout_should_contain("overflower: recursing")?;
    check(out.exit != 0, || "the process exited 0 after an overflow".into())?;
    // The report, not a bare SIGSEGV: the thread, the zone, the fault address, the ranges.
    out.should_match("stack overflow in thread \"overflower\": fault address 0x[0-9a-f]+, (red|yellow|reserved) zone \\[0x[0-9a-f]+ - 0x[0-9a-f]+\\) of the guard zone \\[0x[0-9a-f]+ - 0x[0-9a-f]+\\), stack \\[0x[0-9a-f]+ - 0x[0-9a-f]+\\)")?;
    check(out.signal != Some(11), || "killed by SIGSEGV".into())?;
    println!("{frame_kib} KiB frames: reported, exit {} (signal {:?}); the neighbour's canary intact", out.exit, out.signal);
    Ok(())
}
