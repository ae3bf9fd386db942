//! File outputs: opening with HotSpot's rules, and rotation.
//!
//! * A file output rotates by default (`filecount=5`, `filesize=20M`): once a write brings
//!   the file to the size it is renamed to `<name>.<n>` and a new one is started; an
//!   existing log is archived the same way when the VM starts.
//! * Rotation renames, so it is refused for anything that is not a regular file — a device
//!   node, a directory — with HotSpot's message; a FIFO given without `filecount` just does
//!   not rotate. With `filecount=0` any path that can be opened for appending works
//!   (`/dev/null`, `/dev/stdout`, a FIFO); an existing regular file is truncated.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// The output options of a file output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileOptions {
    /// `filecount`: archives kept (0: no rotation).
    pub count: u32,
    /// `filesize`: rotate at this size (0: never by size).
    pub size: u64,
    /// Whether `filecount` was given (a FIFO only rotates if asked to).
    pub count_given: bool,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            count: 5,
            size: 20 * 1024 * 1024,
            count_given: false,
        }
    }
}

/// The largest `filecount` HotSpot accepts.
pub(crate) const MAX_FILE_COUNT: u32 = 1000;

impl FileOptions {
    /// Parses `filecount=..,filesize=..`; the error is HotSpot's line for it.
    pub(crate) fn parse(text: &str) -> Result<FileOptions, String> {
        let mut o = FileOptions::default();
        for opt in text.split(',') {
            let (key, value) = opt.split_once('=').unwrap_or((opt, ""));
            match (key, opt.contains('=')) {
                ("filecount", true) => {
                    o.count = value
                        .parse::<u32>()
                        .ok()
                        .filter(|&c| {
                            c <= MAX_FILE_COUNT && value.bytes().all(|b| b.is_ascii_digit())
                        })
                        .ok_or_else(|| {
                            format!(
                                "Invalid option: filecount must be in range [0, {MAX_FILE_COUNT}]"
                            )
                        })?;
                    o.count_given = true;
                }
                ("filesize", true) => {
                    o.size = rtvm_flags::value::parse_unsigned(value).ok_or_else(|| {
                        format!(
                            "Invalid option: filesize must be in range [0, {}]",
                            u64::MAX
                        )
                    })?;
                }
                _ => return Err(format!("Invalid option '{key}' for log file output.")),
            }
        }
        Ok(o)
    }

    /// `filecount=5,filesize=20480K`, as the configuration dump prints them: the size in
    /// HotSpot's proper unit (`16384B`, `20480K`, `1024M`, `0B`).
    pub(crate) fn describe(&self) -> String {
        format!(
            "filecount={},filesize={}",
            self.count,
            rtvm_flags::value::format_proper_size(self.size)
        )
    }
}

/// An open log file that rotates.
pub(crate) struct LogFile {
    path: PathBuf,
    file: File,
    written: u64,
    options: FileOptions,
    next_archive: u32,
}

impl std::fmt::Debug for LogFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogFile").field("path", &self.path).finish()
    }
}

fn archive_name(path: &Path, n: u32) -> PathBuf {
    PathBuf::from(format!("{}.{n}", path.display()))
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().append(true).create(true).open(path)
}

impl LogFile {
    /// Opens (creating or appending to) the file at `path`; the error is HotSpot's line.
    /// `trace` gets HotSpot's `logging=trace` lines about it: the options, and the previous
    /// log archived (rotation) or truncated (`filecount=0`).
    pub(crate) fn open(
        p: &Path,
        mut options: FileOptions,
        trace: &mut dyn FnMut(String),
    ) -> Result<LogFile, String> {
        let path = p.display();
        trace(format!(
            "Initializing logging to file '{path}' (filecount: {}, filesize: {} KiB).",
            options.count,
            options.size / 1024
        ));
        let existing = std::fs::metadata(p).ok();
        if let Some(m) = &existing {
            if m.file_type().is_fifo() && !options.count_given {
                // A named pipe is read as it is written: rotation makes no sense for it.
                options.count = 0;
            }
        }
        let mut next_archive = 0;
        if options.count > 0 {
            if let Some(m) = &existing {
                if !m.file_type().is_file() {
                    return Err(format!(
                        "Unable to log to file {path} with log file rotation: {path} is not a regular file"
                    ));
                }
                // Keep the previous run's log: archive it as the next file of the set.
                next_archive = first_free_archive(p, options.count);
                let archive = archive_name(p, next_archive);
                trace(format!(
                    "Existing log file found, saving it as '{}'",
                    archive.display()
                ));
                if let Err(e) = std::fs::rename(p, &archive) {
                    return Err(format!(
                        "Could not rename log file '{path}' to '{}' ({})",
                        archive.display(),
                        rtvm_os_linux::strerror(rtvm_os_linux::Errno::from_raw(
                            e.raw_os_error().unwrap_or(0)
                        ))
                    ));
                }
                next_archive = (next_archive + 1) % options.count;
            }
        }
        let file = open_append(p).map_err(|e| {
            let errno = rtvm_os_linux::Errno::from_raw(e.raw_os_error().unwrap_or(0));
            format!(
                "Error opening log file '{path}': {}",
                rtvm_os_linux::strerror(errno)
            )
        })?;
        // Without rotation an existing regular file starts empty, as in HotSpot.
        if options.count == 0 && existing.as_ref().is_some_and(|m| m.file_type().is_file()) {
            trace("Truncating log file".into());
            if let Err(e) = file.set_len(0) {
                let errno = rtvm_os_linux::Errno::from_raw(e.raw_os_error().unwrap_or(0));
                return Err(format!(
                    "Failed to truncate log file '{path}': {}",
                    rtvm_os_linux::strerror(errno)
                ));
            }
        }
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(LogFile {
            path: p.to_path_buf(),
            file,
            written,
            options,
            next_archive,
        })
    }

    /// Rotates now if the output rotates (`filecount` > 0): `jcmd VM.log rotate`.
    pub(crate) fn rotate_now(&mut self) -> io::Result<()> {
        if self.options.count == 0 {
            return Ok(());
        }
        self.rotate()
    }

    fn rotate(&mut self) -> io::Result<()> {
        let archive = archive_name(&self.path, self.next_archive);
        self.next_archive = (self.next_archive + 1) % self.options.count;
        std::fs::rename(&self.path, archive)?;
        self.file = open_append(&self.path)?;
        self.written = 0;
        Ok(())
    }
}

/// The first `<path>.<n>` that does not exist, or the oldest one if all do.
fn first_free_archive(path: &Path, count: u32) -> u32 {
    let mut oldest = (0, None::<std::time::SystemTime>);
    for n in 0..count {
        match std::fs::metadata(archive_name(path, n)).and_then(|m| m.modified()) {
            Err(_) => return n,
            Ok(t) if oldest.1.is_none_or(|o| t < o) => oldest = (n, Some(t)),
            Ok(_) => {}
        }
    }
    oldest.0
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write_all(buf)?;
        self.written += buf.len() as u64;
        // As HotSpot: the write that brings the file to its size is the last one in it.
        let o = self.options;
        if o.count > 0 && o.size > 0 && self.written >= o.size {
            self.rotate()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rtvm-logfile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn options_and_messages() {
        assert_eq!(
            FileOptions::parse("filecount=2,filesize=1k").unwrap().size,
            1024
        );
        assert_eq!(FileOptions::parse("filesize=1t").unwrap().size, 1 << 40);
        assert_eq!(
            FileOptions::parse("filesize=0x10").unwrap().size,
            16,
            "hex, as java"
        );
        for bad in [
            "filecount=x",
            "filecount=1001",
            "filecount=-1",
            "filecount=0x10",
        ] {
            assert_eq!(
                FileOptions::parse(bad).unwrap_err(),
                "Invalid option: filecount must be in range [0, 1000]",
                "{bad}"
            );
        }
        for bad in [
            "filesize=1q",
            "filesize=10kb",
            "filesize=99999999999999999999",
        ] {
            assert_eq!(
                FileOptions::parse(bad).unwrap_err(),
                "Invalid option: filesize must be in range [0, 18446744073709551615]"
            );
        }
        assert_eq!(
            FileOptions::parse("bogus=1").unwrap_err(),
            "Invalid option 'bogus' for log file output."
        );
        assert_eq!(
            FileOptions::parse("filecount").unwrap_err(),
            "Invalid option 'filecount' for log file output."
        );
        assert_eq!(
            FileOptions::parse(",").unwrap_err(),
            "Invalid option '' for log file output."
        );
        assert_eq!(
            FileOptions::default().describe(),
            "filecount=5,filesize=20480K"
        );
        assert_eq!(
            FileOptions::parse("filesize=100").unwrap().describe(),
            "filecount=5,filesize=100B"
        );
        // HotSpot's proper unit, as java 17's VM.log list prints them.
        for (given, shown) in [
            ("filesize=16k", "filesize=16384B"),
            ("filesize=1g", "filesize=1024M"),
            ("filesize=0", "filesize=0B"),
            ("filesize=100k", "filesize=100K"),
            ("filesize=200g", "filesize=200G"),
        ] {
            let d = FileOptions::parse(given).unwrap().describe();
            assert!(d.ends_with(shown), "{given}: {d}");
        }
    }

    #[test]
    fn rotation_and_archiving() {
        let d = dir("rot");
        let path = d.join("x.log");
        std::fs::write(&path, "old run\n").unwrap();
        let o = FileOptions::parse("filecount=2,filesize=10").unwrap();
        let mut traces = Vec::new();
        let mut f = LogFile::open(&path, o, &mut |t| traces.push(t)).unwrap();
        assert_eq!(
            traces,
            [
                format!(
                    "Initializing logging to file '{}' (filecount: 2, filesize: 0 KiB).",
                    path.display()
                ),
                format!(
                    "Existing log file found, saving it as '{}.0'",
                    path.display()
                ),
            ]
        );
        assert_eq!(
            std::fs::read_to_string(d.join("x.log.0")).unwrap(),
            "old run\n"
        );
        for _ in 0..5 {
            f.write_all(b"12345678\n").unwrap();
        }
        assert!(d.join("x.log.1").exists());
        assert_eq!(
            std::fs::read(&path).unwrap().len(),
            9,
            "rotated after the write that filled it"
        );
        // filecount=0: no archive, the old log truncated.
        std::fs::write(&path, "old run\n").unwrap();
        let mut traces = Vec::new();
        let fc0 = FileOptions::parse("filecount=0").unwrap();
        drop(LogFile::open(&path, fc0, &mut |t| traces.push(t)).unwrap());
        assert_eq!(traces[1], "Truncating log file");
        assert_eq!(std::fs::read(&path).unwrap().len(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn open(path: &str, o: FileOptions) -> Result<LogFile, String> {
        LogFile::open(Path::new(path), o, &mut |_| {})
    }

    #[test]
    fn non_regular_files() {
        let d = dir("nonreg");
        let e = open(d.to_str().unwrap(), FileOptions::default()).unwrap_err();
        assert_eq!(
            e,
            format!(
                "Unable to log to file {0} with log file rotation: {0} is not a regular file",
                d.display()
            )
        );
        let no_rotation = FileOptions::parse("filecount=0").unwrap();
        assert_eq!(
            open(d.to_str().unwrap(), no_rotation).unwrap_err(),
            format!("Error opening log file '{}': Is a directory", d.display())
        );
        let mut null = open("/dev/null", no_rotation).unwrap();
        null.write_all(b"x\n").unwrap();
        assert!(open("/dev/null", FileOptions::default()).is_err());
        assert_eq!(
            open("/nonexistent-dir/q.log", FileOptions::default()).unwrap_err(),
            "Error opening log file '/nonexistent-dir/q.log': No such file or directory"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
