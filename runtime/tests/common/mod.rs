//! Helpers shared by the runtime's integration tests.
#![allow(dead_code)]

use rtvm::os::procfs::{self, MapsEntry};

/// Mappings in `after` that were not in `before`, leaving out glibc malloc arenas: a new
/// thread's allocations get a 64 MiB-aligned, 64 MiB region (read-write head, `PROT_NONE`
/// rest) that outlives the thread by design — the C allocator's, not the VM's.
pub fn new_mappings_besides_arenas(before: &[MapsEntry]) -> Vec<MapsEntry> {
    const ARENA: usize = 64 << 20;
    let after = procfs::read_maps().expect("/proc/self/maps");
    let new: Vec<&MapsEntry> = after
        .iter()
        .filter(|m| !before.iter().any(|b| b.start == m.start && b.end == m.end))
        .collect();
    let mut leaked = Vec::new();
    let mut i = 0;
    while i < new.len() {
        let m = new[i];
        let is_arena = m.start.is_multiple_of(ARENA)
            && m.perms == "rw-p"
            && new
                .get(i + 1)
                .is_some_and(|n| n.start == m.end && n.perms == "---p" && n.end - m.start == ARENA);
        if is_arena {
            i += 2;
        } else {
            leaked.push(m.clone());
            i += 1;
        }
    }
    leaked
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
