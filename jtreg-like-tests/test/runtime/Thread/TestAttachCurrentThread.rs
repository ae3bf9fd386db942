/*
 * @test id=host-threads
 * @summary Threads the host created attach and detach (JNI's AttachCurrentThread): they show
 *          in the thread list and the NMT report with their own stacks, whose bounds agree with
 *          the kernel's mappings (glibc's guard page below, the thread's stack pointer
 *          inside); a second attach is refused, a VM thread cannot attach or detach; a thread
 *          that ends attached is forgotten; the soft limit stops a recursion before the guard
 * @requires os.family == "linux"
 * @run main/othervm -XX:NativeMemoryTracking=detail TestAttachCurrentThread host-threads
 */

/*
 * @test id=destroy
 * @summary The VM's destroy (after the main returns) does not wait for a host thread that
 *          stays attached — it waits for the VM's own threads only, as DestroyJavaVM does
 * @requires os.family == "linux"
 * @run driver TestAttachCurrentThread destroy
 */

use std::sync::mpsc;
use std::time::Duration;

use rtvm_os_linux::procfs::{read_maps, MapsEntry};
use rtvm::{StackBounds, ThreadError, ThreadKind, VmHandle};
use rtvm_jtreg::testlib::*;

fn mapping_at(maps: &[MapsEntry], addr: usize) -> Option<&MapsEntry> {
    maps.iter().find(|m| m.start <= addr && addr < m.end)
}

/// An address in the calling thread's current frame.
#[inline(never)]
fn stack_pointer() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Checks bounds of a glibc-created thread against /proc/self/maps.
fn check_glibc_thread(b: &StackBounds, what: &str) -> TestResult {
    let maps = read_maps()?;
    let sp = stack_pointer();
    check(b.limit < sp && sp < b.base, || format!("{what}: stack pointer {sp:#x} outside [{:#x}, {:#x})", b.limit, b.base))?;
    let usable = mapping_at(&maps, b.limit).ok_or_else(|| TestFailure(format!("{what}: nothing mapped at the limit {:#x}", b.limit)))?;
    check(usable.perms.starts_with("rw") && usable.end >= b.base, || format!("{what}: [{:#x}, {:#x}) is not inside one writable mapping: {usable:?}", b.limit, b.base))?;
    check(b.guard.1 == b.limit && b.guard.1 - b.guard.0 >= 4096, || format!("{what}: guard {:x?} is not directly below the limit {:#x}", b.guard, b.limit))?;
    let guard = mapping_at(&maps, b.guard.0).ok_or_else(|| TestFailure(format!("{what}: nothing mapped at the guard {:#x}", b.guard.0)))?;
    check(guard.is_protected_none() && guard.end == b.limit, || format!("{what}: the guard {:x?} is not glibc's PROT_NONE page: {guard:?}", b.guard))?;
    check(b.limit < b.soft_limit && b.soft_limit < sp, || format!("{what}: soft limit {:#x} not between the limit {:#x} and the stack pointer {sp:#x}", b.soft_limit, b.limit))?;
    Ok(())
}

/// Recurses with 1 KiB frames until the stack pointer passes the soft limit; returns the
/// depth reached. Runs on an unmitigated host thread whose guard is one glibc page: without
/// the soft limit this would crash.
#[inline(never)]
fn recurse(soft_limit: usize, depth: usize) -> usize {
    let frame = [depth as u8; 1024];
    std::hint::black_box(&frame);
    if stack_pointer() < soft_limit {
        return depth;
    }
    let d = recurse(soft_limit, depth + 1);
    std::hint::black_box(frame[depth % 1024]);
    d
}

fn host_threads(vm: &VmHandle) -> TestResult {
    let before = vm.threads().len();
    std::thread::scope(|s| -> TestResult {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let vm2 = vm.clone();
        let host = std::thread::Builder::new()
            .name("host-pool-1".into())
            .stack_size(4 << 20)
            .spawn_scoped(s, move || -> TestResult {
                let attached = vm2.attach_current_thread("host-pool-1")?;
                let b = attached.stack_bounds();
                check(vm2.current_stack_bounds() == Some(b), || "current_stack_bounds differs from the guard's".into())?;
                check_glibc_thread(&b, "host-pool-1")?;
                check(b.size() >= 4 << 20, || format!("stack size {} for a 4 MiB thread", b.size()))?;
                // Attaching twice is refused and leaves the attachment alone.
                match vm2.attach_current_thread("again") {
                    Err(ThreadError::AlreadyAttached { name }) => check(name == "host-pool-1", || name)?,
                    other => return Err(TestFailure(format!("second attach: {other:?}")).into()),
                }
                // The soft limit stops a recursion 5/6 down a 4 MiB stack before the guard.
                let depth = recurse(b.soft_limit, 0);
                println!("recursion stopped at depth {depth} ({} KiB of {} KiB)", depth, b.size() / 1024);
                check(depth > 3000, || format!("stopped after only {depth} frames"))?;
                ready_tx.send(b).unwrap();
                go_rx.recv().unwrap();
                attached.detach()?;
                check(vm2.current_stack_bounds().is_none(), || "still has stack bounds after detach".into())?;
                // A detached thread can attach again, under another name.
                let again = vm2.attach_current_thread("host-pool-1b")?;
                drop(again);
                Ok(())
            })?;
        let b = ready_rx.recv_timeout(Duration::from_secs(30)).map_err(|_| TestFailure("the host thread did not attach".into()))?;
        let listed = vm.threads();
        let me = listed.iter().find(|t| t.name == "host-pool-1").ok_or_else(|| TestFailure("the attached thread is not listed".into()))?;
        check(me.kind == ThreadKind::Attached && me.stack_bounds() == b, || format!("listed as {:?} with {:?}", me.kind, me.stack_bounds()))?;
        check(me.tid() > 0, || "no tid".into())?;
        let nmt = vm.native_memory_summary().ok_or_else(|| TestFailure("NMT is off".into()))?;
        let detail = nmt.stack_details.iter().find(|d| d.name == "host-pool-1").ok_or_else(|| TestFailure("no NMT detail line for the attached thread".into()))?;
        check(detail.start == b.guard.0 && detail.end == b.base, || format!("NMT stack [{:#x}, {:#x}) for bounds {b:x?}", detail.start, detail.end))?;
        // The recursion touched most of the 4 MiB: NMT's committed figure sees it.
        check(detail.committed > 3 << 20, || format!("NMT: {} bytes committed after a deep recursion", detail.committed))?;
        check(nmt.report().contains("host-pool-1"), || "the NMT report does not name the attached thread".into())?;
        go_tx.send(()).unwrap();
        host.join().map_err(|_| TestFailure("host thread panicked".into()))??;
        check(vm.threads().len() == before, || format!("{} threads after detach, {before} before", vm.threads().len()))?;
        Ok(())
    })?;

    // A VM thread is already known: attach is refused, detach is not its to do.
    let vm2 = vm.clone();
    let t = vm.spawn("vm-thread", move || {
        let a = vm2.attach_current_thread("x").map(|_| ());
        let b = vm2.current_stack_bounds();
        println!("VM thread: attach {a:?}, bounds {b:x?}");
        assert!(matches!(a, Err(ThreadError::AlreadyAttached { ref name }) if name == "vm-thread"));
        assert!(b.is_some());
    })?;
    t.join()?;

    // A host thread that ends attached (the guard leaked) is forgotten.
    let vm2 = vm.clone();
    std::thread::spawn(move || std::mem::forget(vm2.attach_current_thread("leaky").unwrap()))
        .join()
        .map_err(|_| TestFailure("leaky thread panicked".into()))?;
    check(!vm.threads().iter().any(|t| t.name == "leaky"), || "a thread that ended attached is still listed".into())?;
    // A host thread that never attached has no bounds; the main (a VM thread) has.
    let vm2 = vm.clone();
    let stranger = std::thread::spawn(move || vm2.current_stack_bounds()).join().map_err(|_| TestFailure("panicked".into()))?;
    check(stranger.is_none(), || "a thread that never attached has stack bounds".into())?;
    check(vm.current_stack_bounds().is_some(), || "the main thread (a VM thread) has no stack bounds".into())?;
    println!("host threads: attach, detach, refusals and exit all as expected");
    Ok(())
}

/// In the child: a host thread attaches and never detaches nor ends; a VM thread sleeps a
/// little; the main returns, and the launcher destroys the VM.
fn destroy_child(vm: &VmHandle) -> TestResult {
    let (tx, rx) = mpsc::channel();
    let handle = vm.clone();
    std::thread::spawn(move || {
        let _guard = handle.attach_current_thread("stays-attached").unwrap();
        tx.send(()).unwrap();
        loop {
            std::thread::park();
        }
    });
    rx.recv().unwrap();
    vm.spawn("short-vm-thread", || {
        std::thread::sleep(Duration::from_millis(300));
        println!("the VM thread ended");
    })?;
    println!("host thread attached; main returns");
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("host-threads") => host_threads(vm),
        Some("destroy") => {
            let out = ProcessTools::execute_within(ProcessTools::create_limited_test_vm(&["TestAttachCurrentThread", "destroy-child"]), Duration::from_secs(30))?;
            out.should_have_exit_value(0)?
                .stdout_should_contain("host thread attached; main returns")?
                .stdout_should_contain("the VM thread ended")?;
            Ok(())
        }
        Some("destroy-child") => destroy_child(vm),
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
