/*
 * @test
 * @summary Wasmtime — a language runtime rtvm did not write — on rtvm. Builds
 *          runtime/examples/wasmtime-host in release (this compiles Wasmtime: minutes, hence
 *          manual; .ci/run runs it with RTVM_CI_WASMTIME=1) and runs it: a module whose linear
 *          memories rtvm reserved (the -Xlog:os reservation line, NMT's "Wasm Memory"
 *          category, each memory the start of its own mapping) runs on two VM threads and on
 *          an attached host thread, exit 0; an out-of-bounds load, a division by zero and
 *          deep recursion are wasmtime::Trap values on a VM thread and the process goes on —
 *          with rtvm's signal handlers installed after Wasmtime's, before them
 *          (--engine-first), and with -Xrs; with -Xss256k the wasm stack limit is fitted
 *          below the soft limit (still a trap), -Xss176k is refused; a real overflow of a VM thread's native stack
 *          outside wasm, on a thread that ran wasm, is rtvm's report and an abort; 100 stops of
 *          the world while wasm spins on two VM threads (one calling an imported poll, one
 *          never: stopped by the signal inside JIT code) freeze both loops, in either order of
 *          handler installation, and under -XX:+SafepointALot -XX:+HandshakeALot (a service
 *          thread's verified stops and handshakes every 5 ms between the host's own); with -Xrs
 *          the loop that never polls makes the stop time out
 * @key wasmtime
 * @requires os.family == "linux"
 * @run main/manual TestWasmtimeHost
 */

use std::path::PathBuf;
use std::process::Command;

use rtvm_jtreg::testlib::*;

fn host_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../runtime/examples/wasmtime-host")
}

fn host(args: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    let bin = host_dir().join("target/release/rtvm-wasmtime-host");
    let mut c = Command::new(bin);
    c.args(args).env_remove("RTVM_OPTIONS");
    ProcessTools::execute(c)
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    let started = std::time::Instant::now();
    let mut build = Command::new(env!("CARGO"));
    build
        .args(["build", "--release", "--manifest-path"])
        .arg(host_dir().join("Cargo.toml"));
    let out = ProcessTools::execute(build)?;
    check(out.exit == 0, || format!("building the Wasmtime host failed:\n{}", out.stderr))?;
    println!("built in {:.0} s", started.elapsed().as_secs_f64());

    // Memories from rtvm, wasm on VM threads and an attached thread, NMT.
    let demo = host(&["-Xlog:os", "-XX:+AlwaysPreTouch", "-XX:NativeMemoryTracking=summary", "demo"])?;
    demo.should_have_exit_value(0)?
        .should_match(r"\[info\]\[os *\] Reserved Wasm Memory \[0x[0-9a-f]+ - 0x[0-9a-f]+\): capacity 4G, guard 32M, 1M committed")?
        .should_contain("(on an rtvm VM thread)")?
        .should_contain("(on an attached host thread)")?
        .should_contain("(on the thread that created the VM)")?
        .should_match(r"NMT Wasm Memory: reserved=\d+KB, committed=1024KB")?
        .should_match(r"-\s+Wasm Memory \(reserved=\d+, committed=1048576\)")?
        .should_contain("demo: ok")?;

    // Traps, in every order of handler installation and without rtvm's handlers.
    for extra in [&[][..], &["--engine-first"], &["-Xrs"], &["-Xrs", "--engine-first"]] {
        let mut args = extra.to_vec();
        args.push("traps");
        let out = host(&args)?;
        out.should_have_exit_value(0)?
            .should_contain("out-of-bounds load: MemoryOutOfBounds")?
            .should_contain("division by zero: IntegerDivisionByZero")?
            .should_contain("deep recursion: StackOverflow")?
            .should_contain("traps: ok")?
            .should_not_contain("stack overflow in thread")?;
        println!("traps with {extra:?}: ok");
    }

    // A small -Xss: the host fits Wasmtime's stack limit below the soft limit, so deep
    // recursion is still a trap; a stack too small for wasm is refused with a message.
    let out = host(&["-Xss256k", "traps"])?;
    out.should_have_exit_value(0)?
        .should_match(r"max_wasm_stack \d+ KiB")?
        .should_contain("deep recursion: StackOverflow")?
        .should_not_contain("stack overflow in thread")?;
    let out = host(&["-Xss176k", "traps"])?;
    out.should_have_exit_value(1)?
        .stderr_should_contain("run with a larger -Xss")?
        .should_not_contain("stack overflow in thread")?;
    println!("-Xss256k: trap with a fitted limit; -Xss176k: refused");

    // A native overflow outside wasm is still rtvm's: its report, then abort.
    for extra in [&[][..], &["--engine-first"]] {
        let mut args = extra.to_vec();
        args.push("native-overflow");
        let out = host(&args)?;
        check(out.signal == Some(6), || format!("native overflow ({extra:?}): expected SIGABRT, got {out:?}"))?;
        out.stderr_should_contain("stack overflow in thread \"native\"")?;
        println!("native overflow with {extra:?}: rtvm's report, SIGABRT");
    }
    // Stops of the world while wasm runs on VM threads: at the poll and by the signal.
    for extra in [&[][..], &["--engine-first"], &["-XX:+UseTransparentHugePages"]] {
        let mut args = extra.to_vec();
        args.push("stop");
        let out = host(&args)?;
        out.should_have_exit_value(0)?
            .should_match(r"stop: 100 stops while wasm ran on VM threads: (\d+) at the imported poll, (\d+) by the signal")?
            .should_not_contain(" 0 by the signal")?
            .should_contain("stop: ok")?;
        println!("stops with {extra:?}: ok");
    }
    // The same under HotSpot's stress modes: the VM's service thread stops the world and
    // handshakes both wasm threads every 5 ms between the host's own stops, verifying each (a
    // failed check is a fatal error); its stops and handshakes are counted in the log file.
    let log = std::env::current_dir()?.join("wasmtime-stress.log");
    let _ = std::fs::remove_file(&log);
    let xlog = format!("-Xlog:safepoint=info,handshake=info:file={}", log.display());
    let out = host(&[
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+SafepointALot",
        "-XX:+HandshakeALot",
        "-XX:GuaranteedSafepointInterval=5",
        &xlog,
        "stop",
    ])?;
    out.should_have_exit_value(0)?
        .should_match(r"stop: 100 stops while wasm ran on VM threads: (\d+) at the imported poll, (\d+) by the signal")?
        .should_not_contain(" 0 by the signal")?
        .should_contain("stop: ok")?;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let stress_stops = text.matches("Safepoint \"None\", ").count();
    let stress_handshakes = text.matches("Handshake \"HandshakeALot\", ").count();
    check(stress_stops > 0 && stress_handshakes > 0, || format!("the stress did not run: {stress_stops} stops, {stress_handshakes} handshakes"))?;
    println!("stops under SafepointALot and HandshakeALot: ok ({stress_stops} verified stops, {stress_handshakes} verified handshakes besides)");
    let out = host(&["-Xrs", "stop"])?;
    out.should_have_exit_value(0)?
        .should_contain("threads which did not reach the safepoint: \"wasm-never-polls\"")?
        .should_contain("no signal fallback: -Xrs")?
        .should_contain("0 by the signal")?
        .should_contain("stop: ok")?;
    println!("stops with -Xrs: the loop that never polls times out, the polling one stops");
    println!("total {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
