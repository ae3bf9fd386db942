//! The C API from C: `runtime/examples/embed.c` and README's C example are compiled with
//! the system `cc` against the shared and the static C library, run, and — where valgrind is
//! installed — run under `valgrind --error-exitcode=1`.
//!
//! `cargo test` builds the C library as the example targets `rtvm_capi` (cdylib) and
//! `rtvm_capi_static` (staticlib); when only this test is asked for, they are built here into
//! a separate target directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`, where cargo puts `librtvm.so` and `librtvm.a`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_owned()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_owned()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The directory holding `librtvm_capi.so` and `librtvm_capi_static.a`.
fn c_library_dir() -> PathBuf {
    let dir = target_dir().join("examples");
    if dir.join("librtvm_capi.so").exists() && dir.join("librtvm_capi_static.a").exists() {
        return dir;
    }
    let own = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-library");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "-p",
            "rtvm",
            "--example",
            "rtvm_capi",
            "--example",
            "rtvm_capi_static",
            "--target-dir",
        ])
        .arg(&own)
        .current_dir(root())
        .status()
        .expect("run cargo");
    assert!(status.success(), "building the C library failed");
    own.join("debug/examples")
}

fn compile(source: &Path, out: &Path, static_link: bool) -> Result<(), String> {
    let lib = c_library_dir();
    let mut cc = Command::new("cc");
    cc.args(["-Wall", "-Wextra", "-Werror", "-o"])
        .arg(out)
        .arg(source)
        .arg(format!("-I{}", root().join("include").display()));
    if static_link {
        cc.arg(lib.join("librtvm_capi_static.a")).args([
            "-lpthread",
            "-ldl",
            "-lm",
            "-lgcc_s",
            "-lc",
        ]);
    } else {
        cc.arg(format!("-L{}", lib.display()))
            .arg("-lrtvm_capi")
            .arg(format!("-Wl,-rpath,{}", lib.display()));
    }
    let o = cc.output().map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cc failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

fn run(binary: &Path) -> (i32, String, String) {
    let o = Command::new(binary)
        .env_remove("RTVM_OPTIONS")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-api");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn example_embedder_builds_runs_and_is_valgrind_clean() {
    if !have("cc") {
        println!("skipped: no C compiler (`cc`) on this machine");
        return;
    }
    let bin = scratch("embed");
    compile(&root().join("examples/embed.c"), &bin, false).unwrap();
    let (code, out, err) = run(&bin);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("bad option: code -6, message: Unrecognized VM option 'NoSuchFlag'"),
        "{out}"
    );
    assert!(out.contains("second VM: code -5"), "{out}");
    assert!(
        out.contains("-                    Thread (reserved="),
        "{out}"
    );
    assert!(out.ends_with("embed: ok\n"), "{out}");
    if have("valgrind") {
        let o = Command::new("valgrind")
            .args(["--error-exitcode=1", "-q"])
            .arg(&bin)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "valgrind found errors:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    } else {
        println!("valgrind not installed: the memory check was not run");
    }
    // The same program against the static library.
    let bin = scratch("embed-static");
    compile(&root().join("examples/embed.c"), &bin, true).unwrap();
    let (code, out, _) = run(&bin);
    assert_eq!(code, 0);
    assert!(out.ends_with("embed: ok\n"));
}

#[test]
fn readme_c_example_compiles_and_runs() {
    if !have("cc") {
        println!("skipped: no C compiler (`cc`) on this machine");
        return;
    }
    let readme = std::fs::read_to_string(root().join("../README.md")).unwrap();
    let start = readme.find("```c\n").expect("README has a C example") + 5;
    let end = start + readme[start..].find("```").unwrap();
    let src = scratch("readme.c");
    std::fs::write(&src, &readme[start..end]).unwrap();
    let bin = scratch("readme");
    compile(&src, &bin, false).unwrap();
    let (code, out, err) = run(&bin);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("committed 16777216, resident 16777216"),
        "{out}"
    );
}
