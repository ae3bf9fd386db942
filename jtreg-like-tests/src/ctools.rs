//! C programs against an installed rtvm, as a C embedder builds them: `tools/install-c.sh`
//! installs the header, the libraries and the pkg-config files under a prefix (building the
//! real `librtvm.so`/`librtvm.a` with a nested cargo into `<target>/tmp/c-library`, a target
//! directory of its own), and programs are compiled with `pkg-config --cflags --libs rtvm`.
//!
//! Std only: `runtime/tests/c_api.rs` includes this file too (`#[path]`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default()
}

/// Whether the shell knows `tool`.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

/// The tools a C build needs that are missing here (empty: all present).
pub fn missing_tools() -> Vec<&'static str> {
    ["cc", "pkg-config", "sh"]
        .into_iter()
        .filter(|t| !have(t))
        .collect()
}

/// How a program gets the library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// `pkg-config rtvm`: `librtvm.so`.
    Shared,
    /// `pkg-config rtvm-static`: `librtvm.a`.
    Static,
    /// Header only: the program loads the library with `dlopen`.
    Runtime,
}

/// An install made by `tools/install-c.sh --debug`.
#[derive(Clone, Debug)]
pub struct Install {
    /// The prefix.
    pub prefix: PathBuf,
}

impl Install {
    /// Installs (building first, incrementally) under `prefix`. `cargo` is the cargo to run
    /// (`env!("CARGO")` of the caller).
    pub fn new(prefix: &Path, cargo: &str) -> Result<Install, String> {
        let root = workspace_root();
        // The script runs in the workspace root: make a relative prefix the caller's.
        let prefix = &std::env::current_dir()
            .map_err(|e| format!("no current directory: {e}"))?
            .join(prefix);
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        let _ = std::fs::remove_dir_all(prefix);
        let out = Command::new("sh")
            .arg(root.join("tools/install-c.sh"))
            .arg("--debug")
            .arg("--prefix")
            .arg(prefix)
            .env("CARGO_TARGET_DIR", target.join("tmp/c-library"))
            .env("PATH", path_with_cargo(cargo))
            .current_dir(&root)
            .output()
            .map_err(|e| format!("cannot run tools/install-c.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tools/install-c.sh failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        for f in [
            "include/rtvm.h",
            "lib/librtvm.so",
            "lib/librtvm.a",
            "lib/pkgconfig/rtvm.pc",
            "lib/pkgconfig/rtvm-static.pc",
        ] {
            if !prefix.join(f).exists() {
                return Err(format!("the install has no {f}"));
            }
        }
        Ok(Install {
            prefix: prefix.to_owned(),
        })
    }

    /// `pkg-config <what> <package>` against this install.
    pub fn pkg_config(&self, package: &str, what: &[&str]) -> Result<Vec<String>, String> {
        let out = Command::new("pkg-config")
            .args(what)
            .arg(package)
            .env("PKG_CONFIG_PATH", self.prefix.join("lib/pkgconfig"))
            .output()
            .map_err(|e| format!("cannot run pkg-config: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "pkg-config {package}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect())
    }

    /// Compiles `source` into `out` with `-Wall -Wextra -Werror -g`, `extra` flags and the
    /// library as `link` says.
    pub fn compile(
        &self,
        source: &Path,
        out: &Path,
        link: Link,
        extra: &[&str],
    ) -> Result<(), String> {
        let flags = match link {
            Link::Shared => self.pkg_config("rtvm", &["--cflags", "--libs"])?,
            Link::Static => self.pkg_config("rtvm-static", &["--cflags", "--libs"])?,
            Link::Runtime => self.pkg_config("rtvm", &["--cflags"])?,
        };
        let o = Command::new("cc")
            .args(["-Wall", "-Wextra", "-Werror", "-g"])
            .args(extra)
            .arg("-o")
            .arg(out)
            .arg(source)
            .args(flags)
            .args(["-lpthread", "-ldl"])
            .output()
            .map_err(|e| format!("cannot run cc: {e}"))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!(
                "cc {} failed:\n{}",
                source.display(),
                String::from_utf8_lossy(&o.stderr)
            ))
        }
    }
}

/// A command for a compiled program: it loads the installed library (its RUNPATH), not one
/// that cargo's `LD_LIBRARY_PATH` may point at, and sees no `RTVM_OPTIONS`.
pub fn command(binary: &Path) -> Command {
    let mut c = Command::new(binary);
    c.env_remove("LD_LIBRARY_PATH").env_remove("RTVM_OPTIONS");
    c
}

/// `PATH` with `cargo`'s directory first, so the install script runs the same cargo.
fn path_with_cargo(cargo: &str) -> std::ffi::OsString {
    let mut dirs: Vec<PathBuf> = Path::new(cargo)
        .parent()
        .map(Path::to_owned)
        .into_iter()
        .collect();
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).unwrap_or_default()
}
