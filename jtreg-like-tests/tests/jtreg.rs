//! `cargo test` runs every automatic jtreg test of `test/` as one trial, through the same
//! runner as the `jtreg` binary. Manual tests are listed as ignored
//! (`manual: run with jtreg -manual`); tests that skip themselves or whose `@requires` is false
//! are reported as ignored with their reason.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use rtvm_jtreg::props::Props;
use rtvm_jtreg::run::{self, Mode, RunConfig, Status};
use rtvm_jtreg::suite::{Found, Suite};

fn main() {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("test");
    let suite = Arc::new(Suite::open(&root).expect("open the test suite"));
    let files = suite.files_under(&root).expect("list test files");
    let found = suite.discover(&files).expect("read test files");
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("jtreg-cargo")
        .join("JTwork");
    let test_vm = rtvm_jtreg::cli::link_test_vm_to(Path::new(env!("CARGO_BIN_EXE_jtreg")), &work)
        .expect("link the test VM");
    let cfg = Arc::new(RunConfig {
        test_vm,
        vm_options: Vec::new(),
        timeout_factor: 1.0,
        work_dir: work.clone(),
        report_dir: work.with_file_name("JTreport"),
        mode: Mode::Automatic,
        keywords: None,
        concurrency: 1,
        verbose: false,
    });
    let props = Arc::new(Props::compute(&[]));
    let trials: Vec<Trial> = found
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            trial(
                i,
                f,
                Arc::clone(&suite),
                Arc::clone(&cfg),
                Arc::clone(&props),
            )
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

fn trial(
    index: usize,
    found: Found,
    suite: Arc<Suite>,
    cfg: Arc<RunConfig>,
    props: Arc<Props>,
) -> Trial {
    let name = found.name(&suite.root);
    let manual = matches!(&found.parsed, Ok(d) if d.is_manual());
    if manual {
        return Trial::ignorable_test(name, || {
            Ok(Completion::ignored_with("manual: run with jtreg -manual"))
        });
    }
    Trial::ignorable_test(name, move || {
        let scratch = cfg.work_dir.join("scratch").join(format!("cargo-{index}"));
        let outcome = run::run_test(
            &found,
            &suite,
            &cfg,
            &props,
            &scratch,
            &rtvm_jtreg::has_main,
        );
        let jtr = outcome
            .jtr
            .as_ref()
            .map(|p| format!("\n.jtr: {}", p.display()))
            .unwrap_or_default();
        match outcome.status {
            Status::Passed(_) => Ok(Completion::Completed),
            Status::Skipped(reason) => Ok(Completion::ignored_with(format!("skipped: {reason}"))),
            Status::NotRun(req) => Ok(Completion::ignored_with(format!(
                "@requires {req} is false here"
            ))),
            Status::Filtered => Ok(Completion::ignored_with("filtered")),
            Status::Failed(m) => Err(Failed::from(format!(
                "Failed. {m}{jtr}{}",
                tail(outcome.jtr.as_deref())
            ))),
            Status::Error(m) => Err(Failed::from(format!(
                "Error. {m}{jtr}{}",
                tail(outcome.jtr.as_deref())
            ))),
        }
    })
}

/// The end of the `.jtr` record, so a CI log shows the test's own output.
fn tail(jtr: Option<&Path>) -> String {
    let Some(text) = jtr.and_then(|p| std::fs::read_to_string(p).ok()) else {
        return String::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(60);
    format!(
        "\n--- last lines of the .jtr ---\n{}",
        lines[from..].join("\n")
    )
}
