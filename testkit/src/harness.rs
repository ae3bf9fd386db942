//! A libtest-mimic harness whose tests may be ignored at run time, with the reason.

use libtest_mimic::{Arguments, Completion, Trial};

/// The environment variable CI sets (`.ci/run`): prerequisite tools must be present.
pub const CI_ENV: &str = "RTVM_CI";

/// Why a test did not run here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip(pub String);

/// What a test function returns: `Ok(())` when it ran (a failure panics, as with `assert!`),
/// `Err(Skip)` when it could not run on this machine.
pub type Outcome = Result<(), Skip>;

/// Skips the test with a reason (reported as ignored).
pub fn skip(reason: impl Into<String>) -> Outcome {
    Err(Skip(reason.into()))
}

/// A prerequisite tool: `Ok` when `present`; otherwise a skip naming it — or, with
/// [`CI_ENV`] set, a panic, because CI machines have the tool.
pub fn require_tool(tool: &str, present: bool) -> Outcome {
    if present {
        return Ok(());
    }
    let reason = format!("{tool} is not installed");
    assert!(
        std::env::var_os(CI_ENV).is_none(),
        "{reason}, and {CI_ENV} is set: CI machines have it"
    );
    skip(reason)
}

/// One test: its name (as `--exact` and filters see it) and its function.
#[derive(Debug)]
pub struct Test {
    name: &'static str,
    f: fn() -> Outcome,
}

impl Test {
    /// A test named `name` (a path's last segment is used, as libtest names tests).
    pub fn new(name: &'static str, f: fn() -> Outcome) -> Test {
        let name = name.rsplit("::").next().unwrap_or(name).trim();
        Test { name, f }
    }
}

/// Runs the tests with the command line's arguments and exits with libtest's status.
pub fn run(tests: Vec<Test>) -> ! {
    let args = Arguments::from_args();
    let trials = tests
        .into_iter()
        .map(|t| {
            let f = t.f;
            Trial::ignorable_test(t.name, move || match f() {
                Ok(()) => Ok(Completion::Completed),
                Err(Skip(reason)) => Ok(Completion::ignored_with(reason)),
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}
