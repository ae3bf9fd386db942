//! Helpers shared by rtvm's benchmarks: medians, `--name value` arguments, whole-process
//! timing, and whether `java` (the reference) is installed.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The median of some samples.
pub fn median<T: Ord + Copy>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

/// The value after `--<name>` on the command line, parsed.
pub fn arg<T: std::str::FromStr>(name: &str) -> Option<T> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
}

/// Whether cargo only asked for the benchmark list (`cargo bench -- --list`).
pub fn listing() -> bool {
    std::env::args().any(|a| a == "--list")
}

/// Wall time of a whole process, output discarded; panics if it fails.
pub fn time_process(program: &str, args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .env_remove("RTVM_OPTIONS")
        .env_remove("JAVA_TOOL_OPTIONS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("start process");
    let elapsed = start.elapsed();
    assert!(status.success(), "{program} {args:?} failed");
    elapsed
}

/// Whether `java` runs here.
pub fn have_java() -> bool {
    Command::new("java")
        .arg("-version")
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
