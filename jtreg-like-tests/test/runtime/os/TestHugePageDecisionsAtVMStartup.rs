/*
 * @test id=default
 * @bug 8310233
 * @summary -Xlog:pagesize says what the VM found and decided: THP mode and page size, mTHP
 *          sizes, explicit hugepage sizes, the stack decision and the heap line, in
 *          HotSpot's wording
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestHugePageDecisionsAtVMStartup default
 */

/*
 * @test id=THP_enabled
 * @summary With -XX:+UseTransparentHugePages: large pages enabled, heap with the THP size
 * @requires os.family == "linux"
 * @requires vm.flagless
 * @run driver TestHugePageDecisionsAtVMStartup THP_enabled
 */

use rtvm::testing::os::{PageInfo, ThpMode};
use rtvm_jtreg::testlib::*;

fn size(b: usize) -> String {
    rtvm::testing::flags::value::format_exact_size(b as u64)
}

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    let info = PageInfo::detect();
    let thp_mode = info.thp.mode;
    let thp_args = args.first().map(String::as_str) == Some("THP_enabled");
    let mut opts = vec!["-Xlog:pagesize", "-Xms64m", "-Xmx64m"];
    if thp_args {
        opts.push("-XX:+UseTransparentHugePages");
    }
    opts.push("-version");
    let out = ProcessTools::execute_limited_test_vm(&opts)?;
    out.should_have_exit_value(0)?
        .stdout_should_contain("[pagesize] Transparent hugepage (THP) support:")?
        .stdout_should_contain(&format!("[pagesize]   THP mode: {thp_mode}"))?
        .stdout_should_contain("[pagesize] Static hugepage support:")?
        .stdout_should_contain("[pagesize] Shared memory transparent hugepage (THP) support:")?;
    if let Some(p) = info.thp.pmd_size {
        out.stdout_should_contain(&format!("[pagesize]   THP pagesize: {}", size(p)))?;
    }
    for s in &info.hugetlb.sizes {
        out.stdout_should_contain(&format!("[pagesize]   hugepage size: {}", size(*s)))?;
    }
    if !info.thp.mthp.is_empty() {
        out.stdout_should_contain("[pagesize]   mTHP sizes: ")?;
    }
    out.should_match("\\[pagesize\\] Kernel marks MAP_STACK mappings MADV_NOHUGEPAGE \\(nh\\): (yes|no)")?
        .stdout_should_contain("[pagesize] JVM will attempt to prevent THPs in thread stacks.")?
        .stdout_should_contain("[pagesize] THP stack mitigation: ")?;
    let thp_usable = matches!(thp_mode, ThpMode::Always | ThpMode::Madvise);
    if thp_args && thp_usable {
        out.stdout_should_contain("[pagesize] UseLargePages=1, UseTransparentHugePages=1")?
            .should_match("Large page support enabled\\. Usable page sizes: 4k, 2M\\. Default large page size: 2M\\.")?
            .should_match("\\[pagesize *\\] Heap: +min=64M max=64M base=0x[0-9a-f]+ page_size=2M size=64M")?;
    } else {
        if thp_args {
            out.stdout_should_contain("UseTransparentHugePages disabled, transparent huge pages are not supported by the operating system.")?;
        }
        out.stdout_should_contain("[pagesize] Large page support disabled.")?
            .should_match("\\[pagesize *\\] Heap: +min=64M max=64M base=0x[0-9a-f]+ page_size=4K size=64M")?;
    }
    // The decision is logged once, whatever the number of threads started.
    let once = out.stdout.matches("JVM will attempt to prevent THPs in thread stacks.").count();
    check(once == 1, || format!("the stack decision is logged {once} times"))?;
    Ok(())
}
