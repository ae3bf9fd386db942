//! Serviceability inside one process, each case in a child so this test process keeps its
//! signal dispositions and files: diagnostic commands and thread dumps through the API; a
//! SIGQUIT dump through the embedder's output hook, one dump per SIGQUIT even when they
//! arrive while the dispatcher is busy, and a SIGQUIT after destroy absorbed (counted,
//! nothing printed, the process lives on); destroy while an attach client is
//! connected (prompt, and no socket, perf file or thread left); 100 create/destroy cycles
//! that each serve an attach request leave no descriptor, thread or file behind.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtvm::{InitArgs, Vm};
use rtvm_testkit::child::{check_child, child_role, describe};

fn socket() -> PathBuf {
    PathBuf::from(format!("/tmp/.java_pid{}", std::process::id()))
}

fn perf_file() -> PathBuf {
    rtvm_os_linux::perfmem::user_directory().join(std::process::id().to_string())
}

/// The names of this process's threads (`comm`).
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .map(|s| s.trim().to_owned())
        .collect()
}

/// Whether signal `sig` is ignored in this process (`SigIgn` of its status).
fn signal_ignored(sig: u32) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// One attach request, raw: `(status line, text)`.
fn attach(op: &str, arg: &str) -> (String, String) {
    let mut s = UnixStream::connect(socket()).expect("connect to the attach socket");
    s.write_all(format!("1\0{op}\0{arg}\0\0\0").as_bytes())
        .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (status, text) = reply.split_once('\n').unwrap_or((&reply, ""));
    (status.to_owned(), text.to_owned())
}

#[test]
fn commands_and_dumps_through_the_api() {
    if child_role().is_none() {
        return check_child("commands_and_dumps_through_the_api");
    }
    let printed = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&printed);
    let quit_was_ignored = signal_ignored(3);
    let vm = Vm::create(
        InitArgs::new(["-Xmx32m", "-XX:NativeMemoryTracking=summary"])
            .command("Embedded --mode test")
            .output(move |_, text| sink.lock().unwrap().push_str(text)),
    )
    .unwrap();
    let help = vm.diagnostic_command("help").unwrap();
    assert!(
        help.starts_with("The following commands are available:\n"),
        "{help}"
    );
    assert_eq!(
        vm.diagnostic_command("No.such").unwrap_err(),
        "java.lang.IllegalArgumentException: Unknown diagnostic command\n"
    );
    let cl = vm.diagnostic_command("VM.command_line").unwrap();
    assert!(
        cl.contains("\njava_command: Embedded --mode test\n")
            && cl.ends_with("Launcher Type: generic\n"),
        "{cl}"
    );
    let nmt = vm
        .diagnostic_command("VM.native_memory summary scale=MB")
        .unwrap();
    assert!(
        nmt.contains("(Omitting categories weighting less than 1MB)"),
        "{nmt}"
    );
    // The dump names every registry thread with its kernel tid (once each has published it:
    // a thread registered a moment ago, the Signal Dispatcher say, may not have yet).
    let deadline = Instant::now() + Duration::from_secs(10);
    while vm.threads().iter().any(|t| t.tid() == 0) {
        assert!(
            Instant::now() < deadline,
            "a thread never published its tid"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let dump = vm.thread_dump();
    for t in vm.threads() {
        assert!(
            dump.contains(&format!("\"{}\" ", t.name)),
            "{} missing:\n{dump}",
            t.name
        );
        assert!(dump.contains(&format!(" nid={:#x} ", t.tid())), "{dump}");
    }
    // SIGQUIT without a trigger file: the dump goes through the output hook.
    let before = rtvm_os_linux::quit::quit_count();
    // SAFETY-free: a signal to this process, which has rtvm's handler.
    std::process::Command::new("kill")
        .args(["-QUIT", &std::process::id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !printed
        .lock()
        .unwrap()
        .contains("Full thread dump rtvm 64-Bit VM")
    {
        assert!(Instant::now() < deadline, "no dump after SIGQUIT");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(rtvm_os_linux::quit::quit_count() > before);
    vm.shutdown().unwrap();
    if quit_was_ignored {
        assert!(
            !rtvm_os_linux::quit::handler_installed(),
            "SIGQUIT given back (ignored)"
        );
    } else {
        // Over SIG_DFL rtvm's handler stays, counting only: a late kill -3 (or an attach
        // client that found the VM a moment before) does not dump the host's core.
        assert!(rtvm_os_linux::quit::handler_installed());
        let (count, text) = (
            rtvm_os_linux::quit::quit_count(),
            printed.lock().unwrap().len(),
        );
        std::process::Command::new("kill")
            .args(["-QUIT", &std::process::id().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while rtvm_os_linux::quit::quit_count() == count {
            assert!(
                Instant::now() < deadline,
                "the SIGQUIT after destroy was not counted"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(printed.lock().unwrap().len(), text, "a dump after destroy");
    }
    println!("CHILD OK");
}

/// Sends this process a `SIGQUIT`.
fn quit_self() {
    std::process::Command::new("kill")
        .args(["-QUIT", &std::process::id().to_string()])
        .status()
        .unwrap();
}

#[test]
fn every_sigquit_gets_its_dump_while_the_dispatcher_is_busy() {
    if child_role().is_none() {
        return check_child("every_sigquit_gets_its_dump_while_the_dispatcher_is_busy");
    }
    // The first dump's output blocks until two more SIGQUITs have been counted: both arrive
    // while the Signal Dispatcher is still busy with the first, as kill -3 sent in quick
    // succession to a loaded VM (or one printing to a slow pipe) finds it.
    let gate = Arc::new((Mutex::new((0usize, false)), std::sync::Condvar::new()));
    let hook = Arc::clone(&gate);
    let vm = Vm::create(InitArgs::new(["-Xmx32m"]).output(move |_, text| {
        if !text.contains("Full thread dump rtvm 64-Bit VM") {
            return;
        }
        let (lock, cv) = &*hook;
        let mut g = lock.lock().unwrap();
        g.0 += 1;
        cv.notify_all();
        while !g.1 {
            g = cv.wait(g).unwrap();
        }
    }))
    .unwrap();
    let wait_for = |what: &str, done: &dyn Fn(&(usize, bool)) -> bool| {
        let (lock, cv) = &*gate;
        let mut g = lock.lock().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(&g) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{what}: {g:?}");
            g = cv.wait_timeout(g, left).unwrap().0;
        }
    };
    let base = rtvm_os_linux::quit::quit_count();
    quit_self();
    wait_for("the first dump", &|g| g.0 == 1);
    quit_self();
    quit_self();
    let deadline = Instant::now() + Duration::from_secs(20);
    while rtvm_os_linux::quit::quit_count().wrapping_sub(base) < 3 {
        assert!(Instant::now() < deadline, "three SIGQUITs not counted");
        std::thread::sleep(Duration::from_millis(5));
    }
    {
        let (lock, cv) = &*gate;
        lock.lock().unwrap().1 = true;
        cv.notify_all();
    }
    wait_for("three dumps", &|g| g.0 == 3);
    vm.shutdown().unwrap();
    let (lock, _) = &*gate;
    assert_eq!(lock.lock().unwrap().0, 3, "one dump per SIGQUIT");
    println!("three SIGQUITs, two of them while the first dump was printing: three dumps");
    println!("CHILD OK");
}

#[test]
fn destroy_while_a_client_is_connected() {
    if child_role().is_none() {
        return check_child("destroy_while_a_client_is_connected");
    }
    let vm = Vm::create(InitArgs::new(["-Xmx32m", "-XX:+StartAttachListener"])).unwrap();
    assert!(socket().exists() && perf_file().exists());
    let (status, text) = attach("jcmd", "VM.uptime");
    assert_eq!(status, "0");
    assert!(text.ends_with(" s\n"), "{text}");
    // Connected, never writing: the listener waits in its read.
    let silent = UnixStream::connect(socket()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    vm.shutdown().unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_millis(1500), "destroy took {took:?}");
    assert!(!socket().exists(), "the socket outlived the VM");
    assert!(!perf_file().exists(), "the perf data file outlived the VM");
    let names = thread_names();
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("Attach") || n.starts_with("Signal")),
        "{names:?}"
    );
    drop(silent);
    println!("destroy with a client connected: {took:?}");
    println!("CHILD OK");
}

#[test]
fn create_destroy_cycles_leave_nothing() {
    if child_role().is_none() {
        return check_child("create_destroy_cycles_leave_nothing");
    }
    // What a first VM sets up once per process (the logger, the allocator's arenas).
    Vm::create(InitArgs::new(["-Xmx16m"]))
        .unwrap()
        .shutdown()
        .unwrap();
    let (fds, threads) = (fd_count(), thread_names().len());
    for i in 0..100 {
        let vm = Vm::create(InitArgs::new(["-Xmx16m", "-XX:+StartAttachListener"])).unwrap();
        let (status, text) = attach("threaddump", "");
        assert_eq!(status, "0", "cycle {i}");
        assert!(text.contains("\"Attach Listener\""), "cycle {i}: {text}");
        vm.shutdown().unwrap();
        assert!(!socket().exists() && !perf_file().exists(), "cycle {i}");
    }
    assert_eq!(fd_count(), fds, "descriptors left behind");
    assert_eq!(
        thread_names().len(),
        threads,
        "threads left behind: {:?}",
        thread_names()
    );
    println!("100 cycles: {fds} descriptors, {threads} threads before and after");
    println!("CHILD OK");
}

/// A SIGHUP to an embedder with an exit hook (`InitArgs::exit_hook`): the hook is called on
/// the Signal Dispatcher with java's status, 129, once the socket and the perf data are gone.
#[test]
fn sighup_calls_the_exit_hook_after_the_files_are_gone() {
    use std::os::unix::process::ExitStatusExt;
    if child_role().is_none() {
        // SIGHUP at its default in the child, whatever this process inherited (nohup).
        let out = std::process::Command::new("env")
            .arg("--default-signal=HUP")
            .arg(std::env::current_exe().unwrap())
            .args([
                "sighup_calls_the_exit_hook_after_the_files_are_gone",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(rtvm_testkit::child::CHILD_ROLE, "child")
            .env_remove("RTVM_OPTIONS")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.code() == Some(129) && out.status.signal().is_none(),
            "{}",
            describe(&out)
        );
        assert!(
            text.contains("EXIT HOOK 129 on \"Signal Dispatch\": socket false, perf data false"),
            "{}",
            describe(&out)
        );
        return;
    }
    let vm = Vm::create(
        InitArgs::new(["-Xmx32m", "-XX:+StartAttachListener"]).exit_hook(|status| {
            let name = std::fs::read_to_string("/proc/thread-self/comm").unwrap_or_default();
            let name = name.trim();
            println!(
                "EXIT HOOK {status} on {name:?}: socket {}, perf data {}",
                socket().exists(),
                perf_file().exists()
            );
            std::process::exit(status);
        }),
    )
    .unwrap();
    assert!(socket().exists() && perf_file().exists());
    assert!(!signal_ignored(1), "SIGHUP is ignored in the child");
    std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_secs(30));
    drop(vm);
    panic!("SIGHUP did not end the process");
}
