//! The `rtvm` binary prints every applicable HotSpot 17 message of table A3 word for word
//! (with `rtvm` where HotSpot names itself) and exits with HotSpot's status.

use std::process::{Command, Output};

use rtvm_launcher::CREATE_FAILED;

fn rtvm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtvm"))
        .args(args)
        .env_remove("RTVM_OPTIONS")
        .output()
        .expect("run rtvm")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `args -version` and expects exit 1 with exactly `message` then the launcher line on
/// stderr, and nothing on stdout.
fn expect_argument_error(args: &[&str], message: &str) {
    let mut full = args.to_vec();
    full.push("-version");
    let out = rtvm(&full);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?}: {}",
        text(&out.stderr)
    );
    assert_eq!(
        text(&out.stderr),
        format!("{message}{CREATE_FAILED}"),
        "{args:?}"
    );
    assert_eq!(text(&out.stdout), "", "{args:?}");
}

/// Expects exit 1 with HotSpot's initialization error on stdout and no launcher line.
fn expect_init_error(args: &[&str], message: &str) {
    let mut full = args.to_vec();
    full.push("-version");
    let out = rtvm(&full);
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    assert_eq!(
        text(&out.stdout),
        format!("Error occurred during initialization of VM\n{message}\n"),
        "{args:?}"
    );
    assert!(!text(&out.stderr).contains("Could not create"), "{args:?}");
}

#[test]
fn unrecognized_options() {
    expect_argument_error(&["-XX:+Foo"], "Unrecognized VM option 'Foo'\n");
    expect_argument_error(&["-XX:Foo=1"], "Unrecognized VM option 'Foo=1'\n");
    expect_argument_error(&["-XX:"], "Unrecognized VM option ''\n");
    expect_argument_error(&["-Xfoo"], "Unrecognized option: -Xfoo\n");
    expect_argument_error(&["-foo"], "Unrecognized option: -foo\n");
}

#[test]
fn did_you_mean_has_no_newline() {
    // HotSpot's own name for the flag points at rtvm's.
    expect_argument_error(
        &["-XX:+THPStackMitigation"],
        "Unrecognized VM option 'THPStackMitigation'\nDid you mean '(+/-)DisableTHPStackMitigation'? ",
    );
    expect_argument_error(
        &["-XX:ThreadStackSiz=1"],
        "Unrecognized VM option 'ThreadStackSiz=1'\nDid you mean 'ThreadStackSize=<value>'? ",
    );
}

#[test]
fn type_and_value_errors() {
    expect_argument_error(
        &["-XX:AlwaysPreTouch=1"],
        "Missing +/- setting for VM option 'AlwaysPreTouch=1'\n",
    );
    expect_argument_error(
        &["-XX:+MaxHeapSize"],
        "Unexpected +/- setting in VM option 'MaxHeapSize'\n",
    );
    expect_argument_error(
        &["-XX:ThreadStackSize=abc"],
        "Improperly specified VM option 'ThreadStackSize=abc'\n",
    );
    expect_argument_error(
        &["-XX:PreTouchParallelChunkSize=1"],
        "size_t PreTouchParallelChunkSize=1 is outside the allowed range [ 4096 ... 9223372036854775807 ]\n\
         Improperly specified VM option 'PreTouchParallelChunkSize=1'\n",
    );
    expect_argument_error(&["-Xmx1q"], "Invalid maximum heap size: -Xmx1q\n");
    expect_argument_error(
        &["-XX:MaxHeapSize=abc"],
        "Invalid maximum heap size: -XX:MaxHeapSize=abc\n",
    );
    expect_argument_error(&["-Xss1q"], "Invalid thread stack size: -Xss1q\n");
    expect_argument_error(
        &["-XX:NativeMemoryTracking=foo"],
        "Syntax error, expecting -XX:NativeMemoryTracking=[off|summary|detail]",
    );
}

#[test]
fn locked_flags() {
    expect_argument_error(
        &["-XX:+PrintNMTStatistics"],
        "Error: VM option 'PrintNMTStatistics' is diagnostic and must be enabled via -XX:+UnlockDiagnosticVMOptions.\n\
         Error: The unlock option must precede 'PrintNMTStatistics'.\n",
    );
    expect_argument_error(
        &["-XX:+DisableTHPStackMitigation", "-XX:+UnlockDiagnosticVMOptions"],
        "Error: VM option 'DisableTHPStackMitigation' is diagnostic and must be enabled via -XX:+UnlockDiagnosticVMOptions.\n\
         Error: The unlock option must precede 'DisableTHPStackMitigation'.\n",
    );
    expect_argument_error(
        &["-XX:+BackgroundPreTouch"],
        "Error: VM option 'BackgroundPreTouch' is experimental and must be enabled via -XX:+UnlockExperimentalVMOptions.\n\
         Error: The unlock option must precede 'BackgroundPreTouch'.\n",
    );
}

#[test]
fn after_ergo_constraint() {
    expect_argument_error(
        &[
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+BackgroundPreTouch",
        ],
        "-XX:+BackgroundPreTouch requires -XX:+AlwaysPreTouch\n",
    );
}

#[test]
fn initialization_errors_go_to_stdout() {
    expect_init_error(&["-Xmx1"], "Too small maximum heap");
    expect_init_error(
        &["-Xms128m", "-Xmx64m"],
        "Initial heap size set to a larger value than the maximum heap size",
    );
    expect_init_error(
        &["-XX:MinHeapSize=128m", "-Xmx64m"],
        "Incompatible minimum and maximum heap sizes specified",
    );
}

#[test]
fn commented_out_option_is_reported_but_not_fatal() {
    let out = rtvm(&["-XX:#+Foo", "-version"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).starts_with("Unrecognized VM option '#+Foo'\n"));
}

#[test]
fn ignore_unrecognized() {
    let out = rtvm(&[
        "-XX:+IgnoreUnrecognizedVMOptions",
        "-XX:+Foo",
        "-Xfoo",
        "-version",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = rtvm(&[
        "-XX:+IgnoreUnrecognizedVMOptions",
        "-XX:+PrintNMTStatistics",
        "-version",
    ]);
    assert_eq!(out.status.code(), Some(1), "locked flags are not ignored");
}

#[test]
fn version_help_and_x() {
    let out = rtvm(&["-version"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).starts_with("rtvm version \""),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "");
    // As java 17: -help, -h, -? and -X print to stderr; --help and --help-extra to stdout.
    for opt in ["-help", "-h", "-?"] {
        let out = rtvm(&[opt]);
        assert_eq!(out.status.code(), Some(0));
        assert!(text(&out.stderr).starts_with("Usage: rtvm [options] <main> [args...]"));
        assert!(text(&out.stderr).contains("IdleThreads <count> [<hold-seconds>]"));
        assert_eq!(text(&out.stdout), "");
    }
    let out = rtvm(&["--help"]);
    assert!(text(&out.stdout).starts_with("Usage: rtvm [options]"));
    let out = rtvm(&["-X"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("-Xss<size>"));
    let out = rtvm(&["--help-extra"]);
    assert!(text(&out.stdout).contains("-Xss<size>"));
    // -version, -help and -X end option processing, after the VM checked what came before.
    let out = rtvm(&["-version", "-XX:+NoSuchFlag"]);
    assert_eq!(out.status.code(), Some(0));
    let out = rtvm(&["-help", "-XX:+NoSuchFlag"]);
    assert_eq!(out.status.code(), Some(0));
    let out = rtvm(&["-XX:+NoSuchFlag", "-help"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("Unrecognized VM option 'NoSuchFlag'"));
    let out = rtvm(&[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no main: usage on stderr, status 1"
    );
    assert!(text(&out.stderr).starts_with("Usage: rtvm"));
    let out = rtvm(&["NoSuchMain"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("Error: Could not find or load main class NoSuchMain\n"));
}

#[test]
fn xlog_errors_and_help() {
    for (opt, detail) in [
        ("-Xlog:foo", "Invalid tag 'foo' in log selection."),
        ("-Xlog:gc=bar", "Invalid level 'bar' in log selection."),
        ("-Xlog:gc::bogus", "Invalid decorator 'bogus'."),
    ] {
        let out = rtvm(&[opt, "-version"]);
        assert_eq!(out.status.code(), Some(1), "{opt}");
        // The uptime decoration depends on how fast the process started (a loaded machine
        // shows 0.001s or more): one decoration of the form [N.NNNs], then the message.
        let stdout = text(&out.stdout);
        let (uptime, rest) = stdout.split_once(']').unwrap_or(("", ""));
        assert!(
            uptime.starts_with('[')
                && uptime.ends_with('s')
                && uptime[1..uptime.len() - 1].parse::<f64>().is_ok(),
            "{opt}: {stdout}"
        );
        assert_eq!(rest, format!("[error][logging] {detail}\n"), "{opt}");
        assert_eq!(
            text(&out.stderr),
            format!("Invalid -Xlog option '{opt}', see error log for details.\n{CREATE_FAILED}")
        );
    }
    let out = rtvm(&["-Xlog:gc+pagesize", "-version"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("][warning][logging] No tag set matches selection: gc+pagesize. Did you mean any of the following?"));
    let out = rtvm(&["-Xlog:help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with(
        "-Xlog Usage: -Xlog[:[selections][:[output][:[decorators][:output-options]]]]\n"
    ));
}

#[test]
fn xlog_lines_have_hotspot_decorations() {
    let out = rtvm(&["-Xlog:pagesize", "-version"]);
    let stdout = text(&out.stdout);
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with('[') && first.contains("s][info][pagesize] "),
        "{first}"
    );
    let child = Command::new(env!("CARGO_BIN_EXE_rtvm"))
        .args([
            "-Xlog:pagesize::uptimemillis,pid,tid,level,tags",
            "-version",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let line = text(&out.stdout).lines().next().unwrap().to_owned();
    // [<n>ms][<pid>][<tid>][info][pagesize] ...
    let fields: Vec<&str> = line
        .split(']')
        .take(5)
        .map(|f| f.trim_start_matches('[').trim())
        .collect();
    assert!(fields[0].ends_with("ms"), "{line}");
    assert_eq!(fields[1], pid.to_string(), "{line}");
    assert!(fields[2].parse::<u32>().is_ok(), "{line}");
    assert_eq!(&fields[3..], ["info", "pagesize"], "{line}");
    let out = rtvm(&["-Xlog:pagesize::none", "-version"]);
    assert!(
        text(&out.stdout).starts_with("Static hugepage support:\n"),
        "{}",
        text(&out.stdout)
    );
    let out = rtvm(&["-Xlog:pagesize:stderr", "-version"]);
    assert!(text(&out.stderr).contains("][info][pagesize] Transparent hugepage (THP) support:"));
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn xlog_to_a_file() {
    let dir = std::env::temp_dir().join(format!("rtvm-xlog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("log-%p.txt");
    let opt = format!("-Xlog:os+thread=info:file={}", file.display());
    let out = rtvm(&[&opt, "IdleThreads", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let entries: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(entries.len(), 1);
    let name = entries[0].file_name().into_string().unwrap();
    assert!(name.starts_with("log-") && !name.contains("%p"), "{name}");
    let log = std::fs::read_to_string(entries[0].path()).unwrap();
    assert_eq!(
        log.matches("] Thread \"Idle#").count(),
        6,
        "start and exit of 3 threads:\n{log}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn environment_options_are_announced_and_applied_first() {
    let out = Command::new(env!("CARGO_BIN_EXE_rtvm"))
        .args(["-Xmx64m", "-XX:+PrintCommandLineFlags", "-version"])
        .env("RTVM_OPTIONS", "-Xmx32m -XX:+AlwaysPreTouch")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).starts_with("Picked up RTVM_OPTIONS: -Xmx32m -XX:+AlwaysPreTouch\n"));
    let flags = text(&out.stdout);
    assert!(
        flags.contains("-XX:+AlwaysPreTouch ") && flags.contains("-XX:MaxHeapSize=67108864 "),
        "{flags}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_rtvm"))
        .args(["-version"])
        .env("RTVM_OPTIONS", "\"-Xmx16m")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "Picked up RTVM_OPTIONS: \"-Xmx16m\nUnmatched quote in RTVM_OPTIONS\n{CREATE_FAILED}"
        )
    );
}

#[test]
fn options_files() {
    expect_argument_error(
        &["-XX:VMOptionsFile=/nonexistent"],
        "Could not open options file '/nonexistent'\n",
    );
    expect_argument_error(
        &["-XX:Flags=/nonexistent"],
        "Could not open settings file /nonexistent\n",
    );
}

#[test]
fn print_flags_initial_exits_before_starting() {
    let out = rtvm(&["-XX:+PrintFlagsInitial", "IdleThreads", "1"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("[Global flags]\n"));
    assert!(!stdout.contains("IdleThreads:"), "the main must not run");
    assert!(stdout.contains("size_t InitialHeapSize                          = 0 "));
}

#[test]
fn print_vm_options() {
    let out = rtvm(&[
        "-XX:+PrintVMOptions",
        "-XX:+AlwaysPreTouch",
        "-Xms8m",
        "-version",
    ]);
    assert_eq!(
        text(&out.stdout),
        "VM option '+PrintVMOptions'\nVM option '+AlwaysPreTouch'\n"
    );
}

#[test]
fn print_nmt_statistics() {
    let out = rtvm(&[
        "-XX:NativeMemoryTracking=summary",
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+PrintNMTStatistics",
        "-Xmx64m",
        "-Xms16m",
        "IdleThreads",
        "4",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout.matches("Native Memory Tracking:").count(),
        1,
        "one report at exit: {stdout}"
    );
    let report = &stdout[stdout
        .find("Native Memory Tracking:")
        .expect("report at exit")..];
    assert!(
        report.contains("\n-                 Java Heap (reserved=67108864, committed=16777216)\n"),
        "{report}"
    );
    assert!(
        report.contains("\n-                    Thread (reserved="),
        "{report}"
    );
    let out = rtvm(&[
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+PrintNMTStatistics",
        "-version",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("rtvm warning: PrintNMTStatistics is disabled, because native memory tracking is not enabled"));
    assert!(!text(&out.stdout).contains("Native Memory Tracking:"));
}
