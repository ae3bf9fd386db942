//! Helpers shared by the runtime's integration tests.
#![allow(dead_code)]

use rtvm::testing::os::procfs::{self, MapsEntry};

/// Mappings now that were not in `before`, besides glibc malloc arenas (see
/// [`procfs::without_malloc_arenas`]).
pub fn new_mappings_besides_arenas(before: &[MapsEntry]) -> Vec<MapsEntry> {
    let after = procfs::without_malloc_arenas(&procfs::read_maps().expect("/proc/self/maps"));
    after
        .into_iter()
        .filter(|m| !before.iter().any(|b| b.start == m.start && b.end == m.end))
        .collect()
}

/// The environment variable that tells a re-executed test binary which child role to play.
pub const CHILD_ROLE: &str = "RTVM_TEST_CHILD_ROLE";

/// The child role of this process, if it is one.
pub fn child_role() -> Option<String> {
    std::env::var(CHILD_ROLE).ok()
}

/// Re-runs only `test` of this test binary in a child process, with `role`.
pub fn run_child(test: &str, role: &str) -> std::process::Output {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ROLE, role)
        .env_remove("RTVM_OPTIONS")
        .output()
        .unwrap()
}
