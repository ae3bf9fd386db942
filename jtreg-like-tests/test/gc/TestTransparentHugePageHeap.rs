/*
 * @test
 * @bug 8315923
 * @summary With -XX:+UseTransparentHugePages -XX:+AlwaysPreTouch a 1 GB heap is backed by
 *          transparent huge pages: AnonHugePages over the heap mapping is at least 90% of it
 * @key thp
 * @requires os.family == "linux" & os.maxMemory > 4G
 * @requires thp.mode != "never"
 * @run driver TestTransparentHugePageHeap
 */

use rtvm_jtreg::testlib::*;

fn report(vm: &Vm) -> TestResult {
    let r = vm.heap().range();
    let entries = rtvm_os_linux::procfs::smaps_overlapping(r.start, r.end)?;
    let t = rtvm_os_linux::procfs::totals(&entries);
    let advised = entries.iter().any(|e| e.has_flag("hg"));
    println!("HeapSmaps: size_kb={} rss_kb={} anon_huge_kb={} hg={advised} base={:#x}", t.size_kb, t.rss_kb, t.anon_huge_kb, r.start);
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("report") {
        return report(vm);
    }
    // The THP facts from sysfs, not from rtvm's detection.
    let mode = rtvm_testkit::kernel::thp_mode().ok_or_else(|| TestFailure("no THP in sysfs".into()))?;
    let pmd_bytes = rtvm_testkit::kernel::thp_pmd_size().ok_or_else(|| TestFailure("no hpage_pmd_size in sysfs".into()))?;
    let pmd = rtvm_flags::value::format_exact_size(pmd_bytes as u64);
    for primitive in ["-XX:+UseMadvPopulateWrite", "-XX:-UseMadvPopulateWrite"] {
        let out = ProcessTools::execute_limited_test_vm(&[
            "-XX:+UseTransparentHugePages",
            "-XX:+AlwaysPreTouch",
            "-Xms1g",
            "-Xmx1g",
            "-XX:+UnlockDiagnosticVMOptions",
            primitive,
            "-Xlog:pagesize",
            "TestTransparentHugePageHeap",
            "report",
        ])?;
        out.should_have_exit_value(0)?
            .stdout_should_contain("UseLargePages=1, UseTransparentHugePages=1")?
            .should_match(&format!("Heap: +min=1G max=1G base=0x[0-9a-f]+ page_size={pmd} size=1G"))?;
        let huge = out.number("HeapSmaps:", "anon_huge_kb")?;
        let size = out.number("HeapSmaps:", "size_kb")?;
        println!("{primitive}: AnonHugePages {huge} kB of {size} kB");
        check(size == 1 << 20, || format!("heap mapping is {size} kB"))?;
        check(huge * 10 >= size * 9, || format!("{primitive}: only {huge} kB of {size} kB in huge pages"))?;
        // In madvise mode the heap must be advised; in always mode it needs nothing.
        if mode == "madvise" {
            out.stdout_should_contain("hg=true")?;
        }
    }
    Ok(())
}
