/*
 * @test
 * @bug 8230305 8231111 8253727
 * @summary Simulated cgroup hierarchies, side by side with java: each case is a fixture tree
 *          that the test VM and java both see as /proc/cgroups, /proc/self/cgroup,
 *          /proc/self/mountinfo and /sys/fs/cgroup (bind mounts in a private mount namespace
 *          of the child alone: nothing of the machine changes). For every case — cgroup v2 at
 *          the root of its namespace (Docker's and containerd's layout), nested, with quotas,
 *          and memory.max or cpu.max garbage, empty, missing, negative, too large, above the
 *          host, zero, padded, on a second line, not UTF-8, a directory (java's "Empty
 *          file"); cgroup v1 the same, with memory.stat
 *          and memory.use_hierarchy variants; a mountinfo with a non-UTF-8 mount point;
 *          -XX:ActiveProcessorCount — the os+container lines up to gc+init, the heap sizes of
 *          -XX:+PrintFlagsFinal and gc+init's CPUs line are java's. The one deliberate
 *          difference (a parent's memory.max on v2, which java 17.0.15 does not read) is
 *          checked against rtvm's own expected figures
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestCgroupHierarchies
 */

use rtvm_jtreg::cgroup::{Detection, FakeCgroups};
use rtvm_jtreg::testlib::*;

const MB: u64 = 1 << 20;

const CGROUPS_V2: &str = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t0\t1\t1\ncpu\t0\t1\t1\ncpuacct\t0\t1\t1\nmemory\t0\t1\t1\npids\t0\t1\t1\n";
const MOUNT_V2: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
const CGROUPS_V1: &str = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t2\t1\t1\ncpuacct\t2\t1\t1\nmemory\t4\t1\t1\npids\t5\t1\t1\n";
const MOUNT_V1: &str = "30 23 0:26 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpuset\n\
31 23 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu,cpuacct\n\
32 23 0:28 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory\n\
33 23 0:29 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,pids\n";
const SELF_V1: &str = "5:pids:/box\n4:memory:/box\n3:cpuset:/box\n2:cpu,cpuacct:/box\n0::/\n";

/// One simulated hierarchy.
struct Case {
    name: &'static str,
    v2: bool,
    /// The process's cgroup path (v2; v1 cases are in /box).
    path: &'static str,
    /// Files under /sys/fs/cgroup (v1: under the controller's /box, named `memory/…`, `cpu/…`).
    files: Vec<(String, Vec<u8>)>,
    /// An extra mountinfo line (bytes: may be other than UTF-8).
    extra_mount: Option<Vec<u8>>,
    options: &'static [&'static str],
}

fn v2(name: &'static str, path: &'static str, files: &[(&str, &[u8])]) -> Case {
    Case {
        name,
        v2: true,
        path,
        files: files.iter().map(|(p, b)| (p.to_string(), b.to_vec())).collect(),
        extra_mount: None,
        options: &[],
    }
}

/// A v1 case: the v1 defaults (use_hierarchy 1, no quota) with these files replaced or, with
/// `None`, removed.
fn v1(name: &'static str, files: &[(&str, Option<&[u8]>)]) -> Case {
    let mut all: Vec<(String, Vec<u8>)> = vec![
        ("memory/box/memory.use_hierarchy".into(), b"1\n".to_vec()),
        ("memory/box/memory.limit_in_bytes".into(), b"536870912\n".to_vec()),
        ("cpu,cpuacct/box/cpu.cfs_quota_us".into(), b"-1\n".to_vec()),
        ("cpu,cpuacct/box/cpu.cfs_period_us".into(), b"100000\n".to_vec()),
        ("cpu,cpuacct/box/cpu.shares".into(), b"1024\n".to_vec()),
        ("cpuset/box/cpuset.cpus".into(), b"0-1\n".to_vec()),
        ("pids/box/pids.max".into(), b"max\n".to_vec()),
    ];
    for (path, bytes) in files {
        let full = if path.starts_with("memory.") {
            format!("memory/box/{path}")
        } else {
            format!("cpu,cpuacct/box/{path}")
        };
        all.retain(|(p, _)| *p != full);
        if let Some(b) = bytes {
            all.push((full, b.to_vec()));
        }
    }
    Case { name, v2: false, path: "", files: all, extra_mount: None, options: &[] }
}

fn cases() -> Vec<Case> {
    let mut c = vec![
        // The root of a cgroup namespace: the limit in /sys/fs/cgroup/memory.max itself.
        v2("v2 namespace root, 512 MB", "/", &[("memory.max", b"536870912\n"), ("cpu.max", b"max 100000\n")]),
        v2("v2 namespace root, quota 1.5 CPUs", "/", &[("memory.max", b"1073741824\n"), ("cpu.max", b"150000 100000\n")]),
        v2("v2 nested, own limit", "/kubepods/pod1", &[("kubepods/pod1/memory.max", b"268435456\n"), ("kubepods/pod1/cpu.max", b"100000 100000\n")]),
        v2("v2 max", "/", &[("memory.max", b"max\n"), ("cpu.max", b"max 100000\n")]),
        v2("v2 garbage", "/", &[("memory.max", b"lots\n"), ("cpu.max", b"x y\n")]),
        v2("v2 empty", "/", &[("memory.max", b""), ("cpu.max", b"")]),
        v2("v2 missing files", "/", &[]),
        v2("v2 negative", "/", &[("memory.max", b"-5\n"), ("cpu.max", b"-1 100000\n")]),
        v2("v2 too large", "/", &[("memory.max", b"99999999999999999999\n"), ("cpu.max", b"99999999999999999999 100000\n")]),
        v2("v2 above the host", "/", &[("memory.max", b"1099511627776\n"), ("cpu.max", b"150000\n")]),
        v2("v2 zero", "/", &[("memory.max", b"0\n"), ("cpu.max", b"150000 0\n")]),
        v2("v2 padded", "/", &[("memory.max", b"  536870912  \n"), ("cpu.max", b"max\n")]),
        v2("v2 second line", "/", &[("memory.max", b"\n536870912\n"), ("cpu.max", b"\n100000 100000\n")]),
        v2("v2 not UTF-8", "/", &[("memory.max", b"\xff\xfe\n"), ("cpu.max", b"\xff 100000\n")]),
        // Single precision, as java computes the count: 16777217 / 1 is 16777216.
        v2("v2 quota rounded in floating point", "/", &[("memory.max", b"536870912\n"), ("cpu.max", b"16777217 1\n")]),
        v1("v1 512 MB", &[]),
        v1("v1 garbage", &[("memory.limit_in_bytes", Some(b"lots\n")), ("cpu.cfs_quota_us", Some(b"lots\n"))]),
        v1("v1 empty", &[("memory.limit_in_bytes", Some(b"")), ("cpu.cfs_period_us", Some(b""))]),
        v1("v1 missing", &[("memory.limit_in_bytes", None), ("cpu.cfs_period_us", None), ("memory.use_hierarchy", None)]),
        v1("v1 negative", &[("memory.limit_in_bytes", Some(b"-5\n"))]),
        v1("v1 too large", &[("memory.limit_in_bytes", Some(b"99999999999999999999\n"))]),
        v1("v1 above the host", &[("memory.limit_in_bytes", Some(b"1099511627776\n"))]),
        v1("v1 not UTF-8", &[("memory.limit_in_bytes", Some(b"\xff\xfe\n"))]),
        v1("v1 quota 1.5 CPUs", &[("cpu.cfs_quota_us", Some(b"150000\n"))]),
        v1("v1 hierarchical limit", &[("memory.limit_in_bytes", Some(b"9223372036854771712\n")), ("memory.stat", Some(b"cache 0\nhierarchical_memory_limit 268435456\n"))]),
        v1("v1 memory.stat without the line", &[("memory.limit_in_bytes", Some(b"9223372036854771712\n")), ("memory.stat", Some(b"cache 0\nrss 5\n"))]),
        v1("v1 no hierarchy", &[("memory.limit_in_bytes", Some(b"9223372036854771712\n")), ("memory.use_hierarchy", Some(b"0\n"))]),
    ];
    // One non-UTF-8 mount point anywhere in mountinfo must not hide the rest.
    let mut odd = v2("v2 with a non-UTF-8 mount point elsewhere", "/", &[("memory.max", b"536870912\n"), ("cpu.max", b"max 100000\n")]);
    odd.extra_mount = Some(b"40 23 0:40 / /mnt/caf\xe9 rw,relatime - tmpfs tmpfs rw\n".to_vec());
    c.push(odd);
    let mut odd = v1("v1 with a non-UTF-8 mount point elsewhere", &[]);
    odd.extra_mount = Some(b"40 23 0:40 / /mnt/caf\xe9 rw,relatime - tmpfs tmpfs rw\n".to_vec());
    c.push(odd);
    // A limit file that is a directory: glibc's fopen opens it, the first read finds nothing.
    let mut dir = v1("v1 limit file is a directory", &[("memory.limit_in_bytes", None)]);
    dir.files.push(("memory/box/memory.limit_in_bytes/x".into(), b"1\n".to_vec()));
    c.push(dir);
    let dir = v2("v2 limit files are directories", "/", &[("memory.max/x", b"1\n"), ("cpu.max/x", b"1\n")]);
    c.push(dir);
    let mut ap = v2("v2 with -XX:ActiveProcessorCount=1", "/", &[("memory.max", b"536870912\n"), ("cpu.max", b"150000 100000\n")]);
    ap.options = &["-XX:ActiveProcessorCount=1"];
    c.push(ap);
    let mut ap = v1("v1 with -XX:ActiveProcessorCount=1", &[("cpu.cfs_quota_us", Some(b"150000\n"))]);
    ap.options = &["-XX:ActiveProcessorCount=1"];
    c.push(ap);
    c
}

fn world(case: &Case) -> Result<FakeCgroups, TestFailure> {
    let (cgroups, cgroup, mut mountinfo) = if case.v2 {
        (CGROUPS_V2, format!("0::{}\n", case.path), MOUNT_V2.as_bytes().to_vec())
    } else {
        (CGROUPS_V1, SELF_V1.to_string(), MOUNT_V1.as_bytes().to_vec())
    };
    if let Some(extra) = &case.extra_mount {
        mountinfo.splice(0..0, extra.iter().copied());
    }
    let files: Vec<(&str, &[u8])> = case.files.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
    FakeCgroups::new(cgroups, &cgroup, &mountinfo, &files).map_err(|e| TestFailure(format!("{}: writing the fixture: {e}", case.name)))
}

/// What a run says about the container: the os+container lines before gc+init's first line
/// (java asks again later, in its own rhythm), the heap sizes, and gc+init's CPUs line.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    lines: Vec<String>,
    sizes: (u64, u64, u64),
    cpus: String,
}

fn seen(out: &OutputAnalyzer) -> Result<Seen, TestFailure> {
    let Detection { lines, cpus } = Detection::from_stdout(&out.stdout);
    let value = |name: &str| -> Result<u64, TestFailure> {
        let line = out.first_match(&format!(r"^ *size_t {name} += \d+"))?.ok_or_else(|| TestFailure(format!("{name} is not in -XX:+PrintFlagsFinal")))?;
        line.split('=').nth(1).and_then(|v| v.split_whitespace().next()?.parse().ok()).ok_or_else(|| TestFailure(format!("no value in '{line}'")))
    };
    Ok(Seen { lines, sizes: (value("MaxHeapSize")?, value("InitialHeapSize")?, value("MinHeapSize")?), cpus })
}

fn run(world: &FakeCgroups, program: &str, options: &[&str]) -> Result<Seen, TestFailure> {
    let mut args = vec!["-Xlog:os+container=trace,gc+init", "-XX:+PrintFlagsFinal"];
    args.extend_from_slice(options);
    args.push("-version");
    let out = ProcessTools::execute(world.command(program, &args))?;
    out.should_have_exit_value(0)?;
    seen(&out)
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    if let Err(reason) = FakeCgroups::available() {
        return skip(reason);
    }
    if !JavaTools::available() {
        return require_tool("java", false);
    }
    let vm = test_vm();
    let mut compared = 0;
    for case in cases() {
        let w = world(&case)?;
        let ours = run(&w, &vm, case.options)?;
        let java = run(&w, "java", case.options)?;
        check(!ours.lines.is_empty() && ours.lines[0] == "OSContainer::init: Initializing Container Support", || format!("{}: rtvm logged no detection: {ours:#?}", case.name))?;
        check(ours.lines == java.lines, || {
            let d = Detection { lines: ours.lines.clone(), cpus: String::new() }.diff(&Detection { lines: java.lines.clone(), cpus: String::new() });
            format!("{}: os+container lines differ from java's:\n{d}", case.name)
        })?;
        check(ours.sizes == java.sizes, || format!("{}: (MaxHeapSize, InitialHeapSize, MinHeapSize) rtvm {:?}, java {:?}", case.name, ours.sizes, java.sizes))?;
        check(ours.cpus == java.cpus, || format!("{}: gc+init: rtvm '{}', java '{}'", case.name, ours.cpus, java.cpus))?;
        println!("{}: {} lines, heap {:?}, {} — as java", case.name, ours.lines.len(), ours.sizes, ours.cpus);
        compared += 1;
    }

    // The deliberate difference: java 17.0.15 reads only its own memory.max; rtvm takes the
    // smallest up the tree, as later JDKs do. A pod with no limit of its own in a 256 MB parent.
    let mut tree = v2("v2 nested, the parent's limit", "/kubepods/pod1", &[("kubepods/memory.max", b"268435456\n"), ("kubepods/pod1/memory.max", b"max\n"), ("kubepods/pod1/cpu.max", b"max 100000\n")]);
    tree.options = &[];
    let w = world(&tree)?;
    let ours = run(&w, &vm, &[])?;
    let java = run(&w, "java", &[])?;
    // What java gives a 256 MB cgroup of its own ("v2 nested, own limit" above).
    check(ours.sizes == (126 * MB, 8 * MB, 8 * MB), || format!("{}: rtvm sizes for the parent's 256 MB: {:?}", tree.name, ours.sizes))?;
    check(java.sizes.0 > 1024 * MB, || format!("{}: java 17.0.15 was expected to ignore the parent's limit: {:?}", tree.name, java.sizes))?;
    check(ours.lines.iter().any(|l| l == "Raw value for memory limit is: 268435456"), || format!("{}: rtvm did not read the parent: {:#?}", tree.name, ours.lines))?;
    println!("{}: rtvm {:?} from the parent's 256 MB; java 17.0.15 {:?} (the README's deliberate difference)", tree.name, ours.sizes, java.sizes);
    println!("{compared} hierarchies compared with java");
    Ok(())
}
