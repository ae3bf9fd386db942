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
    /// Processors the quota allows: `ceil(quota / period)` computed in single precision, as
    /// HotSpot computes it (`None` without a quota).
    pub fn quota_processors(&self) -> Option<usize> {
        self.cpu_quota
            .map(|(quota, period)| quota_count(quota as i64, period as i64).max(1) as usize)
    }

    fn note(&mut self, level: log::Level, text: impl Into<String>) {
        self.notes.push((level, text.into()));
    }
}

/// HotSpot's `ceilf((float)quota / (float)period)`.
fn quota_count(quota: i64, period: i64) -> i64 {
    (quota as f32 / period as f32).ceil() as i64
}

/// HotSpot's `OSCONTAINER_ERROR`: a read that failed.
const ERROR: i64 = -2;

/// What detection was told: the host's figures, and `-XX:ActiveProcessorCount` (with it,
/// HotSpot reads no CPU file at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// Physical memory in bytes.
    pub memory: u64,
    /// The processors the affinity mask allows.
    pub processors: usize,
    /// `ActiveProcessorCount`, if set (> 0).
    pub active_processor_count: Option<usize>,
}

/// The cgroup information of the current process (with no version when it is in no cgroup
/// hierarchy with a memory or cpu controller): HotSpot 17.0.15's reads, in its order and
/// words, and its verdicts — a limit at or above the host's memory is no limit, a quota only
/// lowers the count.
///
/// Two deliberate differences, both where HotSpot 17.0.15 is less right than later JDKs: on
/// cgroup v2 the smallest `memory.max` from the process's cgroup up to the mount root counts
/// (17.0.15 reads only its own), and on v1 the controllers found are used even when not all
/// of memory, cpu, cpuacct and cpuset are mounted (17.0.15 turns container support off).
pub fn detect(roots: &SysRoots, host: Host) -> ContainerInfo {
    use log::Level::{Debug, Trace};
    // Bytes, lossily: one non-UTF-8 mount point must not hide every other line.
    let text = |p: &Path| {
        std::fs::read(p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let cgroups = text(&roots.proc.join("cgroups"));
    let self_cgroup = text(&roots.proc.join("self/cgroup"));
    let mountinfo = text(&roots.proc.join("self/mountinfo"));
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
        processors: host.processors,
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
    let limit = if unified {
        info.version = Some(CgroupVersion::V2);
        info.note(Debug, "Detected cgroups v2 unified hierarchy");
        let Some(dir) = v2_dir(roots, &mountinfo, &self_cgroup) else {
            info.note(Debug, "Required cgroup v2 mount not found");
            return info;
        };
        if host.active_processor_count.is_none() {
            let quota = v2_quota(&mut info, &dir);
            let period =
                read(&mut info, &dir, "cpu.max", Scan::SkipStrInt).map_or(ERROR, |v| v.int());
            info.note(Trace, format!("CPU Period is: {period}"));
            count_processors(&mut info, quota, period, host.processors);
            read_v2_weight(&mut info, &dir);
        }
        info.note(Trace, format!("total physical memory: {}", host.memory));
        v2_memory_limit(&mut info, &dir, &v2_mount_root(roots, &mountinfo))
    } else {
        info.version = Some(CgroupVersion::V1);
        info.note(
            Debug,
            "Detected cgroups hybrid or legacy hierarchy, using cgroups v1 controllers",
        );
        let memory = v1_dir(roots, &mountinfo, &self_cgroup, "memory");
        let hierarchical = match &memory {
            Some(dir) => {
                let h = read(&mut info, dir, "memory.use_hierarchy", Scan::Long)
                    .map_or(ERROR, |v| v.int());
                info.note(Trace, format!("Use Hierarchy is: {h}"));
                h > 0
            }
            None => {
                info.note(Debug, "Required cgroup v1 memory subsystem not found");
                false
            }
        };
        if host.active_processor_count.is_none() {
            match v1_dir(roots, &mountinfo, &self_cgroup, "cpu") {
                Some(dir) => {
                    let quota = read(&mut info, &dir, "cpu.cfs_quota_us", Scan::Int)
                        .map_or(ERROR, |v| v.int());
                    info.note(Trace, format!("CPU Quota is: {quota}"));
                    let period = read(&mut info, &dir, "cpu.cfs_period_us", Scan::Int)
                        .map_or(ERROR, |v| v.int());
                    info.note(Trace, format!("CPU Period is: {period}"));
                    count_processors(&mut info, quota, period, host.processors);
                    // 1024 is the default, i.e. no shares set; read quietly (HotSpot 17.0.15 does not).
                    info.cpu_shares = std::fs::read_to_string(dir.join("cpu.shares"))
                        .ok()
                        .and_then(|t| t.trim().parse::<u64>().ok())
                        .filter(|&s| s != 1024);
                }
                None => info.note(Debug, "Required cgroup v1 cpu subsystem not found"),
            }
        }
        let Some(dir) = memory else { return info };
        info.note(Trace, format!("total physical memory: {}", host.memory));
        v1_memory_limit(&mut info, &dir, hierarchical, host.memory)
    };
    // os::physical_memory's verdict.
    let phys = host.memory as i64;
    let cpu_read = info
        .notes
        .iter()
        .any(|(_, t)| t.starts_with("OSContainer::active_processor_count"));
    if limit > 0 && limit < phys {
        info.memory_limit = Some(limit as u64);
    } else {
        let why = match limit {
            ERROR => "failed",
            l if l <= 0 => "unlimited",
            _ => "ignored",
        };
        info.note(
            Debug,
            format!(
                "container memory limit {why}: {limit}, using host value {}",
                host.memory
            ),
        );
    }
    if cpu_read {
        // HotSpot's start-up asks for the processor count once more here (cached).
        info.note(
            Trace,
            format!(
                "CgroupSubsystem::active_processor_count (cached): {}",
                info.processors
            ),
        );
    }
    info
}

/// The processors a quota leaves (never more than the host's), noted as HotSpot does —
/// the count and, as HotSpot's start-up asks again at once, its cached answer.
fn count_processors(info: &mut ContainerInfo, quota: i64, period: i64, host_processors: usize) {
    use log::Level::Trace;
    let mut result = host_processors;
    if quota > -1 && period > 0 {
        let count = quota_count(quota, period);
        info.note(
            Trace,
            format!("CPU Quota count based on quota/period: {count}"),
        );
        if count != 0 {
            info.cpu_quota = Some((quota as u64, period as u64));
            result = host_processors.min(count.max(1) as usize);
        }
    }
    info.processors = result;
    info.note(
        Trace,
        format!("OSContainer::active_processor_count: {result}"),
    );
    info.note(
        Trace,
        format!("CgroupSubsystem::active_processor_count (cached): {result}"),
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

/// This process's cgroup v2 directory: the mount point joined with the path of `0::/path`
/// (`0::/` — the root of a cgroup namespace, Docker's and containerd's layout — is the
/// mount point itself).
fn v2_dir(roots: &SysRoots, mountinfo: &str, self_cgroup: &str) -> Option<PathBuf> {
    let path = self_cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    mounts(mountinfo).find(|(_, _, fs, _)| *fs == "cgroup2")?;
    Some(v2_mount_root(roots, mountinfo).join(path.trim_start_matches('/')))
}

/// How a HotSpot 17 read scans a line: `sscanf` with one of these formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scan {
    /// `%lu`: `strtoul`'s number (a minus wraps, an overflow saturates).
    Ulong,
    /// `%ld`: `strtol`'s number (saturating).
    Long,
    /// `%d`: `%ld` stored in an `int` (truncated).
    Int,
    /// `%s`: the first word.
    Str,
    /// `%s %*d`: the first word (what follows need not be a number).
    StrSkipInt,
    /// `%*s %d`: the number after the first word.
    SkipStrInt,
}

/// What a read found.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Scanned {
    Number(i64),
    Unsigned(u64),
    Word(String),
}

impl Scanned {
    /// The value as HotSpot's signed variable holds it.
    fn int(&self) -> i64 {
        match self {
            Scanned::Number(n) => *n,
            Scanned::Unsigned(u) => *u as i64,
            Scanned::Word(_) => ERROR,
        }
    }
}

/// `scanf`'s integer conversion: leading blanks, a sign, decimal digits (at least one).
/// Returns (negative, magnitude saturated at `u64::MAX`, the rest).
fn scan_digits(s: &str) -> Option<(bool, u64, bool, &str)> {
    let s = s.trim_start();
    let (negative, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let mut value: u64 = 0;
    let mut overflow = false;
    for b in s[..digits].bytes() {
        match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
    }
    Some((negative, value, overflow, &s[digits..]))
}

fn first_word(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    (end > 0).then(|| (&s[..end], &s[end..]))
}

impl Scan {
    fn format(self) -> &'static str {
        match self {
            Scan::Ulong => "%lu",
            Scan::Long => "%ld",
            Scan::Int => "%d",
            Scan::Str => "%s",
            Scan::StrSkipInt => "%s %*d",
            Scan::SkipStrInt => "%*s %d",
        }
    }

    fn signed(text: &str) -> Option<i64> {
        let (negative, magnitude, overflow, _) = scan_digits(text)?;
        Some(match (negative, overflow || magnitude > i64::MAX as u64) {
            (false, true) => i64::MAX,
            (true, true) => i64::MIN,
            (false, false) => magnitude as i64,
            (true, false) => -(magnitude as i64),
        })
    }

    fn parse(self, line: &str) -> Option<Scanned> {
        match self {
            Scan::Ulong => {
                let (negative, magnitude, overflow, _) = scan_digits(line)?;
                Some(Scanned::Unsigned(match (overflow, negative) {
                    (true, _) => u64::MAX,
                    (false, true) => magnitude.wrapping_neg(),
                    (false, false) => magnitude,
                }))
            }
            Scan::Long => Scan::signed(line).map(Scanned::Number),
            Scan::Int => Scan::signed(line).map(|v| Scanned::Number(i64::from(v as i32))),
            Scan::Str | Scan::StrSkipInt => {
                first_word(line).map(|(w, _)| Scanned::Word(w.to_owned()))
            }
            Scan::SkipStrInt => {
                let (_, rest) = first_word(line)?;
                Scan::signed(rest).map(|v| Scanned::Number(i64::from(v as i32)))
            }
        }
    }
}

/// Reads `dir/name` as HotSpot 17's `subsystem_file_line_contents` does: the path noted,
/// then each line tried in turn — a line that does not scan is noted — until one does. An
/// open failure and a file without a line are noted in HotSpot's words.
fn read(info: &mut ContainerInfo, dir: &Path, name: &str, scan: Scan) -> Option<Scanned> {
    let (file, text) = open(info, dir, name)?;
    let mut tried = false;
    for line in text.split_inclusive('\n') {
        tried = true;
        if let Some(v) = scan.parse(line) {
            return Some(v);
        }
        info.note(
            log::Level::Debug,
            format!(
                "Type {} not found in file {}",
                scan.format(),
                file.display()
            ),
        );
    }
    if !tried {
        info.note(log::Level::Debug, format!("Empty file {}", file.display()));
    }
    None
}

/// The number after `key` on the line of `dir/name` that contains it (`%s %lu`), as
/// HotSpot reads `memory.stat`: no such line is an "Empty file".
fn read_keyed(info: &mut ContainerInfo, dir: &Path, name: &str, key: &str) -> Option<u64> {
    let (file, text) = open(info, dir, name)?;
    let mut failed = false;
    for line in text.split_inclusive('\n').filter(|l| l.contains(key)) {
        if let Some(Scanned::Unsigned(v)) =
            first_word(line).and_then(|(_, rest)| Scan::Ulong.parse(rest))
        {
            return Some(v);
        }
        failed = true;
        info.note(
            log::Level::Debug,
            format!("Type %s %lu not found in file {}", file.display()),
        );
    }
    if !failed {
        info.note(log::Level::Debug, format!("Empty file {}", file.display()));
    }
    None
}

/// Opens a controller file: its path noted first (`Path to /memory.max is ...`), an open
/// failure noted with its reason; the text read lossily. As with glibc's `fopen` and
/// `fgets`, which HotSpot uses, only the open can fail: a directory opens, and a read that
/// fails (`EISDIR`) ends the text where it stopped — a directory reads as an empty file.
fn open(info: &mut ContainerInfo, dir: &Path, name: &str) -> Option<(PathBuf, String)> {
    use std::io::Read as _;
    let file = dir.join(name);
    info.note(
        log::Level::Trace,
        format!("Path to /{name} is {}", file.display()),
    );
    match std::fs::File::open(&file) {
        Ok(mut f) => {
            let mut bytes = Vec::new();
            let _ = f.read_to_end(&mut bytes);
            Some((file, String::from_utf8_lossy(&bytes).into_owned()))
        }
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

/// HotSpot's `limit_from_str`: `max` is -1 (no limit), a number as `%lu` reads it, held in a
/// signed value (so 2^64-1 is -1 too), anything else an error.
fn limit_from_str(text: Option<&str>) -> i64 {
    match text {
        None => ERROR,
        Some("max") => -1,
        Some(t) => match Scan::Ulong.parse(t) {
            Some(Scanned::Unsigned(u)) => u as i64,
            _ => ERROR,
        },
    }
}

/// v2's CPU quota: the first word of `cpu.max`.
fn v2_quota(info: &mut ContainerInfo, dir: &Path) -> i64 {
    let raw = read(info, dir, "cpu.max", Scan::StrSkipInt).and_then(|v| match v {
        Scanned::Word(w) => Some(w),
        _ => None,
    });
    if let Some(w) = &raw {
        info.note(
            log::Level::Trace,
            format!("Raw value for CPU quota is: {w}"),
        );
    }
    // Held in an `int`, as HotSpot's cpu_quota returns it.
    let quota = i64::from(limit_from_str(raw.as_deref()) as i32);
    info.note(log::Level::Trace, format!("CPU Quota is: {quota}"));
    quota
}

/// `cpu.weight` (1..10000, default 100) as v1 shares, the conversion HotSpot uses; read
/// quietly (reported, not used for the processor count).
fn read_v2_weight(info: &mut ContainerInfo, dir: &Path) {
    info.cpu_shares = std::fs::read_to_string(dir.join("cpu.weight"))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .filter(|&w| w != 100 && w > 0)
        .map(|w| (262142 * w - 1) / 9999 + 2);
}

/// One `memory.max`, with HotSpot's lines.
fn v2_memory_max(info: &mut ContainerInfo, dir: &Path) -> i64 {
    let raw = read(info, dir, "memory.max", Scan::Str).and_then(|v| match v {
        Scanned::Word(w) => Some(w),
        _ => None,
    });
    if let Some(w) = &raw {
        info.note(
            log::Level::Trace,
            format!("Raw value for memory limit is: {w}"),
        );
    }
    let limit = limit_from_str(raw.as_deref());
    info.note(
        log::Level::Trace,
        if limit == -1 {
            "Memory Limit is: Unlimited".to_string()
        } else {
            format!("Memory Limit is: {limit}")
        },
    );
    limit
}

/// v2's memory limit: the process's own `memory.max` as HotSpot 17.0.15 reads it, then —
/// rtvm's deliberate difference — the parents' up to the mount root (the root of a cgroup
/// namespace included), where one exists: the smallest positive limit binds.
fn v2_memory_limit(info: &mut ContainerInfo, dir: &Path, mount_root: &Path) -> i64 {
    let own = v2_memory_max(info, dir);
    let mut smallest = (own > 0).then_some(own);
    let mut at = dir.parent();
    while let Some(d) = at {
        if !d.starts_with(mount_root) {
            break;
        }
        if d.join("memory.max").exists() {
            let l = v2_memory_max(info, d);
            if l > 0 {
                smallest = Some(smallest.map_or(l, |s| s.min(l)));
            }
        }
        if d == mount_root {
            break;
        }
        at = d.parent();
    }
    smallest.unwrap_or(own)
}

/// v1's memory limit, as HotSpot 17.0.15 reads it: `memory.limit_in_bytes`; at or above the
/// host's memory it is no limit, and with `memory.use_hierarchy` the `hierarchical_memory_limit`
/// of `memory.stat` counts instead.
fn v1_memory_limit(info: &mut ContainerInfo, dir: &Path, hierarchical: bool, phys: u64) -> i64 {
    use log::Level::Trace;
    let Some(own) = read(info, dir, "memory.limit_in_bytes", Scan::Ulong).map(|v| v.int() as u64)
    else {
        info.note(Trace, format!("Memory Limit is: {}", ERROR as u64));
        return ERROR;
    };
    info.note(Trace, format!("Memory Limit is: {own}"));
    if own < phys {
        return own as i64;
    }
    info.note(Trace, "Non-Hierarchical Memory Limit is: Unlimited");
    if !hierarchical {
        return -1;
    }
    let Some(h) = read_keyed(info, dir, "memory.stat", "hierarchical_memory_limit") else {
        return ERROR;
    };
    info.note(Trace, format!("Hierarchical Memory Limit is: {h}"));
    if h >= phys {
        info.note(Trace, "Hierarchical Memory Limit is: Unlimited");
        return -1;
    }
    h as i64
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

    fn host(memory: u64, processors: usize) -> Host {
        Host {
            memory,
            processors,
            active_processor_count: None,
        }
    }

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
        let c = detect(&roots, host(24 * GIB, 8));
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
            (log::Level::Trace, "CgroupSubsystem::active_processor_count (cached): 2".into()),
            (log::Level::Trace, format!("total physical memory: {}", 24 * GIB)),
            (log::Level::Trace, format!("Path to /memory.limit_in_bytes is {sys}/fs/cgroup/memory/box/memory.limit_in_bytes")),
            (log::Level::Trace, "Memory Limit is: 536870912".into()),
            (log::Level::Trace, "CgroupSubsystem::active_processor_count (cached): 2".into()),
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
        let c = detect(&roots, host(24 * GIB, 2));
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
        let c = detect(&roots, host(24 * GIB, 2));
        assert_eq!(c.memory_limit, None);
        let t = texts(&c);
        assert_eq!(
            t[t.len() - 3..],
            [
                "Hierarchical Memory Limit is: Unlimited",
                "container memory limit unlimited: -1, using host value 25769803776",
                "CgroupSubsystem::active_processor_count (cached): 2"
            ]
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
        let c = detect(&roots, host(24 * GIB, 2));
        assert_eq!(
            c.memory_limit, None,
            "a limit above physical memory is no limit"
        );
        let t = texts(&c);
        assert_eq!(
            t[t.len() - 3..],
            [
                "Non-Hierarchical Memory Limit is: Unlimited",
                "container memory limit unlimited: -1, using host value 25769803776",
                "CgroupSubsystem::active_processor_count (cached): 2"
            ]
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
        let c = detect(&roots, host(24 * GIB, 2));
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
        let c = detect(&roots, host(24 * GIB, 2));
        assert_eq!((c.memory_limit, c.cpu_quota, c.processors), (None, None, 2));
        // HotSpot 17's words: the scan format that did not match, the error value logged.
        let t = texts(&c);
        assert!(
            t.iter()
                .any(|t| t.starts_with("Type %lu not found in file ")),
            "{t:#?}"
        );
        assert!(
            t.iter()
                .any(|t| t.starts_with("Type %d not found in file ")),
            "{t:#?}"
        );
        assert!(t.contains(&"CPU Quota is: -2"), "{t:#?}");
        assert!(
            t.contains(&"Memory Limit is: 18446744073709551614"),
            "{t:#?}"
        );
        assert!(
            t.contains(&"container memory limit failed: -2, using host value 25769803776"),
            "{t:#?}"
        );
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
        let c = detect(&roots, host(24 * GIB, 2));
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
        let c = detect(&roots, host(24 * GIB, 2));
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
            ("sys/fs/cgroup/u/memory.max/placeholder", ""),
        ]);
        // cpu.max cannot be opened (a dangling symlink); memory.max is a directory, which
        // opens (as glibc's fopen opens it) and reads as nothing: java 17's "Empty file".
        std::os::unix::fs::symlink("nowhere", roots.sys.join("fs/cgroup/u/cpu.max")).unwrap();
        let c = detect(&roots, host(24 * GIB, 2));
        assert_eq!((c.memory_limit, c.cpu_quota, c.processors), (None, None, 2));
        let t = texts(&c);
        assert!(
            t.iter().any(|l| l.starts_with("Open of file ")
                && l.ends_with("cpu.max failed, No such file or directory")),
            "{t:#?}"
        );
        assert!(
            t.iter()
                .any(|l| l.starts_with("Empty file ") && l.ends_with("/u/memory.max")),
            "{t:#?}"
        );
        assert!(!t.iter().any(|l| l.contains("Is a directory")), "{t:#?}");
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
        let c = detect(&roots, host(24 * GIB, 2));
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
        assert_eq!(t[t.len() - 2], "Memory Limit is: 268435456");
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
        let c = detect(&roots, host(24 * GIB, 2));
        assert_eq!((c.memory_limit, c.cpu_quota), (None, None));
        let t = texts(&c);
        assert!(t.contains(&"CPU Quota is: -1"));
        assert!(t.contains(&"Raw value for memory limit is: lots"));
        assert!(t.contains(&"Memory Limit is: -2"));
        assert!(t.contains(&"container memory limit failed: -2, using host value 25769803776"));
        // A limit above the host's memory is none either.
        std::fs::write(
            roots.sys.join("fs/cgroup/box/memory.max"),
            format!("{}\n", 64 * GIB),
        )
        .unwrap();
        assert_eq!(detect(&roots, host(24 * GIB, 2)).memory_limit, None);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn missing_controllers_and_files() {
        let (root, roots) = tree(&[(
            "proc/cgroups",
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\npids\t8\t1\t1\n",
        )]);
        let c = detect(&roots, host(GIB, 2));
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
        let c = detect(&roots2, host(GIB, 2));
        assert_eq!((c.memory_limit, c.cpu_quota), (None, None));
        assert!(texts(&c).contains(&"Required cgroup v1 memory subsystem not found"));
        assert!(texts(&c).contains(&"Required cgroup v1 cpu subsystem not found"));
        // v2 listed, no cgroup2 mount.
        let (root3, roots3) = tree(&[
            ("proc/cgroups", CGROUPS_V2),
            ("proc/self/cgroup", "0::/x\n"),
        ]);
        let c = detect(&roots3, host(GIB, 2));
        assert_eq!((c.version, c.memory_limit), (Some(CgroupVersion::V2), None));
        // Nothing at all.
        let empty = SysRoots {
            sys: root.join("none/sys"),
            proc: root.join("none/proc"),
        };
        assert_eq!(detect(&empty, host(GIB, 2)).version, None);
        for r in [root, root2, root3] {
            std::fs::remove_dir_all(r).unwrap();
        }
    }

    #[test]
    fn this_machine() {
        // Whatever the machine is, detection answers without failing and never raises the
        // processor count above the host's.
        let c = detect(&SysRoots::default(), host(24 * GIB, 2));
        assert!(c.processors <= 2 && c.processors >= 1);
        assert!(c.memory_limit.is_none_or(|l| l < 24 * GIB));
    }

    /// cgroup v2 at the root of its namespace (Docker, containerd): `0::/`, the limit in the
    /// mount point's own `memory.max` — the layout a reader that stopped below the mount
    /// root missed (a 512 MB container got a host-sized heap).
    #[test]
    fn v2_namespace_root() {
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V2),
            ("proc/self/mountinfo", MOUNTS_V2),
            ("proc/self/cgroup", "0::/\n"),
            ("sys/fs/cgroup/memory.max", "536870912\n"),
            ("sys/fs/cgroup/cpu.max", "150000 100000\n"),
        ]);
        let c = detect(&roots, host(24 * GIB, 8));
        assert_eq!(c.memory_limit, Some(536870912));
        assert_eq!((c.cpu_quota, c.processors), (Some((150000, 100000)), 2));
        let sys = roots.sys.display().to_string();
        let t = texts(&c);
        assert!(
            t.contains(&format!("Path to /memory.max is {sys}/fs/cgroup/memory.max").as_str()),
            "{t:#?}"
        );
        assert!(t.contains(&"Memory Limit is: 536870912"));
        std::fs::remove_dir_all(root).unwrap();
    }

    /// `-XX:ActiveProcessorCount`: no CPU file is read (HotSpot reads none).
    #[test]
    fn active_processor_count_reads_no_cpu_file() {
        let (root, roots) = tree(&[
            ("proc/cgroups", CGROUPS_V2),
            ("proc/self/mountinfo", MOUNTS_V2),
            ("proc/self/cgroup", "0::/\n"),
            ("sys/fs/cgroup/memory.max", "536870912\n"),
            ("sys/fs/cgroup/cpu.max", "50000 100000\n"),
        ]);
        let c = detect(
            &roots,
            Host {
                memory: 24 * GIB,
                processors: 8,
                active_processor_count: Some(3),
            },
        );
        assert!(
            texts(&c).iter().all(|t| !t.contains("cpu")),
            "{:#?}",
            texts(&c)
        );
        assert_eq!((c.cpu_quota, c.processors), (None, 8));
        assert_eq!(c.memory_limit, Some(536870912));
        std::fs::remove_dir_all(root).unwrap();
    }

    /// The scans HotSpot's reads make, as glibc's sscanf makes them.
    #[test]
    fn scans() {
        assert_eq!(
            Scan::Ulong.parse("-5\n"),
            Some(Scanned::Unsigned(u64::MAX - 4))
        );
        assert_eq!(
            Scan::Ulong.parse("99999999999999999999"),
            Some(Scanned::Unsigned(u64::MAX))
        );
        assert_eq!(Scan::Ulong.parse("  42abc"), Some(Scanned::Unsigned(42)));
        assert_eq!(Scan::Ulong.parse("lots"), None);
        assert_eq!(
            Scan::Int.parse("4294967297"),
            Some(Scanned::Number(1)),
            "stored in an int"
        );
        assert_eq!(Scan::Str.parse("\n"), None);
        assert_eq!(
            Scan::StrSkipInt.parse("max\n"),
            Some(Scanned::Word("max".into()))
        );
        assert_eq!(Scan::SkipStrInt.parse("150000\n"), None);
        assert_eq!(
            Scan::SkipStrInt.parse("x 100000\n"),
            Some(Scanned::Number(100000))
        );
        assert_eq!(limit_from_str(Some("99999999999999999999")), -1);
        assert_eq!(limit_from_str(Some("max")), -1);
        assert_eq!(limit_from_str(None), ERROR);
        assert_eq!(
            quota_count(16777217, 1),
            16777216,
            "single precision, as HotSpot"
        );
    }
}
