/*
 * @test
 * @summary A command line of 5,000 arguments and 300 VM options, side by side with java 17:
 *          both VMs stay listed by jps, which shows their main's arguments (sun.rt.javaCommand)
 *          and VM options (java.rt.vmArgs) cut at 1,024 bytes, as java stores them; jcmd
 *          VM.command_line (not the perf data) still has every argument
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestPerfDataLongCommandLine
 */

use rtvm_jtreg::service::{jcmd, missing_jdk_tool, reply, target_main, tool, Target};
use rtvm_jtreg::testlib::*;

/// The `jps` line of `pid` (with `flags`), without the pid.
fn jps_line(flags: &str, pid: u32) -> Result<String, TestFailure> {
    let out = tool("jps", &[flags])?;
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{pid} ")).map(str::to_owned))
        .ok_or_else(|| TestFailure(format!("jps {flags} does not list {pid}:\n{}", out.stdout)))
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("target") {
        return target_main(vm, &args[1..]);
    }
    if let Some(t) = missing_jdk_tool() {
        return require_tool(t, false);
    }
    let extra: Vec<String> = (0..5000).map(|i| format!("arg{i}")).collect();
    // 300 VM options: java.rt.vmArgs far beyond 1,024 bytes too.
    let mut options: Vec<&str> = vec!["-Xmx32m"; 300];
    options.push("-Xms8m");
    let ours = Target::rtvm_with_args("TestPerfDataLongCommandLine", &options, 1, &extra)?;
    let java = Target::java_with_args(&options, 1, &extra)?;
    let (r, j) = (ours.pid(), java.pid());

    // jps -m: the main and its arguments, from sun.rt.javaCommand, 1,024 bytes of it.
    let (rm, jm) = (jps_line("-m", r)?, jps_line("-m", j)?);
    check(rm.starts_with("TestPerfDataLongCommandLine target ") && jm.starts_with("Target "), || format!("jps -m: rtvm {:?}, java {:?}", &rm[..rm.len().min(80)], &jm[..jm.len().min(80)]))?;
    check(rm.len() == 1024 && jm.len() == 1024, || format!("jps -m lengths: rtvm {}, java {} (java cuts the command at 1024 bytes)", rm.len(), jm.len()))?;
    // jps -v: the VM options, from java.rt.vmArgs, cut alike: the same text.
    let (rv, jv) = (jps_line("-v", r)?, jps_line("-v", j)?);
    let options_of = |line: &str| line.split_once(' ').map_or(String::new(), |(_, o)| o.to_owned());
    let (ro, jo) = (options_of(&rv), options_of(&jv));
    check(ro.len() == 1024 && ro == jo, || format!("jps -v options: rtvm {} bytes, java {} bytes, equal: {}", ro.len(), jo.len(), ro == jo))?;
    let l = tool("jcmd", &["-l"])?;
    check(l.stdout.lines().any(|x| x.starts_with(&format!("{r} TestPerfDataLongCommandLine target "))), || "jcmd -l does not list rtvm".into())?;
    println!("5000 arguments, 300 VM options: jps lists both VMs, javaCommand and vmArgs cut at 1024 bytes as java's");

    // VM.command_line reads the VM, not the perf data: every argument.
    let cl = reply(&jcmd(r, &["VM.command_line"])?);
    check(cl.contains(" arg4999\n"), || format!("VM.command_line lost arguments: {} bytes", cl.len()))?;
    let end = ours.stop()?;
    end.should_have_exit_value(0)?;
    drop(java);
    Ok(())
}
