/*
 * @test
 * @summary HotSpot's NMT SummarySanityCheck on rtvm's summary in KB (as `jcmd VM.native_memory
 *          summary scale=KB` prints it): every line starting with "Total" and with "-" matches
 *          the real test's regular expressions whole; no category has more committed than
 *          reserved; the categories add up to the totals within ±8 KB. The byte-scaled
 *          -XX:+PrintNMTStatistics report passes the same checks, and so does java's
 * @requires os.family == "linux"
 * @run main/othervm -XX:NativeMemoryTracking=summary -Xms32m -Xmx128m SummarySanityCheck
 */

use rtvm::NmtScale;
use rtvm_jtreg::testlib::*;

/// HotSpot's checks on a summary report whose figures carry `unit` ("KB", or "" for bytes).
fn sanity_check(report: &str, unit: &str, slack: i128) -> Result<usize, TestFailure> {
    let total = regex::Regex::new(&format!(r"^Total:\sreserved=(?P<reserved>\d+){unit},\scommitted=(?P<committed>\d+){unit}$")).map_err(|e| TestFailure(e.to_string()))?;
    let category = regex::Regex::new(&format!(r"^-\s+(?P<typename>[\w\s]+)\(reserved=(?P<reserved>\d+){unit},\scommitted=(?P<committed>\d+){unit}\)$")).map_err(|e| TestFailure(e.to_string()))?;
    let num = |c: &regex::Captures<'_>, g: &str| c[g].parse::<i128>().map_err(|e| TestFailure(format!("{g}: {e}")));
    let (mut totals, mut sum_reserved, mut sum_committed, mut categories) = (None, 0i128, 0i128, 0);
    for line in report.lines() {
        if line.starts_with("Total") {
            let c = total.captures(line).ok_or_else(|| TestFailure(format!("Failed to match the expected groups in 'Total' memory part: {line}")))?;
            totals = Some((num(&c, "reserved")?, num(&c, "committed")?));
        } else if line.starts_with('-') {
            let c = category.captures(line).ok_or_else(|| TestFailure(format!("Failed to match the expected groups in '{line}'")))?;
            let (r, m) = (num(&c, "reserved")?, num(&c, "committed")?);
            check(m <= r, || format!("Committed ({m}) was more than Reserved ({r}) for mtType: {}", &c["typename"]))?;
            sum_reserved += r;
            sum_committed += m;
            categories += 1;
        }
    }
    let (reserved, committed) = totals.ok_or_else(|| TestFailure("no 'Total' line".into()))?;
    check((committed - sum_committed).abs() <= slack, || format!("Total committed ({committed}) did not match the summarized committed ({sum_committed})"))?;
    check((reserved - sum_reserved).abs() <= slack, || format!("Total reserved ({reserved}) did not match the summarized reserved ({sum_reserved})"))?;
    Ok(categories)
}

pub fn main(vm: &Vm, _args: &[String]) -> TestResult {
    // Some memory in every category: heap, a few threads, an attached one, mallocs.
    let _block = vm.allocate(8 << 20);
    let gate = rtvm_launcher::IdleGate::new();
    let _release = gate.release_on_drop();
    let threads = (0..4).map(|i| vm.spawn(&format!("sanity-{i}"), gate.parked_body())).collect::<Result<Vec<_>, _>>()?;
    gate.wait_started(4);
    let summary = vm.native_memory_summary().ok_or_else(|| TestFailure("NMT is off".into()))?;
    let kb = summary.report_in(NmtScale::Kilobytes);
    print!("{kb}");
    let n = sanity_check(&kb, "KB", 8)?;
    check(n >= 3, || format!("only {n} categories"))?;
    // In bytes (PrintNMTStatistics), rounding cannot hide anything: exact sums.
    sanity_check(&summary.report(), "", 0)?;
    gate.release();
    for t in threads {
        t.join()?;
    }
    // java's own exit report passes the byte-scaled checks too (its categories add up exactly).
    if let Some(out) = JavaTools::execute(&["-XX:NativeMemoryTracking=summary", "-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintNMTStatistics", "-version"])? {
        let java_categories = sanity_check(&out.stdout, "", 0)?;
        println!("java's report: {java_categories} categories, same checks passed");
    }
    Ok(())
}
