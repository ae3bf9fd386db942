/*
 * @test
 * @bug 8225690
 * @summary The attach mechanism under abuse, with the JDK's own jcmd: kill -3 never kills
 *          (it prints a thread dump each time, as java does even with a stale trigger file
 *          left while the listener runs); a deleted socket is made again by the next jcmd;
 *          20 concurrent jcmd clients are all answered; eight clients that connect and stay
 *          silent do not delay a ninth at all (it is answered while they are all connected);
 *          a client that connects and never writes, and one that sends a 1100-byte command
 *          (closed without a reply: jcmd's "Premature EOF"), do not stop the next jcmd; a
 *          peer of another uid or gid is refused (jcmd as nobody, and a raw client of the
 *          VM's uid with another gid: as java, logged at debug level only, nothing on stdout)
 *          and the VM keeps serving; -XX:+DisableAttachMechanism: a dump on SIGQUIT, jcmd
 *          refused at once ("The VM does not support the attach mechanism"), never a socket;
 *          -Xrs: the socket exists from start-up and no SIGQUIT handler is installed; run
 *          from a work directory user nobody cannot reach, the VM as nobody runs a copy
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestAttachRobustness
 */

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rtvm_jtreg::service::{java_target_classes, jcmd, missing_jdk_tool, reply, target_main, Target};
use rtvm_jtreg::testlib::*;

fn socket(pid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/.java_pid{pid}"))
}

fn run(program: &str, args: &[&str]) -> Result<(), TestFailure> {
    let mut c = Command::new(program);
    c.args(args);
    ProcessTools::execute(c)?.should_have_exit_value(0)?;
    Ok(())
}

fn kill(pid: u32, sig: &str) -> Result<(), TestFailure> {
    run("kill", &[sig, &pid.to_string()])
}

/// The caught-signal mask of a process (`SigCgt` of its status).
fn caught(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("SigCgt:")).and_then(|v| u64::from_str_radix(v.trim(), 16).ok()))
        .unwrap_or(0)
}

fn uptime_ok(pid: u32) -> Result<(), TestFailure> {
    let out = jcmd(pid, &["VM.uptime"])?;
    out.should_have_exit_value(0)?;
    check(reply(&out).ends_with(" s\n"), || format!("VM.uptime: {out:?}"))
}

/// The raw client of the test VM's `rawclient <socket>` mode: a whole request, then how
/// many bytes came back before the server closed. A server that refuses the peer may close
/// before the request is written: the write then fails with `EPIPE` (or `ECONNRESET`), which
/// is a refusal too — nothing came back.
fn raw_client(path: &str) -> TestResult {
    use std::io::ErrorKind;
    let mut s = UnixStream::connect(path).map_err(|e| TestFailure(format!("connect {path}: {e}")))?;
    match s.write_all(b"1\0jcmd\0VM.version\0\0\0") {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
            println!("RAWCLIENT GOT 0 BYTES (closed before the request was written: {e})");
            return Ok(());
        }
        Err(e) => return Err(TestFailure(e.to_string()).into()),
    }
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| TestFailure(e.to_string()))?;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    println!("RAWCLIENT GOT {} BYTES", buf.len());
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("target") => return target_main(vm, &args[1..]),
        Some("rawclient") => return raw_client(args.get(1).map_or("", String::as_str)),
        _ => {}
    }
    if let Some(t) = missing_jdk_tool() {
        return require_tool(t, false);
    }
    let mut t = Target::rtvm("TestAttachRobustness", &["-Xmx32m"], 1)?;
    let pid = t.pid();
    check(caught(pid) & (1 << 2) != 0, || "no SIGQUIT handler installed".into())?;
    for _ in 0..3 {
        kill(pid, "-QUIT")?;
        std::thread::sleep(Duration::from_millis(200));
        check(t.is_running(), || "kill -3 ended the VM".into())?;
    }
    println!("kill -3 three times: the VM runs on");
    uptime_ok(pid)?;
    std::fs::remove_file(socket(pid)).map_err(|e| TestFailure(e.to_string()))?;
    uptime_ok(pid)?;
    check(socket(pid).exists(), || "the socket was not made again".into())?;
    println!("a deleted socket is made again by the next jcmd");

    // A stale trigger file while the listener runs: kill -3 prints a dump all the same, as
    // java's does (checked on java below). The dumps are counted at the end.
    stale_trigger_quit(pid)?;

    let clients: Vec<_> = (0..20)
        .map(|_| std::thread::spawn(move || jcmd(pid, &["VM.uptime"])))
        .collect();
    let mut answered = 0;
    for c in clients {
        let out = c.join().map_err(|_| TestFailure("a client thread panicked".into()))??;
        out.should_have_exit_value(0)?;
        answered += 1;
    }
    check(answered == 20, || format!("{answered} of 20 answered"))?;
    println!("20 concurrent jcmd clients answered");
    silent_clients_delay_nobody(pid)?;

    // A client that connects and never writes; then one with a 1100-byte command.
    let silent = UnixStream::connect(socket(pid)).map_err(|e| TestFailure(e.to_string()))?;
    let long = "x".repeat(1100);
    let out = jcmd(pid, &[&long])?;
    check(out.exit != 0 && out.output().contains("Premature EOF"), || format!("the 1100-byte command: {out:?}"))?;
    let start = Instant::now();
    uptime_ok(pid)?;
    println!("a silent client and a 1100-byte command: the next jcmd answered after {:?}", start.elapsed());
    drop(silent);

    // Another uid: jcmd as nobody is refused; the VM serves on.
    let mut as_nobody = Command::new("setpriv");
    as_nobody.args(["--reuid=65534", "--regid=65534", "--clear-groups", "jcmd", &pid.to_string(), "VM.uptime"]);
    let out = ProcessTools::execute_within(as_nobody, Duration::from_secs(60))?;
    check(out.exit != 0, || format!("jcmd as nobody was answered: {out:?}"))?;
    uptime_ok(pid)?;
    let end = t.stop()?;
    end.should_have_exit_value(0)?;
    check(!socket(pid).exists(), || "the socket outlived the VM".into())?;
    let dumps = end.stdout.matches("Full thread dump rtvm 64-Bit VM").count();
    check(dumps == 4, || format!("three kill -3 before the listener and one with a stale trigger file: {dumps} dumps"))?;
    let java = Target::java(&["-Xmx32m"], 1)?;
    uptime_ok(java.pid())?;
    stale_trigger_quit(java.pid())?;
    let java_end = java.stop()?;
    check(java_end.stdout.contains("Full thread dump OpenJDK"), || format!("java printed no dump for kill -3 with a stale trigger file: {java_end:?}"))?;
    println!("kill -3 with a stale trigger file and the listener running: a thread dump, as java prints one");

    // -XX:+DisableAttachMechanism.
    let t = Target::rtvm("TestAttachRobustness", &["-Xmx32m", "-XX:+DisableAttachMechanism"], 1)?;
    let pid = t.pid();
    kill(pid, "-QUIT")?;
    let start = Instant::now();
    let out = jcmd(pid, &["VM.uptime"])?;
    check(out.exit != 0 && out.output().contains("The VM does not support the attach mechanism"), || format!("jcmd with DisableAttachMechanism: {out:?}"))?;
    check(start.elapsed() < Duration::from_secs(5), || format!("the refusal took {:?}", start.elapsed()))?;
    kill(pid, "-QUIT")?;
    std::thread::sleep(Duration::from_millis(300));
    check(!socket(pid).exists(), || "a socket appeared".into())?;
    let end = t.stop()?;
    check(end.stdout.matches("Full thread dump rtvm 64-Bit VM").count() == 2, || format!("two SIGQUITs, two dumps: {end:?}"))?;
    println!("-XX:+DisableAttachMechanism: dumps on SIGQUIT, jcmd refused in {:?}, no socket", start.elapsed());

    // -Xrs: the socket from start-up, no SIGQUIT handler.
    let t = Target::rtvm("TestAttachRobustness", &["-Xmx32m", "-Xrs"], 1)?;
    let pid = t.pid();
    check(socket(pid).exists(), || "-Xrs: no socket at start-up".into())?;
    check(caught(pid) & (1 << 2) == 0, || format!("-Xrs: SIGQUIT is caught (SigCgt {:x})", caught(pid)))?;
    uptime_ok(pid)?;
    t.stop()?.should_have_exit_value(0)?;
    println!("-Xrs: socket at start-up, SIGQUIT not caught, jcmd answered");

    another_gid()
}

/// `args` run as user and group nobody.
fn as_nobody(program: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", program]);
    c
}

/// Whether user nobody may do what `test <flag> <path>` asks (`-x`: execute, reach).
fn nobody_may(flag: &str, path: &Path) -> bool {
    let mut c = as_nobody("test");
    c.arg(flag).arg(path);
    c.status().is_ok_and(|s| s.success())
}

/// The test VM as user nobody can execute it: itself when nobody can reach it, else a copy
/// in `dir` (a private work directory, `jtreg -w`, hides the test VM's link from nobody).
fn nobody_test_vm(dir: &Path) -> Result<PathBuf, TestFailure> {
    let vm = PathBuf::from(test_vm());
    if nobody_may("-x", &vm) {
        return Ok(vm);
    }
    let real = std::fs::canonicalize(&vm).map_err(|e| TestFailure(format!("{}: {e}", vm.display())))?;
    let copy = dir.join("rtvm-testvm");
    std::fs::copy(&real, &copy).map_err(|e| TestFailure(format!("copying {} to {}: {e}", real.display(), copy.display())))?;
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).map_err(|e| TestFailure(e.to_string()))?;
    println!("user nobody cannot reach {}: running a copy, {}", vm.display(), copy.display());
    Ok(copy)
}

/// The message of a `-Xlog` file line (after its decorations).
fn logged(path: &Path, text: &str) -> Option<String> {
    let log = std::fs::read_to_string(path).ok()?;
    log.lines().find(|l| l.contains(text)).map(|l| l.rsplit_once("] ").map_or(l, |(_, m)| m).to_owned())
}

/// Eight clients that connect and stay silent, then a ninth with a whole request: it is
/// answered while all eight are still connected (none of them is waited for), and they are
/// dropped later, each at its own deadline. (HotSpot serves one client at a time and waits
/// for a silent one for ever.)
fn silent_clients_delay_nobody(pid: u32) -> TestResult {
    let io = |e: std::io::Error| TestFailure(e.to_string());
    let silent: Vec<UnixStream> = (0..8).map(|_| UnixStream::connect(socket(pid))).collect::<Result<_, _>>().map_err(io)?;
    let start = Instant::now();
    let mut good = UnixStream::connect(socket(pid)).map_err(io)?;
    good.write_all(b"1\0jcmd\0VM.uptime\0\0\0").map_err(io)?;
    good.set_read_timeout(Some(Duration::from_secs(30))).map_err(io)?;
    let mut reply = String::new();
    let _ = good.read_to_string(&mut reply);
    let took = start.elapsed();
    check(reply.starts_with("0\n") && reply.ends_with(" s\n"), || format!("the ninth client's reply: {reply:?} after {took:?}"))?;
    for (i, mut c) in silent.iter().enumerate() {
        c.set_nonblocking(true).map_err(io)?;
        let mut b = [0u8; 1];
        let open = matches!(c.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        check(open, || format!("silent client {i} was dropped before the ninth client was answered (after {took:?}): it was waited for"))?;
    }
    for (i, mut c) in silent.into_iter().enumerate() {
        c.set_nonblocking(false).map_err(io)?;
        c.set_read_timeout(Some(Duration::from_secs(30))).map_err(io)?;
        let mut b = [0u8; 1];
        let dropped = matches!(c.read(&mut b), Ok(0));
        check(dropped, || format!("silent client {i} was never dropped"))?;
    }
    println!("eight silent clients: a ninth answered in {took:?} while they were all still connected; each dropped at its deadline ({:?} after the start)", start.elapsed());
    Ok(())
}

/// `kill -3` with a trigger file left in /tmp while the listener already runs; the
/// listener still answers afterwards.
fn stale_trigger_quit(pid: u32) -> TestResult {
    let trigger = PathBuf::from(format!("/tmp/.attach_pid{pid}"));
    std::fs::write(&trigger, b"").map_err(|e| TestFailure(format!("{}: {e}", trigger.display())))?;
    kill(pid, "-QUIT")?;
    std::thread::sleep(Duration::from_millis(500));
    let _ = std::fs::remove_file(&trigger);
    uptime_ok(pid)?;
    Ok(())
}

/// A VM running as nobody (rtvm, then java), a raw client of its uid and another gid:
/// refused without a reply, logged at debug level only (nothing on the application's
/// stdout), in java's words; the VM serves on.
fn another_gid() -> TestResult {
    let dir = PathBuf::from(format!("/tmp/rtvm-attach-nobody-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| TestFailure(e.to_string()))?;
    run("chown", &["65534:65534", &dir.display().to_string()])?;
    if !nobody_may("-w", &dir) {
        let _ = std::fs::remove_dir_all(&dir);
        return skip(format!("user nobody cannot write {} (the checks of a peer of another gid need a VM running as nobody)", dir.display()));
    }
    let vm = nobody_test_vm(&dir)?;
    let java_dir = dir.join("java");
    let classes = java_target_classes(&java_dir)?;
    run("chown", &["-R", "65534:65534", &dir.display().to_string()])?;

    let mut refusals = Vec::new();
    for who in ["rtvm", "java"] {
        let log = dir.join(format!("{who}-attach.log"));
        let xlog = format!("-Xlog:attach=debug:file={}", log.display());
        let (mut command, stop) = if who == "rtvm" {
            let mut c = as_nobody("env");
            c.arg("--default-signal=QUIT").arg(&vm).args(["-Xmx32m", &xlog, "-XX:+StartAttachListener", "TestAttachRobustness", "target", &dir.display().to_string(), "1"]);
            (c, dir.join("stop"))
        } else {
            let mut c = as_nobody("java");
            c.args(["-Xmx32m", &xlog, "-XX:+StartAttachListener", "-cp", &classes.display().to_string(), "Target", &java_dir.display().to_string(), "1"]);
            (c, java_dir.join("stop"))
        };
        command.current_dir(&dir);
        let mut target = ProcessTools::start(command)?;
        target.wait_for_line("TARGET READY", Duration::from_secs(30))?;
        let pid = target.pid();
        let path = socket(pid).display().to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket(pid).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut raw = Command::new("setpriv");
        raw.args(["--reuid=65534", "--regid=0", "--clear-groups"]).arg(&vm).args(["TestAttachRobustness", "rawclient", &path]);
        let got = ProcessTools::execute_within(raw, Duration::from_secs(60))?;
        got.should_have_exit_value(0)?.stdout_should_contain("RAWCLIENT GOT 0 BYTES")?;
        uptime_ok(pid)?;
        let _ = std::fs::write(&stop, b"");
        let end = target.finish()?;
        end.should_have_exit_value(0)?;
        check(end.stdout == "TARGET READY\n", || format!("{who}: the refusal reached the application's stdout: {:?}", end.stdout))?;
        let line = logged(&log, "euid/egid check failed").ok_or_else(|| TestFailure(format!("{who}: no refusal in {}: {:?}", log.display(), std::fs::read_to_string(&log).unwrap_or_default())))?;
        check(std::fs::read_to_string(&log).unwrap_or_default().contains("[debug][attach") , || format!("{who}: the refusal is not at debug level"))?;
        refusals.push(line);
    }
    check(refusals[0] == refusals[1], || format!("the refusal: rtvm {:?}, java {:?}", refusals[0], refusals[1]))?;
    println!("a peer of the VM's uid with another gid: closed without a reply, nothing on stdout, '-Xlog:attach=debug' says {:?} as java does; the VM serves on", refusals[0]);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
