/*
 * @test
 * @bug 8225690
 * @summary The attach mechanism under abuse, with the JDK's own jcmd: kill -3 never kills
 *          (it prints a thread dump each time); a deleted socket is made again by the next
 *          jcmd; 20 concurrent jcmd clients are all answered; a client that connects and
 *          never writes, and one that sends a 1100-byte command (closed without a reply:
 *          jcmd's "Premature EOF"), do not stop the next jcmd; a peer of another uid or gid
 *          is refused (jcmd as nobody, and a raw client of the VM's uid with another gid)
 *          and the VM keeps serving; -XX:+DisableAttachMechanism: a dump on SIGQUIT, jcmd
 *          refused at once ("The VM does not support the attach mechanism"), never a socket;
 *          -Xrs: the socket exists from start-up and no SIGQUIT handler is installed
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestAttachRobustness
 */

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use rtvm_jtreg::service::{jcmd, missing_jdk_tool, reply, target_main, Target};
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
    t.stop()?.should_have_exit_value(0)?;
    check(!socket(pid).exists(), || "the socket outlived the VM".into())?;

    // A VM running as nobody, a raw client of its uid and another gid: refused, no reply.
    let dir = std::env::temp_dir().join(format!("rtvm-attach-nobody-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| TestFailure(e.to_string()))?;
    run("chown", &["65534:65534", &dir.display().to_string()])?;
    let mut nobody_vm = Command::new("setpriv");
    nobody_vm
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "env", "--default-signal=QUIT"])
        .arg(test_vm())
        .args(["-Xmx32m", "-XX:+StartAttachListener", "TestAttachRobustness", "target", &dir.display().to_string(), "1"])
        .current_dir(&dir);
    let mut vm_nobody = ProcessTools::start(nobody_vm)?;
    vm_nobody.wait_for_line("TARGET READY", Duration::from_secs(30))?;
    let npid = vm_nobody.pid();
    let path = socket(npid).display().to_string();
    let mut raw = Command::new("setpriv");
    raw.args(["--reuid=65534", "--regid=0", "--clear-groups"]).arg(test_vm()).args(["TestAttachRobustness", "rawclient", &path]);
    let got = ProcessTools::execute_within(raw, Duration::from_secs(60))?;
    got.should_have_exit_value(0)?.stdout_should_contain("RAWCLIENT GOT 0 BYTES")?;
    uptime_ok(npid)?;
    println!("a peer of the VM's uid with another gid: closed without a reply; the VM serves on");
    let _ = std::fs::write(dir.join("stop"), b"");
    vm_nobody.finish()?.should_have_exit_value(0)?;
    let _ = std::fs::remove_dir_all(&dir);

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
    Ok(())
}
