//! The harness tested on its fixtures (`fixtures/`): each outcome gives jtreg's summary line
//! and exit code, and the `.jtr` records what a reader needs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

struct Run {
    out: Output,
    work: PathBuf,
    report: PathBuf,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    fn code(&self) -> i32 {
        self.out.status.code().expect("jtreg exits normally")
    }
    fn summary(&self) -> String {
        self.stdout()
            .lines()
            .find(|l| l.starts_with("Test results:"))
            .unwrap_or("")
            .to_owned()
    }
}

fn jtreg(tag: &str, args: &[&str]) -> Run {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("harness-selftest")
        .join(tag);
    let _ = std::fs::remove_dir_all(&base);
    let work = base.join("JTwork");
    let report = base.join("JTreport");
    let out = Command::new(env!("CARGO_BIN_EXE_jtreg"))
        .arg(format!("-w:{}", work.display()))
        .arg(format!("-r:{}", report.display()))
        .args(args)
        .current_dir(fixtures())
        .output()
        .expect("run jtreg");
    Run { out, work, report }
}

#[test]
fn passing() {
    let r = jtreg("pass", &["-a", "FixturePass.rs"]);
    assert_eq!(r.summary(), "Test results: passed: 1");
    assert_eq!(r.code(), 0);
    let summary = std::fs::read_to_string(r.report.join("text/summary.txt")).unwrap();
    assert_eq!(summary, "FixturePass.rs  Passed. Execution successful\n");
    let jtr = std::fs::read_to_string(r.work.join("FixturePass.jtr")).unwrap();
    assert!(jtr.starts_with("#Test Results (version 2)\n"));
    assert!(jtr.contains("FixturePass ran"));
    assert!(jtr.ends_with("test result: Passed. Execution successful\n"));
}

#[test]
fn failing_test_gives_exit_2_and_a_readable_jtr() {
    let r = jtreg("fail", &["-a", "sub/FixtureFail.rs"]);
    assert_eq!(r.summary(), "Test results: failed: 1");
    assert_eq!(r.code(), 2);
    assert!(r
        .stdout()
        .contains("Error: Some tests failed or other problems occurred."));
    let jtr = std::fs::read_to_string(r.work.join("sub/FixtureFail.jtr")).unwrap();
    assert!(
        jtr.contains("Command line: [") && jtr.contains("rtvm-testvm FixtureFail]"),
        "{jtr}"
    );
    assert!(
        jtr.contains("----------System.err:(") && jtr.contains("about to fail"),
        "{jtr}"
    );
    assert!(jtr.contains("test result: Failed. Execution failed: `main' threw exception: java.lang.RuntimeException: expected failure from FixtureFail"), "{jtr}");
    assert!(jtr.contains("keywords=bug4242"), "{jtr}");
}

#[test]
fn malformed_header_is_an_error_naming_file_and_line() {
    let r = jtreg("malformed", &["-a", "FixtureMalformed.rs"]);
    assert_eq!(r.summary(), "Test results: error: 1");
    assert_eq!(r.code(), 3);
    assert!(r.stdout().contains("FixtureMalformed.rs:4: Parse Exception: @run main/bogus FixtureMalformed: invalid option '/bogus'"), "{}", r.stdout());
}

#[test]
fn self_skipping_counts_as_passed_and_skipped() {
    let r = jtreg("skip", &["-a", "-verbose:summary", "FixtureSkip.rs"]);
    assert_eq!(r.summary(), "Test results: passed: 1; skipped: 1");
    assert_eq!(r.code(), 0);
    assert!(r
        .stdout()
        .contains("Skipped: jtreg.SkippedException: Test only makes sense in THP \"always\" mode"));
}

#[test]
fn manual_tests_run_only_when_asked() {
    let r = jtreg("manual-a", &["-a", "FixtureManual.rs"]);
    assert_eq!(r.summary(), "Test results: no tests selected");
    assert_eq!(r.code(), 1);
    let r = jtreg("manual-default", &["FixtureManual.rs"]);
    assert_eq!(
        r.summary(),
        "Test results: no tests selected",
        "the default is automatic"
    );
    let r = jtreg("manual-m", &["-m", "FixtureManual.rs", "FixturePass.rs"]);
    assert_eq!(
        r.summary(),
        "Test results: passed: 1; did not match keywords: 1"
    );
    assert_eq!(r.code(), 0);
    let r = jtreg("both", &["-a", "-m", "FixturePass.rs"]);
    assert_eq!(r.code(), 4, "-a and -m are mutually exclusive");
}

#[test]
fn requires_false_is_not_run() {
    let r = jtreg("requires", &["-a", "FixtureRequiresFalse.rs"]);
    assert_eq!(
        r.summary(),
        "Test results: did not meet platform requirements: 1"
    );
    assert_eq!(r.code(), 1);
}

#[test]
fn timeouts_are_errors_and_scale() {
    let start = std::time::Instant::now();
    let r = jtreg(
        "timeout",
        &["-a", "-timeoutFactor:0.5", "FixtureTimeout.rs"],
    );
    assert_eq!(r.summary(), "Test results: error: 1");
    assert_eq!(r.code(), 3);
    assert!(
        r.stdout().contains("timed out (timeout set to 500ms"),
        "{}",
        r.stdout()
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "the test VM was killed"
    );
}

#[test]
fn actions_run_in_order_and_stop_at_the_first_failure() {
    let r = jtreg("actions", &["-a", "sub/FixtureActions.rs"]);
    assert_eq!(r.summary(), "Test results: passed: 1; failed: 1");
    let jtr = std::fs::read_to_string(r.work.join("sub/FixtureActions_stops-at-first-failure.jtr"))
        .unwrap();
    assert_eq!(
        jtr.matches("#section:main").count(),
        2,
        "the third action never ran:\n{jtr}"
    );
    let jtr =
        std::fs::read_to_string(r.work.join("sub/FixtureActions_expected-failure.jtr")).unwrap();
    assert!(
        jtr.contains("result: Passed. Execution failed as expected"),
        "{jtr}"
    );
}

#[test]
fn whole_directory_groups_keywords_and_lists() {
    let r = jtreg("all", &["-a", "."]);
    assert_eq!(
        r.summary(),
        "Test results: passed: 5; failed: 2; error: 2; skipped: 1; did not meet platform requirements: 1; did not match keywords: 1"
    );
    assert_eq!(r.code(), 3);
    let r = jtreg("group", &["-a", "-verbose:summary", ":most"]);
    assert_eq!(
        r.summary(),
        "Test results: passed: 4; failed: 1; skipped: 1"
    );
    assert!(
        !r.stdout().contains("FixtureFail"),
        "excluded by -sub/FixtureFail.rs"
    );
    let r = jtreg("keywords", &["-a", "-k:!stress", "."]);
    assert!(
        !r.summary().contains("error: 2"),
        "FixtureTimeout has @key stress: {}",
        r.summary()
    );
    let r = jtreg("list", &["-a", "-l", "sub"]);
    let listed: Vec<String> = r.stdout().lines().map(str::to_owned).collect();
    assert_eq!(
        listed,
        [
            "sub/FixtureActions.rs#expected-failure",
            "sub/FixtureActions.rs#stops-at-first-failure",
            "sub/FixtureDriver.rs",
            "sub/FixtureFail.rs"
        ]
    );
    assert_eq!(r.code(), 0);
    let r = jtreg(
        "conc",
        &[
            "-a",
            "-conc:2",
            "FixturePass.rs",
            "FixtureSkip.rs",
            "sub/FixtureDriver.rs",
        ],
    );
    assert_eq!(r.summary(), "Test results: passed: 3; skipped: 1");
}

#[test]
fn vmoptions_reach_main_actions_and_drivers_children() {
    let r = jtreg(
        "vmoptions",
        &[
            "-a",
            "-vmoptions:-XX:+UseTransparentHugePages -XX:+AlwaysPreTouch",
            "FixtureOthervm.rs",
            "sub/FixtureDriver.rs",
        ],
    );
    assert_eq!(r.summary(), "Test results: passed: 2", "{}", r.stdout());
    let jtr = std::fs::read_to_string(r.work.join("FixtureOthervm.jtr")).unwrap();
    assert!(
        jtr.contains("rtvm-testvm -XX:+UseTransparentHugePages -XX:+AlwaysPreTouch -Xmx64m -XX:+AlwaysPreTouch FixtureOthervm 64 two words]"),
        "-vmoptions first, then the action's own:\n{jtr}"
    );
    assert!(jtr.contains("vm.flagless=false"), "{jtr}");
}

#[test]
fn bad_arguments_exit_4() {
    assert_eq!(jtreg("bad1", &["-nosuchoption", "."]).code(), 4);
    assert_eq!(jtreg("bad2", &["-a"]).code(), 4, "no tests");
    assert_eq!(jtreg("bad3", &["-a", "no/such/path"]).code(), 4);
    assert_eq!(jtreg("bad4", &["-a", ":nosuchgroup"]).code(), 4);
    assert_eq!(jtreg("bad5", &["-k:(", "."]).code(), 4);
}
