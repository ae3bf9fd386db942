//! Helpers shared by the OS-layer integration tests.
#![allow(dead_code)]

use rtvm_os_linux::procfs;
#[allow(unused_imports)]
pub use rtvm_testkit::child::{child_role, describe, isolated, run_child, value_after};

/// Current VmRSS in bytes.
pub fn rss() -> u64 {
    procfs::read_status().expect("/proc/self/status").vm_rss_kb * 1024
}

/// The `/proc/self/maps` entries overlapping `[start, end)`.
pub fn maps_in(start: usize, end: usize) -> Vec<procfs::MapsEntry> {
    procfs::maps_overlapping(start, end).expect("/proc/self/maps")
}

pub const MIB: usize = 1 << 20;
pub const GIB: usize = 1 << 30;
