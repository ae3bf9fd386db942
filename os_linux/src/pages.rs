//! Page sizes and transparent-huge-page (THP) configuration, read from sysfs and procfs.
//!
//! The roots are parameters ([`SysRoots`]) so tests can point the readers at fake trees.
//! A missing file means the feature is absent (`never`, as HotSpot assumes); a file with
//! unexpected content is reported as a [`Problem`] and the setting is treated as unknown —
//! never a panic.
//!
//! What is read:
//! * `kernel/mm/transparent_hugepage/enabled` and `defrag` (`always [madvise] never`);
//! * `kernel/mm/transparent_hugepage/hpage_pmd_size` (the PMD huge page size);
//! * every `kernel/mm/transparent_hugepage/hugepages-<N>kB/enabled` (mTHP: `always`,
//!   `inherit`, `madvise`, `never`) and the *effective* mode of each size;
//! * `kernel/mm/transparent_hugepage/shmem_enabled`;
//! * `kernel/mm/transparent_hugepage/khugepaged/max_ptes_none`;
//! * explicit hugetlbfs sizes: `/proc/meminfo` `Hugepagesize` and `kernel/mm/hugepages/`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The base (small) page size of the system.
pub fn base_page_size() -> usize {
    static SIZE: OnceLock<usize> = OnceLock::new();
    *SIZE.get_or_init(|| {
        nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .and_then(|v| usize::try_from(v).ok())
            .filter(|v| v.is_power_of_two())
            .unwrap_or(4096)
    })
}

/// Where sysfs and procfs are mounted (`/sys` and `/proc` on a real system).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysRoots {
    /// The sysfs root.
    pub sys: PathBuf,
    /// The procfs root.
    pub proc: PathBuf,
}

impl Default for SysRoots {
    fn default() -> Self {
        SysRoots {
            sys: PathBuf::from("/sys"),
            proc: PathBuf::from("/proc"),
        }
    }
}

/// The system-wide THP mode (`transparent_hugepage/enabled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThpMode {
    /// Every eligible anonymous mapping may get huge pages.
    Always,
    /// Only mappings advised `MADV_HUGEPAGE` get huge pages.
    Madvise,
    /// No huge pages (also when THP is not compiled in).
    Never,
    /// The file exists but its content could not be understood.
    Unknown,
}

/// A per-size mTHP setting (`hugepages-<N>kB/enabled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MthpSetting {
    /// Always use this size where possible.
    Always,
    /// Follow the top-level `enabled` mode.
    Inherit,
    /// Only in `MADV_HUGEPAGE` regions.
    Madvise,
    /// Never.
    Never,
    /// Unreadable content.
    Unknown,
}

/// The THP defrag policy (`transparent_hugepage/defrag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefragMode {
    /// Stall allocations to reclaim and compact.
    Always,
    /// Wake kswapd/kcompactd and fall back to small pages.
    Defer,
    /// `defer`, but direct reclaim for `MADV_HUGEPAGE` regions.
    DeferMadvise,
    /// Direct reclaim only for `MADV_HUGEPAGE` regions.
    Madvise,
    /// Never defragment.
    Never,
    /// Missing or unreadable.
    Unknown,
}

/// Shared-memory THP mode (`transparent_hugepage/shmem_enabled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShmemMode {
    /// Always.
    Always,
    /// Only if the huge page fits within `i_size`.
    WithinSize,
    /// Only for `MADV_HUGEPAGE` regions.
    Advise,
    /// Never.
    Never,
    /// Disabled for everything, even `huge=` mounts (emergency setting).
    Deny,
    /// Forced on for everything (testing setting).
    Force,
    /// Missing or unreadable.
    Unknown,
}

macro_rules! mode_names {
    ($t:ty { $($name:literal => $v:ident),* $(,)? }) => {
        impl $t {
            fn from_word(word: &str) -> Option<Self> {
                match word { $($name => Some(<$t>::$v),)* _ => None }
            }
            /// The mode as sysfs spells it.
            pub fn as_str(self) -> &'static str {
                match self { $(<$t>::$v => $name,)* #[allow(unreachable_patterns)] _ => "unknown" }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
    };
}
mode_names!(ThpMode { "always" => Always, "madvise" => Madvise, "never" => Never, "unknown" => Unknown });
mode_names!(MthpSetting { "always" => Always, "inherit" => Inherit, "madvise" => Madvise, "never" => Never, "unknown" => Unknown });
mode_names!(DefragMode { "always" => Always, "defer" => Defer, "defer+madvise" => DeferMadvise, "madvise" => Madvise, "never" => Never, "unknown" => Unknown });
mode_names!(ShmemMode { "always" => Always, "within_size" => WithinSize, "advise" => Advise, "never" => Never, "deny" => Deny, "force" => Force, "unknown" => Unknown });

/// One mTHP size and its setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MthpSize {
    /// The folio size in bytes.
    pub size: usize,
    /// The size's own setting.
    pub setting: MthpSetting,
    /// What the setting means once `inherit` is resolved against the top-level mode.
    pub effective: ThpMode,
}

/// Something in sysfs or procfs that could not be understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub path: PathBuf,
    /// What was wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)
    }
}

/// Transparent huge page configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThpInfo {
    /// The top-level mode.
    pub mode: ThpMode,
    /// The defrag policy.
    pub defrag: DefragMode,
    /// The PMD huge page size (`hpage_pmd_size`), if readable.
    pub pmd_size: Option<usize>,
    /// Every mTHP size the kernel offers, ascending. Empty before Linux 6.8.
    pub mthp: Vec<MthpSize>,
    /// The shared-memory mode.
    pub shmem: ShmemMode,
    /// khugepaged's `max_ptes_none` (how many empty PTEs a range may have and still be
    /// collapsed; 511 of 512 by default).
    pub max_ptes_none: Option<u32>,
}

impl ThpInfo {
    /// The mTHP sizes whose effective mode is `always`: the kernel may back any fresh
    /// anonymous mapping — a thread stack included — with folios of these sizes.
    pub fn mthp_always(&self) -> Vec<usize> {
        self.mthp
            .iter()
            .filter(|m| m.effective == ThpMode::Always)
            .map(|m| m.size)
            .collect()
    }

    /// Whether the kernel may put huge pages (PMD or mTHP) into memory that was not advised
    /// `MADV_HUGEPAGE`.
    pub fn unadvised_memory_may_get_huge_pages(&self) -> bool {
        self.mode == ThpMode::Always || !self.mthp_always().is_empty()
    }

    /// Whether THP exists at all (mode `always` or `madvise`, or any mTHP size not `never`).
    pub fn supported(&self) -> bool {
        matches!(self.mode, ThpMode::Always | ThpMode::Madvise)
            || self
                .mthp
                .iter()
                .any(|m| matches!(m.effective, ThpMode::Always | ThpMode::Madvise))
    }
}

/// Explicit (hugetlbfs) huge page configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HugetlbInfo {
    /// `Hugepagesize` from `/proc/meminfo`.
    pub default_size: Option<usize>,
    /// Every size with a directory under `kernel/mm/hugepages`, ascending.
    pub sizes: Vec<usize>,
}

impl HugetlbInfo {
    /// HotSpot's sanity check of a static huge page size: one page of `page_size` can be
    /// mapped from hugetlbfs right now (which needs a free or overcommittable page of that
    /// size), and is unmapped again at once.
    pub fn sanity_check(page_size: usize) -> bool {
        crate::sys::map_anonymous(
            page_size,
            crate::sys::Protection::ReadWrite,
            crate::sys::huge_page_flags(page_size),
        )
        .map(|addr| {
            // SAFETY: the mapping was just created here and nothing refers to it.
            let _ = unsafe { crate::sys::unmap(addr, page_size) };
        })
        .is_ok()
    }

    /// HotSpot's consistency rule: the default size must have a directory.
    pub fn consistent(&self) -> bool {
        self.default_size.is_none_or(|d| self.sizes.contains(&d))
    }
}

/// Everything rtvm needs to know about page sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageInfo {
    /// The base page size.
    pub base_page_size: usize,
    /// THP configuration.
    pub thp: ThpInfo,
    /// hugetlbfs configuration.
    pub hugetlb: HugetlbInfo,
    /// Files that existed but could not be understood.
    pub problems: Vec<Problem>,
}

impl PageInfo {
    /// Reads the live system's configuration.
    pub fn detect() -> PageInfo {
        PageInfo::detect_at(&SysRoots::default())
    }

    /// Reads the configuration under the given roots.
    pub fn detect_at(roots: &SysRoots) -> PageInfo {
        let mut problems = Vec::new();
        let thp_dir = roots.sys.join("kernel/mm/transparent_hugepage");
        let mode = read_bracketed(&thp_dir.join("enabled"), ThpMode::from_word, &mut problems)
            .unwrap_or(ThpMode::Never, ThpMode::Unknown);
        let defrag = read_bracketed(
            &thp_dir.join("defrag"),
            DefragMode::from_word,
            &mut problems,
        )
        .unwrap_or(DefragMode::Unknown, DefragMode::Unknown);
        let shmem = read_bracketed(
            &thp_dir.join("shmem_enabled"),
            ShmemMode::from_word,
            &mut problems,
        )
        .unwrap_or(ShmemMode::Never, ShmemMode::Unknown);
        let pmd_size = read_number(&thp_dir.join("hpage_pmd_size"), &mut problems)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| {
                let ok = n.is_power_of_two() && *n > 0;
                if !ok {
                    problems.push(Problem {
                        path: thp_dir.join("hpage_pmd_size"),
                        what: format!("{n} is not a power of two"),
                    });
                }
                ok
            });
        let max_ptes_none = read_number(&thp_dir.join("khugepaged/max_ptes_none"), &mut problems)
            .and_then(|n| u32::try_from(n).ok());

        let mut mthp = Vec::new();
        for (size, dir) in sized_dirs(&thp_dir, &mut problems) {
            let setting =
                read_bracketed(&dir.join("enabled"), MthpSetting::from_word, &mut problems)
                    .unwrap_or(MthpSetting::Never, MthpSetting::Unknown);
            let effective = match setting {
                MthpSetting::Always => ThpMode::Always,
                MthpSetting::Madvise => ThpMode::Madvise,
                MthpSetting::Never => ThpMode::Never,
                MthpSetting::Inherit => mode,
                MthpSetting::Unknown => ThpMode::Unknown,
            };
            mthp.push(MthpSize {
                size,
                setting,
                effective,
            });
        }

        let default_size = read_meminfo_hugepagesize(&roots.proc.join("meminfo"), &mut problems);
        let sizes = sized_dirs(&roots.sys.join("kernel/mm/hugepages"), &mut problems)
            .into_iter()
            .map(|(size, _)| size)
            .collect();

        PageInfo {
            base_page_size: base_page_size(),
            thp: ThpInfo {
                mode,
                defrag,
                pmd_size,
                mthp,
                shmem,
                max_ptes_none,
            },
            hugetlb: HugetlbInfo {
                default_size,
                sizes,
            },
            problems,
        }
    }
}

/// What reading a sysfs setting gave.
enum Read<T> {
    Missing,
    Garbage,
    Value(T),
}

impl<T> Read<T> {
    fn unwrap_or(self, missing: T, garbage: T) -> T {
        match self {
            Read::Missing => missing,
            Read::Garbage => garbage,
            Read::Value(v) => v,
        }
    }
}

fn read_text(path: &Path, problems: &mut Vec<Problem>) -> Option<String> {
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(s) => Some(s),
            Err(_) => {
                problems.push(Problem {
                    path: path.into(),
                    what: "content is not UTF-8".into(),
                });
                None
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            problems.push(Problem {
                path: path.into(),
                what: format!("cannot be read: {e}"),
            });
            None
        }
    }
}

/// Parses the `always [madvise] never` form: exactly one bracketed, known word.
fn read_bracketed<T>(
    path: &Path,
    word: fn(&str) -> Option<T>,
    problems: &mut Vec<Problem>,
) -> Read<T> {
    let Some(text) = read_text(path, problems) else {
        return if path.exists() {
            Read::Garbage
        } else {
            Read::Missing
        };
    };
    let selected: Vec<&str> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .collect();
    match selected.as_slice() {
        [one] => match word(one) {
            Some(v) => Read::Value(v),
            None => {
                problems.push(Problem {
                    path: path.into(),
                    what: format!("unknown mode '{one}'"),
                });
                Read::Garbage
            }
        },
        _ => {
            let shown: String = text.trim().chars().take(80).collect();
            problems.push(Problem {
                path: path.into(),
                what: format!("unexpected content '{shown}' (expected one [bracketed] mode)"),
            });
            Read::Garbage
        }
    }
}

fn read_number(path: &Path, problems: &mut Vec<Problem>) -> Option<u64> {
    let text = read_text(path, problems)?;
    match text.trim().parse::<u64>() {
        Ok(n) => Some(n),
        Err(_) => {
            let shown: String = text.trim().chars().take(80).collect();
            problems.push(Problem {
                path: path.into(),
                what: format!("'{shown}' is not a number"),
            });
            None
        }
    }
}

/// Lists `hugepages-<N>kB` directories as `(N * 1024, path)`, ascending by size.
fn sized_dirs(dir: &Path, problems: &mut Vec<Problem>) -> Vec<(usize, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(kb) = name
            .strip_prefix("hugepages-")
            .and_then(|n| n.strip_suffix("kB"))
        else {
            continue;
        };
        match kb.parse::<usize>().ok().and_then(|k| k.checked_mul(1024)) {
            Some(size) if size.is_power_of_two() => out.push((size, entry.path())),
            _ => problems.push(Problem {
                path: entry.path(),
                what: "not a valid size directory".into(),
            }),
        }
    }
    out.sort();
    out
}

fn read_meminfo_hugepagesize(path: &Path, problems: &mut Vec<Problem>) -> Option<usize> {
    let text = read_text(path, problems)?;
    let line = text.lines().find(|l| l.starts_with("Hugepagesize:"))?;
    let parsed = line
        .strip_prefix("Hugepagesize:")
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .and_then(|k| k.checked_mul(1024));
    if parsed.is_none() {
        problems.push(Problem {
            path: path.into(),
            what: format!("unexpected line '{line}'"),
        });
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Tree(PathBuf);

    impl Tree {
        fn new(tag: &str) -> Tree {
            let dir = std::env::temp_dir().join(format!(
                "rtvm-pages-{}-{tag}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(dir.join("sys")).unwrap();
            fs::create_dir_all(dir.join("proc")).unwrap();
            Tree(dir)
        }
        fn file(&self, rel: &str, content: &str) -> &Tree {
            let p = self.0.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
            self
        }
        fn roots(&self) -> SysRoots {
            SysRoots {
                sys: self.0.join("sys"),
                proc: self.0.join("proc"),
            }
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const THP: &str = "sys/kernel/mm/transparent_hugepage";

    #[test]
    fn this_machines_layout() {
        let t = Tree::new("machine");
        t.file(&format!("{THP}/enabled"), "always [madvise] never\n")
            .file(
                &format!("{THP}/defrag"),
                "always defer defer+madvise [madvise] never\n",
            )
            .file(&format!("{THP}/hpage_pmd_size"), "2097152\n")
            .file(
                &format!("{THP}/shmem_enabled"),
                "always within_size advise [never] deny force\n",
            )
            .file(&format!("{THP}/khugepaged/max_ptes_none"), "511\n")
            .file(
                &format!("{THP}/hugepages-2048kB/enabled"),
                "always [inherit] madvise never\n",
            )
            .file(
                &format!("{THP}/hugepages-64kB/enabled"),
                "always inherit madvise [never]\n",
            )
            .file(
                &format!("{THP}/hugepages-16kB/enabled"),
                "[always] inherit madvise never\n",
            )
            .file(
                "proc/meminfo",
                "MemTotal: 1 kB\nHugepagesize:       2048 kB\n",
            )
            .file(
                "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
                "0\n",
            )
            .file(
                "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
                "0\n",
            );
        let info = PageInfo::detect_at(&t.roots());
        assert!(info.problems.is_empty(), "{:?}", info.problems);
        assert_eq!(info.thp.mode, ThpMode::Madvise);
        assert_eq!(info.thp.defrag, DefragMode::Madvise);
        assert_eq!(info.thp.pmd_size, Some(2 << 20));
        assert_eq!(info.thp.shmem, ShmemMode::Never);
        assert_eq!(info.thp.max_ptes_none, Some(511));
        assert_eq!(
            info.thp.mthp,
            vec![
                MthpSize {
                    size: 16 << 10,
                    setting: MthpSetting::Always,
                    effective: ThpMode::Always
                },
                MthpSize {
                    size: 64 << 10,
                    setting: MthpSetting::Never,
                    effective: ThpMode::Never
                },
                MthpSize {
                    size: 2 << 20,
                    setting: MthpSetting::Inherit,
                    effective: ThpMode::Madvise
                },
            ]
        );
        assert_eq!(info.thp.mthp_always(), vec![16 << 10]);
        assert!(info.thp.unadvised_memory_may_get_huge_pages());
        assert_eq!(info.hugetlb.default_size, Some(2 << 20));
        assert_eq!(info.hugetlb.sizes, vec![2 << 20, 1 << 30]);
        assert!(info.hugetlb.consistent());
    }

    #[test]
    fn every_mode_word() {
        for (text, mode) in [
            ("[always] madvise never", ThpMode::Always),
            ("always [madvise] never", ThpMode::Madvise),
            ("always madvise [never]", ThpMode::Never),
        ] {
            let t = Tree::new("modes");
            t.file(&format!("{THP}/enabled"), text);
            assert_eq!(PageInfo::detect_at(&t.roots()).thp.mode, mode, "{text}");
        }
        for (text, mode) in [
            (
                "[always] defer defer+madvise madvise never",
                DefragMode::Always,
            ),
            (
                "always [defer] defer+madvise madvise never",
                DefragMode::Defer,
            ),
            (
                "always defer [defer+madvise] madvise never",
                DefragMode::DeferMadvise,
            ),
            (
                "always defer defer+madvise madvise [never]",
                DefragMode::Never,
            ),
        ] {
            let t = Tree::new("defrag");
            t.file(&format!("{THP}/defrag"), text);
            assert_eq!(PageInfo::detect_at(&t.roots()).thp.defrag, mode, "{text}");
        }
        for (word, mode) in [
            ("always", ShmemMode::Always),
            ("within_size", ShmemMode::WithinSize),
            ("advise", ShmemMode::Advise),
            ("deny", ShmemMode::Deny),
            ("force", ShmemMode::Force),
        ] {
            let t = Tree::new("shmem");
            t.file(&format!("{THP}/shmem_enabled"), &format!("never [{word}]"));
            assert_eq!(PageInfo::detect_at(&t.roots()).thp.shmem, mode);
        }
    }

    #[test]
    fn inherit_follows_top_level_always() {
        let t = Tree::new("inherit");
        t.file(&format!("{THP}/enabled"), "[always] madvise never")
            .file(
                &format!("{THP}/hugepages-2048kB/enabled"),
                "always [inherit] madvise never",
            )
            .file(
                &format!("{THP}/hugepages-32kB/enabled"),
                "always inherit [madvise] never",
            );
        let info = PageInfo::detect_at(&t.roots());
        assert_eq!(info.thp.mthp_always(), vec![2 << 20]);
        assert_eq!(info.thp.mthp[0].effective, ThpMode::Madvise);
    }

    #[test]
    fn missing_files_mean_never_and_unknown() {
        let t = Tree::new("missing");
        let info = PageInfo::detect_at(&t.roots());
        assert!(info.problems.is_empty());
        assert_eq!(
            info.thp.mode,
            ThpMode::Never,
            "missing enabled => never, as HotSpot"
        );
        assert_eq!(info.thp.defrag, DefragMode::Unknown);
        assert_eq!(info.thp.pmd_size, None);
        assert_eq!(info.thp.shmem, ShmemMode::Never);
        assert!(info.thp.mthp.is_empty());
        assert_eq!(info.thp.max_ptes_none, None);
        assert_eq!(
            info.hugetlb,
            HugetlbInfo {
                default_size: None,
                sizes: vec![]
            }
        );
        assert!(!info.thp.supported());
    }

    #[test]
    fn garbage_is_a_problem_not_a_panic() {
        let t = Tree::new("garbage");
        t.file(&format!("{THP}/enabled"), "always madvise never") // nothing bracketed
            .file(&format!("{THP}/defrag"), "[sometimes]")
            .file(&format!("{THP}/hpage_pmd_size"), "two megabytes")
            .file(&format!("{THP}/shmem_enabled"), "[always] [never]")
            .file(&format!("{THP}/khugepaged/max_ptes_none"), "-1")
            .file(&format!("{THP}/hugepages-2048kB/enabled"), "\u{0}\u{1}")
            .file(&format!("{THP}/hugepages-3kB/enabled"), "[always]")
            .file("proc/meminfo", "Hugepagesize: lots\n");
        fs::write(
            t.0.join(format!("{THP}/hugepages-2048kB/enabled")),
            [0xff, 0xfe],
        )
        .unwrap();
        let info = PageInfo::detect_at(&t.roots());
        assert_eq!(info.thp.mode, ThpMode::Unknown);
        assert_eq!(info.thp.defrag, DefragMode::Unknown);
        assert_eq!(info.thp.shmem, ShmemMode::Unknown);
        assert_eq!(info.thp.pmd_size, None);
        assert_eq!(info.thp.max_ptes_none, None);
        assert_eq!(info.thp.mthp.len(), 1);
        assert_eq!(info.thp.mthp[0].setting, MthpSetting::Unknown);
        assert_eq!(info.hugetlb.default_size, None);
        let text: Vec<String> = info.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(info.problems.len(), 8, "{text:#?}");
        assert!(
            text[0].ends_with(
                "unexpected content 'always madvise never' (expected one [bracketed] mode)"
            ),
            "{}",
            text[0]
        );
        assert!(text.iter().any(|t| t.contains("unknown mode 'sometimes'")));
        assert!(text
            .iter()
            .any(|t| t.contains("'two megabytes' is not a number")));
        assert!(text.iter().any(|t| t.contains("not UTF-8")));
        assert!(text
            .iter()
            .any(|t| t.contains("hugepages-3kB: not a valid size directory")));
    }

    #[test]
    fn non_power_of_two_pmd_size() {
        let t = Tree::new("pmd");
        t.file(&format!("{THP}/hpage_pmd_size"), "3000000");
        let info = PageInfo::detect_at(&t.roots());
        assert_eq!(info.thp.pmd_size, None);
        assert_eq!(info.problems.len(), 1);
    }

    #[test]
    fn inconsistent_hugetlb() {
        let t = Tree::new("hugetlb");
        t.file("proc/meminfo", "Hugepagesize: 2048 kB\n");
        let info = PageInfo::detect_at(&t.roots());
        assert_eq!(info.hugetlb.default_size, Some(2 << 20));
        assert!(!info.hugetlb.consistent());
    }

    #[test]
    fn live_system_is_readable() {
        let info = PageInfo::detect();
        assert!(info.problems.is_empty(), "{:?}", info.problems);
        assert!(info.base_page_size >= 4096);
        assert_ne!(info.thp.mode, ThpMode::Unknown);
        if Path::new("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").exists() {
            assert!(info.thp.pmd_size.is_some());
        }
    }
}
