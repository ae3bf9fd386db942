//! Serviceability with 10,000 threads: the latency of the JDK's own `jcmd` against a running
//! rtvm (`rtvm IdleThreads 10000`) and against java 17 running the same number of idle
//! threads, measured in the same run, interleaved (rtvm, java, rtvm, java, ...), medians.
//! `VM.uptime` is the floor: the client's own cost (a JVM starting, attaching); the other
//! commands' cost in the VM is their time above it.
//!
//! `cargo bench -p rtvm-launcher --bench service [-- --threads N --runs N]`

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rtvm_testkit::bench::{arg, have_java, listing, median};

const JAVA_IDLE: &str = r#"public class Idle {
    public static void main(String[] a) throws Exception {
        int n = Integer.parseInt(a[0]);
        Object gate = new Object();
        for (int i = 0; i < n; i++) {
            Thread t = new Thread(() -> { synchronized (gate) { try { gate.wait(); } catch (InterruptedException e) { } } }, "Idle#" + i);
            t.setDaemon(true);
            t.start();
        }
        System.out.println("IDLE READY");
        System.out.flush();
        Thread.sleep(Long.parseLong(a[1]) * 1000);
    }
}
"#;

/// Starts `program args` with SIGQUIT at its default, waits for a stdout line containing
/// `ready`.
fn start(program: &str, args: &[&str], ready: &str) -> Child {
    let mut child = Command::new("env")
        .arg("--default-signal=QUIT")
        .arg(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the target");
    let out = child.stdout.take().expect("piped");
    let mut lines = BufReader::new(out).lines();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains(ready) => break,
            Some(Ok(_)) => {}
            _ => panic!("{program} ended before it was ready"),
        }
        assert!(Instant::now() < deadline, "{program} not ready in time");
    }
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    child
}

fn jcmd(pid: u32, command: &[&str]) -> Duration {
    let start = Instant::now();
    let out = Command::new("jcmd")
        .arg(pid.to_string())
        .args(command)
        .output()
        .expect("jcmd");
    let took = start.elapsed();
    assert!(out.status.success(), "jcmd {pid} {command:?}: {out:?}");
    took
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    if listing() {
        return;
    }
    let threads: usize = arg("--threads").unwrap_or(10_000);
    let runs: usize = arg("--runs").unwrap_or(7);
    if Command::new("jcmd").arg("-h").output().is_err() {
        println!("jcmd is not installed: nothing to measure");
        return;
    }
    let n = threads.to_string();
    let mut ours = start(
        env!("CARGO_BIN_EXE_rtvm"),
        &[
            "-XX:NativeMemoryTracking=summary",
            "-Xmx64m",
            "IdleThreads",
            &n,
            "600",
        ],
        "IdleThreads",
    );
    let dir = std::env::temp_dir().join(format!("rtvm-bench-service-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let mut theirs = None;
    if have_java() {
        std::fs::write(dir.join("Idle.java"), JAVA_IDLE).expect("write Idle.java");
        let ok = Command::new("javac")
            .arg("-d")
            .arg(&dir)
            .arg(dir.join("Idle.java"))
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            let cp = dir.display().to_string();
            theirs = Some(start(
                "java",
                &[
                    "-XX:NativeMemoryTracking=summary",
                    "-Xmx64m",
                    "-cp",
                    &cp,
                    "Idle",
                    &n,
                    "600",
                ],
                "IDLE READY",
            ));
        }
    }
    let commands: [&[&str]; 3] = [
        &["VM.uptime"],
        &["VM.native_memory", "summary"],
        &["Thread.print"],
    ];
    // Warm: the first attach starts each listener.
    jcmd(ours.id(), &["VM.uptime"]);
    if let Some(j) = &theirs {
        jcmd(j.id(), &["VM.uptime"]);
    }
    let mut results: Vec<(Vec<Duration>, Vec<Duration>)> =
        vec![(Vec::new(), Vec::new()); commands.len()];
    for _ in 0..runs {
        for (i, c) in commands.iter().enumerate() {
            results[i].0.push(jcmd(ours.id(), c));
            if let Some(j) = &theirs {
                results[i].1.push(jcmd(j.id(), c));
            }
        }
    }
    println!("jcmd against {threads} idle threads, median of {runs} interleaved runs (warm: listeners started):");
    println!("| command | rtvm | above VM.uptime | java 17 | above VM.uptime | rtvm / java (above floor) |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let floor_r = median(results[0].0.clone());
    let floor_j = (!results[0].1.is_empty()).then(|| median(results[0].1.clone()));
    for (i, c) in commands.iter().enumerate() {
        let r = median(results[i].0.clone());
        let above_r = r.saturating_sub(floor_r);
        let (j, above_j, ratio) = match floor_j {
            Some(fj) => {
                let j = median(results[i].1.clone());
                let above = j.saturating_sub(fj);
                let ratio = if i == 0 || above.is_zero() {
                    "-".to_owned()
                } else {
                    format!("{:.2}", above_r.as_secs_f64() / above.as_secs_f64())
                };
                (
                    format!("{:.1} ms", ms(j)),
                    format!("{:.1} ms", ms(above)),
                    ratio,
                )
            }
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "| `{}` | {:.1} ms | {:.1} ms | {j} | {above_j} | {ratio} |",
            c.join(" "),
            ms(r),
            ms(above_r)
        );
    }
    let _ = ours.kill();
    let _ = ours.wait();
    if let Some(mut j) = theirs {
        let _ = j.kill();
        let _ = j.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
