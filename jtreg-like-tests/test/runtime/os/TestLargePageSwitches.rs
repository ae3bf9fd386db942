/*
 * @test
 * @bug 8256155 8310233
 * @summary The large-page switches side by side with java, in HotSpot 17's large_page_init
 *          order: for every combination of -XX:±UseLargePages, -XX:±UseTransparentHugePages and
 *          -XX:LargePageSizeInBytes, on this machine's THP mode and — where root allows, with
 *          the THP `enabled` file faked for the two processes alone (a bind mount in a private
 *          mount namespace; nothing of the machine changes) — on `never` and `always`: HotSpot's
 *          large-page lines of -Xlog:pagesize (page size notes, sanity checks, warnings, the
 *          decision) are java's, at java's levels; UseLargePages and UseTransparentHugePages
 *          end with java's values and origins in -XX:+PrintFlagsFinal; gc+init's Large Page
 *          Support line is java's; and every one of those lines comes before the
 *          -XX:+PrintCommandLineFlags line, as in java
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestLargePageSwitches
 */

use rtvm_jtreg::fakefs::{self, FakeFiles};
use rtvm_jtreg::testlib::*;

const OPTIONS: &[&[&str]] = &[
    &[],
    &["-XX:+UseTransparentHugePages"],
    &["-XX:-UseTransparentHugePages"],
    &["-XX:-UseLargePages"],
    &["-XX:-UseLargePages", "-XX:+UseTransparentHugePages"],
    &["-XX:+UseTransparentHugePages", "-XX:-UseLargePages"],
    &["-XX:+UseLargePages"],
    &["-XX:-UseTransparentHugePages", "-XX:+UseLargePages"],
    &["-XX:+UseLargePages", "-XX:+UseTransparentHugePages"],
    &["-XX:+UseLargePages", "-XX:LargePageSizeInBytes=1g"],
    &["-XX:+UseLargePages", "-XX:LargePageSizeInBytes=4m"],
    &["-XX:+UseTransparentHugePages", "-XX:LargePageSizeInBytes=1g"],
];

/// HotSpot's large-page messages (the lines both VMs print; rtvm's own facts are left out).
const MESSAGES: &[&str] = &[
    "Using the default large page size",
    "Overriding default large page size",
    "LargePageSizeInBytes is not a valid",
    "Large page size (",
    "UseLargePages disabled",
    "UseTransparentHugePages disabled",
    "UseLargePages=",
    "Large page support",
];

#[derive(Debug, PartialEq)]
struct Seen {
    /// (level, message) of HotSpot's large-page lines.
    lines: Vec<(String, String)>,
    /// The value-and-origin part of the two flags' PrintFlagsFinal lines.
    flags: Vec<String>,
    gc_init: String,
}

fn seen(out: &OutputAnalyzer, what: &str) -> Result<Seen, TestFailure> {
    let re = regex::Regex::new(r"^\[[^\]]*\]\[(\w+) *\]\[([a-z,+]+) *\] (.*)$").expect("a valid pattern");
    let mut lines = Vec::new();
    let mut gc_init = String::new();
    let mut last_decision = None;
    let mut command_line = None;
    for (i, l) in out.stdout.lines().enumerate() {
        if l.starts_with("-XX:") && command_line.is_none() {
            command_line = Some(i);
        }
        let Some(c) = re.captures(l) else { continue };
        match &c[2] {
            "pagesize" if MESSAGES.iter().any(|m| c[3].starts_with(m)) => {
                lines.push((c[1].to_owned(), c[3].to_owned()));
                last_decision = Some(i);
            }
            "gc,init" if c[3].starts_with("Large Page Support:") => gc_init = c[3].to_owned(),
            _ => {}
        }
    }
    let (Some(decided), Some(printed)) = (last_decision, command_line) else {
        return Err(TestFailure(format!("{what}: no large-page decision or no -XX:+PrintCommandLineFlags line:\n{}", out.stdout)));
    };
    check(decided < printed, || format!("{what}: the large-page lines come after -XX:+PrintCommandLineFlags:\n{}", out.stdout))?;
    let mut flags = Vec::new();
    for name in ["UseLargePages", "UseTransparentHugePages"] {
        let line = out
            .first_match(&format!(r"^ *bool {name} += .*$"))?
            .ok_or_else(|| TestFailure(format!("{what}: {name} is not in -XX:+PrintFlagsFinal")))?;
        let value = line.split('=').nth(1).and_then(|v| v.split_whitespace().next()).unwrap_or("");
        let origin = line.rsplit_once(" {").map_or("", |(_, o)| o);
        flags.push(format!("{name}={value} {{{origin}"));
    }
    Ok(Seen { lines, flags, gc_init })
}

fn compare(world: &str, fake: Option<&FakeFiles>, vm: &str) -> Result<usize, TestFailure> {
    let mut compared = 0;
    for options in OPTIONS {
        let mut args = vec!["-Xlog:pagesize,gc+init", "-XX:+PrintCommandLineFlags", "-XX:+PrintFlagsFinal"];
        args.extend_from_slice(options);
        args.push("-version");
        let run = |program: &str| -> Result<OutputAnalyzer, TestFailure> {
            let out = match fake {
                Some(f) => ProcessTools::execute(f.command(program, &args))?,
                None if program == "java" => JavaTools::execute(&args)?.ok_or_else(|| TestFailure("java vanished".into()))?,
                None => ProcessTools::execute_test_vm(&args)?,
            };
            out.should_have_exit_value(0)?;
            Ok(out)
        };
        let what = format!("{world} {options:?}");
        let ours = seen(&run(vm)?, &format!("rtvm {what}"))?;
        let java = seen(&run("java")?, &format!("java {what}"))?;
        check(ours == java, || format!("{what}:\nrtvm {ours:#?}\njava {java:#?}"))?;
        println!("{what}: {} large-page lines, {:?}, '{}' — as java", ours.lines.len(), ours.flags, ours.gc_init);
        compared += 1;
    }
    Ok(compared)
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    if !JavaTools::available() {
        return require_tool("java", false);
    }
    let vm = test_vm();
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let mut compared = compare(&format!("THP '{}'", mode.trim()), None, &vm)?;
    match fakefs::available() {
        Ok(()) => {
            for faked in ["always madvise [never]\n", "[always] madvise never\n"] {
                let files = FakeFiles::new(&[("/sys/kernel/mm/transparent_hugepage/enabled", faked)])?;
                compared += compare(&format!("faked THP '{}'", faked.trim()), Some(&files), &vm)?;
            }
        }
        Err(reason) => println!("THP modes other than this machine's not compared: {reason}"),
    }
    println!("{compared} command lines compared with java");
    Ok(())
}
