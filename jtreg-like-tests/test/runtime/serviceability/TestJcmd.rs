/*
 * @test
 * @bug 8225690 8268893
 * @summary The JDK's own jcmd, jstack, jinfo and jps against a running rtvm, side by side
 *          with the same commands against a running java 17 (a small program the test
 *          compiles): help and help <command> for every command rtvm has are java's text;
 *          VM.version, VM.uptime, VM.command_line, VM.flags and jinfo -flags have java's
 *          shape; VM.flags -all is byte-identical to -XX:+PrintFlagsFinal of the same
 *          command line; jinfo -flag MaxHeapSize is java's line and jinfo -flag
 *          +UseTransparentHugePages is refused as java refuses it; VM.native_memory summary
 *          scale=KB passes HotSpot's SummarySanityCheck rules; baseline, 50 more threads,
 *          summary.diff shows (thread #N +50); VM.log makes lines appear in a new file;
 *          Thread.print lists every registry thread with nid its /proc/<pid>/task id;
 *          System.trim_native_heap prints java's line; jps -l and jcmd -l list the pid
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestJcmd
 */

use std::collections::BTreeSet;

use rtvm_jtreg::service::{jcmd, missing_jdk_tool, reply, target_main, tool, Target};
use rtvm_jtreg::testlib::*;

const OPTIONS: &[&str] = &["-XX:NativeMemoryTracking=summary", "-Xmx64m", "-Xms64m"];

/// The name and the text of each command's help, from `help -all`'s names.
fn help_of(pid: u32, command: &str) -> Result<String, TestFailure> {
    let out = jcmd(pid, &["help", command])?;
    out.should_have_exit_value(0)?;
    Ok(reply(&out))
}

fn sanity_check(text: &str) -> Result<(), TestFailure> {
    // HotSpot's SummarySanityCheck: the total, and every category line, must match; the
    // categories add up to the total within 8 KB; committed never exceeds reserved.
    let total_re = regex::Regex::new(r"^Total:\sreserved=(\d+)KB,\scommitted=(\d+)KB$").expect("pattern");
    let cat_re = regex::Regex::new(r"^-\s+([\w\s]+)\(reserved=(\d+)KB,\scommitted=(\d+)KB\)$").expect("pattern");
    let (mut total, mut sum) = (None, (0i64, 0i64));
    for l in text.lines() {
        if l.starts_with("Total") {
            let c = total_re.captures(l).ok_or_else(|| TestFailure(format!("Failed to match the expected groups in 'Total' memory part: {l}")))?;
            total = Some((c[1].parse::<i64>().unwrap_or(-1), c[2].parse::<i64>().unwrap_or(-1)));
        } else if l.starts_with('-') {
            let c = cat_re.captures(l).ok_or_else(|| TestFailure(format!("Failed to match the group on line '{l}'")))?;
            let (r, cm): (i64, i64) = (c[2].parse().unwrap_or(-1), c[3].parse().unwrap_or(-1));
            check(cm <= r, || format!("Committed ({cm}) was more than Reserved ({r}) for mtType: {}", &c[1]))?;
            sum.0 += r;
            sum.1 += cm;
        }
    }
    let (r, c) = total.ok_or_else(|| TestFailure(format!("no Total line:\n{text}")))?;
    check((r - sum.0).abs() <= 8, || format!("Total reserved ({r}) did not match the summarized reserved ({})", sum.0))?;
    check((c - sum.1).abs() <= 8, || format!("Total committed ({c}) did not match the summarized committed ({})", sum.1))?;
    Ok(())
}

/// The kernel tids of a process.
fn tasks(pid: u32) -> BTreeSet<i64> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("target") {
        return target_main(vm, &args[1..]);
    }
    if let Some(t) = missing_jdk_tool() {
        return require_tool(t, false);
    }
    let mut ours = Target::rtvm("TestJcmd", OPTIONS, 2)?;
    let java = Target::java(OPTIONS, 2)?;
    let (r, j) = (ours.pid(), java.pid());

    // help: rtvm's commands are java's names, and each one's help is java's text.
    let list = reply(&jcmd(r, &["help"])?);
    let java_list = reply(&jcmd(j, &["help"])?);
    check(list.starts_with("The following commands are available:\n") && list.ends_with("\nFor more information about a specific command use 'help <command>'.\n"), || format!("help:\n{list}"))?;
    let names: Vec<&str> = list.lines().skip(1).take_while(|l| !l.is_empty()).collect();
    check(names.len() >= 12, || format!("too few commands: {names:?}"))?;
    for n in &names {
        check(java_list.lines().any(|l| l == *n), || format!("{n} is not one of java's commands"))?;
        let (a, b) = (help_of(r, n)?, help_of(j, n)?);
        check(a == b, || format!("help {n} differs from java's:\n--- rtvm\n{a}--- java\n{b}"))?;
    }
    println!("help and help <command> for {} commands: as java", names.len());
    for c in [&["help", "No.such"][..], &["No.such_command"], &["VM.native_memory", "bogus"], &["VM.flags", "-foo"], &["VM.version", "extra"], &["VM.set_flag"], &["VM.native_memory", "scale=XB"], &["VM.native_memory", "summary", "detail"]] {
        let (a, b) = (jcmd(r, c)?, jcmd(j, c)?);
        check(a.exit == b.exit && reply(&a) == reply(&b) && a.stderr == b.stderr, || format!("jcmd {c:?}: rtvm {a:?}\njava {b:?}"))?;
    }
    println!("errors: java's texts, streams and exit codes");

    // Shapes.
    let v = reply(&jcmd(r, &["VM.version"])?);
    check(regex::Regex::new(r"^rtvm 64-Bit VM version \S+ \((release|debug)\)\nrtvm \S+\n$").expect("pattern").is_match(&v), || format!("VM.version: {v:?}"))?;
    let up = regex::Regex::new(r"^\d+\.\d{3} s\n$").expect("pattern");
    for p in [r, j] {
        let u = reply(&jcmd(p, &["VM.uptime"])?);
        check(up.is_match(&u), || format!("VM.uptime of {p}: {u:?}"))?;
    }
    let cl = reply(&jcmd(r, &["VM.command_line"])?);
    let jcl = reply(&jcmd(j, &["VM.command_line"])?);
    check(cl.starts_with("VM Arguments:\njvm_args: -XX:NativeMemoryTracking=summary -Xmx64m -Xms64m \njava_command: TestJcmd target "), || format!("VM.command_line:\n{cl}"))?;
    check(jcl.starts_with("VM Arguments:\njvm_args: -XX:NativeMemoryTracking=summary -Xmx64m -Xms64m \njava_command: Target "), || format!("java's VM.command_line:\n{jcl}"))?;
    let flags = reply(&jcmd(r, &["VM.flags"])?);
    let mut own = ProcessTools::create_limited_test_vm(OPTIONS);
    own.args(["-XX:+PrintCommandLineFlags", "-version"]);
    let own = ProcessTools::execute(own)?;
    let printed = own.stdout.lines().find(|l| l.starts_with("-XX:")).unwrap_or("").replace(" -XX:+PrintCommandLineFlags", "");
    check(flags.trim_end() == printed.trim_end(), || format!("VM.flags {flags:?} is not -XX:+PrintCommandLineFlags {printed:?}"))?;
    let jinfo_flags = tool("jinfo", &["-flags", &r.to_string()])?;
    check(jinfo_flags.stdout == format!("VM Flags:\n{flags}"), || format!("jinfo -flags: {jinfo_flags:?}"))?;

    // VM.flags -all is the PrintFlagsFinal table of the same command line.
    let all = reply(&jcmd(r, &["VM.flags", "-all"])?);
    let mut pff = ProcessTools::create_limited_test_vm(OPTIONS);
    pff.args(["-XX:+PrintFlagsFinal", "-version"]);
    let pff = ProcessTools::execute(pff)?;
    let table: String = pff.stdout.lines().take_while(|l| !l.starts_with("rtvm")).map(|l| format!("{l}\n")).collect();
    let table = table.replace(
        "     bool PrintFlagsFinal                          = true                                      {product} {command line}",
        "     bool PrintFlagsFinal                          = false                                     {product} {default}",
    );
    check(all == table, || format!("VM.flags -all differs from -XX:+PrintFlagsFinal:\n{all}\n---\n{table}"))?;
    println!("VM.flags -all: the PrintFlagsFinal table, byte for byte ({} lines)", all.lines().count());

    // jinfo -flag.
    let (a, b) = (tool("jinfo", &["-flag", "MaxHeapSize", &r.to_string()])?, tool("jinfo", &["-flag", "MaxHeapSize", &j.to_string()])?);
    check(a.stdout == b.stdout && a.stdout == "-XX:MaxHeapSize=67108864\n", || format!("jinfo -flag MaxHeapSize: rtvm {:?}, java {:?}", a.stdout, b.stdout))?;
    for p in [r, j] {
        let t = tool("jinfo", &["-flag", "+UseTransparentHugePages", &p.to_string()])?;
        check(t.exit == 1 && t.stderr.contains("AttachOperationFailedException: flag 'UseTransparentHugePages' cannot be changed"), || format!("jinfo -flag +UseTransparentHugePages against {p}: {t:?}"))?;
    }
    let sysprops = tool("jinfo", &["-sysprops", &r.to_string()])?;
    sysprops.should_have_exit_value(0)?.stdout_should_contain("java.vm.name=rtvm 64-Bit VM\n")?;
    tool("jinfo", &[&r.to_string()])?.should_have_exit_value(0)?.stdout_should_contain("VM Flags:\n")?;
    println!("jinfo: -flag, -flags, -sysprops and plain as java answers them");

    // NMT: the sanity rules, then a diff across 50 new threads.
    let summary = reply(&jcmd(r, &["VM.native_memory", "summary", "scale=KB"])?);
    sanity_check(&summary)?;
    sanity_check(&reply(&jcmd(j, &["VM.native_memory", "summary", "scale=KB"])?))?;
    let threads = |text: &str| -> Option<usize> {
        text.lines().find_map(|l| l.trim().strip_prefix("(thread #")?.split([')', ' ']).next()?.parse().ok())
    };
    let before = threads(&summary).ok_or_else(|| TestFailure(format!("no thread count:\n{summary}")))?;
    jcmd(r, &["VM.native_memory", "baseline"])?.should_have_exit_value(0)?.stdout_should_contain("Baseline taken\n")?;
    let log = ours.dir().join("vm.log");
    let output = format!("output={}", log.display());
    let set = jcmd(r, &["VM.log", &output, "what=os+thread=info", "decorators=uptime,tid"])?;
    check(reply(&set) == "Command executed successfully\n", || format!("VM.log: {set:?}"))?;
    ours.more_threads()?;
    let diff = reply(&jcmd(r, &["VM.native_memory", "summary.diff", "scale=KB"])?);
    check(diff.contains(&format!("(thread #{} +50)", before + 50)), || format!("summary.diff after 50 threads:\n{diff}"))?;
    let lines = std::fs::read_to_string(&log).unwrap_or_default();
    check(lines.lines().filter(|l| l.contains("Thread \"More#")).count() >= 50, || format!("VM.log did not put the threads' os+thread lines into {}:\n{lines}", log.display()))?;
    let listing = reply(&jcmd(r, &["VM.log", "list"])?);
    check(listing.contains(&format!(" #2: file={} all=off,os+thread=info uptime,tid filecount=5,filesize=20480K,async=false (reconfigured)", log.display())), || format!("VM.log list:\n{listing}"))?;
    println!("VM.native_memory: sanity rules hold, (thread #{} +50) after 50 threads; VM.log wrote {} lines", before + 50, lines.lines().count());

    // VM.log list: file sizes in HotSpot's proper unit, as java lists them.
    let sized = |pid: u32, dir: &std::path::Path| -> Result<Vec<String>, TestFailure> {
        for (i, size) in ["16k", "1g", "0", "300k"].iter().enumerate() {
            let output = format!("output={}", dir.join(format!("sized{i}.log")).display());
            let set = jcmd(pid, &["VM.log", &output, &format!("output_options=filesize={size}"), "what=os=info"])?;
            check(reply(&set) == "Command executed successfully\n", || format!("VM.log filesize={size} of {pid}: {set:?}"))?;
        }
        let list = reply(&jcmd(pid, &["VM.log", "list"])?);
        let shown: Vec<String> = list.lines().filter(|l| l.contains("/sized")).map(|l| l.split_once(": file=").map_or(l, |(_, rest)| rest).replace(&dir.display().to_string(), "<dir>")).collect();
        check(shown.len() == 4, || format!("VM.log list of {pid}:\n{list}"))?;
        Ok(shown)
    };
    let (ours_sized, java_sized) = (sized(r, ours.dir())?, sized(j, java.dir())?);
    check(ours_sized == java_sized, || format!("VM.log list sizes: rtvm {ours_sized:#?}\njava {java_sized:#?}"))?;
    println!("VM.log list: filesize=16k, 1g, 0, 300k shown as java shows them: {:?}", ours_sized.iter().map(|l| l.rsplit(',').nth(1).unwrap_or("")).collect::<Vec<_>>());

    // Thread.print: every registry thread, nid = its kernel tid; jstack prints the same.
    let dump = reply(&jcmd(r, &["Thread.print"])?);
    check(dump.contains("Full thread dump rtvm 64-Bit VM ("), || format!("Thread.print:\n{dump}"))?;
    let nid = regex::Regex::new(r#"^"([^"]+)" .* nid=0x([0-9a-f]+) "#).expect("pattern");
    let mut nids = BTreeSet::new();
    for l in dump.lines() {
        if let Some(c) = nid.captures(l) {
            nids.insert(i64::from_str_radix(&c[2], 16).unwrap_or(-1));
        }
    }
    let mut expected = tasks(r);
    expected.remove(&i64::from(r));
    check(nids == expected, || format!("Thread.print nids {nids:?} are not the VM's threads {expected:?} (/proc/{r}/task without the first thread)"))?;
    for name in ["Signal Dispatcher", "Attach Listener", "Worker#0", "Idle#0", "More#49"] {
        check(dump.contains(&format!("\"{name}\" ")), || format!("{name} missing from Thread.print"))?;
    }
    let js = tool("jstack", &[&r.to_string()])?;
    js.should_have_exit_value(0)?.stdout_should_contain("Full thread dump rtvm 64-Bit VM (")?.stdout_should_contain("\"More#49\" ")?;
    println!("Thread.print and jstack: {} threads, nids = /proc/{r}/task", nids.len());

    // System.trim_native_heap: java's line.
    let trim = regex::Regex::new(r"^Trim native heap: RSS\+Swap: \d+[BKMG]->\d+[BKMG] \([+-]\d+[BKMG]\)\n$").expect("pattern");
    for p in [r, j] {
        let t = reply(&jcmd(p, &["System.trim_native_heap"])?);
        check(trim.is_match(&t), || format!("System.trim_native_heap of {p}: {t:?}"))?;
    }

    // jps and jcmd -l.
    let jps = tool("jps", &["-l"])?;
    check(jps.stdout.lines().any(|l| l == format!("{r} TestJcmd")), || format!("jps -l does not list {r}:\n{}", jps.stdout))?;
    let jps_v = tool("jps", &["-lv"])?;
    check(jps_v.stdout.lines().any(|l| l.starts_with(&format!("{r} TestJcmd -XX:NativeMemoryTracking=summary -Xmx64m -Xms64m"))), || format!("jps -lv:\n{}", jps_v.stdout))?;
    let l = tool("jcmd", &["-l"])?;
    check(l.stdout.lines().any(|x| x.starts_with(&format!("{r} TestJcmd target "))), || format!("jcmd -l:\n{}", l.stdout))?;
    println!("jps -l, jps -lv and jcmd -l list {r}");

    let end = ours.stop()?;
    end.should_have_exit_value(0)?;
    drop(java);
    check(!std::path::Path::new(&format!("/tmp/.java_pid{r}")).exists(), || "the attach socket outlived the VM".into())?;
    check(!std::path::Path::new(&format!("/tmp/hsperfdata_root/{r}")).exists() && !rtvm_os_linux::perfmem::user_directory().join(r.to_string()).exists(), || "the perf data file outlived the VM".into())?;
    Ok(())
}
