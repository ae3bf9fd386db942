/*
 * @test id=late-threads
 * @summary Destroy waits for every application thread, including threads started while it
 *          waits: spawner -> child1 after 200 ms -> child2 after 200 ms more; the VM is
 *          destroyed only after child2 wrote to the heap (before the fix: SIGSEGV)
 * @requires os.family == "linux"
 * @run driver TestVmLifecycle late-threads
 */

/*
 * @test id=destroy-from-vm-thread
 * @summary Shutting the VM down from one of its own threads is refused with a message and
 *          changes nothing (before the fix: the thread joined itself and hung forever)
 * @requires os.family == "linux"
 * @run driver TestVmLifecycle destroy-from-vm-thread
 */

/*
 * @test id=panics
 * @summary A gang task that panics is reported to whoever waits for it; the gang, heap
 *          expansion with pretouch and later tasks keep working; a thread body that panics
 *          is reported by join; the VM still shuts down (before the fix: hung forever)
 * @requires os.family == "linux"
 * @run driver TestVmLifecycle panics
 */

/*
 * @test id=nmt-once
 * @summary -XX:+PrintNMTStatistics prints the report exactly once, whatever ends the VM
 *          (a normal run, -version); a failed creation prints none
 * @requires os.family == "linux"
 * @run driver TestVmLifecycle nmt-once
 */

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtvm_jtreg::testlib::*;

const BOUND: Duration = Duration::from_secs(30);

fn child(mode: &str, vm_options: &[&str]) -> Result<OutputAnalyzer, TestFailure> {
    let mut args: Vec<&str> = vm_options.to_vec();
    args.extend(["TestVmLifecycle", mode]);
    ProcessTools::execute_within(ProcessTools::create_limited_test_vm(&args), BOUND)
}

/// In the child: the chain, started by the main, which then returns at once.
fn late_threads_child(vm: &Vm) -> TestResult {
    let heap = Arc::clone(vm.heap());
    let main_done = Instant::now();
    let h = vm.handle();
    vm.spawn("spawner", move || {
        std::thread::sleep(Duration::from_millis(200));
        let h2 = h.clone();
        h.spawn("child1", move || {
            std::thread::sleep(Duration::from_millis(200));
            h2.spawn("child2", move || {
                std::thread::sleep(Duration::from_millis(200));
                let w = heap.allocate(8).expect("heap");
                w.words()[0].store(42, Ordering::SeqCst);
                let at = w.as_ptr() as usize;
                let inside = heap.range().start <= at && at < heap.range().end;
                println!(
                    "child2 wrote to the heap ({inside}) {} ms after the main returned",
                    main_done.elapsed().as_millis()
                );
            })
            .expect("child2 starts while destroy waits");
        })
        .expect("child1 starts while destroy waits");
    })?;
    println!("main returns");
    Ok(())
}

fn destroy_from_vm_thread_child(vm: &Vm) -> TestResult {
    let start = Instant::now();
    let e = vm.shutdown().err().ok_or("shutdown on the main thread (a VM thread) succeeded")?;
    println!("shutdown refused after {} ms: {e}", start.elapsed().as_millis());
    check(vm.state() == rtvm::VmState::Running, || format!("state is {:?}", vm.state()))?;
    vm.spawn("still-works", || println!("a thread still starts"))?.join()?;
    Ok(())
}

struct Panicking;
impl rtvm::testing::GangTask for Panicking {
    fn work(&self, worker: usize) {
        if worker == 0 {
            panic!("expected test panic in a gang task");
        }
    }
}

struct Counting(AtomicU64);
impl rtvm::testing::GangTask for Counting {
    fn work(&self, _: usize) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn panics_child(vm: &Vm) -> TestResult {
    let e = vm.gang().run(Arc::new(Panicking), 2).err().ok_or("the panic was not reported")?;
    println!("gang: {e}");
    let counting = Arc::new(Counting(AtomicU64::new(0)));
    vm.gang().run(counting.clone(), 2)?;
    println!("gang after the panic: {} workers ran the next task", counting.0.load(Ordering::SeqCst));
    let committed = vm.expand_heap(8 << 20)?;
    println!("expansion with pretouch after the panic: committed {committed}");
    let e = vm.spawn("panicker", || panic!("expected test panic in a thread body"))?.join().err().ok_or("not reported")?;
    println!("thread: {e}");
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("late-threads") => {
            let out = child("late-threads-child", &["-Xmx64m"])?;
            out.should_have_exit_value(0)?
                .stdout_should_contain("main returns")?
                .should_match("child2 wrote to the heap \\(true\\) [0-9]+ ms after the main returned")?;
            let line = out.first_match("child2 wrote")?.unwrap_or_default();
            let ms: u64 = line.split(") ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
            check(ms >= 550, || format!("child2 wrote only {ms} ms after the main returned"))?;
            Ok(())
        }
        Some("late-threads-child") => late_threads_child(vm),
        Some("destroy-from-vm-thread") => {
            let out = child("destroy-from-vm-thread-child", &[])?;
            out.should_have_exit_value(0)?
                .stdout_should_contain("the VM cannot be destroyed from its own thread \"main\"")?
                .stdout_should_contain("a thread still starts")?;
            Ok(())
        }
        Some("destroy-from-vm-thread-child") => destroy_from_vm_thread_child(vm),
        Some("panics") => {
            let out = child("panics-child", &["-Xms8m", "-Xmx64m", "-XX:+AlwaysPreTouch", "-XX:ParallelGCThreads=2"])?;
            out.should_have_exit_value(0)?
                .stdout_should_contain("gang: a parallel task panicked on worker 0: expected test panic in a gang task")?
                .stdout_should_contain("gang after the panic: 2 workers ran the next task")?
                .should_match("expansion with pretouch after the panic: committed [0-9]+")?
                .stdout_should_contain("thread: thread \"panicker\" panicked: expected test panic in a thread body")?;
            Ok(())
        }
        Some("panics-child") => panics_child(vm),
        Some("nmt-once") => {
            let nmt = ["-XX:NativeMemoryTracking=summary", "-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintNMTStatistics"];
            for tail in [&["-version"][..], &["IdleThreads", "2"][..]] {
                let mut args = nmt.to_vec();
                args.extend(tail);
                let out = ProcessTools::execute_within(ProcessTools::create_limited_test_vm(&args), BOUND)?;
                out.should_have_exit_value(0)?;
                let n = out.stdout.matches("Native Memory Tracking:").count();
                check(n == 1, || format!("{tail:?}: the report printed {n} times\n{}", out.stdout))?;
            }
            let mut args = nmt.to_vec();
            args.extend(["-Xmx1", "-version"]);
            let out = ProcessTools::execute_limited_test_vm(&args)?;
            out.should_have_exit_value(1)?.should_not_contain("Native Memory Tracking:")?;
            Ok(())
        }
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
