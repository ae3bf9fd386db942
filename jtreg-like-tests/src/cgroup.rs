//! Child cgroups for tests: created under the machine's memory or cpu controller (its cgroup
//! v1 hierarchy, or the v2 unified hierarchy where the controller is delegated to
//! children), limited, used to run commands, and removed when dropped — on every exit path a
//! test can take, failures and panics included. Cgroups a killed test left behind are removed
//! by the next one that creates a cgroup.
//!
//! Creating one needs root and a writable cgroup filesystem; where the machine does not allow
//! it, [`MemoryCgroup::create`] and [`CpuCgroup::create`] say why, for the test to skip with that reason.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const PREFIX: &str = "rtvm-jtreg-";

/// The cgroup version of a [`MemoryCgroup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// The v1 `memory` controller's hierarchy.
    V1,
    /// The v2 unified hierarchy.
    V2,
}

/// A child memory cgroup with a limit; removed on drop.
#[derive(Debug)]
pub struct MemoryCgroup {
    child: Child,
    version: Version,
}

/// Where `controller` can be given a child: (hierarchy root, version).
fn hierarchy(controller: &str) -> Result<(PathBuf, Version), String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mut v2 = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let (Some(mount_point), mut right) =
            (left.split_whitespace().nth(4), right.split_whitespace())
        else {
            continue;
        };
        let (fs, opts) = (right.next().unwrap_or(""), right.nth(1).unwrap_or(""));
        if fs == "cgroup" && opts.split(',').any(|o| o == controller) {
            return Ok((PathBuf::from(mount_point), Version::V1));
        }
        if fs == "cgroup2" {
            v2 = Some(PathBuf::from(mount_point));
        }
    }
    let root =
        v2.ok_or_else(|| format!("no cgroup v1 {controller} controller and no cgroup2 mount"))?;
    let delegated = std::fs::read_to_string(root.join("cgroup.subtree_control"))
        .unwrap_or_default()
        .split_whitespace()
        .any(|c| c == controller);
    if !delegated {
        return Err(format!(
            "the cgroup2 hierarchy at {} does not delegate the {controller} controller to children",
            root.display()
        ));
    }
    Ok((root, Version::V2))
}

/// A new child cgroup of `controller`'s hierarchy, removed when the value drops.
fn create_child(controller: &str) -> Result<(Child, Version), String> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let (root, version) = hierarchy(controller)?;
    remove_stale(&root);
    let dir = root.join(format!(
        "{PREFIX}{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).map_err(|e| {
        format!(
            "cannot create a cgroup in {} (root and a writable cgroup filesystem are needed): {e}",
            root.display()
        )
    })?;
    Ok((Child { dir }, version))
}

/// A child cgroup's directory, removed on drop.
#[derive(Debug)]
struct Child {
    dir: PathBuf,
}

impl Child {
    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        std::fs::write(self.dir.join(file), value).map_err(|e| {
            format!(
                "cannot set {file} of {} to {value}: {e}",
                self.dir.display()
            )
        })
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(self.dir.join("cgroup.procs"))
            .arg(program)
            .args(args);
        c
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // A process that just exited may still be charged for a moment: retry briefly.
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Err(e) = std::fs::remove_dir(&self.dir) {
            if e.kind() == std::io::ErrorKind::NotFound || Instant::now() > deadline {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("cannot remove the test cgroup {}: {e}", self.dir.display());
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Removes cgroups of earlier test processes that no longer exist.
fn remove_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

impl MemoryCgroup {
    /// Creates a child cgroup limited to `limit` bytes of memory. `Err` carries why the
    /// machine does not allow it (not root, read-only cgroup filesystem, no memory controller).
    pub fn create(limit: u64) -> Result<MemoryCgroup, String> {
        let (child, version) = create_child("memory")?;
        let file = match version {
            Version::V1 => "memory.limit_in_bytes",
            Version::V2 => "memory.max",
        };
        child.write(file, &limit.to_string())?;
        Ok(MemoryCgroup { child, version })
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.child.dir
    }

    /// The cgroup's version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// A command that moves itself into the cgroup and then runs `program args` (through
    /// `sh`, so the program starts inside the cgroup from its first instruction).
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        self.child.command(program, args)
    }

    /// The most memory the cgroup has been charged (v1 `memory.max_usage_in_bytes`, v2
    /// `memory.peak`), if the kernel reports it.
    pub fn peak_usage(&self) -> Option<u64> {
        let file = match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        };
        std::fs::read_to_string(self.child.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// A child cgroup of the `cpu` controller with a CFS quota; removed on drop.
#[derive(Debug)]
pub struct CpuCgroup {
    child: Child,
    version: Version,
}

impl CpuCgroup {
    /// Creates a child cgroup with `quota` microseconds of CPU time per `period` (`None`:
    /// no quota — v1 `cpu.cfs_quota_us` -1, v2 `cpu.max` `max`). `Err` says why the machine
    /// does not allow it.
    pub fn create(quota: Option<u64>, period: u64) -> Result<CpuCgroup, String> {
        let (child, version) = create_child("cpu")?;
        match version {
            Version::V1 => {
                child.write("cpu.cfs_period_us", &period.to_string())?;
                let q = quota.map_or_else(|| "-1".to_owned(), |q| q.to_string());
                child.write("cpu.cfs_quota_us", &q)?;
            }
            Version::V2 => {
                let q = quota.map_or_else(|| "max".to_owned(), |q| q.to_string());
                child.write("cpu.max", &format!("{q} {period}"))?;
            }
        }
        Ok(CpuCgroup { child, version })
    }

    /// The cgroup's version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.child.dir
    }

    /// `program args`, started inside the cgroup (see [`MemoryCgroup::command`]).
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        self.child.command(program, args)
    }
}

/// A simulated cgroup world for side-by-side tests: fixture files that a command — the test
/// VM or `java`, the same way — sees as `/proc/cgroups`, `/proc/self/cgroup`,
/// `/proc/self/mountinfo` and `/sys/fs/cgroup`, in a private mount namespace of its own
/// (`unshare -m`: bind mounts over the process's own proc files and a tmpfs on
/// `/sys/fs/cgroup`, gone with the process). Nothing of the machine changes. Needs root and
/// `unshare`; [`FakeCgroups::available`] says why not.
#[derive(Debug)]
pub struct FakeCgroups {
    dir: PathBuf,
}

/// The script run in the namespace: `<fixture dir> <program> <args...>`. It binds the
/// fixture's files over the proc files of its own pid — which `exec` hands to the program.
const FAKE_WORLD: &str = r#"set -e
F=$1; shift
mount --bind "$F/cgroups" /proc/cgroups
mount --bind "$F/cgroup" /proc/$$/cgroup
mount --bind "$F/mountinfo" /proc/$$/mountinfo
mount -t tmpfs rtvm-fixture /sys/fs/cgroup
cp -a "$F/sys/." /sys/fs/cgroup/
exec "$@"
"#;

impl FakeCgroups {
    /// Whether fixture worlds can be made here (root and `unshare`), or why not.
    pub fn available() -> Result<(), String> {
        crate::fakefs::available()
    }

    /// A fixture world: `proc` files (`cgroups`, `cgroup`, `mountinfo`, as bytes) and files
    /// under `/sys/fs/cgroup` (`sys`, paths relative to it).
    pub fn new(
        cgroups: &str,
        cgroup: &str,
        mountinfo: &[u8],
        sys: &[(&str, &[u8])],
    ) -> std::io::Result<FakeCgroups> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rtvm-fake-cgroups-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sys"))?;
        std::fs::write(dir.join("cgroups"), cgroups)?;
        std::fs::write(dir.join("cgroup"), cgroup)?;
        std::fs::write(dir.join("mountinfo"), mountinfo)?;
        for (path, bytes) in sys {
            let p = dir.join("sys").join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(p, bytes)?;
        }
        Ok(FakeCgroups { dir })
    }

    /// `program args...` in the fixture world.
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("unshare");
        c.args([
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            FAKE_WORLD,
            "sh",
        ])
        .arg(&self.dir)
        .arg(program)
        .args(args);
        c
    }
}

impl Drop for FakeCgroups {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a VM's `-Xlog:os+container=trace,gc+init` output says about its container: the
/// `os+container` messages before gc+init's first line (java asks again later, in its own
/// rhythm), and gc+init's `CPUs: N total, M available` line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Detection {
    /// The messages, without decorations.
    pub lines: Vec<String>,
    /// gc+init's CPUs line (empty if none was logged).
    pub cpus: String,
}

/// HotSpot caches the active processor count for 20 ms: a second query within them logs
/// `CgroupSubsystem::active_processor_count (cached): N`, a later one computes it again with
/// the same lines as the first time. Which of the two a run logs depends only on how fast it
/// ran, so a recomputation that repeats the first computation's lines is folded into the
/// cached line.
fn fold_recomputed_cpu_counts(lines: Vec<String>) -> Vec<String> {
    const COUNT: &str = "OSContainer::active_processor_count: ";
    let Some(first) = lines.iter().position(|l| l.starts_with(COUNT)) else {
        return lines;
    };
    let mentions_cpu = |l: &str| l.to_ascii_lowercase().contains("cpu");
    let mut out: Vec<String> = lines[..=first].to_vec();
    for l in &lines[first + 1..] {
        if l.starts_with(COUNT) && *l == lines[first] {
            // The run of CPU lines before it that repeats the one before the first count.
            let mut n = 0;
            while n < out.len() - 1
                && first > n
                && mentions_cpu(&out[out.len() - 1 - n])
                && out[out.len() - 1 - n] == lines[first - 1 - n]
                && out.len() - 1 - n > first
            {
                n += 1;
            }
            if n > 0 {
                out.truncate(out.len() - n);
                out.push(format!(
                    "CgroupSubsystem::active_processor_count (cached): {}",
                    &l[COUNT.len()..]
                ));
                continue;
            }
        }
        out.push(l.clone());
    }
    out
}

impl Detection {
    /// Reads it from a VM's stdout.
    pub fn from_stdout(stdout: &str) -> Detection {
        let re = regex::Regex::new(r"^\[[^\]]*\]\[\w+ *\]\[([a-z,]+) *\] (.*)$")
            .expect("a valid pattern");
        let mut d = Detection::default();
        let mut in_init = false;
        for l in stdout.lines() {
            let Some(c) = re.captures(l) else { continue };
            match &c[1] {
                "os,container" if !in_init => d.lines.push(c[2].to_owned()),
                "gc,init" => {
                    in_init = true;
                    if c[2].starts_with("CPUs:") {
                        d.cpus = c[2].to_owned();
                    }
                }
                _ => {}
            }
        }
        d.lines = fold_recomputed_cpu_counts(d.lines);
        d
    }

    /// The two runs' messages side by side, `*` marking the lines that differ.
    pub fn diff(&self, other: &Detection) -> String {
        let mut diff = String::new();
        for i in 0..self.lines.len().max(other.lines.len()) {
            let (a, b) = (
                self.lines.get(i).map_or("", String::as_str),
                other.lines.get(i).map_or("", String::as_str),
            );
            let mark = if a == b { " " } else { "*" };
            diff.push_str(&format!("{mark} rtvm: {a}\n  java: {b}\n"));
        }
        diff
    }
}

#[cfg(test)]
mod tests {
    use super::fold_recomputed_cpu_counts;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    const FIRST: &[&str] = &[
        "OSContainer::init: Initializing Container Support",
        "Path to /cpu.cfs_quota_us is /sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_quota_us",
        "CPU Quota is: -1",
        "Path to /cpu.cfs_period_us is /sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_period_us",
        "Open of file /sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_period_us failed, No such file or directory",
        "CPU Period is: -2",
        "OSContainer::active_processor_count: 2",
        "CgroupSubsystem::active_processor_count (cached): 2",
        "total physical memory: 25275990016",
    ];

    /// A run that found the count cached and one whose cache had expired (it ran slower) read
    /// the same.
    #[test]
    fn a_recomputation_after_the_cache_expired_reads_as_cached() {
        let mut cached = strings(FIRST);
        cached.push("CgroupSubsystem::active_processor_count (cached): 2".into());
        let mut recomputed = strings(FIRST);
        recomputed.extend(strings(&FIRST[1..7]));
        assert_eq!(
            fold_recomputed_cpu_counts(recomputed),
            fold_recomputed_cpu_counts(cached.clone())
        );
        assert_eq!(fold_recomputed_cpu_counts(cached.clone()), cached);
    }

    /// A recomputation that found something else (another quota) stays as it is.
    #[test]
    fn a_different_recomputation_is_kept() {
        let mut other = strings(FIRST);
        other.extend(strings(&[
            "Path to /cpu.cfs_quota_us is /x",
            "CPU Quota is: 50000",
            "OSContainer::active_processor_count: 1",
        ]));
        assert_eq!(fold_recomputed_cpu_counts(other.clone()), other);
    }
}
