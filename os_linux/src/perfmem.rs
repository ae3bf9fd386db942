//! HotSpot's perf-data file, the way `jps`, `jcmd -l` and the attach client read it:
//! `/tmp/hsperfdata_<user>/<pid>`, a page-multiple file of mode 0600 in a directory of mode
//! 0755 that is the user's own and not a symlink, holding big-endian magic `0xcafec0c0`, a
//! prologue in the file's byte order (little-endian here) and 4-byte-aligned entries (the
//! jvmstat format, version 2.0). Files of processes that no longer exist are removed when a
//! new one is created, as HotSpot's `cleanup_sharedmem_files` does.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The data of one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PerfValue {
    /// A string constant (`'B'`, units `String`, variability `Constant`).
    Text(String),
    /// A 64-bit value (`'J'`) in these units (1 none, 2 bytes, 3 ticks, 4 events, 6 hertz),
    /// with this variability (1 constant, 2 monotonic, 3 variable).
    Long {
        /// The value.
        value: i64,
        /// jvmstat's unit code.
        units: u8,
        /// jvmstat's variability code.
        variability: u8,
    },
}

/// One named counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfEntry {
    /// The name (`sun.rt.javaCommand`).
    pub name: String,
    /// Whether the name is a supported, stable one (`java.*`: jvmstat's `F_Supported`).
    pub supported: bool,
    /// The value.
    pub value: PerfValue,
}

fn align(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// The longest string a text entry stores, in bytes (HotSpot's `PerfMaxStringConstLength`
/// default): longer ones — a command line of thousands of arguments — are cut there, as java
/// cuts them.
pub const MAX_STRING_LENGTH: usize = 1024;

/// The file's bytes: the prologue and `entries`, zero-padded to `size` (a page multiple).
/// Strings are cut at [`MAX_STRING_LENGTH`] bytes. Entries that do not fit are left out and
/// their bytes counted in the prologue's overflow field, as HotSpot's perf memory counts
/// what it has to leave out; the second value is that count (0 when everything fits).
pub fn encode(entries: &[PerfEntry], size: usize, timestamp: i64) -> (Vec<u8>, usize) {
    const PROLOGUE: usize = 32;
    let mut body = Vec::new();
    let (mut written, mut overflow) = (0usize, 0usize);
    for e in entries {
        let name_len = e.name.len() + 1;
        let (type_byte, units, variability, vector, data, data_align): (
            u8,
            u8,
            u8,
            i32,
            Vec<u8>,
            usize,
        ) = match &e.value {
            PerfValue::Text(s) => {
                let bytes = s.as_bytes();
                let mut d = bytes[..bytes.len().min(MAX_STRING_LENGTH)].to_vec();
                d.push(0);
                (b'B', 5, 1, d.len() as i32, d, 1)
            }
            PerfValue::Long {
                value,
                units,
                variability,
            } => (
                b'J',
                *units,
                *variability,
                0,
                value.to_le_bytes().to_vec(),
                8,
            ),
        };
        let data_offset = align(20 + name_len, data_align);
        let length = align(data_offset + data.len(), 8);
        // HotSpot's test: an entry that would reach the end does not fit.
        if PROLOGUE + body.len() + length >= size {
            overflow += length;
            continue;
        }
        written += 1;
        let start = body.len();
        body.resize(start + length, 0);
        let entry = &mut body[start..];
        entry[0..4].copy_from_slice(&(length as i32).to_le_bytes());
        entry[4..8].copy_from_slice(&20i32.to_le_bytes());
        entry[8..12].copy_from_slice(&vector.to_le_bytes());
        entry[12] = type_byte;
        entry[13] = u8::from(e.supported);
        entry[14] = units;
        entry[15] = variability;
        entry[16..20].copy_from_slice(&(data_offset as i32).to_le_bytes());
        entry[20..20 + e.name.len()].copy_from_slice(e.name.as_bytes());
        entry[data_offset..data_offset + data.len()].copy_from_slice(&data);
    }
    let used = PROLOGUE + body.len();
    let mut out = Vec::with_capacity(size.max(used));
    out.extend_from_slice(&0xcafe_c0c0u32.to_be_bytes());
    out.extend_from_slice(&[1, 2, 0, 1]); // little-endian, version 2.0, accessible
    out.extend_from_slice(&(used as i32).to_le_bytes());
    out.extend_from_slice(&(overflow as i32).to_le_bytes());
    out.extend_from_slice(&timestamp.to_le_bytes());
    out.extend_from_slice(&(PROLOGUE as i32).to_le_bytes()); // entry offset
    out.extend_from_slice(&(written as i32).to_le_bytes());
    out.extend_from_slice(&body);
    out.resize(size.max(used), 0);
    (out, overflow)
}

/// A perf-data file this process created; [`PerfFile::remove`] deletes it.
#[derive(Debug)]
pub struct PerfFile {
    path: PathBuf,
}

/// `/tmp/hsperfdata_<user>`.
pub fn user_directory() -> PathBuf {
    PathBuf::from(format!(
        "/tmp/hsperfdata_{}",
        crate::attach::effective_user_name()
    ))
}

/// The directory, made if missing (mode 0755), refused unless it is a real directory that
/// group and others cannot write, owned by the effective user — any owner will do for root
/// (HotSpot's `is_directory_secure`).
fn secure_directory(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let m = fs::symlink_metadata(dir)?;
    let (uid, _) = crate::attach::effective_ids();
    let insecure = if !m.file_type().is_dir() {
        Some("is not a directory")
    } else if uid != 0 && m.uid() != uid {
        Some("is not owned by the effective user")
    } else if m.mode() & 0o022 != 0 {
        Some("is writable by group or others")
    } else {
        None
    };
    match insecure {
        Some(why) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} {why}", dir.display()),
        )),
        None => Ok(()),
    }
}

/// Removes the files in `dir` named after pids of processes that no longer exist; returns
/// how many.
fn remove_stale(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if pid <= 0 || pid as u32 == std::process::id() {
            continue;
        }
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && nix::errno::Errno::last() == nix::errno::Errno::ESRCH;
        if gone && fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

impl PerfFile {
    /// Writes `bytes` as this process's file in `dir` (normally [`user_directory`]): mode
    /// 0600, not following a symlink planted at the name; stale files of dead processes are
    /// removed first (their count is returned too).
    pub fn create(dir: &Path, bytes: &[u8]) -> io::Result<(PerfFile, usize)> {
        secure_directory(dir)?;
        let stale = remove_stale(dir);
        let path = dir.join(std::process::id().to_string());
        let _ = fs::remove_file(&path);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        if let Err(e) = f.write_all(bytes) {
            let _ = fs::remove_file(&path);
            return Err(e);
        }
        Ok((PerfFile { path }, stale))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes the file.
    pub fn remove(self) -> io::Result<()> {
        fs::remove_file(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_jvmstat() {
        let entries = [
            PerfEntry {
                name: "sun.rt.createVmBeginTime".into(),
                supported: false,
                value: PerfValue::Long {
                    value: 7,
                    units: 3,
                    variability: 1,
                },
            },
            PerfEntry {
                name: "sun.rt.javaCommand".into(),
                supported: false,
                value: PerfValue::Text("Sleeper 2".into()),
            },
            PerfEntry {
                name: "java.rt.vmFlags".into(),
                supported: true,
                value: PerfValue::Text(String::new()),
            },
        ];
        let (b, overflow) = encode(&entries, 4096, 1);
        assert_eq!(overflow, 0);
        assert_eq!(b.len(), 4096);
        assert_eq!(&b[0..8], &[0xca, 0xfe, 0xc0, 0xc0, 1, 2, 0, 1]);
        let num = i32::from_le_bytes(b[28..32].try_into().unwrap());
        assert_eq!(num, 3);
        // Entry lengths as java 17 writes them: 56, 56, 40.
        let len0 = i32::from_le_bytes(b[32..36].try_into().unwrap()) as usize;
        assert_eq!(len0, 56);
        let len1 = i32::from_le_bytes(b[32 + len0..36 + len0].try_into().unwrap()) as usize;
        assert_eq!(len1, 56);
        let e2 = 32 + len0 + len1;
        assert_eq!(i32::from_le_bytes(b[e2..e2 + 4].try_into().unwrap()), 40);
        assert_eq!(b[e2 + 13], 1, "supported");
        let used = i32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
        assert_eq!(used, 32 + 56 + 56 + 40);
        // What does not fit is left out and counted, as HotSpot counts it.
        let (small, overflow) = encode(&entries, 128, 1);
        assert_eq!((small.len(), overflow), (128, 56 + 40));
        assert_eq!(i32::from_le_bytes(small[12..16].try_into().unwrap()), 96);
        assert_eq!(i32::from_le_bytes(small[28..32].try_into().unwrap()), 1);
        assert_eq!(
            i32::from_le_bytes(small[8..12].try_into().unwrap()),
            32 + 56
        );
    }

    #[test]
    fn strings_are_cut_as_java_cuts_them() {
        let long = "x".repeat(5000);
        let entry = |value: &str| PerfEntry {
            name: "sun.rt.javaCommand".into(),
            supported: false,
            value: PerfValue::Text(value.into()),
        };
        let (b, _) = encode(&[entry(&long)], 32768, 1);
        // The vector length is the string's bytes and its NUL: 1024 + 1.
        assert_eq!(i32::from_le_bytes(b[40..44].try_into().unwrap()), 1025);
        let offset = i32::from_le_bytes(b[48..52].try_into().unwrap()) as usize;
        let data = &b[32 + offset..32 + offset + 1025];
        assert!(data[..1024].iter().all(|&c| c == b'x') && data[1024] == 0);
        let (b, _) = encode(&[entry("short")], 4096, 1);
        assert_eq!(i32::from_le_bytes(b[40..44].try_into().unwrap()), 6);
    }

    #[test]
    fn file_is_private_and_removable() {
        let dir = std::env::temp_dir().join(format!("rtvm-perf-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("999999999"), b"stale").unwrap();
        let (f, stale) = PerfFile::create(&dir, &[0u8; 4096]).unwrap();
        assert_eq!(stale, 1);
        let m = fs::metadata(f.path()).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(m.len(), 4096);
        let path = f.path().to_owned();
        f.remove().unwrap();
        assert!(!path.exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
