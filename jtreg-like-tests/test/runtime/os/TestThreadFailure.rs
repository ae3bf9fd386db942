/*
 * @test id=address-space
 * @summary Under a low RLIMIT_AS, thread creation fails part-way with HotSpot's message;
 *          the threads already started keep running, nothing is leaked, the VM goes on
 * @requires os.family == "linux"
 * @run driver TestThreadFailure address-space
 */

/*
 * @test id=absurd-xss
 * @summary An -Xss the address space cannot hold fails the main thread's start cleanly
 * @requires os.family == "linux"
 * @run driver TestThreadFailure absurd-xss
 */

/*
 * @test id=idle-threads
 * @summary IdleThreads 10000 under a low limit reports the thread that failed, stops the
 *          others and exits 1
 * @requires os.family == "linux"
 * @run driver TestThreadFailure idle-threads
 */

use rtvm_jtreg::testlib::*;

fn vm_size_kb() -> Result<u64, TestFailure> {
    Ok(rtvm_os_linux::procfs::read_status().map_err(|e| TestFailure(e.to_string()))?.vm_size_kb)
}


/// In the child: lower RLIMIT_AS to 256 MB above what is mapped now, start threads until
/// one fails, then check the error, the survivors, that the stack cache kept only what its
/// limit allows, and that no stack mapping is left once the cache is emptied.
fn child(vm: &Vm) -> TestResult {
    use rtvm_os_linux::system::{set_soft_limit, soft_limit, Limit};
    let original = soft_limit(Limit::AddressSpace).unwrap_or(u64::MAX);
    set_soft_limit(Limit::AddressSpace, vm_size_kb()? * 1024 + (256 << 20))?;
    let gate = rtvm_launcher::IdleGate::new();
    let _release = gate.release_on_drop();
    let mut threads = Vec::new();
    let failure = loop {
        match vm.spawn(&format!("Idle#{}", threads.len()), gate.parked_body()) {
            Ok(t) => threads.push(t),
            Err(e) => break e,
        }
        check(threads.len() < 100_000, || "no failure under a 256 MB address-space limit".into())?;
    };
    let message = failure.to_string();
    println!("FAILED AT {}: {message}", threads.len());
    let expected = format!("Failed to start thread \"Idle#{}\" - mmap failed (ENOMEM) for attributes: stacksize: 1024k, guardsize: 16k, joinable.", threads.len());
    check(message == expected, || format!("message was: {message}\nexpected:    {expected}"))?;
    check(threads.len() > 10, || format!("only {} threads started before the failure", threads.len()))?;
    // The started threads are all alive and reach their body.
    gate.wait_started(threads.len());
    // The VM goes on: with the limit back, a thread starts again.
    set_soft_limit(Limit::AddressSpace, original)?;
    vm.spawn("after-failure", || println!("after-failure ran"))?.join()?;
    gate.release();
    let started = threads.len();
    let stacks: Vec<_> = threads.iter().map(|t| t.info().layout.mapping.clone()).collect();
    for t in threads {
        t.join()?;
    }
    // Joined stacks go to the stack cache (up to ThreadStackCacheSize); emptied, it must
    // leave nothing behind.
    let cached = |r: &std::ops::Range<usize>| rtvm_os_linux::procfs::maps_overlapping(r.start, r.end).map_or(0, |m| m.len());
    let kept = stacks.iter().filter(|r| cached(r) > 0).count();
    println!("stacks kept by the cache after join={kept}");
    check(kept > 0 && kept * (1 << 20) <= 40 << 20, || format!("{kept} stacks of 1 MiB kept by a 40 MiB cache"))?;
    check(vm.diagnostic_command("VM.set_flag ThreadStackCacheSize 0")?.is_empty(), || "VM.set_flag failed".into())?;
    let left: usize = stacks
        .iter()
        .map(|r| rtvm_os_linux::procfs::maps_overlapping(r.start, r.end).map(|m| m.len()))
        .sum::<Result<usize, _>>()?;
    println!("started={started} stack mappings left after join={left}");
    check(left == 0, || format!("{left} stack mappings leaked"))?;
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("address-space") => {
            let out = ProcessTools::execute_limited_test_vm(&["-Xmx32m", "-Xss1m", "TestThreadFailure", "child"])?;
            out.should_have_exit_value(0)?.stdout_should_contain("after-failure ran")?.stdout_should_contain("stack mappings left after join=0")?;
            Ok(())
        }
        Some("absurd-xss") => {
            // 1 GiB stacks under a 768 MiB address-space limit: the main thread cannot start.
            let out = ProcessTools::execute_with_rlimits("as=768m", &["-Xmx32m", "-Xss1g", "IdleThreads", "1"])?;
            out.should_have_exit_value(1)?
                .stderr_should_contain("Failed to start thread \"main\" - mmap failed (ENOMEM) for attributes: stacksize: 1048576k, guardsize: 16k, joinable.")?
                .should_not_contain("panicked")?;
            Ok(())
        }
        Some("idle-threads") => {
            let out = ProcessTools::execute_with_rlimits("as=1g", &["-Xmx32m", "IdleThreads", "10000"])?;
            out.should_have_exit_value(1)?
                .should_match("Exception in thread \"main\" Failed to start thread \"Idle#[0-9]+\" - mmap failed \\(ENOMEM\\) for attributes: stacksize: 1024k, guardsize: 16k, joinable\\. \\([0-9]+ of 10000 threads had started; all stopped\\)")?
                .should_not_contain("IdleThreads: threads=")?;
            Ok(())
        }
        Some("child") => child(vm),
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
