//! The system properties rtvm has (`jcmd VM.system_properties`, `jinfo -sysprops`, the
//! attach `properties` operation), printed as `java.util.Properties.store` prints them.

use std::fmt::Write as _;

use super::context::Context;
use crate::version::{profile, VERSION, VM_NAME, VM_VENDOR};

/// Java's name for the machine architecture.
fn java_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        other => other,
    }
}

/// Every property, in a stable order.
pub(crate) fn system_properties(ctx: &Context) -> Vec<(String, String)> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let user = rtvm_os_linux::attach::effective_user_name();
    // A HOME that is not UTF-8 is shown lossily, as the launcher reads arguments.
    let home = std::env::var_os("HOME").map_or_else(|| "?".into(), |h| crate::args::lossy(&h));
    let dir = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| "?".into());
    let mut p = vec![
        ("java.vm.name", VM_NAME.to_owned()),
        ("java.vm.vendor", VM_VENDOR.to_owned()),
        ("java.vm.version", VERSION.to_owned()),
        ("java.vm.info", profile().to_owned()),
        ("os.name", "Linux".to_owned()),
        ("os.arch", java_arch().to_owned()),
        ("os.version", kernel),
        ("user.name", user),
        ("user.home", home),
        ("user.dir", dir),
        ("file.separator", "/".to_owned()),
        ("path.separator", ":".to_owned()),
        ("line.separator", "\n".to_owned()),
        ("sun.arch.data.model", "64".to_owned()),
        (
            "sun.cpu.endian",
            if cfg!(target_endian = "little") {
                "little"
            } else {
                "big"
            }
            .to_owned(),
        ),
        ("sun.java.launcher", ctx.command.launcher.clone()),
        ("sun.jnu.encoding", "UTF-8".to_owned()),
        ("file.encoding", "UTF-8".to_owned()),
    ];
    if let Some(c) = &ctx.command.java_command {
        p.push(("sun.java.command", c.clone()));
    }
    p.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// One key or value escaped as `Properties.store` escapes it: `\`, tab, newline, return and
/// form feed as escapes, `=`, `:`, `#` and `!` behind a backslash, a leading space (every
/// space in a key) behind one, and characters outside printable ASCII as `\uXXXX`.
fn escape(text: &str, key: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            ' ' if key || i == 0 => out.push_str("\\ "),
            c if (' '..='~').contains(&c) => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04X}");
                }
            }
        }
    }
    out
}

/// The properties as `Properties.store` writes them: a date comment, then `key=value` lines.
pub(crate) fn store_format(props: &[(String, String)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "#{}",
        rtvm_os_linux::system::strftime_now("%a %b %d %H:%M:%S %Z %Y")
    );
    for (k, v) in props {
        let _ = writeln!(s, "{}={}", escape(k, true), escape(v, false));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_java() {
        assert_eq!(escape(":", false), "\\:");
        assert_eq!(escape("\n", false), "\\n");
        assert_eq!(escape("a b", true), "a\\ b");
        assert_eq!(escape(" a b", false), "\\ a b");
        assert_eq!(escape("é", false), "\\u00E9");
        let s = store_format(&[("path.separator".into(), ":".into())]);
        assert!(s.starts_with('#'));
        assert!(s.ends_with("\npath.separator=\\:\n"), "{s}");
    }
}
