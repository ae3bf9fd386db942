//! A system setting (a sysctl or sysfs file) changed for the length of a manual test or a
//! benchmark, restored on every exit path: when the guard is dropped (return, failure, panic)
//! and, if the process dies without dropping it (a kill, an abort), by a watchdog process in a
//! process group of its own that writes the old value back once this process is gone.
//!
//! Automatic tests never change system settings; this exists for the manual ones and for
//! benchmarks run with an explicit opt-in.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// A setting changed until drop.
#[derive(Debug)]
pub struct TemporarySetting {
    path: PathBuf,
    old: String,
    watchdog: Option<Child>,
}

impl TemporarySetting {
    /// Writes `value` to `path`, remembering the old value. The watchdog is started before
    /// the write, so there is no moment at which the change could outlive the process.
    pub fn set(path: &Path, value: &str) -> Result<TemporarySetting, String> {
        let old = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?
            .trim()
            .to_owned();
        use std::os::unix::process::CommandExt;
        // sh -c 'script' sh <pid> <old> <path>: no quoting of the values needed.
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(r#"while kill -0 "$1" 2>/dev/null; do sleep 0.2; done; echo "$2" > "$3""#)
            .arg("sh")
            .arg(std::process::id().to_string())
            .arg(&old)
            .arg(path)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start the watchdog for {}: {e}", path.display()))?;
        let guard = TemporarySetting {
            path: path.to_owned(),
            old,
            watchdog: Some(watchdog),
        };
        std::fs::write(path, value)
            .map_err(|e| format!("cannot write {value} to {}: {e}", path.display()))?;
        Ok(guard)
    }

    /// The value before the change.
    pub fn old(&self) -> &str {
        &self.old
    }
}

impl Drop for TemporarySetting {
    fn drop(&mut self) {
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        if let Err(e) = std::fs::write(&self.path, &self.old) {
            eprintln!(
                "cannot restore {} to {}: {e}",
                self.path.display(),
                self.old
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restores_on_drop_and_after_the_process_is_gone() {
        let dir = std::env::temp_dir().join(format!("rtvm-setting-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("value");
        std::fs::write(&file, "7\n").unwrap();
        {
            let s = TemporarySetting::set(&file, "9").unwrap();
            assert_eq!(s.old(), "7");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "9");
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "7");
        // A process that dies without dropping the guard: the watchdog restores.
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "setting::tests::child_that_dies",
                "--include-ignored",
                "--nocapture",
            ])
            .env("RTVM_SETTING_FILE", &file)
            .status()
            .unwrap();
        assert_eq!(
            child.code(),
            Some(3),
            "the child exits without dropping the guard"
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_to_string(&file).unwrap().trim() != "7" {
            assert!(
                std::time::Instant::now() < deadline,
                "the watchdog did not restore"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Run only as the child of the test above.
    #[test]
    #[ignore = "run by restores_on_drop_and_after_the_process_is_gone as its child"]
    fn child_that_dies() {
        let Ok(file) = std::env::var("RTVM_SETTING_FILE") else {
            return;
        };
        let s = TemporarySetting::set(Path::new(&file), "11").unwrap();
        std::mem::forget(s);
        std::process::exit(3);
    }
}
