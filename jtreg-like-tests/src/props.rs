//! The properties `@requires` expressions see, computed once per run.
//!
//! | name | value |
//! | --- | --- |
//! | `os.family` | `linux` |
//! | `os.arch` | as Java names it: `amd64`, `aarch64` |
//! | `os.processors` | processors available to the process |
//! | `os.maxMemory` | physical memory in bytes |
//! | `thp.mode` | `always`, `madvise`, `never` (or `unknown`) |
//! | `thp.pagesize` | PMD huge page size in bytes (0 if unknown) |
//! | `thp.mthp.always` | whether some mTHP size is effectively `always` |
//! | `vm.flagless` | no `-vmoptions` (env `TEST_VM_FLAGLESS` overrides) |
//! | `vm.debug` | `false` (rtvm has no debug builds) |
//! | `vm.bits` | `64` |
//! | `vm.opt.<Flag>` | the flag's value as `-vmoptions` set it, or `null` |

use std::collections::BTreeMap;

use rtvm_os_linux::system;

/// Property values for one run.
#[derive(Clone, Debug)]
pub struct Props {
    map: BTreeMap<String, String>,
    vm_opts: BTreeMap<String, String>,
}

impl Props {
    /// Computes the properties for a run with the given `-vmoptions`.
    pub fn compute(vm_options: &[String]) -> Props {
        let mut map = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            map.insert(k.to_owned(), v);
        };
        put("os.family", std::env::consts::OS.to_owned());
        put(
            "os.arch",
            match std::env::consts::ARCH {
                "x86_64" => "amd64",
                other => other,
            }
            .to_owned(),
        );
        put("os.processors", system::available_processors().to_string());
        // The machine as the kernel's own files describe it, not as rtvm detects it: tests
        // compare rtvm's detection against these.
        use rtvm_testkit::kernel;
        put(
            "os.maxMemory",
            (kernel::meminfo("MemTotal").unwrap_or(0) * 1024).to_string(),
        );
        put(
            "thp.mode",
            kernel::thp_mode().unwrap_or_else(|| "unknown".into()),
        );
        put(
            "thp.pagesize",
            kernel::thp_pmd_size().unwrap_or(0).to_string(),
        );
        put(
            "thp.mthp.always",
            (!kernel::mthp_always_sizes().is_empty()).to_string(),
        );
        let flagless = match std::env::var("TEST_VM_FLAGLESS") {
            Ok(v) => v == "true",
            Err(_) => vm_options.is_empty(),
        };
        put("vm.flagless", flagless.to_string());
        put("vm.debug", "false".into());
        put("vm.bits", "64".into());

        // vm.opt.X: what -vmoptions set, parsed by the same flag parser the VM uses.
        let mut vm_opts = BTreeMap::new();
        let parse_opts = rtvm_flags::ParseOptions {
            ignore_unrecognized: true,
            ..Default::default()
        };
        if let Ok(parsed) = rtvm_flags::parse(vm_options, &parse_opts, &mut |_, _| {}) {
            for (info, value, origin) in parsed.settings.iter() {
                if !origin.is_default() {
                    vm_opts.insert(info.name.to_owned(), value.display());
                }
            }
        }
        Props { map, vm_opts }
    }

    /// A property's value; `None` for a name jtreg would call invalid.
    pub fn get(&self, name: &str) -> Option<String> {
        if let Some(v) = self.map.get(name) {
            return Some(v.clone());
        }
        let flag = name.strip_prefix("vm.opt.")?;
        let flag = flag.strip_prefix("final.").unwrap_or(flag);
        rtvm_flags::find(flag)?;
        Some(
            self.vm_opts
                .get(flag)
                .cloned()
                .unwrap_or_else(|| "null".into()),
        )
    }

    /// All fixed properties (for `.jtr` environment sections).
    pub fn entries(&self) -> impl Iterator<Item = (&String, &String)> {
        self.map.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computed_values() {
        let p = Props::compute(&["-XX:+AlwaysPreTouch".into(), "-Xmx64m".into()]);
        assert_eq!(p.get("os.family").as_deref(), Some("linux"));
        assert!(p.get("os.processors").unwrap().parse::<u32>().unwrap() >= 1);
        assert!(["always", "madvise", "never", "unknown"]
            .contains(&p.get("thp.mode").unwrap().as_str()));
        assert_eq!(p.get("vm.flagless").as_deref(), Some("false"));
        assert_eq!(p.get("vm.opt.AlwaysPreTouch").as_deref(), Some("true"));
        assert_eq!(p.get("vm.opt.MaxHeapSize").as_deref(), Some("67108864"));
        assert_eq!(
            p.get("vm.opt.UseTransparentHugePages").as_deref(),
            Some("null")
        );
        assert_eq!(p.get("vm.opt.NoSuchFlag"), None);
        assert_eq!(p.get("no.such.property"), None);
        assert_eq!(
            Props::compute(&[]).get("vm.flagless").as_deref(),
            Some("true")
        );
    }
}
