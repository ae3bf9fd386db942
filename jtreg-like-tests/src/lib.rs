//! # rtvm-jtreg
//!
//! A jtreg-compatible harness for rtvm. Test files are Rust sources with jtreg description
//! comments (`@test`, `@bug`, `@summary`, `@key`, `@requires`, `@run`) and a `main`; every
//! test main is compiled into one **test VM** — the rtvm launcher with the mains registered —
//! so `@run main/othervm -Xss2m -XX:+AlwaysPreTouch Foo 1000` runs exactly that command line
//! in a fresh process.
//!
//! * [`cli`]: the `jtreg` runner (`-a`/`-m`, `-k:`, `-vmoptions:`, `-timeoutFactor:`,
//!   `-conc:`, `-w:`, `-r:`, `-l`, `-verbose:summary`), `.jtr` records, `text/summary.txt`,
//!   `Test results: passed: N; failed: M; error: K`, jtreg's exit codes.
//! * [`header`], [`expr`], [`regex`]: strict description parsing and the `@requires` language.
//! * [`testlib`]: `ProcessTools`/`OutputAnalyzer` for tests that start child VMs, and `skip`.
//! * `cargo test` runs the automatic tests through the same runner (`tests/jtreg.rs`).
#![forbid(unsafe_code)]

extern crate self as rtvm_jtreg;

pub mod cgroup;
pub mod cli;
pub mod ctools;
pub mod expr;
pub mod fakefs;
pub mod gclog;
pub mod header;
pub mod props;
pub mod run;
pub mod service;
pub mod suite;
pub mod testlib;

/// Every test file of `test/` and `fixtures/`, compiled in (see `build.rs`).
#[allow(missing_docs, non_snake_case)]
pub mod mains {
    include!(concat!(env!("OUT_DIR"), "/test_mains.rs"));
}

/// The name the test VM is invoked by.
pub const TEST_VM_NAME: &str = "rtvm-testvm";

/// The test VM's mains: rtvm's built-ins and every test main.
pub fn test_vm_mains() -> rtvm_launcher::Mains {
    let mut m = rtvm_launcher::Mains::builtin();
    for (name, file, main) in mains::TEST_MAINS {
        m.add(rtvm_launcher::MainEntry {
            name,
            usage: "[args...]",
            summary: file,
            main: *main,
        });
    }
    m
}

/// Whether the test VM has a main of this name.
pub fn has_main(name: &str) -> bool {
    rtvm_launcher::Mains::builtin().get(name).is_some()
        || mains::TEST_MAINS.iter().any(|(n, _, _)| *n == name)
}

/// The environment variable with which a fault-injection test makes `madvise` with one
/// advice fail in the test VM before the VM is created: `<advice>:<errno>` (e.g. `23:22`,
/// `MADV_POPULATE_WRITE` failing with `EINVAL`). Kernel-level (seccomp), in the child only.
pub const DENY_MADVISE_ENV: &str = "RTVM_TEST_DENY_MADVISE";

/// The environment variable with which a test lowers resource limits of a child test VM
/// before the VM is created: `as=<bytes>,data=<bytes>,nproc=<n>,nofile=<n>` (any subset).
pub const RLIMITS_ENV: &str = "RTVM_TEST_RLIMITS";

fn apply_rlimits(spec: &str) -> Result<(), String> {
    use rtvm_os_linux::system::{set_soft_limit, Limit};
    for item in spec.split(',').filter(|s| !s.is_empty()) {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}' is not name=value"))?;
        let limit = match name {
            "as" => Limit::AddressSpace,
            "data" => Limit::Data,
            "nproc" => Limit::Processes,
            "nofile" => Limit::OpenFiles,
            _ => return Err(format!("unknown limit '{name}'")),
        };
        let value: u64 = rtvm_flags::value::parse_unsigned(value)
            .ok_or_else(|| format!("bad value in '{item}'"))?;
        set_soft_limit(limit, value).map_err(|e| format!("setting {name}={value}: {e}"))?;
    }
    Ok(())
}

/// The test VM: runs the rtvm launcher with the test mains.
pub fn test_vm_main(args: &[std::ffi::OsString]) -> i32 {
    if let Ok(spec) = std::env::var(RLIMITS_ENV) {
        if let Err(e) = apply_rlimits(&spec) {
            eprintln!("{RLIMITS_ENV}={spec}: {e}");
            return 1;
        }
    }
    if let Ok(spec) = std::env::var(DENY_MADVISE_ENV) {
        let parsed = spec
            .split_once(':')
            .and_then(|(a, e)| Some((a.parse::<i32>().ok()?, e.parse::<i32>().ok()?)));
        let Some((advice, errno)) = parsed else {
            eprintln!("{DENY_MADVISE_ENV}={spec}: expected <advice>:<errno>");
            return 1;
        };
        if let Err(e) =
            rtvm_os_linux::fault::deny_madvise_advice(advice, rtvm_os_linux::Errno::from_raw(errno))
        {
            eprintln!("{DENY_MADVISE_ENV}: installing the seccomp filter failed: {e}");
            return 1;
        }
    }
    rtvm_launcher::launch(TEST_VM_NAME, args, &test_vm_mains())
}
