/*
 * @test id=default
 * @bug 8310233
 * @summary HotSpot's TestHugePageDecisionsAtVMStartup with large pages off: the page sizes and
 *          THP mode the VM logs (-Xlog:pagesize, read with HugePageConfiguration's regular
 *          expressions) are what the kernel reports (sysfs and /proc/meminfo, read by the test
 *          itself), and large page support is disabled
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestHugePageDecisionsAtVMStartup -XX:-UseLargePages
 */

/*
 * @test id=THP_enabled
 * @summary The same with -XX:+UseTransparentHugePages: large pages enabled where THP is
 *          usable, the heap on the THP size; else HotSpot's warning and large pages disabled
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestHugePageDecisionsAtVMStartup -XX:+UseTransparentHugePages
 */

/*
 * @test id=LP_enabled
 * @summary The same with -XX:+UseLargePages: with static hugepages configured (nr_hugepages or
 *          overcommit of a size up to the default one) large pages are enabled; without,
 *          HotSpot's warning "UseLargePages disabled, no large pages configured and available
 *          on the system." and exit 0
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestHugePageDecisionsAtVMStartup -XX:+UseLargePages
 */

use std::collections::BTreeSet;

use rtvm_jtreg::testlib::*;

/// What the test reads from the kernel itself, as HugePageConfiguration.readFromOS does.
#[derive(Debug, PartialEq)]
struct Config {
    /// Static hugepage sizes, bytes.
    sizes: BTreeSet<u64>,
    /// The default static hugepage size (`Hugepagesize:` in /proc/meminfo).
    default_size: u64,
    /// THP mode (`always`, `madvise`, `never`), "unknown" without THP.
    thp_mode: String,
    /// THP page size, 0 without THP.
    thp_size: u64,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn from_os() -> (Config, bool) {
    let mut sizes = BTreeSet::new();
    let mut usable = false;
    let default_size = read("/proc/meminfo")
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix("Hugepagesize:")?.split_whitespace().next()?.parse::<u64>().ok()))
        .unwrap_or(0)
        * 1024;
    if let Ok(dir) = std::fs::read_dir("/sys/kernel/mm/hugepages") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(kb) = name.strip_prefix("hugepages-").and_then(|n| n.strip_suffix("kB")).and_then(|n| n.parse::<u64>().ok()) else { continue };
            sizes.insert(kb * 1024);
            let count = |f: &str| read(&format!("/sys/kernel/mm/hugepages/{name}/{f}")).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0);
            if kb * 1024 <= default_size && (count("nr_hugepages") > 0 || count("nr_overcommit_hugepages") > 0) {
                usable = true;
            }
        }
    }
    let thp_mode = read("/sys/kernel/mm/transparent_hugepage/enabled")
        .and_then(|t| Some(t.split('[').nth(1)?.split(']').next()?.to_owned()))
        .unwrap_or_else(|| "unknown".into());
    let thp_size = read("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").and_then(|t| t.trim().parse().ok()).unwrap_or(0);
    (Config { sizes, default_size, thp_mode, thp_size }, usable)
}

fn unit(n: &str, u: &str) -> u64 {
    let n: u64 = n.parse().unwrap_or(0);
    n * match u {
        "K" | "k" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => 1,
    }
}

/// What the VM logged, read with HugePageConfiguration's regular expressions.
fn from_log(out: &OutputAnalyzer) -> Result<Config, TestFailure> {
    let mut c = Config { sizes: BTreeSet::new(), default_size: 0, thp_mode: "unknown".into(), thp_size: 0 };
    for m in out.named_captures(r".*\[pagesize] *hugepage size: (?P<n>\d+)(?P<u>[KMG])")? {
        c.sizes.insert(unit(&m["n"], &m["u"]));
    }
    if let Some(m) = out.named_captures(r".*\[pagesize] *default hugepage size: (?P<n>\d+)(?P<u>[KMG]) *")?.first() {
        c.default_size = unit(&m["n"], &m["u"]);
    }
    if let Some(m) = out.named_captures(r".*\[pagesize] *THP mode: (?P<m>\S+)")?.first() {
        c.thp_mode = m["m"].clone();
    }
    if let Some(m) = out.named_captures(r".*\[pagesize] *THP pagesize: (?P<n>\d+)(?P<u>[KMG])")?.first() {
        c.thp_size = unit(&m["n"], &m["u"]);
    }
    Ok(c)
}

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    let flag = args.first().map(String::as_str).unwrap_or("-XX:-UseLargePages");
    let out = ProcessTools::execute_limited_test_vm(&[flag, "-Xmx128m", "-Xlog:pagesize", "-version"])?;
    // If something goes wrong the VM warns and goes on: never an exit value other than 0.
    out.should_have_exit_value(0)?;
    let (os, usable_static) = from_os();
    let logged = from_log(&out)?;
    println!("OS: {os:?}, static pages usable: {usable_static}\nlog: {logged:?}");
    check(logged == os, || format!("the VM logged {logged:?}, the kernel says {os:?}"))?;

    let use_thp = flag == "-XX:+UseTransparentHugePages";
    let use_lp = use_thp || flag == "-XX:+UseLargePages";
    let thp_supported = os.thp_mode == "always" || os.thp_mode == "madvise";
    // A line at a level: HotSpot pads the decorations once a wider one was printed.
    let logged = |level: &str, text: &str| -> Result<(), TestFailure> {
        out.should_match(&format!(r"\[{level} *\]\[pagesize *\] {}", regex::escape(text))).map(|_| ())
    };
    if !use_lp {
        logged("info", "Large page support disabled")?;
    } else if !use_thp && (os.sizes.is_empty() || !usable_static) {
        logged("info", "Large page support disabled")?;
        logged("warning", "UseLargePages disabled, no large pages configured and available on the system.")?;
    } else if use_thp && !thp_supported {
        logged("info", "Large page support disabled")?;
        logged("warning", "UseTransparentHugePages disabled, transparent huge pages are not supported by the operating system.")?;
    } else {
        logged("info", "Large page support enabled")?;
        let page = if use_thp { os.thp_size } else { os.default_size };
        let heap_page = rtvm_flags::value::format_page_size(page);
        out.should_match(&format!(r"\[pagesize *\] Heap: +min=.* page_size={heap_page} "))?;
    }
    // The same decision as java on this machine.
    if let Some(java) = JavaTools::execute(&[flag, "-Xmx128m", "-Xlog:pagesize", "-version"])? {
        java.should_have_exit_value(0)?;
        check(from_log(&java)? == os, || "java logs another configuration than the kernel reports".into())?;
        for line in ["Large page support disabled", "Large page support enabled", "UseLargePages disabled, no large pages configured", "UseTransparentHugePages disabled"] {
            check(out.stdout.contains(line) == java.stdout.contains(line), || format!("'{line}': rtvm {} java {}", out.stdout.contains(line), java.stdout.contains(line)))?;
        }
    }
    Ok(())
}
