//! Facts about the machine, read from the kernel's own files — the expectations tests compare
//! rtvm's detection against, never rtvm's detection itself.

/// The kernel release as (major, minor), from `/proc/sys/kernel/osrelease`.
pub fn release() -> (u32, u32) {
    let text = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = text.trim().split(['.', '-']);
    let mut next = || parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (next(), next())
}

/// This process's seccomp mode from `/proc/self/status` (0: none, 1: strict, 2: filter).
pub fn seccomp_mode() -> u32 {
    field("/proc/self/status", "Seccomp:").unwrap_or(0) as u32
}

/// Whether `MADV_POPULATE_WRITE` must work here: a kernel since 5.14 and no seccomp filter
/// that could refuse it.
pub fn expects_populate_write() -> bool {
    release() >= (5, 14) && seccomp_mode() == 0
}

/// The THP mode in `/sys/kernel/mm/transparent_hugepage/enabled` (the bracketed word), if the
/// kernel has THP.
pub fn thp_mode() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    Some(text.split('[').nth(1)?.split(']').next()?.to_owned())
}

/// The PMD-sized THP page in bytes (`hpage_pmd_size`), if the kernel has THP.
pub fn thp_pmd_size() -> Option<usize> {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The base page size in bytes, from `/proc/self/smaps` (`KernelPageSize` of the first
/// mapping), else 4096.
pub fn base_page_size() -> usize {
    std::fs::read_to_string("/proc/self/smaps")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("KernelPageSize:")?
                    .split_whitespace()
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
        })
        .map_or(4096, |kb| kb * 1024)
}

/// A `/proc/meminfo` field (the number, in the file's unit).
pub fn meminfo(key: &str) -> Option<u64> {
    field("/proc/meminfo", &format!("{key}:"))
}

/// `/proc/sys/vm/overcommit_memory` (0 heuristic, 1 always, 2 never).
pub fn overcommit_mode() -> u32 {
    std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

fn field(file: &str, key: &str) -> Option<u64> {
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok())
}

/// The multi-size THP sizes (bytes) whose control is effectively `always`: `always`, or
/// `inherit` under a top-level `always` (`/sys/kernel/mm/transparent_hugepage/hugepages-*`).
pub fn mthp_always_sizes() -> Vec<usize> {
    let top_always = thp_mode().as_deref() == Some("always");
    let Ok(dir) = std::fs::read_dir("/sys/kernel/mm/transparent_hugepage") else {
        return Vec::new();
    };
    let mut sizes: Vec<usize> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let kb: usize = name
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            let enabled = std::fs::read_to_string(e.path().join("enabled")).ok()?;
            let setting = enabled.split('[').nth(1)?.split(']').next()?.to_owned();
            (setting == "always" || (setting == "inherit" && top_always)).then_some(kb * 1024)
        })
        .collect();
    sizes.sort_unstable();
    sizes
}
