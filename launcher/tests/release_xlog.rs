//! `-Xlog` survives in a release build of the `rtvm` binary with the MMTk binding linked.
//!
//! MMTk's default features include `log/release_max_level_off`; features are unified across
//! a build, so with them the `log` macros of every crate — rtvm's `-Xlog` included — compile
//! to nothing in release builds. The binding depends on `mmtk` with `default-features =
//! false`; this test runs the release binary (`.ci/run` runs it with `--release`) and fails
//! if any dependency brings such a feature back: `-Xlog:gc` must print the collector and its
//! collections, `-Xlog:os+thread` the GC workers' start.

use std::process::Command;

#[test]
fn xlog_gc_and_os_thread_print_with_the_binding_linked() {
    if cfg!(debug_assertions) {
        println!(
            "a debug build: log's release_max_level_* features do not apply to it; \
             `cargo test --release -p rtvm-launcher --test release_xlog` (.ci/run) checks them"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_rtvm"))
        .args([
            "-Xmx8m",
            "-XX:ParallelGCThreads=2",
            "-Xlog:gc,os+thread",
            "BinaryTrees",
            "14",
        ])
        .env_remove("RTVM_OPTIONS")
        .output()
        .expect("run rtvm");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("long lived tree of depth 14\t check: 32767"),
        "BinaryTrees did not finish:\n{stdout}"
    );
    let xlog = |tags: &str, text: &str| {
        stdout.lines().any(|l| {
            l.contains(&format!("][info][{tags}")) && l.contains(text) && l.starts_with('[')
        })
    };
    assert!(
        xlog("gc", "] Using MMTk Immix"),
        "-Xlog:gc printed no `Using MMTk Immix` (compiled out?):\n{stdout}"
    );
    assert!(
        xlog("gc", "] GC(0) Pause Full (Allocation Failure) "),
        "-Xlog:gc printed no collection (compiled out?):\n{stdout}"
    );
    for worker in ["GC Thread#0", "GC Thread#1"] {
        assert!(
            xlog("os,thread", &format!("Thread \"{worker}\" started")),
            "-Xlog:os+thread printed no start of {worker} (compiled out?):\n{stdout}"
        );
    }
}
