//! What the collector tests share: HotSpot's `-Xlog:gc`, `-Xlog:safepoint` and
//! `GC.heap_info` line shapes as parsers (the same parser reads rtvm's lines and java 17's),
//! and the Benchmarks Game's binary-trees in Java, so rtvm's `BinaryTrees` main is compared
//! with a real run of java rather than with copied strings.

use regex::Regex;

use crate::testlib::{JavaTools, OutputAnalyzer, ProcessTools, TestFailure};

/// The Benchmarks Game's binary-trees (single-threaded): the same output lines as rtvm's
/// `BinaryTrees` main, and `java.lang.OutOfMemoryError: Java heap space` in `main` when the
/// stretch tree does not fit.
pub const JAVA_BINARY_TREES: &str = r#"public class BinaryTrees {
    static final class Node {
        Node left, right;
        Node(Node l, Node r) { left = l; right = r; }
        int check() { return left == null ? 1 : 1 + left.check() + right.check(); }
    }
    static Node create(int d) {
        return d == 0 ? new Node(null, null) : new Node(create(d - 1), create(d - 1));
    }
    public static void main(String[] a) {
        int n = Integer.parseInt(a[0]);
        int min = 4, max = Math.max(6, n), stretch = max + 1;
        System.out.println("stretch tree of depth " + stretch + "\t check: " + create(stretch).check());
        Node longLived = create(max);
        for (int d = min; d <= max; d += 2) {
            int it = 1 << (max - d + min);
            long check = 0;
            for (int i = 0; i < it; i++) check += create(d).check();
            System.out.println(it + "\t trees of depth " + d + "\t check: " + check);
        }
        System.out.println("long lived tree of depth " + max + "\t check: " + longLived.check());
    }
}
"#;

/// Runs `java <options> BinaryTrees <args>` (compiled into the test's scratch directory);
/// `None`, with the reason printed, when java is not installed.
pub fn java_binary_trees(
    options: &[&str],
    args: &[&str],
) -> Result<Option<OutputAnalyzer>, TestFailure> {
    let Some(classes) = JavaTools::compile("BinaryTrees", JAVA_BINARY_TREES)? else {
        return Ok(None);
    };
    let mut all: Vec<&str> = options.to_vec();
    all.extend(["-cp", &classes, "BinaryTrees"]);
    all.extend_from_slice(args);
    let mut java = std::process::Command::new("java");
    java.args(&all).env_remove("JAVA_TOOL_OPTIONS");
    ProcessTools::execute_within(java, std::time::Duration::from_secs(60)).map(Some)
}

/// The lines of `text` that are not `-Xlog` lines (a program's own output).
pub fn program_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !xlog_line().is_match(l)).collect()
}

fn xlog_line() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^\[\d+\.\d+s\]\[[a-z]+ *\]\[[a-z,]+ *\] ").expect("pattern"))
}

/// One `-Xlog:gc` collection line, HotSpot's shape:
/// `[1.234s][info][gc] GC(3) Pause Full (Allocation Failure) 45M->12M(64M) 3.456ms`.
#[derive(Clone, Debug, PartialEq)]
pub struct GcPause {
    /// The uptime decoration, in seconds.
    pub uptime: f64,
    /// `n` of `GC(n)`.
    pub id: u64,
    /// `Young`, `Full`, ...
    pub kind: String,
    /// The parenthesized parts after the kind; the last is the cause (`Allocation
    /// Failure`, `Diagnostic Command`, `System.gc()`); G1 puts its phase first.
    pub causes: Vec<String>,
    /// Heap in use before, MB.
    pub before: u64,
    /// Heap in use after, MB.
    pub after: u64,
    /// The heap's capacity, MB.
    pub capacity: u64,
    /// The pause, ms.
    pub ms: f64,
}

impl GcPause {
    /// The cause: the last parenthesized part.
    pub fn cause(&self) -> &str {
        self.causes.last().map_or("", String::as_str)
    }
}

fn gc_line() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"^\[(\d+\.\d{3})s\]\[info *\]\[gc *\] GC\((\d+)\) Pause ([A-Z][a-z]+)((?: \((?:[^()]|\(\))+\))+) (\d+)M->(\d+)M\((\d+)M\) (\d+\.\d{3})ms$",
        )
        .expect("pattern")
    })
}

/// Parses one `-Xlog:gc` pause line; `None` if it is not one in HotSpot's shape.
pub fn parse_gc_line(line: &str) -> Option<GcPause> {
    let c = gc_line().captures(line)?;
    let causes = Regex::new(r"\(((?:[^()]|\(\))+)\)")
        .expect("pattern")
        .captures_iter(&c[4])
        .map(|p| p[1].to_owned())
        .collect();
    Some(GcPause {
        uptime: c[1].parse().ok()?,
        id: c[2].parse().ok()?,
        kind: c[3].to_owned(),
        causes,
        before: c[5].parse().ok()?,
        after: c[6].parse().ok()?,
        capacity: c[7].parse().ok()?,
        ms: c[8].parse().ok()?,
    })
}

/// Every `GC(n) Pause` line of `text`, parsed: a `[gc]` line naming `GC(n) Pause` that is not
/// in HotSpot's shape fails; the numbers must run from 0 without a gap (or from the first
/// one seen, when `from_zero` is false), each figure within the capacity.
pub fn gc_pauses(text: &str, from_zero: bool) -> Result<Vec<GcPause>, TestFailure> {
    let tagged = Regex::new(r"\]\[gc *\] GC\(\d+\) Pause").expect("pattern");
    let mut pauses = Vec::new();
    for l in text.lines().filter(|l| tagged.is_match(l)) {
        let p = parse_gc_line(l)
            .ok_or_else(|| TestFailure(format!("not in HotSpot's -Xlog:gc shape: {l:?}")))?;
        let want = match pauses.last() {
            Some(GcPause { id, .. }) => id + 1,
            None if from_zero => 0,
            None => p.id,
        };
        if p.id != want {
            return Err(TestFailure(format!(
                "GC({}) where GC({want}) was due: {l:?}",
                p.id
            )));
        }
        if p.before > p.capacity || p.after > p.capacity || p.capacity == 0 {
            return Err(TestFailure(format!("figures beyond the capacity: {l:?}")));
        }
        pauses.push(p);
    }
    Ok(pauses)
}

/// The collector `-Xlog:gc` names at start-up (`Using G1`, `Using MMTk Immix`), if any.
pub fn using_line(text: &str) -> Option<String> {
    let re = Regex::new(r"^\[\d+\.\d{3}s\]\[info *\]\[gc *\] Using (\S.*)$").expect("pattern");
    text.lines()
        .find_map(|l| re.captures(l).map(|c| c[1].to_owned()))
}

/// One `-Xlog:safepoint` line: `Safepoint "<op>", Time since last: N ns, Reaching
/// safepoint: N ns, Cleanup: N ns, At safepoint: N ns, Total: N ns` — the op and the time to
/// reach the stop (ns).
pub fn parse_safepoint_line(line: &str) -> Option<(String, u64)> {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r#"^\[\d+\.\d{3}s\]\[info *\]\[safepoint *\] Safepoint "([A-Za-z]+)", Time since last: \d+ ns, Reaching safepoint: (\d+) ns, Cleanup: \d+ ns, At safepoint: \d+ ns, Total: \d+ ns$"#,
        )
        .expect("pattern")
    });
    let c = re.captures(line)?;
    Some((c[1].to_owned(), c[2].parse().ok()?))
}

/// Every `[safepoint]` line of `text` naming a `Safepoint "..."`, parsed (one that does not
/// parse fails).
pub fn safepoints(text: &str) -> Result<Vec<(String, u64)>, TestFailure> {
    let tagged = Regex::new(r#"\]\[safepoint *\] Safepoint ""#).expect("pattern");
    text.lines()
        .filter(|l| tagged.is_match(l))
        .map(|l| {
            parse_safepoint_line(l).ok_or_else(|| {
                TestFailure(format!("not in HotSpot's -Xlog:safepoint shape: {l:?}"))
            })
        })
        .collect()
}

/// `GC.heap_info`'s (and `-Xlog:gc+heap+exit`'s) first line, HotSpot's shape:
/// ` garbage-first heap   total 65536K, used 1194K [0x00000000fc000000, 0x0000000100000000)`:
/// the heap's name, total and used KB, and the address range.
pub fn parse_heap_line(line: &str) -> Option<(String, u64, u64, u64, u64)> {
    let re = Regex::new(
        r"^ (\S.*\S) heap   total (\d+)K, used (\d+)K \[0x([0-9a-f]{16}), 0x([0-9a-f]{16})\)$",
    )
    .expect("pattern");
    let c = re.captures(line)?;
    Some((
        c[1].to_owned(),
        c[2].parse().ok()?,
        c[3].parse().ok()?,
        u64::from_str_radix(&c[4], 16).ok()?,
        u64::from_str_radix(&c[5], 16).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotspot_lines_parse() {
        let g1 = "[0.310s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 23M->2M(64M) 1.234ms";
        let p = parse_gc_line(g1).unwrap();
        assert_eq!(
            (
                p.id,
                p.kind.as_str(),
                p.cause(),
                p.before,
                p.after,
                p.capacity
            ),
            (0, "Young", "G1 Evacuation Pause", 23, 2, 64)
        );
        let full =
            "[1.000s][info   ][gc       ] GC(12) Pause Full (System.gc()) 3M->1M(61M) 10.500ms";
        assert_eq!(parse_gc_line(full).unwrap().cause(), "System.gc()");
        assert!(
            parse_gc_line("[1.000s][info][gc] GC(1) Pause Full 3M->1M(61M) 10.500ms").is_none()
        );
        assert!(
            parse_gc_line("[1.000s][info][gc] GC(1) Pause Full (x) 3M->1M(61M) 10ms").is_none()
        );
        let text = format!("{g1}\n[0.4s]x\n{}", g1.replace("GC(0)", "GC(2)"));
        assert!(gc_pauses(&text, true).is_err());
        let sp = r#"[0.368s][info][safepoint] Safepoint "GenCollectForAllocation", Time since last: 286930201 ns, Reaching safepoint: 5521 ns, Cleanup: 46106 ns, At safepoint: 17642731 ns, Total: 17694358 ns"#;
        assert_eq!(
            parse_safepoint_line(sp),
            Some(("GenCollectForAllocation".into(), 5521))
        );
        let heap = " garbage-first heap   total 65536K, used 1194K [0x00000000fc000000, 0x0000000100000000)";
        assert_eq!(parse_heap_line(heap).unwrap().0, "garbage-first");
    }
}
