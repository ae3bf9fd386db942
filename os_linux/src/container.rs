//! Container limits, found as HotSpot's `CgroupSubsystemFactory` finds them: the controllers
//! in `/proc/cgroups`, the process's cgroups in `/proc/self/cgroup`, the hierarchies in
//! `/proc/self/mountinfo` — cgroup v2 (unified), v1 (legacy), or hybrid (v1 controllers next
//! to a v2 mount, which HotSpot reads as v1).
//!
//! The memory limit is the smallest of the cgroup's own and its parents' (v2 `memory.max`
//! up the tree; v1 `memory.limit_in_bytes`, else `hierarchical_memory_limit` from
//! `memory.stat` when `memory.use_hierarchy` is on); the CPU quota is `cpu.max` (v2) or
//! `cpu.cfs_quota_us`/`cpu.cfs_period_us` (v1). Shares and weights are read and reported but,
//! as in HotSpot 17.0.x since JDK-8281181, not used for the processor count.
//!
//! Nothing here fails: a missing controller, an unreadable file or a value that makes no
//! sense (garbage, above physical memory) is a note in HotSpot's words and the figure is
//! left out, so the caller falls back to the host's. Paths come from [`SysRoots`], so tests
//! run against fixture trees.

use std::path::{Path, PathBuf};

use crate::pages::SysRoots;

/// Which cgroup hierarchy the controllers were found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CgroupVersion {
    /// cgroup v1 controllers (legacy, or hybrid with an unused v2 mount).
    V1,
    /// The cgroup v2 unified hierarchy.
    V2,
}

/// What the container allows the process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerInfo {
    /// The hierarchy the limits were read from; `None` when the process is in no cgroup
    /// hierarchy with a memory or cpu controller (not containerized: host figures apply).
    pub version: Option<CgroupVersion>,
    /// The memory limit in bytes; `None` for no limit (or none that could be read).
    pub memory_limit: Option<u64>,
    /// The CPU quota as `(quota, period)` in microseconds; `None` for no quota.
    pub cpu_quota: Option<(u64, u64)>,
    /// CPU shares (v1 `cpu.shares`, v2 `cpu.weight` converted to shares), if set. Reported,
    /// not used for the processor count (HotSpot 17.0.5 and later ignore them too).
    pub cpu_shares: Option<u64>,
    /// The processors the container lets the process use: the host's (the caller's
    /// figure) or fewer under a quota (HotSpot's `OSContainer::active_processor_count`).
    pub processors: usize,
    /// What detection found, in HotSpot's order and words, each with the level HotSpot logs
    /// it at (tag set `os+container`).
    pub notes: Vec<(log::Level, String)>,
}

impl ContainerInfo {
    /// Processors the quota allows, rounded up (`None` without a quota).
    pub fn quota_processors(&self) -> Option<usize> {
        self.cpu_quota
            .map(|(quota, period)| quota.div_ceil(period.max(1)).max(1) as usize)
    }

    fn note(&mut self, level: log::Level, text: impl Into<String>) {
        self.notes.push((level, text.into()));
    }
}

/// v1's "no limit": `LONG_MAX` rounded down to a page, or anything at least that large.
const V1_UNLIMITED: u64 = 0x7FFF_FFFF_FFFF_F000;

/// The cgroup information of the current process (with no version when it is in no cgroup
/// hierarchy with a memory or cpu controller). `physical_memory` and `host_processors` are the host's figures:
/// a limit at or above the host's memory is no limit, and a quota only lowers the count.
pub fn detect(roots: &SysRoots, physical_memory: u64, host_processors: usize) -> ContainerInfo {
    use log::Level::{Debug, Trace};
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let cgroups = read(&roots.proc.join("cgroups")).unwrap_or_default();
    let self_cgroup = read(&roots.proc.join("self/cgroup")).unwrap_or_default();
    let mountinfo = read(&roots.proc.join("self/mountinfo")).unwrap_or_default();
    // /proc/cgroups: subsys_name hierarchy num_cgroups enabled
    let hierarchy_of = |controller: &str| -> Option<u32> {
        cgroups.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[0] == controller && f[3] == "1").then(|| f[1].parse().ok())?
        })
    };
    let mut info = ContainerInfo {
        version: None,
        memory_limit: None,
        cpu_quota: None,
        cpu_shares: None,
        processors: host_processors,
        notes: Vec::new(),
    };
    info.note(Trace, "OSContainer::init: Initializing Container Support");
    if cgroups.lines().skip(1).any(|l| l.starts_with("pids")) {
        info.note(
            Debug,
            "Detected optional pids controller entry in /proc/cgroups",
        );
    }
    let memory_h = hierarchy_of("memory");
    let cpu_h = hierarchy_of("cpu");
    if memory_h.is_none() && cpu_h.is_none() {
        info.note(
            Debug,
            "One or more required controllers disabled at kernel level.",
        );
        return info;
    }
    let unified = memory_h.unwrap_or(0) == 0 && cpu_h.unwrap_or(0) == 0;
    if unified {
        info.version = Some(CgroupVersion::V2);
        info.note(Debug, "Detected cgroups v2 unified hierarchy");
        let Some(dir) = v2_dir(roots, &mountinfo, &self_cgroup) else {
            info.note(Debug, "Required cgroup v2 mount not found");
            return info;
        };
        read_v2_cpu(&mut info, &dir);
        count_processors(&mut info, host_processors);
        info.note(Trace, format!("total physical memory: {physical_memory}"));
        read_v2_memory(
            &mut info,
            &dir,
            &v2_mount_root(roots, &mountinfo),
            physical_memory,
        );
    } else {
        info.version = Some(CgroupVersion::V1);
        info.note(
            Debug,
            "Detected cgroups hybrid or legacy hierarchy, using cgroups v1 controllers",
        );
        let memory = v1_dir(roots, &mountinfo, &self_cgroup, "memory");
        let hierarchical = match &memory {
            Some(dir) => {
                number(&mut info, &dir.join("memory.use_hierarchy"))
                    .inspect(|h| info.note(Trace, format!("Use Hierarchy is: {h}")))
                    == Some(1)
            }
            None => {
                info.note(Debug, "Required cgroup v1 memory subsystem not found");
                false
            }
        };
        match v1_dir(roots, &mountinfo, &self_cgroup, "cpu") {
            Some(dir) => read_v1_cpu(&mut info, &dir),
            None => info.note(Debug, "Required cgroup v1 cpu subsystem not found"),
        }
        count_processors(&mut info, host_processors);
        if let Some(dir) = memory {
            info.note(Trace, format!("total physical memory: {physical_memory}"));
            read_v1_memory(&mut info, &dir, hierarchical, physical_memory);
        }
    }
    info
}

/// The processors a quota leaves (never more than the host's), noted as HotSpot does.
fn count_processors(info: &mut ContainerInfo, host_processors: usize) {
    use log::Level::Trace;
    if let Some(count) = info.quota_processors() {
        info.note(
            Trace,
            format!("CPU Quota count based on quota/period: {count}"),
        );
        info.processors = host_processors.min(count);
    }
    info.note(
        Trace,
        format!("OSContainer::active_processor_count: {}", info.processors),
    );
}

/// A mount point from mountinfo, under the fixture root when tests give one.
fn resolve(roots: &SysRoots, mount_point: &str) -> PathBuf {
    match mount_point.strip_prefix("/sys/") {
        Some(rest) => roots.sys.join(rest),
        None => PathBuf::from(mount_point),
    }
}

/// mountinfo fields: (root, mount point, fs type, super options).
fn mounts(mountinfo: &str) -> impl Iterator<Item = (&str, &str, &str, &str)> {
    mountinfo.lines().filter_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let left: Vec<&str> = left.split_whitespace().collect();
        let right: Vec<&str> = right.split_whitespace().collect();
        Some((
            *left.get(3)?,
            *left.get(4)?,
            *right.first()?,
            *right.get(2)?,
        ))
    })
}

/// The v1 directory of `controller` for this process: the mount whose super options name
/// the controller, and the process's path below the mount's root (HotSpot's
/// `set_subsystem_path`).
fn v1_dir(
    roots: &SysRoots,
    mountinfo: &str,
    self_cgroup: &str,
    controller: &str,
) -> Option<PathBuf> {
    let (root, mount_point) = mounts(mountinfo)
        .find(|(_, _, fs, opts)| *fs == "cgroup" && opts.split(',').any(|o| o == controller))
        .map(|(root, mp, _, _)| (root, mp))?;
    let path = self_cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    })?;
    let base = resolve(roots, mount_point);
    // A container's mount shows its own cgroup as the root; a path outside it means the
    // process sits at that root.
    let relative = if root == "/" {
        path
    } else {
        path.strip_prefix(root).unwrap_or("/")
    };
    Some(base.join(relative.trim_start_matches('/')))
}

/// The cgroup2 mount point.
fn v2_mount_root(roots: &SysRoots, mountinfo: &str) -> PathBuf {
    mounts(mountinfo)
        .find(|(_, _, fs, _)| *fs == "cgroup2")
        .map(|(_, mp, _, _)| resolve(roots, mp))
        .unwrap_or_else(|| roots.sys.join("fs/cgroup"))
}

/// This process's cgroup v2 directory (`0::/path`).
fn v2_dir(roots: &SysRoots, mountinfo: &str, self_cgroup: &str) -> Option<PathBuf> {
    let path = self_cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    mounts(mountinfo).find(|(_, _, fs, _)| *fs == "cgroup2")?;
    Some(v2_mount_root(roots, mountinfo).join(path.trim_start_matches('/')))
}

/// A controller file's text, trimmed, as HotSpot reads one: the path noted first, an open
/// failure noted with its reason.
fn contents(info: &mut ContainerInfo, file: &Path) -> Option<String> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    info.note(
        log::Level::Trace,
        format!("Path to /{name} is {}", file.display()),
    );
    match std::fs::read_to_string(file) {
        Ok(t) => Some(t.trim().to_owned()),
        Err(e) => {
            let reason = e
                .raw_os_error()
                .map(|n| crate::strerror(crate::Errno::from_raw(n)))
                .unwrap_or_else(|| e.to_string());
            info.note(
                log::Level::Debug,
                format!("Open of file {} failed, {reason}", file.display()),
            );
            None
        }
    }
}

/// A file holding one number; `None` (noted) when it is missing or holds something else.
fn number(info: &mut ContainerInfo, file: &Path) -> Option<u64> {
    let text = contents(info, file)?;
    parse_number(info, &text, file)
}

fn parse_number(info: &mut ContainerInfo, text: &str, file: &Path) -> Option<u64> {
    match text.parse::<u64>() {
        Ok(v) => Some(v),
        Err(_) => {
            info.note(
                log::Level::Debug,
                format!("'{text}' in {} is not a number; ignored", file.display()),
            );
            None
        }
    }
}

/// A memory limit at or above the host's memory is no limit (HotSpot reports it unlimited).
fn below_host(limit: u64, physical_memory: u64) -> bool {
    limit > 0 && limit < V1_UNLIMITED && (physical_memory == 0 || limit < physical_memory)
}

fn read_v1_memory(info: &mut ContainerInfo, dir: &Path, hierarchical: bool, physical_memory: u64) {
    use log::Level::Trace;
    let Some(own) = number(info, &dir.join("memory.limit_in_bytes")) else {
        return;
    };
    info.note(Trace, format!("Memory Limit is: {own}"));
    if below_host(own, physical_memory) {
        info.memory_limit = Some(own);
        return;
    }
    info.note(Trace, "Non-Hierarchical Memory Limit is: Unlimited");
    if !hierarchical {
        return;
    }
    let stat_file = dir.join("memory.stat");
    let Some(stat) = contents(info, &stat_file) else {
        return;
    };
    let line = stat
        .lines()
        .find_map(|l| l.strip_prefix("hierarchical_memory_limit "));
    let Some(limit) = line.and_then(|v| parse_number(info, v.trim(), &stat_file)) else {
        return;
    };
    info.note(Trace, format!("Hierarchical Memory Limit is: {limit}"));
    if below_host(limit, physical_memory) {
        info.memory_limit = Some(limit);
    } else {
        info.note(Trace, "Hierarchical Memory Limit is: Unlimited");
    }
}

fn read_v1_cpu(info: &mut ContainerInfo, dir: &Path) {
    use log::Level::Trace;
    let quota = contents(info, &dir.join("cpu.cfs_quota_us")).and_then(|t| t.parse::<i64>().ok());
    if let Some(q) = quota {
        info.note(Trace, format!("CPU Quota is: {q}"));
    }
    let period = number(info, &dir.join("cpu.cfs_period_us"));
    if let Some(p) = period {
        info.note(Trace, format!("CPU Period is: {p}"));
    }
    if let (Some(q), Some(p)) = (quota.filter(|&q| q > 0), period.filter(|&p| p > 0)) {
        info.cpu_quota = Some((q as u64, p));
    }
    // 1024 is the default, i.e. no shares set; read quietly (HotSpot 17.0.15 does not).
    info.cpu_shares = std::fs::read_to_string(dir.join("cpu.shares"))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .filter(|&s| s != 1024);
}

fn read_v2_cpu(info: &mut ContainerInfo, dir: &Path) {
    use log::Level::Trace;
    // cpu.max: "<quota|max> <period>"
    if let Some(text) = contents(info, &dir.join("cpu.max")) {
        let mut f = text.split_whitespace();
        let quota = f.next().unwrap_or("max").to_owned();
        info.note(Trace, format!("Raw value for CPU quota is: {quota}"));
        let quota = if quota == "max" {
            Some(-1)
        } else {
            quota.parse::<i64>().ok()
        };
        if let Some(q) = quota {
            info.note(Trace, format!("CPU Quota is: {q}"));
        }
        let period = f.next().and_then(|p| p.parse::<u64>().ok());
        if let Some(p) = period {
            info.note(Trace, format!("CPU Period is: {p}"));
        }
        if let (Some(q), Some(p)) = (quota.filter(|&q| q > 0), period.filter(|&p| p > 0)) {
            info.cpu_quota = Some((q as u64, p));
        }
    }
    // cpu.weight (1..10000, default 100) as v1 shares, the conversion HotSpot uses.
    info.cpu_shares = std::fs::read_to_string(dir.join("cpu.weight"))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .filter(|&w| w != 100 && w > 0)
        .map(|w| (262142 * w - 1) / 9999 + 2);
}

fn read_v2_memory(info: &mut ContainerInfo, dir: &Path, mount_root: &Path, physical_memory: u64) {
    use log::Level::Trace;
    // The smallest memory.max from the process's cgroup up to (not including) the root: a
    // parent's limit binds a child that has none of its own.
    let mut limit: Option<u64> = None;
    let mut at = Some(dir.to_path_buf());
    while let Some(d) = at {
        if d == mount_root || !d.starts_with(mount_root) {
            break;
        }
        let file = d.join("memory.max");
        if file.exists() {
            if let Some(text) = contents(info, &file) {
                info.note(Trace, format!("Raw value for memory limit is: {text}"));
                if text != "max" {
                    if let Some(l) = parse_number(info, &text, &file) {
                        limit = Some(limit.map_or(l, |m| m.min(l)));
                    }
                }
            }
        }
        at = d.parent().map(Path::to_path_buf);
    }
    match limit {
        Some(l) if below_host(l, physical_memory) => {
            info.memory_limit = Some(l);
            info.note(Trace, format!("Memory Limit is: {l}"));
        }
        _ => info.note(Trace, "Memory Limit is: Unlimited"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture tree: files relative to the root.
    fn tree(files: &[(&str, &str)]) -> (PathBuf, SysRoots) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "rtvm-cgroup-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        for (path, text) in files {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let roots = SysRoots {
            sys: root.join("sys"),
            proc: root.join("proc"),
        };
        (root, roots)
    }

    const CGROUPS_V1: &str = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t1\t1\t1\ncpuacct\t2\t1\t1\nmemory\t4\t3\t1\npids\t8\t1\t1\n";
    const CGROUPS_V2: &str = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t0\t1\t1\ncpu\t0\t1\t1\ncpuacct\t0\t1\t1\nmemory\t0\t3\t1\n";
    const MOUNTS_V1: &str = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    const MOUNTS_V2: &str =
        "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
    const GIB: u64 = 1 << 30;

    fn texts(c: &ContainerInfo) -> Vec<&str> {
        c.notes.iter().map(|(_, t)| t.as_str()).collect()
    }

    #[test]
    fn v1_limit_and_quota() {
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V1),
            ("proc/self/mountinfo", MOUNTS_V1),
            ("proc/self/cgroup", "4:memory:/box\n1:cpu:/box\n0::/\n"),
            (
                "sys/fs/cgroup/memory/box/memory.limit_in_bytes",
                "536870912\n",
            ),
            ("sys/fs/cgroup/memory/box/memory.use_hierarchy", "1\n"),
            ("sys/fs/cgroup/cpu/box/cpu.cfs_quota_us", "150000\n"),
            ("sys/fs/cgroup/cpu/box/cpu.cfs_period_us", "100000\n"),
            ("sys/fs/cgroup/cpu/box/cpu.shares", "512\n"),
        ]);
        let c = detect(&roots, 24 * GIB, 8);
        assert_eq!(c.version, Some(CgroupVersion::V1));
        assert_eq!(c.memory_limit, Some(536870912));
        assert_eq!(c.cpu_quota, Some((150000, 100000)));
        assert_eq!(c.quota_processors(), Some(2));
        assert_eq!(c.processors, 2);
        assert_eq!(c.cpu_shares, Some(512));
        // HotSpot 17's sequence and levels, as `java -Xlog:os+container=trace` prints them.
        let sys = roots.sys.display().to_string();
        let expected = [
            (log::Level::Trace, "OSContainer::init: Initializing Container Support".to_string()),
            (log::Level::Debug, "Detected optional pids controller entry in /proc/cgroups".into()),
            (log::Level::Debug, "Detected cgroups hybrid or legacy hierarchy, using cgroups v1 controllers".into()),
            (log::Level::Trace, format!("Path to /memory.use_hierarchy is {sys}/fs/cgroup/memory/box/memory.use_hierarchy")),
            (log::Level::Trace, "Use Hierarchy is: 1".into()),
            (log::Level::Trace, format!("Path to /cpu.cfs_quota_us is {sys}/fs/cgroup/cpu/box/cpu.cfs_quota_us")),
            (log::Level::Trace, "CPU Quota is: 150000".into()),
            (log::Level::Trace, format!("Path to /cpu.cfs_period_us is {sys}/fs/cgroup/cpu/box/cpu.cfs_period_us")),
            (log::Level::Trace, "CPU Period is: 100000".into()),
            (log::Level::Trace, "CPU Quota count based on quota/period: 2".into()),
            (log::Level::Trace, "OSContainer::active_processor_count: 2".into()),
            (log::Level::Trace, format!("total physical memory: {}", 24 * GIB)),
            (log::Level::Trace, format!("Path to /memory.limit_in_bytes is {sys}/fs/cgroup/memory/box/memory.limit_in_bytes")),
            (log::Level::Trace, "Memory Limit is: 536870912".into()),
        ];
        assert_eq!(c.notes, expected);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn v1_unlimited_uses_the_hierarchical_limit() {
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V1),
            ("proc/self/mountinfo", MOUNTS_V1),
            ("proc/self/cgroup", "4:memory:/outer/inner\n1:cpu:/\n"),
            (
                "sys/fs/cgroup/memory/outer/inner/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "sys/fs/cgroup/memory/outer/inner/memory.use_hierarchy",
                "1\n",
            ),
            (
                "sys/fs/cgroup/memory/outer/inner/memory.stat",
                "cache 0\nhierarchical_memory_limit 268435456\n",
            ),
            ("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"),
            ("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"),
        ]);
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!(c.memory_limit, Some(268435456));
        assert_eq!((c.cpu_quota, c.processors), (None, 2));
        let t = texts(&c);
        let at = t
            .iter()
            .position(|l| *l == "Memory Limit is: 9223372036854771712")
            .unwrap();
        assert_eq!(t[at + 1], "Non-Hierarchical Memory Limit is: Unlimited");
        assert!(t[at + 2].starts_with("Path to /memory.stat is "));
        assert_eq!(t[at + 3], "Hierarchical Memory Limit is: 268435456");
        assert!(t.contains(&"CPU Quota is: -1"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn v1_unlimited_everywhere_and_limits_above_ram() {
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V1),
            ("proc/self/mountinfo", MOUNTS_V1),
            ("proc/self/cgroup", "4:memory:/a\n1:cpu:/a\n"),
            (
                "sys/fs/cgroup/memory/a/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            ("sys/fs/cgroup/memory/a/memory.use_hierarchy", "1\n"),
            (
                "sys/fs/cgroup/memory/a/memory.stat",
                "hierarchical_memory_limit 9223372036854771712\n",
            ),
        ]);
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!(c.memory_limit, None);
        assert_eq!(
            texts(&c).last(),
            Some(&"Hierarchical Memory Limit is: Unlimited")
        );
        // A limit above physical memory is no limit; without hierarchy nothing more is read.
        std::fs::write(
            roots.sys.join("fs/cgroup/memory/a/memory.limit_in_bytes"),
            "68719476736\n",
        )
        .unwrap();
        std::fs::write(
            roots.sys.join("fs/cgroup/memory/a/memory.use_hierarchy"),
            "0\n",
        )
        .unwrap();
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!(
            c.memory_limit, None,
            "a limit above physical memory is no limit"
        );
        assert_eq!(
            texts(&c).last(),
            Some(&"Non-Hierarchical Memory Limit is: Unlimited")
        );
        // The cpu controller is mounted but this cgroup has no files: noted, host count.
        assert!(texts(&c).iter().any(|t| t.starts_with("Open of file ")
            && t.ends_with("cpu.cfs_quota_us failed, No such file or directory")));
        assert_eq!(c.processors, 2);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn v1_container_mount_root() {
        // In a container the mount's root is the container's own cgroup.
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V1),
            ("proc/self/mountinfo", "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n32 31 0:29 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n"),
            ("proc/self/cgroup", "4:memory:/docker/abc\n1:cpu:/docker/abc\n"),
            ("sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n"),
            ("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "400000\n"),
            ("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"),
        ]);
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!(c.memory_limit, Some(GIB));
        // A quota of four CPUs on a two-CPU host leaves two.
        assert_eq!((c.quota_processors(), c.processors), (Some(4), 2));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn v1_garbage_values() {
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V1),
            ("proc/self/mountinfo", MOUNTS_V1),
            ("proc/self/cgroup", "4:memory:/g\n1:cpu:/g\n"),
            ("sys/fs/cgroup/memory/g/memory.limit_in_bytes", "a lot\n"),
            ("sys/fs/cgroup/memory/g/memory.use_hierarchy", "yes\n"),
            ("sys/fs/cgroup/cpu/g/cpu.cfs_quota_us", "fast\n"),
            ("sys/fs/cgroup/cpu/g/cpu.cfs_period_us", "0\n"),
        ]);
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!((c.memory_limit, c.cpu_quota, c.processors), (None, None, 2));
        assert!(texts(&c)
            .iter()
            .any(|t| t.starts_with("'a lot' in ") && t.ends_with("is not a number; ignored")));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn hybrid_reads_the_v1_controllers_and_pure_legacy_too() {
        // Hybrid: v1 memory and cpu next to a cgroup2 mount with no controllers; its files
        // (here a smaller memory.max) are not the limit, as in HotSpot.
        let files = [
            ("proc/cgroups", CGROUPS_V1),
            ("proc/self/mountinfo", MOUNTS_V1),
            ("proc/self/cgroup", "4:memory:/h\n1:cpu:/h\n0::/h\n"),
            (
                "sys/fs/cgroup/memory/h/memory.limit_in_bytes",
                "1073741824\n",
            ),
            ("sys/fs/cgroup/unified/h/memory.max", "1048576\n"),
        ];
        let (root, roots) = tree(&files);
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!(
            (c.version, c.memory_limit),
            (Some(CgroupVersion::V1), Some(GIB))
        );
        // Pure legacy: no cgroup2 mount at all.
        let legacy = MOUNTS_V1
            .lines()
            .filter(|l| !l.contains("cgroup2"))
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(roots.proc.join("self/mountinfo"), legacy).unwrap();
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!(
            (c.version, c.memory_limit),
            (Some(CgroupVersion::V1), Some(GIB))
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn unreadable_files_are_noted_and_skipped() {
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V2),
            ("proc/self/mountinfo", MOUNTS_V2),
            ("proc/self/cgroup", "0::/u\n"),
            ("sys/fs/cgroup/u/cpu.max/placeholder", ""),
            ("sys/fs/cgroup/u/memory.max/placeholder", ""),
        ]);
        // cpu.max and memory.max are directories: reading them fails with EISDIR.
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!((c.memory_limit, c.cpu_quota, c.processors), (None, None, 2));
        let t = texts(&c);
        assert!(
            t.iter()
                .any(|l| l.starts_with("Open of file ")
                    && l.ends_with("cpu.max failed, Is a directory")),
            "{t:#?}"
        );
        assert!(
            t.iter().any(|l| l.starts_with("Open of file ")
                && l.ends_with("memory.max failed, Is a directory")),
            "{t:#?}"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn v2_nested_limits_take_the_smallest() {
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V2),
            ("proc/self/mountinfo", MOUNTS_V2),
            ("proc/self/cgroup", "0::/outer/inner\n"),
            ("sys/fs/cgroup/outer/memory.max", "268435456\n"),
            ("sys/fs/cgroup/outer/inner/memory.max", "max\n"),
            ("sys/fs/cgroup/outer/inner/cpu.max", "50000 100000\n"),
            ("sys/fs/cgroup/outer/inner/cpu.weight", "200\n"),
        ]);
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!(c.version, Some(CgroupVersion::V2));
        assert_eq!(c.memory_limit, Some(268435456));
        assert_eq!(c.cpu_quota, Some((50000, 100000)));
        assert_eq!((c.quota_processors(), c.processors), (Some(1), 1));
        assert_eq!(c.cpu_shares, Some(((262142 * 200) - 1) / 9999 + 2));
        let t = texts(&c);
        assert_eq!(t[1], "Detected cgroups v2 unified hierarchy");
        for line in [
            "Raw value for CPU quota is: 50000",
            "CPU Quota is: 50000",
            "CPU Period is: 100000",
            "OSContainer::active_processor_count: 1",
            "Raw value for memory limit is: max",
            "Raw value for memory limit is: 268435456",
        ] {
            assert!(t.contains(&line), "{line} in {t:#?}");
        }
        assert_eq!(t.last(), Some(&"Memory Limit is: 268435456"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn v2_unlimited_and_garbage() {
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V2),
            ("proc/self/mountinfo", MOUNTS_V2),
            ("proc/self/cgroup", "0::/box\n"),
            ("sys/fs/cgroup/box/memory.max", "lots\n"),
            ("sys/fs/cgroup/box/cpu.max", "max 100000\n"),
        ]);
        let c = detect(&roots, 24 * GIB, 2);
        assert_eq!((c.memory_limit, c.cpu_quota), (None, None));
        assert!(texts(&c).contains(&"CPU Quota is: -1"));
        assert!(texts(&c).iter().any(|t| t.contains("is not a number")));
        assert_eq!(texts(&c).last(), Some(&"Memory Limit is: Unlimited"));
        // A limit above the host's memory is none either.
        std::fs::write(
            roots.sys.join("fs/cgroup/box/memory.max"),
            format!("{}\n", 64 * GIB),
        )
        .unwrap();
        assert_eq!(detect(&roots, 24 * GIB, 2).memory_limit, None);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn missing_controllers_and_files() {
        let (root, roots) = tree(&[(
            "proc/cgroups",
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\npids\t8\t1\t1\n",
        )]);
        let c = detect(&roots, GIB, 2);
        assert_eq!((c.version, c.memory_limit, c.processors), (None, None, 2));
        assert_eq!(
            texts(&c).last(),
            Some(&"One or more required controllers disabled at kernel level.")
        );
        // Controllers listed but nothing mounted: v1 with nothing found, never a failure.
        let (root2, roots2) = tree(&[
            ("proc/cgroups", CGROUPS_V1),
            ("proc/self/cgroup", "4:memory:/x\n"),
        ]);
        let c = detect(&roots2, GIB, 2);
        assert_eq!((c.memory_limit, c.cpu_quota), (None, None));
        assert!(texts(&c).contains(&"Required cgroup v1 memory subsystem not found"));
        assert!(texts(&c).contains(&"Required cgroup v1 cpu subsystem not found"));
        // v2 listed, no cgroup2 mount.
        let (root3, roots3) = tree(&[
            ("proc/cgroups", CGROUPS_V2),
            ("proc/self/cgroup", "0::/x\n"),
        ]);
        let c = detect(&roots3, GIB, 2);
        assert_eq!((c.version, c.memory_limit), (Some(CgroupVersion::V2), None));
        // Nothing at all.
        let empty = SysRoots {
            sys: root.join("none/sys"),
            proc: root.join("none/proc"),
        };
        assert_eq!(detect(&empty, GIB, 2).version, None);
        for r in [root, root2, root3] {
            std::fs::remove_dir_all(r).unwrap();
        }
    }

    #[test]
    fn this_machine() {
        // Whatever the machine is, detection answers without failing and never raises the
        // processor count above the host's.
        let c = detect(&SysRoots::default(), 24 * GIB, 2);
        assert!(c.processors <= 2 && c.processors >= 1);
        assert!(c.memory_limit.is_none_or(|l| l < 24 * GIB));
    }
}
