/*
 * @test id=plain
 * @summary Heap expansion commits the new part; allocation works up to the new size
 * @requires os.family == "linux"
 * @run main/othervm -Xms16m -Xmx256m TestHeapExpansion plain
 */

/*
 * @test id=pretouch
 * @summary With -XX:+AlwaysPreTouch an expansion is pretouched: RSS and mincore show it
 * @requires os.family == "linux"
 * @run main/othervm -Xms16m -Xmx256m -XX:+AlwaysPreTouch TestHeapExpansion pretouch
 */

/*
 * @test id=failure
 * @summary An expansion that cannot be committed (RLIMIT_DATA) fails with the commit
 *          error and leaves the heap usable at its old size; a smaller one then succeeds
 * @requires os.family == "linux"
 * @run driver TestHeapExpansion failure
 */

/*
 * @test id=pretouch-failure
 * @summary An expansion whose pretouch fails (MADV_POPULATE_WRITE answers ENOMEM, injected
 *          with seccomp after the VM started) returns the pretouch error; the heap keeps its
 *          committed size, the failed range is given back (not resident, not counted), and the
 *          heap stays usable and expandable by commit-only means
 * @requires os.family == "linux"
 * @run main/othervm -Xms16m -Xmx256m -XX:+AlwaysPreTouch -XX:ParallelGCThreads=2 TestHeapExpansion pretouch-failure
 */

use std::sync::atomic::Ordering;

use rtvm_os_linux::system::{set_soft_limit, Limit};
use rtvm_jtreg::testlib::*;

const MB: usize = 1 << 20;

fn fill(vm: &Vm, bytes: usize, tag: u64) -> Result<Vec<rtvm::HeapBlock<'_>>, TestFailure> {
    let mut blocks = Vec::new();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(MB);
        let b = vm.allocate(n).ok_or_else(|| TestFailure(format!("allocation of {n} failed with {} committed", vm.heap_stats().committed)))?;
        for w in b.words().iter().step_by(512) {
            w.store(tag, Ordering::Relaxed);
        }
        blocks.push(b);
        left -= n;
    }
    Ok(blocks)
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("plain") | Some("pretouch") => {
            let pretouch = args[0] == "pretouch";
            let before = vm.heap_stats();
            let before_resident = vm.heap().resident_bytes();
            check(before.committed == 16 * MB, || format!("initial committed {}", before.committed))?;
            let _first = fill(vm, 15 * MB, 1)?;
            check(vm.allocate(2 * MB).is_none(), || "allocation beyond the committed heap succeeded".into())?;
            let rss0 = rtvm_os_linux::procfs::read_status()?.vm_rss_kb;
            let new = vm.expand_heap(100 * MB)?;
            check(new == 116 * MB, || format!("committed after expansion: {new}"))?;
            let after = vm.heap_stats();
            let after_resident = vm.heap().resident_bytes();
            let rss1 = rtvm_os_linux::procfs::read_status()?.vm_rss_kb;
            // RSS is process-wide and may also fall meanwhile: a rise, never an underflow.
            let grown_kb = rss1.saturating_sub(rss0);
            println!("expanded to {new}: resident {} (was {}), RSS {rss0} -> {rss1} kB", after_resident, before_resident);
            if pretouch {
                check(after_resident == after.committed, || format!("{} of {} resident after a pretouched expansion", after_resident, after.committed))?;
                check(grown_kb >= 100 * 1024, || format!("RSS grew only {grown_kb} kB"))?;
            } else {
                check(grown_kb < 50 * 1024, || format!("an expansion without pretouch made {grown_kb} kB resident"))?;
            }
            let _second = fill(vm, 100 * MB, 2)?;
            let e = vm.expand_heap(1 << 30).unwrap_err();
            println!("beyond MaxHeapSize: {e}");
            check(e.to_string().contains("left below MaxHeapSize"), || format!("{e}"))?;
            Ok(())
        }
        Some("failure") => {
            let out = ProcessTools::execute_limited_test_vm(&["-Xms16m", "-Xmx1g", "TestHeapExpansion", "failure-child"])?;
            out.should_have_exit_value(0)?
                .should_match("expansion failed: os::commit_memory\\(0x[0-9a-f]+, 536870912, 0\\) failed; error='Not enough space' \\(errno=12\\)")?
                .stdout_should_contain("old heap usable")?
                .stdout_should_contain("smaller expansion ok")?;
            Ok(())
        }
        Some("failure-child") => {
            let _old = fill(vm, 8 * MB, 7)?;
            let vm_data = rtvm_os_linux::procfs::read_status()?.vm_data_kb;
            set_soft_limit(Limit::Data, vm_data * 1024 + 64 * MB as u64)?;
            let before = vm.heap_stats();
            let e = vm.expand_heap(512 * MB).unwrap_err();
            println!("expansion failed: {e}");
            let after = vm.heap_stats();
            check(after.committed == before.committed, || format!("committed changed from {} to {}", before.committed, after.committed))?;
            let more = fill(vm, 7 * MB, 8)?;
            check(!more.is_empty(), || "no allocation".into())?;
            println!("old heap usable: committed {}", after.committed);
            vm.expand_heap(16 * MB)?;
            fill(vm, 16 * MB, 9)?;
            println!("smaller expansion ok: committed {}", vm.heap_stats().committed);
            Ok(())
        }
        Some("pretouch-failure") => {
            let _old = fill(vm, 8 * MB, 3)?;
            let before = vm.heap_stats();
            let resident_before = vm.heap().resident_bytes();
            rtvm_os_linux::fault::deny_madvise_advice(23, rtvm_os_linux::Errno::ENOMEM)?;
            let e = vm.expand_heap(64 * MB).unwrap_err();
            println!("expansion failed: {e}");
            check(e.to_string().contains("was not made resident") && e.to_string().contains("errno=12"), || format!("not the pretouch error: {e}"))?;
            let after = vm.heap_stats();
            check(after.committed == before.committed, || format!("committed changed from {} to {}", before.committed, after.committed))?;
            // The range that was committed for the expansion went back to the kernel.
            let range = vm.heap().range();
            let (start, end) = (range.start + before.committed, range.start + before.committed + 64 * MB);
            let tail = rtvm_os_linux::procfs::smaps_overlapping(start, end)?;
            for e in &tail {
                check(e.map.perms.starts_with("---") && e.rss_kb == 0, || format!("the failed expansion's range is still committed: {} {} Rss {} kB", e.map.perms, e.map.name, e.rss_kb))?;
            }
            check(!tail.is_empty(), || "the heap's reservation is gone".into())?;
            check(vm.heap().resident_bytes() <= resident_before, || "resident heap grew".into())?;
            // Nothing beyond the old end can be allocated; the old heap still can.
            check(vm.allocate(before.committed - before.used + 8).is_none(), || "allocated beyond the old end".into())?;
            let more = fill(vm, 7 * MB, 4)?;
            check(!more.is_empty(), || "no allocation".into())?;
            println!("heap kept {} and stays usable", after.committed);
            Ok(())
        }
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
