//! The `jtreg` command line.

use std::path::{Path, PathBuf};

use crate::expr::Expr;
use crate::props::Props;
use crate::run::{self, Mode, RunConfig, Summary};
use crate::suite::Suite;

const USAGE: &str = "\
Usage: jtreg [options] <tests>...
  <tests>              test files, directories, or :groups of TEST.groups
  -a, -automatic       run only automatic tests (the default)
  -m, -manual          run only manual tests
  -k:<expr>            run only tests whose keywords satisfy <expr> (e.g. -k:!stress)
  -vmoptions:<opts>    add options to every test VM (space separated); -vmoption:<opt> adds one
  -timeoutFactor:<n>   multiply every action timeout by <n>
  -conc:<n>            run <n> tests at once
  -w:<dir>, -workDir:<dir>      work directory (default ./JTwork)
  -r:<dir>, -reportDir:<dir>    report directory (default ./JTreport)
  -l, -listtests       list the selected tests and exit
  -verbose:summary     print one line per test
  -testvm:<path>       the test VM binary (default: this binary, linked as rtvm-testvm)
";

/// Exit code for bad arguments.
pub const BAD_ARGS: i32 = 4;

fn bad(msg: &str) -> i32 {
    eprintln!("Error: {msg}");
    eprint!("{USAGE}");
    BAD_ARGS
}

/// Runs the `jtreg` command line; returns jtreg's exit code.
pub fn main(args: &[String]) -> i32 {
    let mut mode: Option<Mode> = None;
    let mut keywords = None;
    let mut vm_options: Vec<String> = Vec::new();
    let mut timeout_factor = 1.0;
    let mut concurrency = 1usize;
    let mut work_dir = PathBuf::from("JTwork");
    let mut report_dir = PathBuf::from("JTreport");
    let mut list = false;
    let mut verbose = false;
    let mut test_vm: Option<PathBuf> = None;
    let mut tests = Vec::new();
    for a in args {
        let value = |prefixes: &[&str]| prefixes.iter().find_map(|p| a.strip_prefix(p));
        let set_mode = |m: Mode, mode: &mut Option<Mode>| match *mode {
            Some(old) if old != m => Err(()),
            _ => {
                *mode = Some(m);
                Ok(())
            }
        };
        match a.as_str() {
            "-a" | "-automatic" | "-automagic" => {
                if set_mode(Mode::Automatic, &mut mode).is_err() {
                    return bad("-automatic and -manual are mutually exclusive");
                }
            }
            "-m" | "-manual" => {
                if set_mode(Mode::Manual, &mut mode).is_err() {
                    return bad("-automatic and -manual are mutually exclusive");
                }
            }
            "-l" | "-listtests" => list = true,
            "-verbose:summary" | "-v:summary" => verbose = true,
            "-h" | "-help" | "--help" => {
                print!("{USAGE}");
                return 0;
            }
            _ => {
                if let Some(k) = value(&["-k:", "-keywords:"]) {
                    match Expr::parse(k) {
                        Ok(e) => keywords = Some(e),
                        Err(e) => return bad(&format!("invalid keyword expression '{k}': {e}")),
                    }
                } else if let Some(v) = value(&["-vmoptions:", "-javaoptions:"]) {
                    vm_options.extend(v.split_whitespace().map(str::to_owned));
                } else if let Some(v) = value(&["-vmoption:", "-javaoption:"]) {
                    vm_options.push(v.to_owned());
                } else if let Some(v) = value(&["-timeoutFactor:"]) {
                    match v.parse::<f64>() {
                        Ok(f) if f > 0.0 && f.is_finite() => timeout_factor = f,
                        _ => return bad(&format!("bad timeout factor: {v}")),
                    }
                } else if let Some(v) = value(&["-conc:", "-concurrency:"]) {
                    concurrency = match v {
                        "auto" => rtvm_os_linux::system::available_processors(),
                        n => match n.parse::<usize>() {
                            Ok(n) if n > 0 => n,
                            _ => return bad(&format!("bad concurrency: {v}")),
                        },
                    };
                } else if let Some(v) = value(&["-w:", "-workDir:"]) {
                    work_dir = PathBuf::from(v);
                } else if let Some(v) = value(&["-r:", "-reportDir:"]) {
                    report_dir = PathBuf::from(v);
                } else if let Some(v) = value(&["-testvm:"]) {
                    test_vm = Some(PathBuf::from(v));
                } else if a.starts_with('-') {
                    return bad(&format!("Unknown option: {a}"));
                } else {
                    tests.push(a.clone());
                }
            }
        }
    }
    if tests.is_empty() {
        return bad("No tests specified");
    }
    let anchor = tests
        .iter()
        .find(|t| !t.starts_with(':'))
        .map(String::as_str)
        .unwrap_or(".");
    let suite = match Suite::containing(Path::new(anchor)) {
        Ok(s) => s,
        Err(e) => return bad(&e.to_string()),
    };
    let files = match suite.select(&tests) {
        Ok(f) => f,
        Err(e) => return bad(&e.to_string()),
    };
    let found = match suite.discover(&files) {
        Ok(f) => f,
        Err(e) => return bad(&e.to_string()),
    };
    let cfg = RunConfig {
        test_vm: PathBuf::new(),
        vm_options,
        timeout_factor,
        work_dir,
        report_dir,
        mode: mode.unwrap_or(Mode::Automatic),
        keywords,
        concurrency,
        verbose,
    };
    if list {
        for f in found.iter().filter(|f| run::selected(f, &cfg)) {
            println!("{}", f.name(&suite.root));
        }
        return 0;
    }
    if let Err(e) = std::fs::create_dir_all(&cfg.work_dir) {
        return bad(&format!(
            "cannot create work directory {}: {e}",
            cfg.work_dir.display()
        ));
    }
    let work_dir = std::fs::canonicalize(&cfg.work_dir).unwrap_or(cfg.work_dir.clone());
    let test_vm = match test_vm {
        Some(p) => p,
        None => match link_test_vm(&work_dir) {
            Ok(p) => p,
            Err(e) => {
                return bad(&format!(
                    "cannot link the test VM into {}: {e}",
                    work_dir.display()
                ))
            }
        },
    };
    let cfg = RunConfig {
        test_vm,
        work_dir,
        ..cfg
    };
    let props = Props::compute(&cfg.vm_options);
    let outcomes = run::run_all(&found, &suite, &cfg, &props, &crate::has_main);
    let summary = Summary::of(&outcomes);
    let report = run::write_report(&cfg.report_dir, &outcomes);
    println!("{}", summary.line());
    match report {
        Ok(p) => println!("Report written to {}", p.display()),
        Err(e) => eprintln!(
            "Error: cannot write the report to {}: {e}",
            cfg.report_dir.display()
        ),
    }
    println!("Results written to {}", cfg.work_dir.display());
    if summary.exit_code() >= 2 {
        println!("Error: Some tests failed or other problems occurred.");
    }
    summary.exit_code()
}

/// Makes `<dir>/rtvm-testvm` a link to this binary, so test command lines name the test VM.
pub fn link_test_vm(dir: &Path) -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    link_test_vm_to(&exe, dir)
}

/// Makes `<dir>/rtvm-testvm` a link to `exe`.
pub fn link_test_vm_to(exe: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let link = dir.join(crate::TEST_VM_NAME);
    if std::fs::read_link(&link).ok().as_deref() != Some(exe) {
        let tmp = dir.join(format!(".{}.{}", crate::TEST_VM_NAME, std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(exe, &tmp)?;
        std::fs::rename(&tmp, &link)?;
    }
    Ok(link)
}
