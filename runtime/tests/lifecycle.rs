//! The VM's life as an embedder sees it, one process per case (a VM, the logger and the
//! signal handlers are process-wide): teardown once, no thread after the shutdown began, a VM
//! dropped on its own thread, the embedder's logger and level left alone, handlers given back.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{child_role, run_child};
use rtvm::{InitArgs, ShutdownError, ThreadError, Vm, VmState};

fn child_ok(test: &str) {
    let out = run_child(test, "child");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("CHILD OK"),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn teardown_runs_once_and_later_starts_are_refused() {
    if child_role().is_none() {
        return child_ok("teardown_runs_once_and_later_starts_are_refused");
    }
    let vm = Vm::create(InitArgs::new(["-Xmx64m"])).unwrap();
    let h = vm.handle();
    assert_eq!(vm.state(), VmState::Running);
    assert!(
        vm.thread("w")
            .kind(rtvm::ThreadKind::Worker)
            .spawn(|| {})
            .is_err(),
        "workers are the gang's own"
    );
    // A host thread (not waited for) sees the shutdown begin and tries to start a thread.
    let h2 = h.clone();
    let watcher = std::thread::spawn(move || {
        while h2.state() < VmState::ShuttingDown {
            std::thread::sleep(Duration::from_millis(1));
        }
        match h2.spawn("too-late", || {}) {
            Err(ThreadError::ShuttingDown { name }) => name == "too-late",
            other => panic!("a start during the shutdown gave {other:?}"),
        }
    });
    vm.shutdown().unwrap();
    let seen = Arc::new(AtomicUsize::new(usize::from(watcher.join().unwrap())));
    assert_eq!(vm.state(), VmState::Destroyed);
    vm.shutdown().unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1, "the late start was refused");
    assert!(matches!(
        h.spawn("after", || {}),
        Err(ThreadError::ShuttingDown { .. })
    ));
    drop(vm);
    // The slot is free again.
    let vm = Vm::create(InitArgs::new(["-Xmx64m"])).unwrap();
    vm.shutdown().unwrap();
    println!("CHILD OK");
}

#[test]
fn a_vm_dropped_on_its_own_thread_is_reaped() {
    if child_role().is_none() {
        return child_ok("a_vm_dropped_on_its_own_thread_is_reaped");
    }
    let vm = Vm::create(InitArgs::new(["-Xmx64m"])).unwrap();
    let h = vm.handle();
    h.spawn("dropper", move || drop(vm)).unwrap();
    let start = Instant::now();
    while h.state() != VmState::Destroyed {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the reaper did not finish"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(h.threads().len(), 0, "every thread joined");
    let vm = Vm::create(InitArgs::new(["-Xmx64m"])).expect("the slot was freed");
    vm.shutdown().unwrap();
    println!("CHILD OK");
}

#[test]
fn shutdown_on_a_vm_thread_is_refused_and_changes_nothing() {
    if child_role().is_none() {
        return child_ok("shutdown_on_a_vm_thread_is_refused_and_changes_nothing");
    }
    let vm = Arc::new(Vm::create(InitArgs::new(["-Xmx64m"])).unwrap());
    let v = Arc::clone(&vm);
    let t = vm
        .spawn("self-destroyer", move || {
            let e = v.shutdown().unwrap_err();
            assert_eq!(
                e,
                ShutdownError::OnVmThread {
                    thread: "self-destroyer".into()
                }
            );
        })
        .unwrap();
    t.join().unwrap();
    assert_eq!(vm.state(), VmState::Running);
    vm.shutdown().unwrap();
    println!("CHILD OK");
}

struct Counter(AtomicUsize);

impl log::Log for Counter {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, _: &log::Record<'_>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn flush(&self) {}
}

static EMBEDDER_LOGGER: Counter = Counter(AtomicUsize::new(0));

/// An embedder's logger and level are theirs: rtvm neither replaces the logger nor changes
/// the level (before the fix, dropping a VM set it to `Warn`).
#[test]
fn the_embedders_logger_and_level_are_left_alone() {
    if child_role().is_none() {
        return child_ok("the_embedders_logger_and_level_are_left_alone");
    }
    log::set_logger(&EMBEDDER_LOGGER).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let vm = Vm::create(InitArgs::new(["-Xmx64m", "-Xlog:os=debug"])).unwrap();
    vm.shutdown().unwrap();
    drop(vm);
    assert_eq!(log::max_level(), log::LevelFilter::Trace);
    log::info!(target: "embedder", "still mine");
    assert!(EMBEDDER_LOGGER.0.load(Ordering::SeqCst) > 0);
    println!("CHILD OK");
}

/// When rtvm installed the logger itself, the level it set goes back to what it was when
/// the VM is destroyed.
#[test]
fn rtvm_gives_the_level_back() {
    if child_role().is_none() {
        return child_ok("rtvm_gives_the_level_back");
    }
    log::set_max_level(log::LevelFilter::Off);
    let vm = Vm::create(InitArgs::new(["-Xmx64m", "-Xlog:os=trace"])).unwrap();
    assert_eq!(log::max_level(), log::LevelFilter::Trace);
    vm.shutdown().unwrap();
    assert_eq!(log::max_level(), log::LevelFilter::Off);
    println!("CHILD OK");
}

extern "C" fn host_handler(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

fn segv_handler() -> usize {
    // SAFETY: a NULL new action only queries the current one.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut old);
        old.sa_sigaction
    }
}

/// The handlers the host had are back after the VM, and `-Xrs` never touches them.
#[test]
fn signal_handlers_are_given_back_and_xrs_installs_none() {
    if child_role().is_none() {
        return child_ok("signal_handlers_are_given_back_and_xrs_installs_none");
    }
    // SAFETY: installs a handler that does nothing (never called here).
    unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = host_handler as *const () as usize;
        a.sa_flags = libc::SA_SIGINFO;
        libc::sigaction(libc::SIGSEGV, &a, std::ptr::null_mut());
    }
    let host = host_handler as *const () as usize;
    let vm = Vm::create(InitArgs::new(["-Xmx64m"])).unwrap();
    assert_ne!(
        segv_handler(),
        host,
        "rtvm's handler is in place while the VM runs"
    );
    vm.shutdown().unwrap();
    assert_eq!(segv_handler(), host, "given back at shutdown");
    let vm = Vm::create(InitArgs::new(["-Xmx64m", "-Xrs"])).unwrap();
    assert_eq!(segv_handler(), host, "-Xrs installs nothing");
    assert!(vm.flags().get(rtvm::flags::flag::ReduceSignalUsage));
    vm.shutdown().unwrap();
    assert_eq!(segv_handler(), host);
    println!("CHILD OK");
}

#[test]
fn destroy_from_an_attached_thread_while_another_stays_attached() {
    if child_role().is_none() {
        return child_ok("destroy_from_an_attached_thread_while_another_stays_attached");
    }
    let vm = Vm::create(InitArgs::new(["-Xmx64m"])).unwrap();
    let (attached_tx, attached_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let h = vm.handle();
    let stays = std::thread::spawn(move || {
        let guard = h.attach_current_thread("stays").unwrap();
        attached_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        // After the destroy: detaching is harmless, attaching is refused.
        drop(guard);
        assert!(matches!(
            h.attach_current_thread("late"),
            Err(ThreadError::ShuttingDown { .. })
        ));
        assert!(h.current_stack_bounds().is_none());
    });
    attached_rx.recv().unwrap();
    let destroyer = std::thread::spawn(move || {
        let guard = vm.attach_current_thread("destroyer").unwrap();
        let start = Instant::now();
        // An attached thread is not one the destroy waits for: it may destroy.
        vm.shutdown().unwrap();
        assert_eq!(vm.state(), VmState::Destroyed);
        drop(guard);
        drop(vm);
        start.elapsed()
    });
    let took = destroyer.join().unwrap();
    assert!(
        took < Duration::from_secs(10),
        "destroy took {took:?} with an attached thread alive"
    );
    release_tx.send(()).unwrap();
    stays.join().unwrap();
    // The slot is free again.
    Vm::create(InitArgs::new(["-Xmx64m"]))
        .unwrap()
        .shutdown()
        .unwrap();
    println!("CHILD OK");
}

/// A hold on the background pretouch cannot hang the shutdown: the VM's own start-up hold
/// and an embedder's forgotten one are both overridden, the pretouch completes, and the
/// shutdown returns with the heap fully pretouched.
#[test]
fn a_held_pretouch_never_hangs_the_shutdown() {
    if child_role().is_none() {
        return child_ok("a_held_pretouch_never_hangs_the_shutdown");
    }
    let vm = Vm::create(InitArgs::new([
        "-Xms64m",
        "-Xmx64m",
        "-XX:+AlwaysPreTouch",
        "-XX:+UnlockExperimentalVMOptions",
        "-XX:+BackgroundPreTouch",
        "-XX:+HoldBackgroundPreTouch",
        "-XX:ParallelGCThreads=2",
    ]))
    .unwrap();
    let forgotten = vm.heap().hold_pretouch();
    assert_eq!(vm.heap().pretouch_progress(), Some((0, 64 << 20)));
    let heap = std::sync::Arc::clone(vm.heap());
    let started = Instant::now();
    vm.shutdown().unwrap();
    assert!(started.elapsed() < Duration::from_secs(60));
    // The shutdown let the held pretouch finish (this Arc keeps the heap mapped to look).
    assert_eq!(heap.resident_bytes(), 64 << 20, "the pretouch completed");
    drop(forgotten);
    println!("CHILD OK");
}
