/*
 * @test
 * @summary An hsperfdata directory that others can write (/tmp/hsperfdata_<user> seen as a
 *          mode-0777 directory through a bind mount in a private mount namespace of the child
 *          alone: nothing of the machine changes) is refused silently, side by side with java
 *          17: no file in it, nothing on the application's stdout or stderr, and the refusal
 *          only with -Xlog:perf+memops=debug
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestInsecurePerfDataDirectory
 */

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use rtvm_jtreg::testlib::*;

/// `program args...` seeing `fixture` as the user's hsperfdata directory; afterwards the
/// directory's entries are printed after a `LISTING` line.
fn insecure_world(fixture: &Path, user_dir: &Path, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", "set -e\nmount --bind \"$1\" \"$2\"\nd=$2\nshift 2\n\"$@\"\necho LISTING\nls -A \"$d\"\n", "sh"])
        .arg(fixture)
        .arg(user_dir)
        .arg(program)
        .args(args);
    c
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    if let Err(reason) = rtvm_jtreg::fakefs::available() {
        return skip(reason);
    }
    if !JavaTools::available() {
        return require_tool("java", false);
    }
    let user_dir = Path::new("/tmp").join(format!("hsperfdata_{}", rtvm_os_linux::attach::effective_user_name()));
    if !user_dir.exists() {
        // The mount point: what any VM of this user makes (mode 0755).
        std::fs::create_dir_all(&user_dir).map_err(|e| TestFailure(format!("{}: {e}", user_dir.display())))?;
        std::fs::set_permissions(&user_dir, std::fs::Permissions::from_mode(0o755)).map_err(|e| TestFailure(e.to_string()))?;
    }
    let fixture = std::env::temp_dir().join(format!("rtvm-insecure-hsperf-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&fixture);
    std::fs::create_dir_all(&fixture).map_err(|e| TestFailure(e.to_string()))?;
    std::fs::set_permissions(&fixture, std::fs::Permissions::from_mode(0o777)).map_err(|e| TestFailure(e.to_string()))?;

    let vm = test_vm();
    let mut quiet = Vec::new();
    for (who, program) in [("rtvm", vm.as_str()), ("java", "java")] {
        let out = ProcessTools::execute(insecure_world(&fixture, &user_dir, program, &["-Xmx32m", "-version"]))?;
        out.should_have_exit_value(0)?;
        let (before, listing) = out.stdout.split_once("LISTING\n").unwrap_or((&out.stdout, ""));
        check(before.is_empty(), || format!("{who}: stdout of -version with an insecure {}: {before:?}", user_dir.display()))?;
        check(!out.stderr.contains("PerfData") && !out.stderr.contains("hsperfdata"), || format!("{who}: stderr: {:?}", out.stderr))?;
        check(listing.trim().is_empty(), || format!("{who} wrote into the insecure directory: {listing:?}"))?;
        quiet.push(who);
    }
    let out = ProcessTools::execute(insecure_world(&fixture, &user_dir, &vm, &["-Xmx32m", "-Xlog:perf+memops=debug", "-version"]))?;
    out.should_have_exit_value(0)?;
    let line = out.stdout.lines().find(|l| l.contains("Could not create PerfData file")).ok_or_else(|| TestFailure(format!("-Xlog:perf+memops=debug does not show the refusal:\n{}", out.stdout)))?;
    check(line.contains("[debug]") && line.contains("writable by group or others"), || format!("the refusal: {line}"))?;
    let _ = std::fs::remove_dir_all(&fixture);
    println!("an insecure {}: {quiet:?} print nothing and write nothing; rtvm's debug line: {line}", user_dir.display());
    Ok(())
}
