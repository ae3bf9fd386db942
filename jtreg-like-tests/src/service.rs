//! What the serviceability tests share: the JDK's tools, a target process to attach to —
//! the test VM or `java` running the same small program — and its main.
//!
//! The target starts `n` idle threads named `Idle#<i>`, prints `TARGET READY`, and then
//! watches its directory: a file `more` starts 50 more threads (`More#<i>`, then `MORE
//! STARTED`), a file `stop` ends every thread and the process. Targets are started with
//! `SIGQUIT`, `SIGTERM`, `SIGINT` and `SIGHUP` at their default actions (`env
//! --default-signal=...`): a test runner (a shell's background job) may have some ignored,
//! which would hide what the signals do.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::testlib::{OutputAnalyzer, ProcessTools, RunningProcess, TestFailure, TestResult};

/// A JDK tool on the `PATH` (`jcmd`, `jstack`, `jinfo`, `jps`, `javac`, `java`).
pub fn jdk_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The tools every serviceability test needs, or the first one missing.
pub fn missing_jdk_tool() -> Option<&'static str> {
    ["jcmd", "jstack", "jinfo", "jps", "javac", "java"]
        .into_iter()
        .find(|t| jdk_tool(t).is_none())
}

/// Runs a JDK tool to completion.
pub fn tool(name: &str, args: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    let mut c = Command::new(name);
    c.args(args);
    ProcessTools::execute_within(c, Duration::from_secs(60))
}

/// `jcmd <pid> <args...>`.
pub fn jcmd(pid: u32, args: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    let pid = pid.to_string();
    let mut all = vec![pid.as_str()];
    all.extend_from_slice(args);
    tool("jcmd", &all)
}

/// The text a `jcmd` printed after its `<pid>:` line.
pub fn reply(out: &OutputAnalyzer) -> String {
    match out.stdout.split_once('\n') {
        Some((first, rest)) if first.ends_with(':') => rest.to_owned(),
        _ => out.stdout.clone(),
    }
}

const JAVA_TARGET: &str = r#"import java.nio.file.*;
public class Target {
    public static void main(String[] a) throws Exception {
        Path dir = Paths.get(a[0]);
        int n = Integer.parseInt(a[1]);
        for (int i = 0; i < n; i++) start("Idle#" + i, dir);
        System.out.println("TARGET READY");
        System.out.flush();
        while (!Files.exists(dir.resolve("stop"))) {
            if (Files.deleteIfExists(dir.resolve("more"))) {
                for (int i = 0; i < 50; i++) start("More#" + i, dir);
                System.out.println("MORE STARTED");
                System.out.flush();
            }
            Thread.sleep(20);
        }
    }
    static void start(String name, Path dir) {
        Thread t = new Thread(() -> {
            while (!Files.exists(dir.resolve("stop"))) {
                try { Thread.sleep(50); } catch (Exception e) { }
            }
        }, name);
        t.setDaemon(true);
        t.start();
    }
}
"#;

/// Compiles the Java target program into `<dir>/classes` (returned): `java -cp <it>
/// Target <dir> <n>` runs it.
pub fn java_target_classes(dir: &Path) -> Result<PathBuf, TestFailure> {
    let classes = dir.join("classes");
    std::fs::create_dir_all(&classes).map_err(|e| TestFailure(e.to_string()))?;
    let source = classes.join("Target.java");
    std::fs::write(&source, JAVA_TARGET).map_err(|e| TestFailure(e.to_string()))?;
    let javac = tool(
        "javac",
        &[
            "-d",
            &classes.display().to_string(),
            &source.display().to_string(),
        ],
    )?;
    javac.should_have_exit_value(0)?;
    Ok(classes)
}

/// A running target.
#[derive(Debug)]
pub struct Target {
    process: Option<RunningProcess>,
    dir: PathBuf,
}

fn scratch(tag: &str) -> Result<PathBuf, TestFailure> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "rtvm-target-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).map_err(|e| TestFailure(format!("{}: {e}", d.display())))?;
    Ok(d)
}

fn default_quit(program: &str, args: &[String]) -> Command {
    let mut c = Command::new("env");
    c.arg("--default-signal=QUIT,TERM,INT,HUP")
        .arg(program)
        .args(args);
    c
}

impl Target {
    /// The test VM running test `main` in its `target` mode, with `options` first.
    pub fn rtvm(main: &str, options: &[&str], idle: usize) -> Result<Target, TestFailure> {
        Self::rtvm_with_args(main, options, idle, &[])
    }

    /// [`Target::rtvm`] with more arguments after the target's own (which it ignores).
    pub fn rtvm_with_args(
        main: &str,
        options: &[&str],
        idle: usize,
        extra: &[String],
    ) -> Result<Target, TestFailure> {
        let dir = scratch("rtvm")?;
        let mut args: Vec<String> = options.iter().map(|s| s.to_string()).collect();
        args.extend([
            main.to_owned(),
            "target".to_owned(),
            dir.display().to_string(),
            idle.to_string(),
        ]);
        args.extend_from_slice(extra);
        Self::start(default_quit(&crate::testlib::test_vm(), &args), dir)
    }

    /// `java` running the same program, with `options` first.
    pub fn java(options: &[&str], idle: usize) -> Result<Target, TestFailure> {
        Self::java_with_args(options, idle, &[])
    }

    /// [`Target::java`] with more arguments after the program's own (which it ignores).
    pub fn java_with_args(
        options: &[&str],
        idle: usize,
        extra: &[String],
    ) -> Result<Target, TestFailure> {
        let dir = scratch("java")?;
        let classes = java_target_classes(&dir)?;
        let mut args: Vec<String> = options.iter().map(|s| s.to_string()).collect();
        args.extend([
            "-cp".to_owned(),
            classes.display().to_string(),
            "Target".to_owned(),
            dir.display().to_string(),
            idle.to_string(),
        ]);
        args.extend_from_slice(extra);
        Self::start(default_quit("java", &args), dir)
    }

    fn start(command: Command, dir: PathBuf) -> Result<Target, TestFailure> {
        let mut p = ProcessTools::start(command)?;
        p.wait_for_line("TARGET READY", Duration::from_secs(30))?;
        Ok(Target {
            process: Some(p),
            dir,
        })
    }

    /// The target's pid (`env` execs it, so it is the process the tools attach to).
    pub fn pid(&self) -> u32 {
        self.process.as_ref().map_or(0, RunningProcess::pid)
    }

    /// The directory the target watches.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts 50 more threads and waits until they run.
    pub fn more_threads(&mut self) -> Result<(), TestFailure> {
        std::fs::write(self.dir.join("more"), b"").map_err(|e| TestFailure(e.to_string()))?;
        let p = self.process.as_mut().expect("running");
        p.wait_for_line("MORE STARTED", Duration::from_secs(30))
            .map(drop)
    }

    /// Whether the target process still runs.
    pub fn is_running(&mut self) -> bool {
        self.process
            .as_mut()
            .is_some_and(RunningProcess::is_running)
    }

    /// The running process and the directory it watches, for a test that ends it its own
    /// way (the directory is the caller's to remove).
    pub fn into_process(mut self) -> (RunningProcess, PathBuf) {
        let p = self.process.take().expect("running");
        (p, std::mem::take(&mut self.dir))
    }

    /// Sends `signal` (`"-TERM"`, as `kill` takes it) to the target and waits for it to end
    /// (killing it after 30 s); returns its output and how it ended.
    pub fn signal_and_finish(mut self, signal: &str) -> Result<OutputAnalyzer, TestFailure> {
        let mut p = self.process.take().expect("running");
        let mut kill = Command::new("kill");
        kill.args([signal, &p.pid().to_string()]);
        ProcessTools::execute(kill)?.should_have_exit_value(0)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while p.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if p.is_running() {
            p.kill();
        }
        p.finish()
    }

    /// Ends the target (its threads end, the VM shuts down) and returns its output.
    pub fn stop(mut self) -> Result<OutputAnalyzer, TestFailure> {
        let _ = std::fs::write(self.dir.join("stop"), b"");
        let mut p = self.process.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(30);
        while p.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if p.is_running() {
            p.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        p.finish()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = std::fs::write(self.dir.join("stop"), b"");
            std::thread::sleep(Duration::from_millis(200));
            if p.is_running() {
                p.kill();
            }
            let _ = p.finish();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The target's main, for a test file's `target` mode: `target <dir> <idle threads>`.
pub fn target_main(vm: &rtvm::Vm, args: &[String]) -> TestResult {
    let dir = PathBuf::from(
        args.first()
            .ok_or_else(|| TestFailure("target <dir> <n>".into()))?,
    );
    let idle: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(2);
    let stop = dir.join("stop");
    let mut threads = Vec::new();
    let start = |name: String, threads: &mut Vec<rtvm::VmThread>| -> Result<(), TestFailure> {
        let stop = stop.clone();
        let t = vm
            .spawn(&name, move || {
                while !stop.exists() {
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
            .map_err(|e| TestFailure(e.to_string()))?;
        threads.push(t);
        Ok(())
    };
    for i in 0..idle {
        start(format!("Idle#{i}"), &mut threads)?;
    }
    println!("TARGET READY");
    let more = dir.join("more");
    while !stop.exists() {
        if std::fs::remove_file(&more).is_ok() {
            for i in 0..50 {
                start(format!("More#{i}"), &mut threads)?;
            }
            println!("MORE STARTED");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for t in threads {
        t.join().map_err(|e| TestFailure(e.to_string()))?;
    }
    Ok(())
}
