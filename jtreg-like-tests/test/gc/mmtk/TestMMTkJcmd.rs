/*
 * @test
 * @summary The JDK's own jcmd and jstack against a live rtvm running BinaryTrees 20 on the
 *          MMTk heap (ended by SIGTERM: exit 143, as java), side by side with a live java
 *          17: help lists GC.heap_info and GC.run in java's layout and order; GC.heap_info's
 *          first line has java's shape (MMTk Immix, total = -Xmx); GC.run answers as java's
 *          does and causes a collection the target's -Xlog:gc prints as java's does (`Pause
 *          Full (Diagnostic Command)`), with the stop MMTkCollectFull in -Xlog:safepoint;
 *          four more while BinaryTrees keeps collecting each run their own (one arriving
 *          during a pause waits for it), and GC.heap_info counts them; jstack and
 *          Thread.print list ParallelGCThreads `GC Thread#n` workers in java's line shape;
 *          VM.native_memory summary's Java Heap reserves -Xmx and its Thread category counts
 *          every thread Thread.print lists, the GC workers included
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestMMTkJcmd
 */

use std::process::Command;
use std::time::Duration;

use rtvm_jtreg::gclog::*;
use rtvm_jtreg::service::{jcmd, missing_jdk_tool, reply, tool, Target};
use rtvm_jtreg::testlib::*;

/// The workload: the README's main, deep enough to run well past the checks (about 140 M
/// nodes, collecting about once a second in a debug build), ended by SIGTERM.
const OPTIONS: &[&str] = &["-Xmx256m", "-XX:ParallelGCThreads=2", "-XX:NativeMemoryTracking=summary", "-Xlog:gc,safepoint", "BinaryTrees", "20", "1"];
const JAVA_OPTIONS: &[&str] = &["-Xmx32m", "-XX:ParallelGCThreads=2", "-Xlog:gc,safepoint"];
const WAIT: Duration = Duration::from_secs(30);

/// The `"GC Thread#n"` lines of a thread dump.
fn gc_thread_lines(dump: &str) -> Vec<String> {
    dump.lines().filter(|l| l.starts_with("\"GC Thread#")).map(str::to_owned).collect()
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    if let Some(t) = missing_jdk_tool() {
        return require_tool(t, false);
    }
    // SIGQUIT at its default action (a shell's background job may have it ignored), as the
    // service tests' targets.
    let mut command = Command::new("env");
    command.arg("--default-signal=QUIT,TERM").arg(test_vm()).args(OPTIONS);
    let mut ours = ProcessTools::start(command)?;
    ours.wait_for_line("stretch tree of depth 21", Duration::from_secs(60))?;
    let java = Target::java(JAVA_OPTIONS, 1)?;
    let (r, j) = (ours.pid(), java.pid());
    let result = (|| -> TestResult {
        // help: both commands, in java's layout and order.
        let help = reply(&jcmd(r, &["help"])?);
        let java_help = reply(&jcmd(j, &["help"])?);
        let lines: Vec<&str> = help.lines().collect();
        check(lines.first() == java_help.lines().next().as_ref() && lines.last() == java_help.lines().last().as_ref() && lines.get(lines.len().saturating_sub(2)) == Some(&""), || format!("help's layout differs from java's:\n{help}---\n{java_help}"))?;
        let order = |text: &str| -> Vec<String> { text.lines().filter(|l| *l == "GC.heap_info" || *l == "GC.run").map(str::to_owned).collect() };
        check(order(&help) == ["GC.heap_info", "GC.run"] && order(&java_help) == order(&help), || format!("help lists {:?}, java {:?}", order(&help), order(&java_help)))?;

        // GC.heap_info: java's first-line shape.
        let info = reply(&jcmd(r, &["GC.heap_info"])?);
        let first = info.lines().next().unwrap_or_default();
        let (name, total, used, lo, hi) = parse_heap_line(first).ok_or_else(|| TestFailure(format!("GC.heap_info's first line is not java's shape: {info:?}")))?;
        check(name == "MMTk Immix" && total == 256 * 1024 && used <= total && lo < hi, || format!("GC.heap_info: {first:?}"))?;
        let java_info = reply(&jcmd(j, &["GC.heap_info"])?);
        check(parse_heap_line(java_info.lines().next().unwrap_or_default()).is_some(), || format!("java's GC.heap_info does not pass the same parser: {java_info:?}"))?;
        let collections = |text: &str| -> Option<u64> { text.split("collections ").nth(1)?.split(',').next()?.parse().ok() };
        let before = collections(&info).ok_or_else(|| TestFailure(format!("no collection count in GC.heap_info: {info:?}")))?;
        println!("GC.heap_info: {first:?} ({before} collections so far)");

        let java_dump = java_process_dump(j)?;

        // GC.run: java's answer, and the collection in -Xlog:gc with java's cause.
        let run = jcmd(r, &["GC.run"])?;
        run.should_have_exit_value(0)?;
        let java_run = jcmd(j, &["GC.run"])?;
        check(reply(&run) == reply(&java_run) && run.stderr == java_run.stderr, || format!("GC.run: rtvm {run:?}\njava {java_run:?}"))?;
        let line = ours.wait_for_line("(Diagnostic Command)", WAIT)?;
        let p = parse_gc_line(&line).ok_or_else(|| TestFailure(format!("not java's shape: {line:?}")))?;
        check(p.kind == "Full" && p.causes == ["Diagnostic Command"] && p.capacity == 256, || format!("GC.run's collection: {p:?}"))?;
        let stop = ours.wait_for_line("Safepoint \"MMTkCollectFull\"", WAIT)?;
        check(parse_safepoint_line(&stop).is_some(), || format!("GC.run's stop: {stop:?}"))?;
        // More, while BinaryTrees keeps collecting: one that arrives during an allocation's
        // pause waits for it (MMTk panics at a request made during a pause), then runs its own.
        for _ in 0..4 {
            jcmd(r, &["GC.run"])?.should_have_exit_value(0)?;
            let l = ours.wait_for_line("(Diagnostic Command)", WAIT)?;
            check(parse_gc_line(&l).is_some_and(|p| p.cause() == "Diagnostic Command"), || format!("GC.run's collection: {l:?}"))?;
        }
        let after = collections(&reply(&jcmd(r, &["GC.heap_info"])?)).unwrap_or(0);
        check(after >= before + 5, || format!("GC.heap_info counted {before} collections before 5 GC.run and {after} after"))?;
        let (mut java_process, java_dir) = java.into_process();
        let java_line = java_process.wait_for_line("(Diagnostic Command)", WAIT);
        let _ = std::fs::write(java_dir.join("stop"), b"");
        let java_line = java_line?;
        let q = parse_gc_line(&java_line).ok_or_else(|| TestFailure(format!("java's GC.run line does not pass the parser: {java_line:?}")))?;
        check(q.kind == p.kind && q.cause() == p.cause(), || format!("GC.run: rtvm {p:?}, java {q:?}"))?;
        println!("GC.run: {line:?} (java: {java_line:?}); {stop:?}");

        // jstack, Thread.print: the GC workers, java's line shape.
        let dump = tool("jstack", &[&r.to_string()])?;
        dump.should_have_exit_value(0)?;
        let print = reply(&jcmd(r, &["Thread.print"])?);
        let _ = java_process.finish();
        let _ = std::fs::remove_dir_all(&java_dir);
        for text in [&dump.stdout, &print] {
            let workers = gc_thread_lines(text);
            let names: Vec<String> = workers.iter().map(|l| l.split('"').nth(1).unwrap_or_default().to_owned()).collect();
            check(names == ["GC Thread#0", "GC Thread#1"], || format!("GC workers listed: {names:?} (ParallelGCThreads=2):\n{text}"))?;
            let theirs = gc_thread_lines(&java_dump);
            // java prints `runnable` for every worker; rtvm the state the worker is in.
            let shape = |l: &String| line_shape(l).replace("waiting on condition", "runnable");
            check(theirs.first().map(shape) == workers.first().map(shape), || format!("a GC worker's line:\nrtvm {:?}\njava {:?}", workers.first(), theirs.first()))?;
        }
        println!("jstack and Thread.print: GC Thread#0, GC Thread#1 in java's shape");

        // NMT: the heap, and every thread (the workers too) in Thread.
        let nmt = reply(&jcmd(r, &["VM.native_memory", "summary"])?);
        let heap = nmt.lines().find(|l| l.contains("Java Heap (")).unwrap_or_default();
        check(heap.contains("Java Heap (reserved=262144KB, committed="), || format!("NMT's Java Heap line: {heap:?}\n{nmt}"))?;
        let threads: u64 = nmt.split("(thread #").nth(1).and_then(|s| s.split(')').next()).and_then(|n| n.trim().parse().ok()).unwrap_or(0);
        let listed = print.lines().filter(|l| l.starts_with('"')).count() as u64;
        check(threads == listed, || format!("NMT counts {threads} threads, Thread.print lists {listed}:\n{nmt}\n{print}"))?;
        println!("NMT: {heap:?}; (thread #{threads}) = the {listed} threads Thread.print lists");
        Ok(())
    })();
    // SIGTERM: the launcher ends as java's does.
    let mut kill = Command::new("kill");
    kill.args(["-TERM", &r.to_string()]);
    let killed = ProcessTools::execute(kill);
    let mut end_by = 300;
    while ours.is_running() && end_by > 0 {
        std::thread::sleep(Duration::from_millis(100));
        end_by -= 1;
    }
    if ours.is_running() {
        ours.kill();
    }
    let end = ours.finish()?;
    result?;
    killed?.should_have_exit_value(0)?;
    check(end.exit == 143 && end.stderr.is_empty(), || format!("the target's end after SIGTERM (java: 143): exit {}, stderr {:?}", end.exit, end.stderr))?;
    check(!end.stdout.contains("long lived tree"), || "BinaryTrees 20 ended before the checks did: give it more work".into())?;
    gc_pauses(&end.stdout, true)?;
    Ok(())
}

fn java_process_dump(pid: u32) -> Result<String, TestFailure> {
    let d = tool("jstack", &[&pid.to_string()])?;
    d.should_have_exit_value(0)?;
    Ok(d.stdout)
}
