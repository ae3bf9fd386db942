/*
 * @test id=einval
 * @summary MADV_POPULATE_WRITE unavailable (a seccomp filter makes it fail with EINVAL, as on
 *          kernels before 5.14): the probe sees it, the fallback touches every page, the heap
 *          is fully resident
 * @requires os.family == "linux"
 * @run driver TestPretouchFaults einval
 */

/*
 * @test id=eperm
 * @summary A seccomp profile that answers EPERM for advice it does not know: the VM starts,
 *          says why it touches pages instead, and the heap is fully resident (before the fix
 *          every -XX:+AlwaysPreTouch creation failed)
 * @requires os.family == "linux"
 * @run driver TestPretouchFaults eperm
 */

/*
 * @test id=flag
 * @summary -XX:-UseMadvPopulateWrite forces the fallback; the heap is fully resident
 * @requires os.family == "linux"
 * @run driver TestPretouchFaults flag
 */

/*
 * @test id=enomem
 * @summary MADV_POPULATE_WRITE failing with ENOMEM fails VM creation with an error naming the
 *          range that was not made resident (HotSpot silently skips the rest of the chunk)
 * @requires os.family == "linux"
 * @run driver TestPretouchFaults enomem
 */

use rtvm_jtreg::testlib::*;

fn child(args: &[&str], deny: Option<&str>) -> Result<OutputAnalyzer, TestFailure> {
    let mut c = ProcessTools::create_limited_test_vm(args);
    if let Some(d) = deny {
        c.env(rtvm_jtreg::DENY_MADVISE_ENV, d);
    }
    ProcessTools::execute(c)
}

fn report(vm: &Vm) -> TestResult {
    let s = vm.heap_stats();
    println!("Resident: committed={} resident={}", s.committed, vm.heap().resident_bytes());
    Ok(())
}

const HEAP: [&str; 5] = ["-Xms256m", "-Xmx256m", "-XX:+AlwaysPreTouch", "-Xlog:gc+heap,os", "-XX:ParallelGCThreads=2"];

fn expect_fallback(out: &OutputAnalyzer) -> TestResult {
    // The base page size as the kernel reports it for this process.
    let page = rtvm_flags::value::format_page_size(rtvm_testkit::kernel::base_page_size() as u64);
    out.should_have_exit_value(0)?.should_match(&format!("Pretouched 268435456B in .* atomic-add, page size {page}"))?;
    let (c, r) = (out.number("Resident:", "committed")?, out.number("Resident:", "resident")?);
    check(c == 256 << 20 && r == c, || format!("{r} of {c} bytes resident"))?;
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("report") => report(vm),
        Some("einval") => {
            let mut a = HEAP.to_vec();
            a.extend(["TestPretouchFaults", "report"]);
            let out = child(&a, Some("23:22"))?;
            out.should_contain("MADV_POPULATE_WRITE: not usable (madvise returned Invalid argument)")?;
            expect_fallback(&out)
        }
        Some("eperm") => {
            let mut a = HEAP.to_vec();
            a.extend(["TestPretouchFaults", "report"]);
            let out = child(&a, Some("23:1"))?;
            out.should_contain("MADV_POPULATE_WRITE: not usable (madvise returned Operation not permitted); pretouch will touch every page")?;
            expect_fallback(&out)
        }
        Some("flag") => {
            let mut a = HEAP.to_vec();
            a.extend(["-XX:+UnlockDiagnosticVMOptions", "-XX:-UseMadvPopulateWrite", "TestPretouchFaults", "report"]);
            expect_fallback(&child(&a, None)?)
        }
        Some("enomem") => {
            let mut a = HEAP.to_vec();
            a.push("-version");
            child(&a, Some("23:12"))?
                .should_have_exit_value(1)?
                .stdout_should_contain("Error occurred during initialization of VM")?
                .should_match("os::pretouch_memory\\(0x[0-9a-f]+, 4194304\\) failed: \\[0x[0-9a-f]+, 0x[0-9a-f]+\\) was not made resident; error='Not enough space' \\(errno=12\\)")?;
            Ok(())
        }
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
