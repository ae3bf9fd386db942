//! Helpers shared by the runtime's integration tests.
#![allow(dead_code)]

use rtvm_os_linux::procfs::{self, MapsEntry};
#[allow(unused_imports)]
pub use rtvm_testkit::child::{child_role, describe, isolated, run_child, value_after};

/// Mappings now that were not in `before`, besides glibc malloc arenas (see
/// [`procfs::without_malloc_arenas`]).
pub fn new_mappings_besides_arenas(before: &[MapsEntry]) -> Vec<MapsEntry> {
    let after = procfs::without_malloc_arenas(&procfs::read_maps().expect("/proc/self/maps"));
    after
        .into_iter()
        .filter(|m| !before.iter().any(|b| b.start == m.start && b.end == m.end))
        .collect()
}
