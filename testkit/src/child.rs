//! Child processes playing a role of the same test binary.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that tells a re-executed test binary which child role to play.
pub const CHILD_ROLE: &str = "RTVM_TEST_CHILD_ROLE";

/// The role this process plays, if it is a child started by [`run_child`].
pub fn child_role() -> Option<String> {
    std::env::var(CHILD_ROLE).ok()
}

/// How long a child may run before it is killed and reported as hung: a child test that
/// hangs (a failed assertion leaving a thread the VM's shutdown waits for, say) fails the
/// test with its output instead of holding the whole suite.
pub const CHILD_DEADLINE: Duration = Duration::from_secs(300);

/// Re-runs this test binary, running only `test` (which must dispatch on [`child_role`]),
/// with the given role, alone (`--test-threads=1`) and without the options variable. A
/// child still running after [`CHILD_DEADLINE`] is killed (`SIGKILL`), its stderr ending
/// with a line that says so.
pub fn run_child(test: &str, role: &str) -> Output {
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ROLE, role)
        .env_remove("RTVM_OPTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("re-running the test binary");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + CHILD_DEADLINE;
    let mut killed = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            killed = true;
            break child.wait().expect("waiting for the killed child");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap_or_default();
    let mut stderr = err.join().unwrap_or_default();
    if killed {
        stderr.extend_from_slice(
            format!(
                "\n[testkit] child `{test}` ({role}) still running after {} s: killed\n",
                CHILD_DEADLINE.as_secs()
            )
            .as_bytes(),
        );
    }
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Runs `test` — the calling test itself — again in a child process playing role `child`
/// and asserts that it exited 0 having printed `CHILD OK`; shows the child's stdout.
pub fn check_child(test: &str) {
    let out = run_child(test, "child");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("CHILD OK"),
        "{}",
        describe(&out)
    );
    print!("{}", String::from_utf8_lossy(&out.stdout));
}

/// A child's status and output, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The rest of the first line of `text` that contains `key` (the child's harness may print
/// its own prefix on the same line).
pub fn value_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.find(key).map(|i| &l[i + key.len()..]))
}

/// Runs `test` — the calling test itself — again in a child process of its own and asserts
/// that it passed there; returns `false` in that child, where the caller goes on with its
/// body. For tests that compare `/proc/self/maps` before and after: in the test binary the
/// harness starts threads for other tests meanwhile (Rust's runtime maps each a signal
/// stack and its guard page, into any hole a test just unmapped), and non-serial tests map
/// memory of their own. In the child only this test runs.
///
/// ```text
/// if rtvm_testkit::child::isolated("my_test") {
///     return;
/// }
/// ```
pub fn isolated(test: &str) -> bool {
    if child_role().is_some() {
        return false;
    }
    let out = run_child(test, "isolated");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{test} in a child process of its own:\n{}",
        describe(&out)
    );
    true
}
