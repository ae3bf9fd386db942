//! Conservative roots under hundreds of collections, in child processes (MMTk is
//! process-wide):
//!
//! * mutators that hold their objects only in locals of deep frames, and only in a
//!   callee-saved register (put there by inline asm, the pointer masked everywhere else)
//!   across calls that allocate enough to collect many times;
//! * meanwhile threads start, bind, allocate and exit, and foreign threads attach, bind,
//!   allocate and detach;
//! * every object is checked afterwards: a lost root is a changed or reused object.
//!
//! Also: create → destroy → create reuses the process's MMTk (its workers respawned), and a
//! VM asking for another heap configuration is refused with a clear error.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rtvm::{InitArgs, Vm};
use rtvm_mmtk::{Language, Mmtk, Mutator, ObjRef, StartError};
use rtvm_testkit::child::{check_child, child_role};

/// A node: header (`size << 16 | slots`), next, value, check (`!value`), padding.
struct Nodes;

const NODE: usize = 32 << 16 | 1;
/// Garbage nodes are bigger: more bytes per allocation, more collections per second.
const BIG_NODE: usize = 256 << 16 | 1;

impl Language for Nodes {
    fn size(object: ObjRef) -> usize {
        object.header() >> 16
    }

    fn for_each_slot(object: ObjRef, slot: &mut dyn FnMut(*mut usize)) {
        for i in 1..=(object.header() & 0xffff) {
            slot(object.word_ptr(i));
        }
    }
}

fn node(m: &mut Mutator<Nodes>, next: Option<ObjRef>, value: u64) -> ObjRef {
    sized_node(m, NODE, next, value)
}

fn sized_node(m: &mut Mutator<Nodes>, h: usize, next: Option<ObjRef>, value: u64) -> ObjRef {
    rtvm::safepoint_poll();
    m.alloc(h >> 16, |o| {
        // SAFETY: a fresh node: its four meaningful words written (the padding is not read).
        unsafe {
            *o.word_ptr(0) = h;
            *o.word_ptr(1) = next.map_or(0, ObjRef::address);
            *o.word_ptr(2) = value as usize;
            *o.word_ptr(3) = !value as usize;
        }
    })
    .expect("the heap has room for the live nodes")
}

/// Checks a node holds `value`; returns its successor.
fn check(o: ObjRef, value: u64) -> Option<ObjRef> {
    // SAFETY: words of a live node.
    let (h, next, v, c) = unsafe { (o.word(0), o.word(1), o.word(2), o.word(3)) };
    assert!(
        h == NODE || h == BIG_NODE,
        "node {:#x}: header {h:#x} (a lost root?)",
        o.address()
    );
    assert_eq!(v as u64, value, "node {:#x}: value changed", o.address());
    assert_eq!(c, !v, "node {:#x}: check word changed", o.address());
    // SAFETY: 0 or a live node.
    unsafe { ObjRef::from_address(next) }
}

/// Garbage: lists of `n` nodes dropped at once.
#[inline(never)]
fn churn(m: &mut Mutator<Nodes>, lists: usize, n: u64) {
    for _ in 0..lists {
        let mut head = None;
        for v in 0..n {
            head = Some(sized_node(m, BIG_NODE, head, v));
        }
        let mut at = head;
        let mut v = n;
        while let Some(o) = at {
            v -= 1;
            at = check(o, v);
        }
    }
}

/// Recursion `depth` deep; each frame holds one list of 8 nodes only in its locals while the
/// frames below churn; checked on the way back up.
#[inline(never)]
fn deep(m: &mut Mutator<Nodes>, depth: u32, seed: u64) -> u64 {
    let mut head = None;
    for k in 0..8 {
        head = Some(node(m, head, seed * 8 + k));
    }
    let below = if depth == 0 {
        churn(m, 40, 500);
        0
    } else {
        deep(m, depth - 1, seed + 1)
    };
    let mut at = head;
    let mut k = 8;
    while let Some(o) = at {
        k -= 1;
        at = check(o, seed * 8 + k);
    }
    std::hint::black_box(below + 1)
}

/// Data for [`held_in_r12`]'s callback.
struct Churn {
    mutator: *mut Mutator<Nodes>,
}

extern "C" fn churn_callback(ctx: *mut Churn) {
    // SAFETY: `ctx` points at the caller's live `Churn`, whose mutator is this thread's.
    let m = unsafe { &mut *(*ctx).mutator };
    churn(m, 40, 500);
}

const MASK: usize = 0x5a5a_5a5a_5a5a_5a5a;

/// Holds a node only in r12 (callee-saved: `churn_callback` and what it calls keep it there
/// or save it in their frames) while `churn_callback` allocates; elsewhere only the masked
/// pointer exists. Returns the node r12 held.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn held_in_r12(m: &mut Mutator<Nodes>, value: u64) -> ObjRef {
    let masked = node(m, None, value).address() ^ MASK;
    let mut ctx = Churn { mutator: m };
    let out: usize;
    // SAFETY: r12 is set from the masked pointer (r13 ^ r14), survives the C call
    // (callee-saved, as r13-r15 which the block only reads) and is read back; the call follows the C ABI (clobber_abi) with a 16-byte aligned stack
    // (rsp is aligned at an asm block's start; nothing is pushed).
    unsafe {
        std::arch::asm!(
            "mov r12, r13",
            "xor r12, r14",
            "mov rdi, r15",
            "call {f}",
            "mov rax, r12",
            f = sym churn_callback,
            in("r13") masked,
            in("r14") MASK,
            in("r15") &mut ctx as *mut Churn,
            lateout("rax") out,
            out("r12") _,
            clobber_abi("C"),
        );
    }
    // SAFETY: the node r12 held (alive if its root was seen).
    let o = unsafe { ObjRef::from_address(out) }.expect("r12 held a node");
    check(o, value);
    o
}

#[cfg(not(target_arch = "x86_64"))]
fn held_in_r12(m: &mut Mutator<Nodes>, value: u64) -> ObjRef {
    let o = node(m, None, value);
    churn(m, 40, 500);
    check(o, value);
    o
}

fn create(options: &[&str]) -> Vm {
    Vm::create(InitArgs::new(options.iter().copied())).unwrap()
}

#[test]
fn conservative_roots_survive_hundreds_of_collections_immix() {
    stress(
        "conservative_roots_survive_hundreds_of_collections_immix",
        "Immix",
    );
}

#[test]
fn conservative_roots_survive_hundreds_of_collections_sticky_immix() {
    stress(
        "conservative_roots_survive_hundreds_of_collections_sticky_immix",
        "StickyImmix",
    );
}

#[test]
fn conservative_roots_survive_hundreds_of_collections_mark_sweep() {
    stress(
        "conservative_roots_survive_hundreds_of_collections_mark_sweep",
        "MarkSweep",
    );
}

fn stress(test: &str, plan: &str) {
    if child_role().is_none() {
        return check_child(test);
    }
    let vm = create(&[
        "-Xmx8m",
        &format!("-XX:MMTkPlan={plan}"),
        "-XX:ParallelGCThreads=2",
    ]);
    let heap = Mmtk::<Nodes>::start(&vm).unwrap();
    let before = heap.usage().collections;
    let done = Arc::new(AtomicBool::new(false));
    let churned = Arc::new(AtomicU64::new(0));
    // Threads that start, bind, allocate and end; foreign threads that attach and detach.
    let (h, d, c, v) = (heap.clone(), done.clone(), churned.clone(), vm.handle());
    let starter = vm
        .spawn("Starter", move || {
            let mut k = 0u64;
            while !d.load(Ordering::Relaxed) {
                let h2 = h.clone();
                let t = v
                    .spawn(&format!("Short#{k}"), move || {
                        let mut m = h2.bind().unwrap();
                        churn(&mut m, 2, 200);
                    })
                    .unwrap();
                t.join().unwrap();
                let (h3, v3) = (h.clone(), v.clone());
                // A join inside the C library: in a safe region, or no stop could end.
                let _safe = v.enter_safe_region().unwrap();
                std::thread::spawn(move || {
                    let attached = v3.attach_current_thread("Attached").unwrap();
                    {
                        let mut m = h3.bind().unwrap();
                        churn(&mut m, 2, 200);
                    }
                    attached.detach().unwrap();
                })
                .join()
                .unwrap();
                drop(_safe);
                k += 1;
                c.fetch_add(2, Ordering::Relaxed);
            }
        })
        .unwrap();
    let mut mutators = Vec::new();
    for t in 0..2 {
        let h = heap.clone();
        mutators.push(
            vm.spawn(&format!("Deep#{t}"), move || {
                let mut m = h.bind().unwrap();
                for round in 0..40u64 {
                    deep(&mut m, 48, round * 1000 + t * 100_000);
                    held_in_r12(&mut m, round + 7 + t * 1000);
                }
            })
            .unwrap(),
        );
    }
    for t in mutators {
        t.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    starter.join().unwrap();
    let collections = heap.usage().collections - before;
    assert!(
        collections >= 100,
        "only {collections} collections: the heap is not small enough"
    );
    vm.shutdown().unwrap();
    println!(
        "{plan}: {collections} collections; deep frames and r12 kept their nodes; {} short and attached threads bound and left meanwhile (sanity checks: {})",
        churned.load(Ordering::Relaxed),
        rtvm_mmtk::SANITY_CHECKS
    );
    println!("CHILD OK");
}

#[test]
fn create_destroy_create_reuses_mmtk_and_another_heap_is_refused() {
    if child_role().is_none() {
        return check_child("create_destroy_create_reuses_mmtk_and_another_heap_is_refused");
    }
    for round in 0..3 {
        let vm = create(&["-Xmx16m", "-XX:ParallelGCThreads=2"]);
        let heap = Mmtk::<Nodes>::start(&vm).unwrap();
        let before = heap.usage().collections;
        let t = {
            let h = heap.clone();
            vm.spawn("Worker", move || {
                let mut m = h.bind().unwrap();
                let keep = node(&mut m, None, 42);
                churn(&mut m, 20, 2000);
                assert!(h.collect(), "a full collection ran");
                check(keep, 42);
            })
            .unwrap()
        };
        t.join().unwrap();
        assert!(heap.usage().collections > before);
        let workers = vm
            .threads()
            .iter()
            .filter(|t| t.name.starts_with("GC Thread#"))
            .count();
        assert_eq!(
            workers, 2,
            "round {round}: the GC workers are this VM's threads"
        );
        // While this VM runs, no other may use the process's MMTk.
        vm.shutdown().unwrap();
        drop(heap);
        drop(vm);
    }
    let vm = create(&["-Xmx32m", "-XX:ParallelGCThreads=2"]);
    match Mmtk::<Nodes>::start(&vm) {
        Err(e @ StartError::OtherConfiguration { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("FixedHeapSize 16M") && text.contains("FixedHeapSize 32M"),
                "{text}"
            );
            println!("refused: {text}");
        }
        other => panic!("a VM with another heap got {other:?}"),
    }
    vm.shutdown().unwrap();
    std::thread::sleep(Duration::from_millis(1));
    println!("CHILD OK");
}
