//! Readers for the kernel's own view of a process: `/proc/self/status`, `smaps`,
//! `smaps_rollup` and `maps`. Parsers take text so they can be tested on literal contents;
//! the `read_*` functions read the live files.

use std::io;

/// Selected fields of `/proc/<pid>/status`, in kB where the kernel reports kB.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Resident set size.
    pub vm_rss_kb: u64,
    /// Peak resident set size.
    pub vm_hwm_kb: u64,
    /// Virtual size.
    pub vm_size_kb: u64,
    /// Private writable data (what `RLIMIT_DATA` limits).
    pub vm_data_kb: u64,
    /// Swapped-out anonymous memory.
    pub vm_swap_kb: u64,
    /// Number of threads.
    pub threads: u64,
}

impl Status {
    /// Parses the text of a status file. Missing fields stay 0.
    pub fn parse(text: &str) -> Status {
        let mut s = Status::default();
        for line in text.lines() {
            let Some((key, rest)) = line.split_once(':') else {
                continue;
            };
            let value = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok());
            let Some(value) = value else { continue };
            match key {
                "VmRSS" => s.vm_rss_kb = value,
                "VmHWM" => s.vm_hwm_kb = value,
                "VmSize" => s.vm_size_kb = value,
                "VmData" => s.vm_data_kb = value,
                "VmSwap" => s.vm_swap_kb = value,
                "Threads" => s.threads = value,
                _ => {}
            }
        }
        s
    }
}

/// Reads `/proc/self/status`.
pub fn read_status() -> io::Result<Status> {
    std::fs::read_to_string("/proc/self/status").map(|t| Status::parse(&t))
}

/// One mapping as `/proc/<pid>/maps` lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapsEntry {
    /// First address.
    pub start: usize,
    /// One past the last address.
    pub end: usize,
    /// Permissions, e.g. `rw-p` or `---p`.
    pub perms: String,
    /// The path or pseudo-name (`[stack]`, `[anon:rtvm heap]`), empty for anonymous memory.
    pub name: String,
}

impl MapsEntry {
    /// Parses a maps header line (`start-end perms offset dev inode [name]`).
    pub fn parse_line(line: &str) -> Option<MapsEntry> {
        let mut fields = line.splitn(6, ' ');
        let range = fields.next()?;
        let perms = fields.next()?;
        let _offset = fields.next()?;
        let _dev = fields.next()?;
        let _inode = fields.next()?;
        let name = fields.next().unwrap_or("").trim_start().to_owned();
        let (start, end) = range.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        if perms.len() != 4 || end < start {
            return None;
        }
        Some(MapsEntry {
            start,
            end,
            perms: perms.to_owned(),
            name,
        })
    }

    /// Whether the mapping is inaccessible (`---p`), as guard zones and reservations are.
    pub fn is_protected_none(&self) -> bool {
        self.perms.starts_with("---")
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether the mapping is empty (never, for a real mapping).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Parses a whole maps file.
pub fn parse_maps(text: &str) -> Vec<MapsEntry> {
    text.lines().filter_map(MapsEntry::parse_line).collect()
}

/// The mappings that are not glibc malloc arenas. glibc gives a thread's allocations an arena:
/// a 64 MiB-aligned, 64 MiB region (read-write head, `PROT_NONE` rest) that outlives the
/// thread by design. Checks for leaked mappings leave those out: they are the C allocator's.
pub fn without_malloc_arenas(maps: &[MapsEntry]) -> Vec<MapsEntry> {
    const ARENA: usize = 64 << 20;
    let mut out = Vec::new();
    let mut i = 0;
    while i < maps.len() {
        let m = &maps[i];
        let is_arena = m.start.is_multiple_of(ARENA)
            && m.perms == "rw-p"
            && m.name.is_empty()
            && maps
                .get(i + 1)
                .is_some_and(|n| n.start == m.end && n.perms == "---p" && n.end - m.start == ARENA);
        if is_arena {
            i += 2;
        } else {
            out.push(m.clone());
            i += 1;
        }
    }
    out
}

/// Reads a `/proc` file whose text the kernel generates in pieces (`maps`, `smaps`) until two
/// reads in a row agree: a read spans several system calls, and mappings that other threads
/// change between them can otherwise show up twice, shifted, or not at all.
fn read_consistent(path: &str) -> io::Result<String> {
    let mut last = std::fs::read_to_string(path)?;
    for _ in 0..16 {
        let again = std::fs::read_to_string(path)?;
        if again == last {
            return Ok(again);
        }
        last = again;
    }
    Ok(last)
}

/// Reads `/proc/self/maps` as a consistent snapshot: re-read until two reads in a row agree
/// (mappings other threads change between the system calls of one read could otherwise show
/// up twice, shifted, or not at all).
pub fn read_maps() -> io::Result<Vec<MapsEntry>> {
    read_consistent("/proc/self/maps").map(|t| parse_maps(&t))
}

/// The mappings of `/proc/self/maps` that overlap `[start, end)`.
pub fn maps_overlapping(start: usize, end: usize) -> io::Result<Vec<MapsEntry>> {
    Ok(read_maps()?
        .into_iter()
        .filter(|m| m.start < end && m.end > start)
        .collect())
}

/// One mapping of `/proc/<pid>/smaps` with the fields rtvm checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SmapsEntry {
    /// The header line's fields.
    pub map: MapsEntry,
    /// `Size` in kB.
    pub size_kb: u64,
    /// `Rss` in kB.
    pub rss_kb: u64,
    /// `AnonHugePages` in kB: memory backed by PMD-sized transparent huge pages.
    pub anon_huge_kb: u64,
    /// `KernelPageSize` in kB.
    pub kernel_page_kb: u64,
    /// `THPeligible` (kernels since 5.0), if present.
    pub thp_eligible: Option<bool>,
    /// The two-letter `VmFlags` (`rd wr mr mw me ac nh ...`).
    pub vm_flags: Vec<String>,
}

impl SmapsEntry {
    /// Whether `VmFlags` has the given flag (`nh` for `MADV_NOHUGEPAGE`, `hg` for
    /// `MADV_HUGEPAGE`).
    pub fn has_flag(&self, flag: &str) -> bool {
        self.vm_flags.iter().any(|f| f == flag)
    }
}

fn is_header(line: &str) -> bool {
    // Header lines start with a hex range; field lines with a capitalised key.
    line.split(' ').next().is_some_and(|r| {
        r.split_once('-').is_some_and(|(a, b)| {
            !a.is_empty()
                && a.bytes().all(|c| c.is_ascii_hexdigit())
                && b.bytes().all(|c| c.is_ascii_hexdigit())
        })
    })
}

fn kb_field(rest: &str) -> Option<u64> {
    rest.split_whitespace().next()?.parse().ok()
}

/// Parses a whole smaps file.
pub fn parse_smaps(text: &str) -> Vec<SmapsEntry> {
    let mut out: Vec<SmapsEntry> = Vec::new();
    for line in text.lines() {
        if is_header(line) {
            if let Some(map) = MapsEntry::parse_line(line) {
                out.push(SmapsEntry {
                    map,
                    ..SmapsEntry::default()
                });
            }
            continue;
        }
        let Some(entry) = out.last_mut() else {
            continue;
        };
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        match key {
            "Size" => entry.size_kb = kb_field(rest).unwrap_or(0),
            "Rss" => entry.rss_kb = kb_field(rest).unwrap_or(0),
            "AnonHugePages" => entry.anon_huge_kb = kb_field(rest).unwrap_or(0),
            "KernelPageSize" => entry.kernel_page_kb = kb_field(rest).unwrap_or(0),
            "THPeligible" => entry.thp_eligible = kb_field(rest).map(|v| v != 0),
            "VmFlags" => entry.vm_flags = rest.split_whitespace().map(str::to_owned).collect(),
            _ => {}
        }
    }
    out
}

/// Reads `/proc/self/smaps`. Not re-read for consistency: its `Rss` figures change with
/// every page fault anywhere in the process; callers look at their own mappings.
pub fn read_smaps() -> io::Result<Vec<SmapsEntry>> {
    std::fs::read_to_string("/proc/self/smaps").map(|t| parse_smaps(&t))
}

/// The smaps entry of the mapping that contains `addr`.
pub fn smaps_for(addr: usize) -> io::Result<Option<SmapsEntry>> {
    Ok(read_smaps()?
        .into_iter()
        .find(|e| e.map.start <= addr && addr < e.map.end))
}

/// The smaps entries that overlap `[start, end)` (a range can span several mappings once
/// protections or advice split it).
pub fn smaps_overlapping(start: usize, end: usize) -> io::Result<Vec<SmapsEntry>> {
    Ok(read_smaps()?
        .into_iter()
        .filter(|e| e.map.start < end && e.map.end > start)
        .collect())
}

/// How many base pages of `[start, end)` are present in RAM, per `/proc/self/pagemap` (bit 63
/// of each page's entry; readable without privileges). The kernel's page-table view, with no
/// system call on the memory itself: for tests and diagnostics of any address range.
pub fn present_pages(start: usize, end: usize) -> io::Result<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let page = crate::base_page_size();
    let first = start / page;
    let last = end.div_ceil(page);
    let mut file = std::fs::File::open("/proc/self/pagemap")?;
    file.seek(SeekFrom::Start(first as u64 * 8))?;
    let mut present = 0;
    let mut buf = vec![0u8; 8 * 4096];
    let mut left = last.saturating_sub(first);
    while left > 0 {
        let n = left.min(4096);
        file.read_exact(&mut buf[..n * 8])?;
        present += buf[..n * 8]
            .chunks_exact(8)
            .filter(|e| e[7] & 0x80 != 0)
            .count();
        left -= n;
    }
    Ok(present)
}

/// What `/proc/self/task/<tid>` says about one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskStat {
    /// The scheduler state letter (`R` running, `S` sleeping, `D` in uninterruptible wait,
    /// `T` stopped, `Z` zombie, ...).
    pub state: char,
    /// CPU time consumed, nanoseconds (`schedstat`, or `stat`'s ticks where that is off).
    pub cpu_ns: u64,
}

/// The state and CPU time of one of this process's threads; `None` once it is gone.
pub fn task_stat(tid: i32) -> Option<TaskStat> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The command may contain spaces and parentheses: the fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let cpu_ns = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .or_else(|| {
            // utime and stime are fields 14 and 15 (11 and 12 after the state).
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            // SAFETY: sysconf reads a constant.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
            Some(ticks * 1_000_000_000 / hz)
        })?;
    Some(TaskStat { state, cpu_ns })
}

/// What the kernel says of one of this process's threads, for a report on a thread that
/// did not stop: its scheduler state, the system call it is in, where it waits, and its
/// signal masks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskReport {
    /// The scheduler state letter (`R`, `S`, `D`, `T`, `t`, `Z`, ...).
    pub state: char,
    /// The system call number it is blocked in (`/proc/.../syscall`), if it is in one.
    pub syscall: Option<i64>,
    /// The kernel function it waits in (`wchan`), if it waits.
    pub wchan: Option<String>,
    /// Its blocked signals (`SigBlk`), as a bit mask (bit `n - 1` for signal `n`).
    pub blocked: u64,
    /// Signals pending for it alone (`SigPnd`).
    pub pending: u64,
}

impl TaskReport {
    /// The state letter in the kernel's words: `S (sleeping)`.
    pub fn state_words(&self) -> String {
        let what = match self.state {
            'R' => "running",
            'S' => "sleeping",
            'D' => "disk sleep",
            'T' => "stopped",
            't' => "tracing stop",
            'Z' => "zombie",
            'X' => "dead",
            'I' => "idle",
            'P' => "parked",
            _ => "unknown",
        };
        format!("{} ({what})", self.state)
    }

    /// Whether it blocks signal `signo`.
    pub fn blocks(&self, signo: i32) -> bool {
        (1..=64).contains(&signo) && self.blocked & (1u64 << (signo - 1)) != 0
    }

    /// Whether signal `signo` is pending for it.
    pub fn has_pending(&self, signo: i32) -> bool {
        (1..=64).contains(&signo) && self.pending & (1u64 << (signo - 1)) != 0
    }
}

/// A report on thread `tid` of this process; `None` once it is gone.
pub fn task_report(tid: i32) -> Option<TaskReport> {
    let dir = format!("/proc/self/task/{tid}");
    let state = task_stat(tid).map(|s| s.state)?;
    let syscall = std::fs::read_to_string(format!("{dir}/syscall"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<i64>().ok())
        .filter(|&n| n >= 0);
    let wchan = std::fs::read_to_string(format!("{dir}/wchan"))
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s != "0");
    let status = std::fs::read_to_string(format!("{dir}/status")).unwrap_or_default();
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    Some(TaskReport {
        state,
        syscall,
        wchan,
        blocked: mask("SigBlk:"),
        pending: mask("SigPnd:"),
    })
}

/// Whether thread `tid` of this process still exists.
pub fn task_exists(tid: i32) -> bool {
    std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
}

/// The end of the readable mapping that holds `addr` (a stack of unknown size, a fiber's:
/// from its stack pointer to there); `None` if `addr` lies in no readable mapping.
pub fn readable_mapping_end(addr: usize) -> Option<usize> {
    read_maps()
        .ok()?
        .iter()
        .find(|m| (m.start..m.end).contains(&addr) && m.perms.starts_with('r'))
        .map(|m| m.end)
}

/// Totals over several smaps entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Sum of `Size`.
    pub size_kb: u64,
    /// Sum of `Rss`.
    pub rss_kb: u64,
    /// Sum of `AnonHugePages`.
    pub anon_huge_kb: u64,
}

/// Sums `Size`, `Rss` and `AnonHugePages` over entries.
pub fn totals<'a>(entries: impl IntoIterator<Item = &'a SmapsEntry>) -> Totals {
    entries.into_iter().fold(Totals::default(), |t, e| Totals {
        size_kb: t.size_kb + e.size_kb,
        rss_kb: t.rss_kb + e.rss_kb,
        anon_huge_kb: t.anon_huge_kb + e.anon_huge_kb,
    })
}

/// `/proc/<pid>/smaps_rollup`: the whole process's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rollup {
    /// `Rss` in kB.
    pub rss_kb: u64,
    /// `Anonymous` in kB.
    pub anonymous_kb: u64,
    /// `AnonHugePages` in kB.
    pub anon_huge_kb: u64,
}

impl Rollup {
    /// Parses the text of a smaps_rollup file.
    pub fn parse(text: &str) -> Rollup {
        let mut r = Rollup::default();
        for line in text.lines().filter(|l| !is_header(l)) {
            let Some((key, rest)) = line.split_once(':') else {
                continue;
            };
            let Some(v) = kb_field(rest) else { continue };
            match key {
                "Rss" => r.rss_kb = v,
                "Anonymous" => r.anonymous_kb = v,
                "AnonHugePages" => r.anon_huge_kb = v,
                _ => {}
            }
        }
        r
    }
}

/// Reads `/proc/self/smaps_rollup`.
pub fn read_smaps_rollup() -> io::Result<Rollup> {
    std::fs::read_to_string("/proc/self/smaps_rollup").map(|t| Rollup::parse(&t))
}

/// Counts the open file descriptors of this process.
pub fn count_fds() -> io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\trtvm\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t  123456 kB\n\
        VmSize:\t  120000 kB\nVmData:\t   70000 kB\nVmHWM:\t    9000 kB\nVmRSS:\t    8000 kB\nVmSwap:\t       0 kB\nThreads:\t1003\n";

    const SMAPS: &str = "\
7f0000000000-7f0000200000 rw-p 00000000 00:00 0 \n\
Size:               2048 kB\n\
KernelPageSize:        4 kB\n\
MMUPageSize:           4 kB\n\
Rss:                2048 kB\n\
AnonHugePages:      2048 kB\n\
THPeligible:           1\n\
VmFlags: rd wr mr mw me ac hg \n\
7f0000200000-7f0000201000 ---p 00000000 00:00 0                          [anon:rtvm stack: worker]\n\
Size:                  4 kB\n\
KernelPageSize:        4 kB\n\
Rss:                   0 kB\n\
AnonHugePages:         0 kB\n\
THPeligible:           0\n\
VmFlags: mr mw me ac nh \n\
7f0000201000-7f0000300000 rw-p 00000000 00:00 0                          [anon:rtvm stack: worker]\n\
Size:               1020 kB\n\
Rss:                  12 kB\n\
AnonHugePages:         0 kB\n\
VmFlags: rd wr mr mw me ac nh \n\
7ffd1000-7ffd2000 r--p 00001000 fd:01 12345                      /usr/lib/x86_64-linux-gnu/libc.so.6\n\
Size:                  4 kB\n\
VmFlags: rd mr mw me \n";

    #[test]
    fn status_fields() {
        let s = Status::parse(STATUS);
        assert_eq!(
            s,
            Status {
                vm_rss_kb: 8000,
                vm_hwm_kb: 9000,
                vm_size_kb: 120000,
                vm_data_kb: 70000,
                vm_swap_kb: 0,
                threads: 1003
            }
        );
        assert_eq!(Status::parse("garbage\nVmRSS: lots\n"), Status::default());
    }

    #[test]
    fn smaps_entries() {
        let e = parse_smaps(SMAPS);
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].map.start, 0x7f00_0000_0000);
        assert_eq!(e[0].map.end, 0x7f00_0020_0000);
        assert_eq!(
            (
                e[0].size_kb,
                e[0].rss_kb,
                e[0].anon_huge_kb,
                e[0].kernel_page_kb
            ),
            (2048, 2048, 2048, 4)
        );
        assert_eq!(e[0].thp_eligible, Some(true));
        assert!(e[0].has_flag("hg") && !e[0].has_flag("nh"));
        assert!(e[1].map.is_protected_none());
        assert_eq!(e[1].map.name, "[anon:rtvm stack: worker]");
        assert_eq!(e[1].thp_eligible, Some(false));
        assert!(e[1].has_flag("nh"));
        assert_eq!(e[2].thp_eligible, None);
        assert_eq!(e[3].map.name, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        let t = totals(&e[..3]);
        assert_eq!(
            t,
            Totals {
                size_kb: 3072,
                rss_kb: 2060,
                anon_huge_kb: 2048
            }
        );
    }

    #[test]
    fn maps_lines() {
        let m = MapsEntry::parse_line(
            "55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0          [heap]",
        )
        .unwrap();
        assert_eq!(
            (m.start, m.end, m.perms.as_str(), m.name.as_str()),
            (0x55d0c0000000, 0x55d0c0021000, "rw-p", "[heap]")
        );
        assert_eq!(m.len(), 0x21000);
        let m = MapsEntry::parse_line("7f00-8f00 ---p 00000000 00:00 0").unwrap();
        assert!(m.is_protected_none() && m.name.is_empty());
        assert_eq!(MapsEntry::parse_line("zz-8f00 ---p 0 0 0"), None);
        assert_eq!(MapsEntry::parse_line("9000-8000 ---p 0 0 0"), None);
        assert_eq!(MapsEntry::parse_line(""), None);
    }

    #[test]
    fn arenas_are_recognised() {
        let text = "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n\
                    7f0000021000-7f0004000000 ---p 00000000 00:00 0 \n\
                    7f0004000000-7f0004001000 rw-p 00000000 00:00 0 \n\
                    7f0004100000-7f0004121000 rw-p 00000000 00:00 0 \n\
                    7f0004121000-7f0008100000 ---p 00000000 00:00 0 \n";
        let left = without_malloc_arenas(&parse_maps(text));
        assert_eq!(
            left.len(),
            3,
            "only the 64 MiB-aligned pair is an arena: {left:?}"
        );
        assert_eq!(left[0].start, 0x7f00_0400_0000);
    }

    #[test]
    fn rollup() {
        let r = Rollup::parse(
            "55d0c0000000-7ffd1000 ---p 00000000 00:00 0                          [rollup]\n\
             Rss:              367928 kB\nPss:              1 kB\nAnonymous:        350000 kB\nAnonHugePages:     20480 kB\n",
        );
        assert_eq!(
            r,
            Rollup {
                rss_kb: 367928,
                anonymous_kb: 350000,
                anon_huge_kb: 20480
            }
        );
    }

    #[test]
    fn live_files() {
        let s = read_status().unwrap();
        assert!(s.vm_rss_kb > 0 && s.threads >= 1);
        let maps = read_maps().unwrap();
        assert!(maps.iter().any(|m| m.name == "[stack]"));
        let smaps = read_smaps().unwrap();
        assert!(smaps.iter().all(|e| e.size_kb * 1024 == e.map.len() as u64));
        let here = &s as *const Status as usize;
        let entry = smaps_for(here).unwrap().expect("our own stack is mapped");
        assert!(entry.map.perms.starts_with("rw"));
        assert!(read_smaps_rollup().unwrap().rss_kb > 0);
        assert!(count_fds().unwrap() >= 3);
    }
}
