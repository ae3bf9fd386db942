//! The perf data (`-XX:+UsePerfData`, on by default): the `hsperfdata` file through which
//! `jps`, `jcmd -l` and `jcmd <main name>` find the VM, and the attach client learns that
//! it may attach (`sun.rt.jvmCapabilities` starting with `1`; `-XX:+DisableAttachMechanism`
//! makes it `0` and the client refuses at once, as with java). The counters are constants
//! written once: rtvm keeps no live jvmstat counters (`jstat` has nothing to read).

use std::path::PathBuf;
use std::time::UNIX_EPOCH;

use rtvm_flags::flag;
use rtvm_os_linux::perfmem::{encode, user_directory, PerfEntry, PerfFile, PerfValue};

use super::context::Context;
use crate::version::{profile, VERSION, VM_NAME, VM_VENDOR};

/// The perf data of a running VM: its file, and the bytes to save at exit.
#[derive(Debug)]
pub(crate) struct PerfData {
    file: Option<PerfFile>,
    bytes: Vec<u8>,
}

fn text(name: &str, supported: bool, value: impl Into<String>) -> PerfEntry {
    PerfEntry {
        name: name.to_owned(),
        supported,
        value: PerfValue::Text(value.into()),
    }
}

/// jvmstat's capabilities string: attach supported (first character), then HotSpot's
/// second capability, as java 17 sets them.
fn capabilities(attach: bool) -> String {
    let mut c = String::with_capacity(64);
    c.push(if attach { '1' } else { '0' });
    c.push('1');
    c.extend(std::iter::repeat_n('0', 62));
    c
}

impl PerfData {
    /// Creates the file (unless `-XX:-UsePerfData`). A failure is logged and the VM goes on
    /// without it, as HotSpot's does.
    pub(crate) fn create(ctx: &Context) -> Option<PerfData> {
        let f = &ctx.flags;
        if !f.get(flag::UsePerfData) {
            return None;
        }
        let begin = ctx
            .started_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let entries = vec![
            PerfEntry {
                name: "sun.rt.createVmBeginTime".into(),
                supported: false,
                value: PerfValue::Long {
                    value: begin,
                    units: 1,
                    variability: 1,
                },
            },
            PerfEntry {
                name: "sun.os.hrt.frequency".into(),
                supported: false,
                value: PerfValue::Long {
                    value: 1_000_000_000,
                    units: 6,
                    variability: 1,
                },
            },
            text(
                "sun.rt.jvmCapabilities",
                false,
                capabilities(!f.get(flag::DisableAttachMechanism)),
            ),
            text("java.property.java.vm.name", true, VM_NAME),
            text("java.property.java.vm.vendor", true, VM_VENDOR),
            text("java.property.java.vm.version", true, VERSION),
            text("java.property.java.vm.info", true, profile()),
            text("java.rt.vmFlags", true, ""),
            text("java.rt.vmArgs", true, ctx.command.jvm_args.join(" ")),
            text(
                "sun.rt.javaCommand",
                false,
                ctx.command.java_command.clone().unwrap_or_default(),
            ),
        ];
        let page = rtvm_os_linux::base_page_size();
        let size = (f.get(flag::PerfDataMemorySize).max(0) as usize)
            .div_ceil(page)
            .max(1)
            * page;
        // Strings are cut at 1024 bytes, as java cuts them; what still does not fit is left
        // out and counted in the file, as HotSpot does (silently: only with -Xlog).
        let (bytes, overflow) = encode(&entries, size, begin);
        if overflow > 0 {
            log::debug!(target: "perf+memops", "PerfDataMemorySize ({size}) cannot hold all of the perf data: {overflow} bytes left out");
        }
        let dir = user_directory();
        let file = match PerfFile::create(&dir, &bytes) {
            Ok((file, stale)) => {
                log::debug!(target: "perf+memops", "Created perf data file {} ({size} bytes), removed {stale} stale file(s)", file.path().display());
                Some(file)
            }
            Err(e) => {
                // Debug, as HotSpot says it (only with -Xlog): the application's stdout is its
                // own, and the VM runs on without the file.
                log::debug!(target: "perf+memops", "Could not create PerfData file {}/{}: {e}", dir.display(), std::process::id());
                None
            }
        };
        Some(PerfData { file, bytes })
    }

    /// Removes the file, and with `-XX:+PerfDataSaveToFile` saves the data first
    /// (`PerfDataSaveFile`, `%p` replaced by the pid, or `hsperfdata_<pid>` in the working
    /// directory).
    pub(crate) fn finish(self, ctx: &Context) {
        let f = &ctx.flags;
        if f.get(flag::PerfDataSaveToFile) {
            let pid = std::process::id().to_string();
            let name = f.get(flag::PerfDataSaveFile);
            let path = if name.is_empty() {
                PathBuf::from(format!("hsperfdata_{pid}"))
            } else {
                PathBuf::from(name.replace("%p", &pid))
            };
            if let Err(e) = std::fs::write(&path, &self.bytes) {
                log::warn!(target: "perf+memops", "Could not save PerfData to {}: {e}", path.display());
            }
        }
        if let Some(file) = self.file {
            let path = file.path().to_owned();
            if let Err(e) = file.remove() {
                log::debug!(target: "perf+memops", "Could not remove {}: {e}", path.display());
            }
        }
    }
}
