//! Child processes playing a role of the same test binary.

use std::process::{Command, Output};

/// The environment variable that tells a re-executed test binary which child role to play.
pub const CHILD_ROLE: &str = "RTVM_TEST_CHILD_ROLE";

/// The role this process plays, if it is a child started by [`run_child`].
pub fn child_role() -> Option<String> {
    std::env::var(CHILD_ROLE).ok()
}

/// Re-runs this test binary, running only `test` (which must dispatch on [`child_role`]),
/// with the given role, alone (`--test-threads=1`) and without the options variable.
pub fn run_child(test: &str, role: &str) -> Output {
    let exe = std::env::current_exe().expect("test binary path");
    Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ROLE, role)
        .env_remove("RTVM_OPTIONS")
        .output()
        .expect("re-running the test binary")
}

/// A child's status and output, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The rest of the first line of `text` that contains `key` (the child's harness may print
/// its own prefix on the same line).
pub fn value_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.find(key).map(|i| &l[i + key.len()..]))
}
