/*
 * @test id=mitigated
 * @bug 8312182
 * @summary NMT's "stack: committed" (measured with mincore) stays small when every stack is
 *          collapsed while its thread is held in the start window with the mitigation on
 * @key thp
 * @requires os.family == "linux"
 * @requires thp.mode != "never"
 * @requires vm.flagless
 * @run driver ThreadStackCommitted mitigated
 */

/*
 * @test id=unmitigated
 * @bug 8312182
 * @summary With the mitigation off the same collapses succeed, and NMT's "stack: committed"
 *          rises with RSS: the JDK-8312182 blow-up as NMT shows it
 * @key thp
 * @requires os.family == "linux"
 * @requires thp.mode != "never"
 * @requires vm.flagless
 * @run driver ThreadStackCommitted unmitigated
 */

use rtvm_jtreg::testlib::*;

const THREADS: usize = 200;
const MB: u64 = 1 << 20;

fn child(vm: &Vm) -> TestResult {
    let gate = rtvm_launcher::IdleGate::new();
    let _release = gate.release_on_drop();
    let before = vm.native_memory_summary().ok_or_else(|| TestFailure("NMT is off".into()))?;
    let rss_before = rtvm_os_linux::procfs::read_status()?.vm_rss_kb;
    let mut threads = Vec::new();
    for i in 0..THREADS {
        threads.push(vm.thread(&format!("Idle#{i}")).hold_at_start(true).spawn(gate.parked_body())?);
    }
    let collapsed = threads.iter().filter(|t| t.info().collapse_stack().is_ok()).count();
    for t in &threads {
        t.start();
    }
    gate.wait_started(THREADS);
    let after = vm.native_memory_summary().ok_or_else(|| TestFailure("NMT is off".into()))?;
    let rss_after = rtvm_os_linux::procfs::read_status()?.vm_rss_kb;
    println!(
        "NMT: collapsed={collapsed} stack_committed_before={} stack_committed_after={} stack_reserved={} rss_before_kB={rss_before} rss_after_kB={rss_after} threads={}",
        before.stacks.committed, after.stacks.committed, after.stacks.reserved, after.thread_count
    );
    print!("{}", after.report());
    gate.release();
    for t in threads {
        t.join()?;
    }
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    let mode = args.first().map(String::as_str);
    if mode == Some("child") {
        return child(vm);
    }
    let mut opts = vec!["-XX:NativeMemoryTracking=summary", "-Xms16m", "-Xmx16m", "-Xss2m", "-XX:ParallelGCThreads=1"];
    if mode == Some("unmitigated") {
        opts.extend(["-XX:+UnlockDiagnosticVMOptions", "-XX:+DisableTHPStackMitigation"]);
    }
    opts.extend(["ThreadStackCommitted", "child"]);
    let out = ProcessTools::execute_limited_test_vm(&opts)?;
    out.should_have_exit_value(0)?.should_match("^-                    Thread \\(reserved=[0-9]+, committed=[0-9]+\\)$")?;
    let committed = out.number("NMT:", "stack_committed_after")?;
    // A rise, never an underflow: RSS may fall meanwhile (freed malloc arenas, ...).
    let rss_rise = out.number("NMT:", "rss_after_kB")?.saturating_sub(out.number("NMT:", "rss_before_kB")?) * 1024;
    let collapsed = out.number("NMT:", "collapsed")?;
    println!("{mode:?}: {collapsed} collapsed, stack committed {} MB, RSS +{} MB", committed / MB, rss_rise / MB);
    let per_thread = committed / THREADS as u64;
    if mode == Some("mitigated") {
        check(collapsed == 0, || format!("{collapsed} collapses succeeded"))?;
        check(per_thread < 128 * 1024, || format!("{per_thread} bytes committed per stack"))?;
        check(rss_rise < 64 * MB, || format!("RSS rose by {} MB", rss_rise / MB))?;
    } else {
        check(collapsed as usize >= THREADS * 9 / 10, || format!("only {collapsed} collapses succeeded"))?;
        check(per_thread > MB, || format!("only {per_thread} bytes committed per stack"))?;
        // NMT's figure follows RSS: both rose by the collapsed stacks.
        check(rss_rise > (THREADS as u64) * MB, || format!("RSS rose by only {} MB", rss_rise / MB))?;
        check(committed * 10 >= rss_rise * 9, || format!("stack committed {committed} does not account for the RSS rise {rss_rise}"))?;
    }
    Ok(())
}
