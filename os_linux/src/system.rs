//! Facts about the machine and the process: memory, processors, limits, time, identity.

use std::time::{SystemTime, UNIX_EPOCH};

use nix::sys::resource::{getrlimit, setrlimit, Resource, RLIM_INFINITY};

/// Physical memory in bytes (`_SC_PHYS_PAGES` × page size), as HotSpot's
/// `os::physical_memory()`. `None` if the kernel does not say.
pub fn physical_memory() -> Option<u64> {
    let pages = nix::unistd::sysconf(nix::unistd::SysconfVar::_PHYS_PAGES)
        .ok()
        .flatten()?;
    u64::try_from(pages)
        .ok()?
        .checked_mul(crate::pages::base_page_size() as u64)
}

/// Processors this process may run on (CPU affinity and cgroup quota considered).
pub fn available_processors() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Processors the system has configured (HotSpot's `os::processor_count`).
pub fn configured_processors() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_CONF)
        .ok()
        .flatten()
        .map_or(1, |n| n.max(1) as usize)
}

/// Processors in this thread's CPU affinity mask, no cgroup quota considered (HotSpot's
/// `os::Linux::active_processor_count`); the configured count if the mask cannot be read.
pub fn affinity_processors() -> usize {
    use nix::sched::{sched_getaffinity, CpuSet};
    match sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&i| set.is_set(i).unwrap_or(false))
            .count()
            .max(1),
        Err(e) => {
            let configured = configured_processors();
            log::debug!(target: "os", "sched_getaffinity failed ({}): using the {configured} configured processors", crate::strerror(e));
            configured
        }
    }
}

/// The soft `RLIMIT_STACK` in bytes, `None` if unlimited: glibc's default thread stack size.
pub fn stack_rlimit() -> Option<u64> {
    getrlimit(Resource::RLIMIT_STACK)
        .ok()
        .map(|(soft, _)| soft)
        .filter(|&s| s != RLIM_INFINITY)
}

/// A resource limit that tests and tools lower, in bytes (or count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// `RLIMIT_AS`: address space.
    AddressSpace,
    /// `RLIMIT_DATA`: writable private mappings.
    Data,
    /// `RLIMIT_NPROC`: threads and processes of the user.
    Processes,
    /// `RLIMIT_NOFILE`: open files.
    OpenFiles,
}

impl Limit {
    fn resource(self) -> Resource {
        match self {
            Limit::AddressSpace => Resource::RLIMIT_AS,
            Limit::Data => Resource::RLIMIT_DATA,
            Limit::Processes => Resource::RLIMIT_NPROC,
            Limit::OpenFiles => Resource::RLIMIT_NOFILE,
        }
    }
}

/// Sets the soft limit (process-wide: use from a child process or a serialized test).
pub fn set_soft_limit(limit: Limit, value: u64) -> Result<(), nix::errno::Errno> {
    let (_, hard) = getrlimit(limit.resource())?;
    setrlimit(limit.resource(), value.min(hard), hard)
}

/// The current soft limit, `None` if unlimited.
pub fn soft_limit(limit: Limit) -> Option<u64> {
    getrlimit(limit.resource())
        .ok()
        .map(|(s, _)| s)
        .filter(|&s| s != RLIM_INFINITY)
}

/// Bumped in the child of every `fork()` (a `pthread_atfork` handler, registered by the first
/// call of [`process_generation`]).
static FORK_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn forked_child() {
    FORK_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Which process this is, as far as `fork()` goes: a value that differs in a child created by
/// `fork()` after the first call (where only the forking thread exists — a VM's workers and
/// threads do not). One atomic load; the `pthread_atfork` handler is registered once.
pub fn process_generation() -> u64 {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers a child handler that only increments an atomic (async-signal-
        // safe, allocation-free); no prepare or parent handler. The function lives as long
        // as the code, which is never unloaded (-z nodelete for the C library).
        let rc = unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
        if rc != 0 {
            log::warn!(target: "os", "pthread_atfork failed ({}): a forked child cannot tell that its VM belongs to the parent", crate::error::strerror(nix::errno::Errno::from_raw(rc)));
        }
    });
    FORK_GENERATION.load(std::sync::atomic::Ordering::Relaxed)
}

thread_local! {
    /// The calling thread's tid, and the process generation it was read in (a `fork()` child's
    /// forking thread has another tid). Plain data: read from any context.
    static TID: std::cell::Cell<(u64, i32)> = const { std::cell::Cell::new((u64::MAX, 0)) };
}

/// The calling thread's kernel thread id: one system call per thread (and per `fork()`), then
/// a thread-local read.
pub fn current_tid() -> i32 {
    let generation = process_generation();
    TID.with(|c| {
        let (g, tid) = c.get();
        if g == generation && tid != 0 {
            return tid;
        }
        let tid = crate::sys::current_tid();
        c.set((generation, tid));
        tid
    })
}

/// The host name, as `/proc/sys/kernel/hostname` gives it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// `vm.max_map_count`: how many mappings a process may have.
pub fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The C allocator's figures for the whole process (glibc `mallinfo2`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MallocStats {
    /// Bytes the allocator holds from the kernel: its arenas plus its own `mmap`s.
    pub reserved: u64,
    /// Bytes handed out to callers (in use).
    pub in_use: u64,
}

/// The C allocator's figures, process-wide. `None` where glibc is not the C library.
pub fn malloc_stats() -> Option<MallocStats> {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: mallinfo2 (glibc 2.33+) takes no arguments and returns plain data.
        let m = unsafe { libc::mallinfo2() };
        Some(MallocStats {
            reserved: (m.arena + m.hblkhd) as u64,
            in_use: (m.uordblks + m.hblkhd) as u64,
        })
    }
    #[cfg(not(target_env = "gnu"))]
    {
        None
    }
}

/// Gives the C allocator's free memory back to the kernel (glibc `malloc_trim(0)`: every
/// arena, holes below live blocks included); `false` where glibc is not the C library.
pub fn malloc_trim() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: malloc_trim takes a padding argument and works on glibc's own state,
        // thread-safely.
        unsafe { libc::malloc_trim(0) };
        true
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}

/// A broken-down calendar time with the UTC offset that applied to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CalendarTime {
    /// Year, e.g. 2026.
    pub year: i32,
    /// Month, 1–12.
    pub month: u32,
    /// Day of month, 1–31.
    pub day: u32,
    /// Hour, 0–23.
    pub hour: u32,
    /// Minute.
    pub minute: u32,
    /// Second.
    pub second: u32,
    /// Milliseconds.
    pub millis: u32,
    /// Offset from UTC in seconds (east positive).
    pub utc_offset_secs: i64,
}

impl CalendarTime {
    /// ISO-8601 with milliseconds and offset, as HotSpot's `time` decorator prints it
    /// (`2026-11-30T03:10:48.123+0000`).
    pub fn iso8601(&self) -> String {
        let sign = if self.utc_offset_secs < 0 { '-' } else { '+' };
        let off = self.utc_offset_secs.unsigned_abs();
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}{sign}{:02}{:02}",
            self.year,
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.second,
            self.millis,
            off / 3600,
            off % 3600 / 60
        )
    }
}

/// The current local (or UTC) time.
pub fn calendar_now(utc: bool) -> CalendarTime {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: `tm` is plain data that localtime_r/gmtime_r fill in; both are thread-safe and
    // read only `secs`.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if utc {
            libc::gmtime_r(&secs, &mut tm);
        } else {
            libc::localtime_r(&secs, &mut tm);
        }
        tm
    };
    CalendarTime {
        year: tm.tm_year + 1900,
        month: (tm.tm_mon + 1) as u32,
        day: tm.tm_mday as u32,
        hour: tm.tm_hour as u32,
        minute: tm.tm_min as u32,
        second: tm.tm_sec as u32,
        millis: now.subsec_millis(),
        utc_offset_secs: if utc { 0 } else { tm.tm_gmtoff },
    }
}

/// The current local time formatted by the C library's `strftime` (`%a %b %d %H:%M:%S %Z
/// %Y` gives `Wed Dec 02 00:19:41 UTC 2026`, as Java's `Date.toString`); empty if the
/// format cannot be used.
pub fn strftime_now(format: &str) -> String {
    let Ok(fmt) = std::ffi::CString::new(format) else {
        return String::new();
    };
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as libc::time_t;
    let mut buf = [0u8; 256];
    // SAFETY: localtime_r fills a local tm; strftime writes at most buf.len() bytes into the
    // local buffer and returns how many.
    let n = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        libc::strftime(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), &tm)
    };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The CPU time thread `tid` of this process has used so far — its CPU clock, read from any
/// thread (what `pthread_getcpuclockid` gives its own thread) — or `None` once it is gone.
pub fn thread_cpu_time(tid: i32) -> Option<std::time::Duration> {
    if tid <= 0 {
        return None;
    }
    // The kernel's clock id for a thread's CPU clock: glibc's MAKE_THREAD_CPUCLOCK(tid,
    // CPUCLOCK_SCHED), `~tid << 3 | 4 (one thread) | 2 (scheduler time)`.
    let clock: libc::clockid_t = (!tid << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into a local.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| std::time::Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.max(0) as u32))
}

/// Writes `bytes` to fd 2 with `write(2)` (retrying short writes and `EINTR`), bypassing
/// every lock: for fatal reports and for output while other threads may be stopped.
pub fn write_stderr(bytes: &[u8]) {
    write_fd(2, bytes);
}

/// Writes `bytes` to `fd` with `write(2)` (retrying short writes and `EINTR`), bypassing
/// every user-space lock. Errors other than `EINTR` end the write silently.
pub fn write_fd(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writes from a valid slice to a file descriptor; no memory is written.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if n < 0 && nix::errno::Errno::last() == nix::errno::Errno::EINTR {
            continue;
        } else {
            return;
        }
    }
}

/// Ends the process after a fatal error a diagnostic mode asked for: writes `report` to fd 2;
/// then, with `dump_core`, sends `SIGABRT` to thread `culprit` of this process if given (a
/// core then shows that thread's stack) and waits a little for it to end the process, else
/// (or then) `abort()`; without, `_exit(1)` (HotSpot's `-XX:-CreateCoredumpOnCrash`).
pub fn abort_process(report: &str, culprit: Option<i32>, dump_core: bool) -> ! {
    write_stderr(report.as_bytes());
    if !dump_core {
        // SAFETY: _exit ends the process at once; nothing runs after it.
        unsafe { libc::_exit(1) };
    }
    if let Some(tid) = culprit.filter(|&t| t > 0) {
        // SIGABRT to the culprit: its default action ends the process.
        let _ = crate::sys::tgkill(tid, libc::SIGABRT);
        std::thread::sleep(std::time::Duration::from_secs(3));
    }
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_facts() {
        let mem = physical_memory().unwrap();
        assert!(mem > 64 << 20);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let total_kb: u64 = meminfo
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert!(mem >= total_kb * 1024, "phys pages cover MemTotal");
        assert!(available_processors() >= 1);
        assert!(current_tid() > 0);
        // The CPU clock of a thread, read from another, moves while it spins, not while it
        // sleeps.
        let me = thread_cpu_time(current_tid()).unwrap();
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        assert!(thread_cpu_time(current_tid()).unwrap() > me);
        let (tx, rx) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || {
            tx.send(current_tid()).unwrap();
            let _ = wait.recv();
        });
        let tid = rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let a = thread_cpu_time(tid).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = thread_cpu_time(tid).unwrap();
        assert!(
            b - a < std::time::Duration::from_millis(5),
            "{a:?} -> {b:?}"
        );
        go.send(()).unwrap();
        sleeper.join().unwrap();
        assert_eq!(thread_cpu_time(-1), None);
        let sysctl: u64 = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(max_map_count(), Some(sysctl));
        // The block must exist while the statistics are read: black_box keeps the optimizer
        // from eliding an allocation that is never read (it does so in release builds).
        let big = std::hint::black_box(vec![1u8; 64 << 20]);
        let during = malloc_stats().unwrap();
        // Absolute, not a difference: other tests allocate and free concurrently.
        assert!(during.in_use >= 64 << 20, "{during:?}");
        assert!(during.reserved >= during.in_use);
        assert_eq!(std::hint::black_box(&big)[(64 << 20) - 1], 1);
        drop(big);
    }

    #[test]
    fn calendar() {
        let t = calendar_now(true);
        assert!(t.year >= 2024 && (1..=12).contains(&t.month) && t.utc_offset_secs == 0);
        let s = t.iso8601();
        assert_eq!(s.len(), "2026-11-30T03:10:48.123+0000".len(), "{s}");
        assert!(s.ends_with("+0000"));
        let neg = CalendarTime {
            utc_offset_secs: -(5 * 3600 + 30 * 60),
            ..t
        };
        assert!(neg.iso8601().ends_with("-0530"));
    }
}
