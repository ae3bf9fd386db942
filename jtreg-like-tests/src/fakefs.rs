//! Kernel files as a test wants them, for one command: fixture contents bind-mounted over
//! the real files (`/sys/kernel/mm/transparent_hugepage/enabled`, ...) in a private mount
//! namespace of the command alone (`unshare -m`), gone with it. Nothing of the machine
//! changes — no sysfs write, no sysctl. Needs root and `unshare`; [`available`] says why not.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether private mount namespaces can be made here (root and `unshare -m`), or why not.
pub fn available() -> Result<(), String> {
    // The effective uid: the second field of Status's Uid line.
    let euid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().nth(1)?.parse::<u32>().ok())
        });
    if euid != Some(0) {
        return Err(
            "faking kernel files needs root (bind mounts in a private mount namespace)".into(),
        );
    }
    let probe = Command::new("unshare")
        .args(["-m", "--propagation", "private", "true"])
        .output()
        .map_err(|e| format!("unshare cannot run: {e}"))?;
    if !probe.status.success() {
        return Err(format!(
            "unshare -m fails here: {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        ));
    }
    Ok(())
}

/// Fixture files bound over real ones for the commands made by [`FakeFiles::command`];
/// the fixtures are removed on drop.
#[derive(Debug)]
pub struct FakeFiles {
    dir: PathBuf,
    binds: Vec<(PathBuf, String)>,
}

impl FakeFiles {
    /// Fixtures: (the real file to cover, the content it shows).
    pub fn new(files: &[(&str, &str)]) -> std::io::Result<FakeFiles> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rtvm-fake-files-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut binds = Vec::new();
        for (i, (target, content)) in files.iter().enumerate() {
            let fixture = dir.join(i.to_string());
            std::fs::write(&fixture, content)?;
            binds.push((fixture, (*target).to_owned()));
        }
        Ok(FakeFiles { dir, binds })
    }

    /// `program args...` seeing the fixtures.
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut script = String::from("set -e\n");
        for (i, _) in self.binds.iter().enumerate() {
            // Arguments 1.. are fixture/target pairs; the program follows them.
            script.push_str(&format!(
                "mount --bind \"${}\" \"${}\"\n",
                2 * i + 1,
                2 * i + 2
            ));
        }
        script.push_str(&format!("shift {}\nexec \"$@\"\n", 2 * self.binds.len()));
        let mut c = Command::new("unshare");
        c.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(script)
            .arg("sh");
        for (fixture, target) in &self.binds {
            c.arg(fixture).arg(target);
        }
        c.arg(program).args(args);
        c
    }
}

impl Drop for FakeFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
