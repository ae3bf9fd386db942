//! The C API from C, as a C embedder gets it: `tools/install-c.sh` installs the header, the
//! shared and static libraries and the pkg-config files into a temporary prefix (building
//! the real `librtvm.so` — linked `-z nodelete` — and `librtvm.a` with a nested cargo into a
//! target directory of its own, so nothing stale is picked up), and every C program is
//! compiled with `pkg-config --cflags --libs rtvm` (or `rtvm-static`):
//!
//! * `examples/embed.c`, shared and static, and under `valgrind --error-exitcode=1`;
//! * README's C example;
//! * `tests/c/capi_test.c`, one process per mode (versions, exit requests, the output hook,
//!   allocation, attach and stack bounds, the soft limit, the NMT idiom, threads);
//! * `tests/c/dlopen_test.c`: 100 rounds of dlopen/create/destroy/dlclose with a host
//!   SIGSEGV handler.
//!
//! Without `cc`, `pkg-config` or `sh` the tests say so and pass as skipped (`RTVM_CI=1`
//! turns a missing tool into a failure).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[path = "../../jtreg-like-tests/src/ctools.rs"]
mod ctools;

use ctools::{command, have, Install, Link};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_owned()
}

/// `Some(reason)` when the C toolchain is missing; fails instead on CI.
fn missing_tools() -> Option<String> {
    let missing = ctools::missing_tools();
    if missing.is_empty() {
        return None;
    }
    let reason = format!("skipped: {} not installed", missing.join(", "));
    assert!(
        std::env::var_os("RTVM_CI").is_none(),
        "{reason} (RTVM_CI is set)"
    );
    println!("{reason}");
    Some(reason)
}

fn scratch() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-api");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The install `tools/install-c.sh --debug` made (once per test process).
fn install() -> &'static Install {
    static INSTALL: OnceLock<Install> = OnceLock::new();
    INSTALL.get_or_init(|| Install::new(&scratch().join("prefix"), env!("CARGO")).unwrap())
}

fn prefix() -> &'static Path {
    &install().prefix
}

fn pkg_config(package: &str, what: &[&str]) -> Vec<String> {
    install().pkg_config(package, what).unwrap()
}

/// Compiles `source` into `scratch()/name` against the installed library.
fn compile(source: &Path, name: &str, link: Link, extra: &[&str]) -> PathBuf {
    let out = scratch().join(name);
    install().compile(source, &out, link, extra).unwrap();
    out
}

fn run(binary: &Path, args: &[&str]) -> (i32, String, String) {
    let o = command(binary).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn valgrind_clean(binary: &Path, args: &[&str]) {
    if !have("valgrind") {
        assert!(
            std::env::var_os("RTVM_CI").is_none(),
            "valgrind is not installed (RTVM_CI is set)"
        );
        println!("valgrind not installed: the memory check was not run");
        return;
    }
    let o = command(Path::new("valgrind"))
        .args(["--error-exitcode=1", "-q"])
        .arg(binary)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "valgrind found errors:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_install_has_header_libraries_and_pkg_config_files() {
    if missing_tools().is_some() {
        return;
    }
    let flags = pkg_config("rtvm", &["--cflags", "--libs"]).join(" ");
    let p = prefix().display().to_string();
    assert!(
        flags.contains(&format!("-I{p}/include"))
            && flags.contains(&format!("-L{p}/lib"))
            && flags.contains("-lrtvm"),
        "{flags}"
    );
    let flags = pkg_config("rtvm-static", &["--cflags", "--libs"]).join(" ");
    assert!(flags.contains(&format!("{p}/lib/librtvm.a")), "{flags}");
    // The shared library stays loaded once loaded (hooks and handlers point into it).
    let o = std::process::Command::new("readelf")
        .arg("-d")
        .arg(prefix().join("lib/librtvm.so"))
        .output();
    match o {
        Ok(o) if o.status.success() => {
            let dynamic = String::from_utf8_lossy(&o.stdout);
            assert!(
                dynamic.contains("NODELETE"),
                "librtvm.so is not -z nodelete:\n{dynamic}"
            );
        }
        _ => println!("readelf not available: NODELETE not checked"),
    }
}

#[test]
fn example_embedder_builds_runs_and_is_valgrind_clean() {
    if missing_tools().is_some() {
        return;
    }
    let bin = compile(&root().join("examples/embed.c"), "embed", Link::Shared, &[]);
    let (code, out, err) = run(&bin, &[]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "bad option: code -6, message: Unrecognized VM option 'NoSuchFlag'",
        "second VM: code -5",
        "main thread attached: stack ",
        "TLAB: 100000 cells, sum 4999950000",
        "stopped their recursion at the soft limit",
    ] {
        assert!(out.contains(expected), "no '{expected}' in:\n{out}");
    }
    // The NMT report twice: the one the program asked for, and the one the destroy printed
    // through the output hook (-XX:+PrintNMTStatistics).
    assert_eq!(out.matches("Native Memory Tracking:").count(), 2, "{out}");
    assert!(
        out.contains("[vm] "),
        "nothing came through the output hook:\n{out}"
    );
    assert!(out.ends_with("embed: ok\n"), "{out}");
    valgrind_clean(&bin, &[]);
    // The same program against the static library.
    let bin = compile(
        &root().join("examples/embed.c"),
        "embed-static",
        Link::Static,
        &[],
    );
    let (code, out, err) = run(&bin, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("embed: ok\n"));
}

#[test]
fn readme_c_example_compiles_and_runs() {
    if missing_tools().is_some() {
        return;
    }
    let readme = std::fs::read_to_string(root().join("../README.md")).unwrap();
    let start = readme.find("```c\n").expect("README has a C example") + 5;
    let end = start + readme[start..].find("```").unwrap();
    let src = scratch().join("readme.c");
    std::fs::write(&src, &readme[start..end]).unwrap();
    let bin = compile(&src, "readme", Link::Shared, &[]);
    let (code, out, err) = run(&bin, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("committed 16777216, resident 16777216"),
        "{out}"
    );
}

fn capi_test_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        compile(
            &root().join("tests/c/capi_test.c"),
            "capi_test",
            Link::Shared,
            &["-O0", "-fno-stack-clash-protection"],
        )
    })
}

fn capi_mode(mode: &str) {
    if missing_tools().is_some() {
        return;
    }
    let (code, out, err) = run(capi_test_binary(), &[mode]);
    println!("{out}");
    assert!(
        code == 0 && out.contains(&format!("PASS {mode}")),
        "capi_test {mode}: exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    );
}

#[test]
fn c_versions_and_default_args() {
    capi_mode("version");
}

#[test]
fn c_exit_requests_deliver_output_and_their_own_code() {
    capi_mode("exit-requests");
}

#[test]
fn c_output_hook_gets_flags_logs_and_the_nmt_report() {
    if missing_tools().is_some() {
        return;
    }
    capi_mode("output-hook");
    // Nothing of it reached the process's own stdout/stderr.
    let (_, out, err) = run(capi_test_binary(), &["output-hook"]);
    assert!(
        !out.contains("[Global flags]") && !err.contains("Native Memory Tracking"),
        "{out}{err}"
    );
}

#[test]
fn c_allocation_shared_tlab_zero_and_full() {
    capi_mode("alloc");
}

#[test]
fn c_attach_detach_and_stack_bounds() {
    capi_mode("attach");
}

#[test]
fn c_soft_limit_stops_a_recursion_before_the_guard() {
    capi_mode("soft-limit");
}

#[test]
fn c_nmt_size_query_idiom_under_concurrent_malloc() {
    capi_mode("nmt-idiom");
}

#[test]
fn c_threads_pthread_exit_and_error_codes() {
    capi_mode("threads");
}

#[test]
fn c_destroy_rules() {
    capi_mode("destroy-rules");
}

#[test]
fn c_dlopen_dlclose_100_times_with_a_host_signal_handler() {
    if missing_tools().is_some() {
        return;
    }
    let bin = compile(
        &root().join("tests/c/dlopen_test.c"),
        "dlopen_test",
        Link::Runtime,
        &[],
    );
    let lib = prefix().join("lib/librtvm.so");
    let (code, out, err) = run(&bin, &[lib.to_str().unwrap()]);
    assert!(
        code == 0 && out.contains("PASS dlopen"),
        "exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    );
    println!("{out}");
}
