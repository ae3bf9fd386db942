//! Helpers shared by the OS-layer integration tests.
#![allow(dead_code)]

use std::process::{Command, Output};

use rtvm_os_linux::procfs;

/// The environment variable that tells a re-executed test binary which child role to play.
pub const CHILD_ROLE: &str = "RTVM_TEST_CHILD_ROLE";

/// The role this process plays, if it is a child started by [`run_child`].
pub fn child_role() -> Option<String> {
    std::env::var(CHILD_ROLE).ok()
}

/// Re-runs this test binary, running only `test` (which must dispatch on [`child_role`]),
/// with the given role. Process-wide changes (rlimits, seccomp filters, crashes) stay in the
/// child.
pub fn run_child(test: &str, role: &str) -> Output {
    let exe = std::env::current_exe().expect("test binary path");
    Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ROLE, role)
        .output()
        .expect("re-running the test binary")
}

/// Current VmRSS in bytes.
pub fn rss() -> u64 {
    procfs::read_status().expect("/proc/self/status").vm_rss_kb * 1024
}

/// The `/proc/self/maps` entries overlapping `[start, end)`.
pub fn maps_in(start: usize, end: usize) -> Vec<procfs::MapsEntry> {
    procfs::maps_overlapping(start, end).expect("/proc/self/maps")
}

/// Text of a child's output, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub const MIB: usize = 1 << 20;
pub const GIB: usize = 1 << 30;

/// The rest of the first line of `text` that contains `key` (the child's test harness may
/// print its own `test name ... ` prefix on the same line).
pub fn value_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.find(key).map(|i| &l[i + key.len()..]))
}
