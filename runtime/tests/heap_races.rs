//! The heap under races that held-out C programs found (issue 30), each in a child process of
//! its own (one VM per process), bounded by a count of rounds and a few seconds:
//!
//! * a hold on the heap's background pretouch holds that pretouch only: an embedder memory's
//!   background pretouch, its wait, shrink and release, a heap shrink below the initial size
//!   and an expansion all complete while it stays held.
//!
//! A call that would hang is run on a helper thread and given a generous deadline (a hang
//! detector, not a timing assertion: each call takes milliseconds).

use std::sync::{mpsc, Arc};
use std::time::Duration;

use rtvm::{InitArgs, MemoryRequest, Vm};
use rtvm_testkit::child::isolated;

const MB: usize = 1 << 20;

fn create(options: &[&str]) -> Vm {
    Vm::create(InitArgs::new(options.iter().copied())).unwrap()
}

/// Runs `f` on a helper thread; panics naming `what` if it has not returned after a minute
/// (it would hang for ever otherwise; the child process then exits with the failure).
fn returns<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} did not return: it waits behind the held pretouch"))
}

/// With `-XX:+HoldBackgroundPreTouch` holding the heap's pretouch, everything else that
/// pretouches or waits completes: an embedder memory reserved with a background pretouch is
/// pretouched by the gang and its wait returns, another is shrunk and a third dropped; the
/// heap shrinks below its initial size and grows again. Through all of it the heap's own
/// pretouch stays held; released, it completes.
#[test]
fn a_held_heap_pretouch_holds_nothing_else() {
    if isolated("a_held_heap_pretouch_holds_nothing_else") {
        return;
    }
    let vm = Arc::new(create(&[
        "-Xms64m",
        "-Xmx64m",
        "-XX:MinHeapSize=8m",
        "-XX:+AlwaysPreTouch",
        "-XX:+UnlockExperimentalVMOptions",
        "-XX:+BackgroundPreTouch",
        "-XX:+HoldBackgroundPreTouch",
        "-XX:ParallelGCThreads=2",
    ]));
    let held = |vm: &Vm| vm.heap().pretouch_progress() == Some((0, 64 * MB));
    assert!(held(&vm));
    let v = Arc::clone(&vm);
    let resident = returns("a memory's wait for its background pretouch", move || {
        let mut m = v
            .handle()
            .reserve_memory(MemoryRequest::new("Wasm Memory", 32 * MB).initial(32 * MB))
            .unwrap();
        let report = m
            .wait_for_pretouch()
            .unwrap()
            .expect("a background pretouch");
        assert!(report.workers > 0, "pretouched on the caller: {report:?}");
        m.resident_bytes()
    });
    assert_eq!(resident, 32 * MB, "the memory's pretouch did not complete");
    let v = Arc::clone(&vm);
    returns("a memory's shrink", move || {
        let mut m = v
            .handle()
            .reserve_memory(MemoryRequest::new("Wasm Memory", 16 * MB).initial(16 * MB))
            .unwrap();
        m.shrink_to(4 * MB).unwrap();
        assert_eq!(m.size(), 4 * MB);
    });
    let v = Arc::clone(&vm);
    returns("a memory's release", move || {
        drop(
            v.handle()
                .reserve_memory(MemoryRequest::new("Wasm Memory", 16 * MB).initial(16 * MB))
                .unwrap(),
        )
    });
    let v = Arc::clone(&vm);
    let shrunk = returns("a heap shrink below the initial size", move || {
        v.shrink_heap(16 * MB)
    });
    assert_eq!(shrunk.unwrap(), 16 * MB, "a shrink over a held pretouch");
    let v = Arc::clone(&vm);
    let grown = returns("a heap expansion", move || v.expand_heap(48 * MB));
    assert_eq!(grown.unwrap(), 64 * MB);
    assert_eq!(
        vm.heap().resident_bytes(),
        48 * MB,
        "the expansion pretouched its part, the held pretouch nothing"
    );
    assert!(
        held(&vm),
        "the hold did not hold: {:?}",
        vm.heap().pretouch_progress()
    );
    assert!(vm.release_pretouch());
    let v = Arc::clone(&vm);
    let report = returns("the released pretouch", move || v.wait_for_pretouch())
        .unwrap()
        .unwrap();
    assert_eq!(vm.heap().resident_bytes(), 64 * MB);
    println!("held throughout: memories pretouched, waited for, shrunk and dropped; the heap shrunk and grown; released: {report:?}");
}
