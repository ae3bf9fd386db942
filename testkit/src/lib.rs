//! # rtvm-testkit
//!
//! What rtvm's test binaries share, so that a test can fail only for the right reasons:
//!
//! * [`harness`]: tests are plain functions returning [`Outcome`]; one that cannot run on this
//!   machine returns [`skip`] and is reported **ignored, with the reason** — never "ok". The
//!   binary's `main` is [`tests!`], which runs them with libtest-mimic (`--exact`, filters,
//!   `--test-threads`, `--include-ignored` as with libtest).
//! * [`require_tool`]: a tool a test needs (`cc`, `java`, `valgrind`); missing, the test is
//!   skipped — unless `RTVM_CI` is set, because CI machines have these tools and a silently
//!   lost check there is a defect: then it fails.
//! * [`child`]: re-running one test of the binary in a child process with a role, for
//!   process-wide changes (rlimits, seccomp filters, signal handlers, crashes) and for
//!   measurements of the whole process (RSS) that other tests must not disturb.
//! * [`bench`](mod@bench): what the benchmarks share (medians, arguments, whole-process timing).
//! * [`stack`]: a stack made resident on purpose (a deep recursion's leftovers).
//! * [`java`]: the Java programs a test and a benchmark both run on `java` as the reference.
#![forbid(unsafe_code)]

pub mod bench;
pub mod child;
pub mod harness;
pub mod java;
pub mod stack;

pub use harness::{require_tool, skip, Outcome, Skip, Test, CI_ENV};

/// The binary's `main`: runs the listed test functions (each `fn() -> Outcome`) as trials.
///
/// ```text
/// rtvm_testkit::tests!(first_test, second_test);
/// ```
#[macro_export]
macro_rules! tests {
    ($($f:path),* $(,)?) => {
        fn main() {
            $crate::harness::run(vec![$($crate::Test::new(stringify!($f), $f)),*]);
        }
    };
}

pub mod kernel;
