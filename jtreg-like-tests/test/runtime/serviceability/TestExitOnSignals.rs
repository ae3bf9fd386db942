/*
 * @test
 * @summary SIGTERM, SIGINT and SIGHUP side by side with java 17: each ends both VMs with the
 *          same exit status (143, 130, 129, a normal exit, not a death by the signal), and
 *          neither leaves /tmp/.java_pid<pid> or its hsperfdata file behind, so jps does not
 *          list it ("process information unavailable") afterwards; with
 *          -XX:+PrintNMTStatistics both print the NMT report on the way out. A SIGINT that was
 *          ignored when the VM started (a shell's background job, nohup) stays ignored, as
 *          java leaves it; kill -3 every millisecond from the end of the main to the end of
 *          the process (a 1 GiB pretouched heap to unmap) kills neither; with -Xrs neither VM
 *          handles SIGTERM (killed by it)
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestExitOnSignals
 */

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use rtvm_jtreg::service::{jcmd, missing_jdk_tool, reply, target_main, tool, Target};
use rtvm_jtreg::testlib::*;

fn files(pid: u32) -> [PathBuf; 2] {
    [
        PathBuf::from(format!("/tmp/.java_pid{pid}")),
        PathBuf::from(format!("/tmp/hsperfdata_{}/{pid}", rtvm_os_linux::attach::effective_user_name())),
    ]
}

/// Both files exist (the listener was started by a jcmd).
fn attached(pid: u32) -> Result<(), TestFailure> {
    let up = jcmd(pid, &["VM.uptime"])?;
    check(up.exit == 0 && reply(&up).ends_with(" s\n"), || format!("jcmd {pid} VM.uptime: {up:?}"))?;
    for f in files(pid) {
        check(f.exists(), || format!("{} is missing while the VM runs", f.display()))?;
    }
    Ok(())
}

/// How a VM ended and what it left: `(exit, signal, files left, listed by jps)`.
fn ended(pid: u32, out: &OutputAnalyzer) -> Result<(i32, Option<i32>, Vec<String>, bool), TestFailure> {
    let left: Vec<String> = files(pid).iter().filter(|f| f.exists()).map(|f| f.display().to_string()).collect();
    let jps = tool("jps", &[])?;
    let listed = jps.stdout.lines().any(|l| l.split_whitespace().next() == Some(&pid.to_string()));
    Ok((out.exit, out.signal, left, listed))
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("target") {
        return target_main(vm, &args[1..]);
    }
    if let Some(t) = missing_jdk_tool() {
        return require_tool(t, false);
    }
    let nmt: &[&str] = &["-Xmx32m", "-XX:NativeMemoryTracking=summary", "-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintNMTStatistics"];
    for (signal, status) in [("-TERM", 143), ("-INT", 130), ("-HUP", 129)] {
        let options: &[&str] = if signal == "-TERM" { nmt } else { &["-Xmx32m"] };
        let ours = Target::rtvm("TestExitOnSignals", options, 1)?;
        let java = Target::java(options, 1)?;
        let (r, j) = (ours.pid(), java.pid());
        attached(r)?;
        attached(j)?;
        let (a, b) = (ours.signal_and_finish(signal)?, java.signal_and_finish(signal)?);
        let (ra, ja) = (ended(r, &a)?, ended(j, &b)?);
        check(ja == (status, None, vec![], false), || format!("java after kill {signal}: {ja:?}"))?;
        check(ra == ja, || format!("kill {signal}: rtvm (exit, signal, files left, listed by jps) {ra:?}, java {ja:?}\nrtvm's output: {a:?}"))?;
        if signal == "-TERM" {
            for (who, out) in [("rtvm", &a), ("java", &b)] {
                check(out.stdout.contains("\nNative Memory Tracking:\n\nTotal: reserved="), || format!("{who}: no NMT report at exit on SIGTERM:\n{}", out.stdout))?;
            }
        }
        println!("kill {signal}: both exit {status}, no socket or hsperfdata file left, jps lists neither{}", if signal == "-TERM" { "; both print the NMT report" } else { "" });
    }

    // SIGINT ignored at start-up stays ignored (java: the same); SIGTERM then ends both.
    let (ours, java) = (ignoring_int(true)?, ignoring_int(false)?);
    for (who, (mut p, dir)) in [("rtvm", ours), ("java", java)] {
        let pid = p.pid();
        Command::new("kill").args(["-INT", &pid.to_string()]).status().map_err(|e| TestFailure(e.to_string()))?;
        std::thread::sleep(Duration::from_millis(500));
        check(p.is_running(), || format!("{who}: an ignored SIGINT ended the VM"))?;
        Command::new("kill").args(["-TERM", &pid.to_string()]).status().map_err(|e| TestFailure(e.to_string()))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while p.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = p.finish()?;
        let _ = std::fs::remove_dir_all(&dir);
        check(out.exit == 143 && out.signal.is_none(), || format!("{who}: SIGTERM after an ignored SIGINT: {out:?}"))?;
    }
    println!("SIGINT ignored at start-up: ignored by both VMs; SIGTERM then ends both with 143");

    // kill -3 all through the exit of a VM with a 1 GiB pretouched heap (whose unmapping
    // takes a while): neither dies of it.
    let big: &[&str] = &["-Xms1g", "-Xmx1g", "-XX:+AlwaysPreTouch"];
    for (who, target) in [("rtvm", Target::rtvm("TestExitOnSignals", big, 1)?), ("java", Target::java(big, 1)?)] {
        let (out, quits) = quit_through_exit(target)?;
        check(out.exit == 0 && out.signal.is_none(), || format!("{who}: {quits} SIGQUITs during its exit ended it: exit {}, signal {:?}", out.exit, out.signal))?;
        println!("{who}: {quits} SIGQUITs from the end of its main to its exit; exit 0");
    }

    // -Xrs: no handler; SIGTERM kills both by its default action.
    let ours = Target::rtvm("TestExitOnSignals", &["-Xmx32m", "-Xrs"], 1)?;
    let java = Target::java(&["-Xmx32m", "-Xrs"], 1)?;
    let (a, b) = (ours.signal_and_finish("-TERM")?, java.signal_and_finish("-TERM")?);
    check(a.signal == Some(15) && b.signal == Some(15), || format!("-Xrs, SIGTERM: rtvm {:?}, java {:?}", a.signal, b.signal))?;
    println!("-Xrs: SIGTERM is not handled by either VM: both killed by it");
    Ok(())
}

/// A VM (rtvm's test VM or java) started with SIGINT ignored, ready.
fn ignoring_int(rtvm: bool) -> Result<(RunningProcess, PathBuf), TestFailure> {
    let dir = std::env::temp_dir().join(format!("rtvm-exit-signals-{}-{rtvm}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| TestFailure(e.to_string()))?;
    // `sh -c 'trap "" INT; exec ...'`: the exec'd VM starts with SIGINT ignored.
    let mut c = Command::new("sh");
    c.args(["-c", "trap '' INT; exec \"$@\"", "sh", "env", "--default-signal=TERM"]);
    if rtvm {
        c.arg(test_vm()).args(["-Xmx32m", "TestExitOnSignals", "target"]).arg(&dir).arg("1");
    } else {
        let classes = rtvm_jtreg::service::java_target_classes(&dir)?;
        c.args(["java", "-Xmx32m", "-cp"]).arg(&classes).arg("Target").arg(&dir).arg("1");
    }
    let mut p = ProcessTools::start(c)?;
    p.wait_for_line("TARGET READY", Duration::from_secs(30))?;
    Ok((p, dir))
}

/// Ends the target's main (its `stop` file) and sends it SIGQUIT every millisecond until the
/// process is gone; returns its output and how many signals it got.
fn quit_through_exit(target: Target) -> Result<(OutputAnalyzer, usize), TestFailure> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let pid = Pid::from_raw(target.pid() as i32);
    let mut p = target.into_process();
    let mut quits = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    // The main sees the file within 20 ms; signal from then on.
    let stop = p.1.join("stop");
    std::fs::write(&stop, b"").map_err(|e| TestFailure(e.to_string()))?;
    while p.0.is_running() && Instant::now() < deadline {
        // A zombie (ended, not yet reaped by is_running) takes the signal harmlessly.
        if kill(pid, Signal::SIGQUIT).is_ok() {
            quits += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    if p.0.is_running() {
        p.0.kill();
    }
    let out = p.0.finish()?;
    let _ = std::fs::remove_dir_all(&p.1);
    Ok((out, quits))
}
