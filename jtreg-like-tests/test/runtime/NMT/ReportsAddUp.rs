/*
 * @test
 * @summary Every byte NMT counts appears in every report that breaks it down, as in java: with
 *          stacks of ended threads in the stack cache, the Thread category of summary,
 *          summary.diff (scale=1) and the byte-scaled PrintNMTStatistics-style report is the
 *          sum of its sub-lines (stack, stack cache), changes included; detail's virtual
 *          memory map lists every reserved byte the "mmap:" total counts and every committed
 *          one; detail's and detail.diff's sites add up to the same totals. The same checks
 *          pass on java 17's own summary.diff (after 50 more threads) and detail, by jcmd
 * @requires os.family == "linux"
 * @run main/othervm -XX:NativeMemoryTracking=detail -Xms32m -Xmx64m ReportsAddUp
 */

use rtvm_jtreg::service::{jcmd, missing_jdk_tool, reply, Target};
use rtvm_jtreg::testlib::*;

/// `reserved=N` (or `committed=N`) in `text`, bytes (no unit suffix).
fn figure(text: &str, key: &str) -> Option<i128> {
    let at = text.find(&format!("{key}="))? + key.len() + 1;
    let digits: String = text[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `reserved=N +D` / `committed=N -D`: the change after the figure (0 if none).
fn change(text: &str, key: &str) -> i128 {
    let Some(at) = text.find(&format!("{key}=")) else { return 0 };
    let rest = &text[at + key.len() + 1..];
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let Some(signed) = rest.strip_prefix(' ') else { return 0 };
    let sign = match signed.chars().next() {
        Some('+') => 1,
        Some('-') => -1,
        _ => return 0,
    };
    signed[1..].chars().take_while(char::is_ascii_digit).collect::<String>().parse::<i128>().map_or(0, |v| sign * v)
}

/// Each category of a summary (bytes) and whether its sub-lines add up to it: `(name,
/// (reserved, committed), (sum of sub-lines' reserved, committed), (changes), (sum of
/// sub-line changes))`. A sub-line counts with `reserved=`/`committed=` (stack, stack
/// cache, mmap) or with `malloc=`/`arena=` (both reserved and committed), as java's do.
type Block = (String, (i128, i128), (i128, i128), (i128, i128), (i128, i128));

fn categories(report: &str) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    for line in report.lines() {
        if line.starts_with("Details:") || line.starts_with("Virtual memory map:") {
            break;
        }
        if let Some(rest) = line.strip_prefix('-') {
            let name = rest.split('(').next().unwrap_or("").trim().to_owned();
            let (r, c) = (figure(rest, "reserved").unwrap_or(-1), figure(rest, "committed").unwrap_or(-1));
            out.push((name, (r, c), (0, 0), (change(rest, "reserved"), change(rest, "committed")), (0, 0)));
            continue;
        }
        let Some(block) = out.last_mut() else { continue };
        let sub = line.trim();
        if !sub.starts_with('(') || sub.starts_with("(thread #") || sub.starts_with("(  ") || sub.starts_with("(tracking overhead") {
            continue;
        }
        if sub.starts_with("(malloc=") || sub.starts_with("(arena=") {
            let key = if sub.starts_with("(malloc=") { "malloc" } else { "arena" };
            let v = figure(sub, key).unwrap_or(0);
            let d = change(sub, key);
            block.2 .0 += v;
            block.2 .1 += v;
            block.4 .0 += d;
            block.4 .1 += d;
        } else if let (Some(r), Some(c)) = (figure(sub, "reserved"), figure(sub, "committed")) {
            block.2 .0 += r;
            block.2 .1 += c;
            block.4 .0 += change(sub, "reserved");
            block.4 .1 += change(sub, "committed");
        }
    }
    out
}

/// The categories with sub-lines add up to their figures, changes included.
fn blocks_add_up(who: &str, report: &str, names: &[&str]) -> Result<(), TestFailure> {
    let blocks = categories(report);
    for name in names {
        let b = blocks.iter().find(|b| b.0 == *name).ok_or_else(|| TestFailure(format!("{who}: no {name} category:\n{report}")))?;
        check(b.1 == b.2, || format!("{who}: {name} (reserved, committed) {:?}, its sub-lines add up to {:?}:\n{report}", b.1, b.2))?;
        check(b.3 == b.4, || format!("{who}: {name}'s changes {:?}, its sub-lines' changes add up to {:?}:\n{report}", b.3, b.4))?;
    }
    Ok(())
}

/// The virtual memory map of a detail report: the reserved bytes of its regions, and the
/// committed bytes of their committed sub-regions (a region "reserved and committed"
/// counts whole). Figures in bytes, or in KB when `kb`.
fn map_sums(report: &str, kb: bool) -> (i128, i128) {
    let map = report.split("Virtual memory map:").nth(1).unwrap_or("");
    let map = map.split("\nDetails:").next().unwrap_or(map);
    let unit = if kb { 1024 } else { 1 };
    let number = |s: &str| -> i128 { s.chars().take_while(char::is_ascii_digit).collect::<String>().parse::<i128>().unwrap_or(0) * unit };
    let (mut reserved, mut committed) = (0, 0);
    let mut whole = false;
    for line in map.lines() {
        if line.starts_with('[') {
            if let Some(rest) = line.split("] reserved and committed ").nth(1) {
                reserved += number(rest);
                committed += number(rest);
                whole = true;
            } else if let Some(rest) = line.split("] reserved ").nth(1) {
                reserved += number(rest);
                whole = false;
            }
        } else if let Some(rest) = line.strip_prefix('\t').and_then(|l| l.split("] committed ").nth(1)) {
            if !whole {
                committed += number(rest);
            }
        }
    }
    (reserved, committed)
}

/// The `mmap:` line under the total.
fn mmap_total(report: &str, kb: bool) -> Option<(i128, i128)> {
    let line = report.lines().find(|l| l.trim_start().starts_with("mmap:"))?;
    let unit = if kb { 1024 } else { 1 };
    Some((figure(line, "reserved")? * unit, figure(line, "committed")? * unit))
}

/// The sites under `Details:`: the sum of their `(mmap: reserved=..., committed=...)` or
/// `(reserved=..., committed=...)` figures and of their changes.
fn site_sums(report: &str) -> ((i128, i128), (i128, i128)) {
    let details = report.split("\nDetails:").nth(1).unwrap_or("");
    let (mut sum, mut changes) = ((0, 0), (0, 0));
    for line in details.lines().map(str::trim).filter(|l| l.contains("Type=")) {
        sum.0 += figure(line, "reserved").unwrap_or(0);
        sum.1 += figure(line, "committed").unwrap_or(0);
        changes.0 += change(line, "reserved");
        changes.1 += change(line, "committed");
    }
    (sum, changes)
}

fn command(vm: &Vm, line: &str) -> Result<String, TestFailure> {
    vm.diagnostic_command(line).map_err(|e| TestFailure(format!("{line}: {e}")))
}

/// Starts `n` threads that end at once and joins them: their stacks go to the cache.
fn churn(vm: &Vm, n: usize) -> Result<(), TestFailure> {
    let threads: Vec<_> = (0..n).map(|i| vm.spawn(&format!("Churn#{i}"), || {})).collect::<Result<_, _>>().map_err(|e| TestFailure(e.to_string()))?;
    for t in threads {
        t.join().map_err(|e| TestFailure(e.to_string()))?;
    }
    Ok(())
}

pub fn main(vm: &Vm, _args: &[String]) -> TestResult {
    churn(vm, 12)?;
    let n = vm.native_memory_summary().ok_or_else(|| TestFailure("NMT is off".into()))?;
    check(n.stack_cache.0 > 0, || format!("no stack in the cache after 12 ended threads: {:?}", n.stack_cache))?;

    // summary, in bytes: Thread = stack + stack cache.
    let summary = command(vm, "VM.native_memory summary scale=1")?;
    blocks_add_up("summary", &summary, &["Java Heap", "Thread"])?;
    check(summary.contains("(stack cache: #"), || format!("summary has no stack cache line:\n{summary}"))?;

    // summary.diff: threads taking stacks from the cache, more stacks cached than the
    // baseline had; every change shows in a sub-line.
    command(vm, "VM.native_memory baseline")?;
    let gate = rtvm_launcher::IdleGate::new();
    let release = gate.release_on_drop();
    let held: Vec<_> = (0..4).map(|i| vm.spawn(&format!("Held#{i}"), gate.parked_body())).collect::<Result<_, _>>().map_err(|e| TestFailure(e.to_string()))?;
    gate.wait_started(4);
    let diff = command(vm, "VM.native_memory summary.diff scale=1")?;
    blocks_add_up("summary.diff", &diff, &["Java Heap", "Thread"])?;
    check(diff.contains("(stack cache: #"), || format!("summary.diff has no stack cache line:\n{diff}"))?;
    let thread = categories(&diff).into_iter().find(|b| b.0 == "Thread").map(|b| b.3).unwrap_or_default();
    println!("summary.diff with 4 threads on cached stacks: Thread changes {thread:?}, its sub-lines add up");

    // detail: the map lists what the mmap total counts; the sites add up to it.
    let detail = command(vm, "VM.native_memory detail scale=1")?;
    let (listed, mmap) = (map_sums(&detail, false), mmap_total(&detail, false).ok_or_else(|| TestFailure(format!("no mmap line:\n{detail}")))?);
    check(listed == mmap, || format!("detail's virtual memory map lists (reserved, committed) {listed:?} of the mmap total {mmap:?}:\n{detail}"))?;
    let (sites, _) = site_sums(&detail);
    check(sites == mmap, || format!("detail's sites add up to {sites:?}, the mmap total is {mmap:?}:\n{detail}"))?;
    check(detail.contains("for Thread Stack (cached)"), || format!("detail lists no cached stack:\n{detail}"))?;
    println!("detail: the map lists {listed:?} bytes (reserved, committed) = the mmap total");

    // detail.diff: the sites' figures and changes add up to the mmap total's.
    let dd = command(vm, "VM.native_memory detail.diff scale=1")?;
    let (sites, changes) = site_sums(&dd);
    let total = categories(&dd).iter().filter(|b| b.0 != "Other").fold(((0, 0), (0, 0)), |a, b| ((a.0 .0 + b.1 .0, a.0 .1 + b.1 .1), (a.1 .0 + b.3 .0, a.1 .1 + b.3 .1)));
    check(sites == total.0 && changes == total.1, || format!("detail.diff's sites {sites:?} (changes {changes:?}) do not add up to the mapped categories {total:?}:\n{dd}"))?;
    gate.release();
    drop(release);
    for t in held {
        t.join().map_err(|e| TestFailure(e.to_string()))?;
    }

    // The report printed at exit (PrintNMTStatistics' layout, bytes).
    let report = vm.native_memory_summary().ok_or_else(|| TestFailure("NMT is off".into()))?.report();
    blocks_add_up("the exit report", &report, &["Java Heap", "Thread"])?;
    let (listed, mmap) = (map_sums(&report, false), mmap_total(&report, false).unwrap_or_default());
    check(listed == mmap, || format!("the exit report's map lists {listed:?} of {mmap:?}:\n{report}"))?;

    // java's own reports, through jcmd from a running java 17 (its exit report races with
    // threads that are ending), pass the same checks.
    if let Some(t) = missing_jdk_tool() {
        return require_tool(t, false);
    }
    let mut java = Target::java(&["-XX:NativeMemoryTracking=detail", "-Xmx64m"], 2)?;
    let pid = java.pid();
    let ask = |line: &[&str]| -> Result<String, TestFailure> {
        let out = jcmd(pid, line)?;
        out.should_have_exit_value(0)?;
        Ok(reply(&out))
    };
    ask(&["VM.native_memory", "baseline"])?;
    java.more_threads()?;
    let diff = ask(&["VM.native_memory", "summary.diff", "scale=1"])?;
    blocks_add_up("java's summary.diff", &diff, &["Java Heap", "Thread", "Code", "GC"])?;
    let detail = ask(&["VM.native_memory", "detail", "scale=1"])?;
    blocks_add_up("java's detail", &detail, &["Java Heap", "Thread", "Code", "GC"])?;
    let (listed, mmap) = (map_sums(&detail, false), mmap_total(&detail, false).ok_or_else(|| TestFailure(format!("java: no mmap line:\n{detail}")))?);
    check(listed.0 == mmap.0, || format!("java's map lists {} of {} reserved bytes", listed.0, mmap.0))?;
    println!("java 17: summary.diff after 50 threads and detail add up (Java Heap, Thread, Code, GC); its map lists all {} reserved bytes", mmap.0);
    Ok(())
}
