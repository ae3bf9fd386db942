/*
 * @test
 * @summary An embedder's diagnostic commands through the JDK's own jcmd, side by side with
 *          java 17: a target registers GC.heap_info, GC.run, GC.class_histogram and
 *          GC.heap_dump declared as HotSpot declares them; help <command> for each is java's
 *          text byte for byte; help lists them in java's order among rtvm's commands and
 *          help -all has java's blocks; bad input (an INT that is not one, a bare INT, a
 *          duplicate option, a BOOLEAN that is not one, a long unknown argument, a missing
 *          mandatory argument, arguments to a command without any, an open quote) gets
 *          java's text, stream and exit code; GC.run and GC.class_histogram -parallel=2 run
 *          (java's "Command executed successfully"; the value reaches the handler); a
 *          handler's error is an exception with exit code 1; a command still running when
 *          the VM is destroyed holds up no other client, answers its own after 5 s, and the
 *          destroy reports it
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestJcmdEmbedderCommands
 */

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rtvm::{DcmdArguments, DcmdParam, DcmdType, DiagnosticCommand};
use rtvm_jtreg::service::{jcmd, missing_jdk_tool, reply, target_main, Target};
use rtvm_jtreg::testlib::*;

const OPTIONS: &[&str] = &["-Xmx64m"];
const MONITOR: &str = "java.lang.management.ManagementPermission(monitor)";

/// The commands, declared with HotSpot 17's texts; the handlers write what they got.
fn register(vm: &Vm, dir: &Path) -> Result<(), TestFailure> {
    let heap_info = DiagnosticCommand::new("GC.heap_info", "Provide generic Java heap information.", |_: &DcmdArguments, out: &mut String| {
        out.push_str(" embedder heap total 65536K, used 0K\n");
        Ok(())
    })
    .impact("Medium")
    .permission(MONITOR);
    let runs = dir.join("gc-runs");
    let run = DiagnosticCommand::new("GC.run", "Call java.lang.System.gc().", move |_: &DcmdArguments, _: &mut String| {
        let n: u32 = std::fs::read_to_string(&runs).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        std::fs::write(&runs, format!("{}", n + 1)).map_err(|e| e.to_string())
    })
    .impact("Medium: Depends on Java heap size and content.");
    let histogram = DiagnosticCommand::new("GC.class_histogram", "Provide statistics about the Java heap usage.", |a: &DcmdArguments, out: &mut String| {
        out.push_str(&format!("all={} parallel={}\n", a.boolean("-all"), a.int("-parallel").unwrap_or(-1)));
        Ok(())
    })
    .impact("High: Depends on Java heap size and content.")
    .permission(MONITOR)
    .option(DcmdParam::new("-all", "Inspect all objects, including unreachable objects", DcmdType::Boolean).default_value("false"))
    .option(DcmdParam::new("-parallel", "Number of parallel threads to use for heap inspection. 0 (the default) means let the VM determine the number of threads to use. 1 means use one thread (disable parallelism). For any other value the VM will try to use the specified number of threads, but might use fewer.", DcmdType::Int).default_value("0"));
    let heap_dump = DiagnosticCommand::new("GC.heap_dump", "Generate a HPROF format dump of the Java heap.", |a: &DcmdArguments, out: &mut String| {
        let file = a.string("filename").unwrap_or_default();
        out.push_str(&format!("Dumping heap to {file} ...\n"));
        Err(format!("{file}: the embedder writes no heap dumps"))
    })
    .impact("High: Depends on Java heap size and content. Request a full GC unless the '-all' option is specified.")
    .permission(MONITOR)
    .argument(DcmdParam::new("filename", "Name of the dump file", DcmdType::String).mandatory())
    .option(DcmdParam::new("-all", "Dump all objects, including unreachable objects", DcmdType::Boolean).default_value("false"))
    .option(DcmdParam::new("-gz", "If specified, the heap dump is written in gzipped format using the given compression level. 1 (recommended) is the fastest, 9 the strongest compression.", DcmdType::Int).default_value("1"))
    .option(DcmdParam::new("-overwrite", "If specified, the dump file will be overwritten if it exists", DcmdType::Boolean).default_value("false"));
    let entered = dir.join("hang-entered");
    let hang = DiagnosticCommand::new("Test.hang", "Runs until the VM is destroyed, and on.", move |_: &DcmdArguments, _: &mut String| {
        let _ = std::fs::write(&entered, b"");
        loop {
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    for c in [heap_info, run, histogram, heap_dump, hang] {
        vm.register_diagnostic_command(c).map_err(|e| TestFailure(e.to_string()))?;
    }
    Ok(())
}

fn wait_for(path: &Path) -> Result<(), TestFailure> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        check(Instant::now() < deadline, || format!("{} never appeared", path.display()))?;
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("target") {
        let dir = PathBuf::from(args.get(1).cloned().unwrap_or_default());
        register(vm, &dir)?;
        return target_main(vm, &args[1..]);
    }
    if let Some(t) = missing_jdk_tool() {
        return require_tool(t, false);
    }
    let ours = Target::rtvm("TestJcmdEmbedderCommands", OPTIONS, 1)?;
    let java = Target::java(OPTIONS, 1)?;
    let (r, j) = (ours.pid(), java.pid());
    const COMMANDS: [&str; 4] = ["GC.class_histogram", "GC.heap_dump", "GC.heap_info", "GC.run"];

    // help <command>: java's text, byte for byte.
    for c in COMMANDS {
        let (a, b) = (jcmd(r, &["help", c])?, jcmd(j, &["help", c])?);
        a.should_have_exit_value(0)?;
        check(reply(&a) == reply(&b), || format!("help {c} differs from java's:\n--- rtvm\n{}--- java\n{}", reply(&a), reply(&b)))?;
    }
    println!("help <command> for {COMMANDS:?}: java's text");

    // help: the same order as java's for the names both have; help -all: java's blocks.
    let names = |text: String| -> Vec<String> { text.lines().skip(1).take_while(|l| !l.is_empty()).map(str::to_owned).collect() };
    let ours_list = names(reply(&jcmd(r, &["help"])?));
    let java_list = names(reply(&jcmd(j, &["help"])?));
    for c in COMMANDS {
        check(ours_list.iter().any(|n| n == c), || format!("help does not list {c}: {ours_list:?}"))?;
    }
    let common: Vec<&String> = java_list.iter().filter(|n| ours_list.contains(n)).collect();
    let ours_common: Vec<&String> = ours_list.iter().filter(|n| java_list.contains(n)).collect();
    check(common == ours_common, || format!("help's order differs from java's:\nrtvm {ours_common:?}\njava {common:?}"))?;
    check(common.len() >= COMMANDS.len() + 10, || format!("too few common commands: {common:?}"))?;
    let (all, java_all) = (reply(&jcmd(r, &["help", "-all"])?), reply(&jcmd(j, &["help", "-all"])?));
    for c in COMMANDS {
        let block = java_all.split("\n\n").find(|b| b.starts_with(&format!("{c}\n\t"))).map(|b| format!("{b}\n\n"));
        let block = block.ok_or_else(|| TestFailure(format!("java's help -all has no {c}")))?;
        check(all.contains(&block), || format!("help -all lacks java's block {block:?}:\n{all}"))?;
    }
    println!("help lists {} commands in java's order; help -all has java's blocks", ours_list.len());

    // Bad input: java's text, stream and exit code.
    let long = format!("-parallel={}", "a".repeat(70));
    for c in [
        &["GC.class_histogram", "-parallel=abc"][..],
        &["GC.class_histogram", "-parallel"],
        &["GC.class_histogram", &long],
        &["GC.class_histogram", "-all", "-all"],
        &["GC.class_histogram", "-all=yes"],
        &["GC.class_histogram", "abcdefghijklmnopqrstuvwxyz0123456789"],
        &["GC.heap_dump"],
        &["GC.heap_dump", "-all"],
        &["GC.run", "x"],
        &["GC.heap_info", "x"],
        &["help", "\"GC.run"],
        &["help", "GC.run", "extra"],
        &["help", "GC.run=x"],
        &["help", "GC.nope"],
    ] {
        let (a, b) = (jcmd(r, c)?, jcmd(j, c)?);
        check(a.exit == b.exit && reply(&a) == reply(&b) && a.stderr == b.stderr, || format!("jcmd {c:?}:\nrtvm {a:?}\njava {b:?}"))?;
    }
    println!("bad input: java's texts, streams and exit codes");

    // Runs (a failure goes to jcmd's stderr, as java's exceptions do).
    for p in [r, j] {
        let run = jcmd(p, &["GC.run"])?;
        run.should_have_exit_value(0)?;
        check(reply(&run) == "Command executed successfully\n", || format!("GC.run against {p}: {run:?}"))?;
    }
    jcmd(r, &["GC.run"])?.should_have_exit_value(0)?;
    let runs = std::fs::read_to_string(ours.dir().join("gc-runs")).unwrap_or_default();
    check(runs == "2", || format!("GC.run ran {runs:?} times, not 2"))?;
    let h = jcmd(r, &["GC.class_histogram", "-parallel=2", "-all=TRUE"])?;
    h.should_have_exit_value(0)?;
    check(reply(&h) == "all=true parallel=2\n", || format!("GC.class_histogram: {h:?}"))?;
    check(reply(&jcmd(r, &["GC.heap_info"])?) == " embedder heap total 65536K, used 0K\n", || "GC.heap_info's text".into())?;
    let d = jcmd(r, &["GC.heap_dump", "/tmp/x.hprof"])?;
    check(d.exit == 1 && d.stderr == "Dumping heap to /tmp/x.hprof ...java.lang.RuntimeException: /tmp/x.hprof: the embedder writes no heap dumps\n", || format!("a failing handler through jcmd: {d:?}"))?;
    println!("GC.run, GC.class_histogram, GC.heap_info run; a handler's error is jcmd's exception (exit 1)");

    // A command that never returns, then the VM's destroy.
    let mut hung = Command::new("jcmd");
    hung.args([&r.to_string(), "Test.hang"]);
    let hung = ProcessTools::start(hung)?;
    wait_for(&ours.dir().join("hang-entered"))?;
    // Meanwhile the listener serves the others.
    let t = Instant::now();
    jcmd(r, &["VM.version"])?.should_have_exit_value(0)?;
    jcmd(r, &["GC.run"])?.should_have_exit_value(0)?;
    let served = t.elapsed();
    check(served < Duration::from_secs(10), || format!("two commands took {served:?} next to a hung one"))?;
    let t = Instant::now();
    let end = ours.stop()?;
    let took = t.elapsed();
    let client = hung.finish()?;
    check(client.exit == 1 && client.stderr == "java.lang.RuntimeException: diagnostic command Test.hang did not finish before the VM shut down\n", || format!("the hung command's client: {client:?}"))?;
    check(end.exit == 1 && end.stderr.contains("diagnostic command Test.hang was still running 5 s into the VM's destroy"), || format!("the target's end: {end:?}"))?;
    check(took < Duration::from_secs(20), || format!("the target took {took:?} to end"))?;
    println!("a hung command: others served next to it ({served:?}); at destroy its client answered after the grace, the destroy reported it ({took:?})");
    drop(java);
    Ok(())
}
