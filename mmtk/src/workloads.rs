//! The standard GC workloads on the MMTk heap (the `rtvm` launcher's `BinaryTrees` and
//! `GCBench` mains run these): here, so MMTk's generic code is instantiated in this crate,
//! which debug builds optimize (the workspace's `profile.dev.package.rtvm-mmtk`).
//!
//! The standard GC workloads on the MMTk heap: `BinaryTrees` (the Benchmarks Game's
//! binary-trees) and `GCBench` (Ellis, Kovac, Boehm). Mutators are VM threads that poll at
//! every allocation and loop back-edge; their pointers live only in their frames and
//! registers (conservative roots). Every answer is checked, so a lost root is a wrong
//! answer or a crash report, never a silent pass.

use std::io::Write as _;
use std::time::Instant;

use rtvm::VmHandle as Vm;

use crate::{Language, Mmtk, Mutator, ObjRef, OutOfMemory, StartError};

/// How a workload ends other than with its answer.
#[derive(Debug)]
pub enum WorkloadError {
    /// MMTk refused the configuration (a bad option: the launcher says so as for any).
    Refused(StartError),
    /// The heap was exhausted on the thread named.
    OutOfMemory {
        /// The thread's name.
        thread: String,
    },
    /// A usage error, a broken answer, an output or thread failure.
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkloadError::Refused(e) => e.fmt(f),
            WorkloadError::OutOfMemory { thread } => {
                write!(f, "Exception in thread \"{thread}\" {OutOfMemory}")
            }
            WorkloadError::Failed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WorkloadError {}

impl From<String> for WorkloadError {
    fn from(e: String) -> Self {
        WorkloadError::Failed(e.into())
    }
}

impl From<&str> for WorkloadError {
    fn from(e: &str) -> Self {
        WorkloadError::Failed(e.into())
    }
}

impl From<std::io::Error> for WorkloadError {
    fn from(e: std::io::Error) -> Self {
        WorkloadError::Failed(e.into())
    }
}

impl From<rtvm::ThreadError> for WorkloadError {
    fn from(e: rtvm::ThreadError) -> Self {
        WorkloadError::Failed(e.into())
    }
}

type MainResult = Result<(), WorkloadError>;

/// The workloads' objects: a header word `size << 16 | reference slots`, then the
/// reference slots, then plain data (a tree node's two ints, an array's doubles).
#[derive(Debug)]
pub struct Objects;

impl Language for Objects {
    fn size(object: ObjRef) -> usize {
        object.header() >> 16
    }

    fn for_each_slot(object: ObjRef, slot: &mut dyn FnMut(*mut usize)) {
        for i in 1..=(object.header() & 0xffff) {
            slot(object.word_ptr(i));
        }
    }
}

const fn header(size: usize, slots: usize) -> usize {
    size << 16 | slots
}

/// A binary-trees node: header, left, right.
const NODE: usize = header(24, 2);
/// A GCBench node: header, left, right, two ints.
const GCBENCH_NODE: usize = header(32, 2);

type Heap = Mmtk<Objects>;

/// Starts MMTk for the workload.
fn start(vm: &Vm) -> Result<Heap, WorkloadError> {
    Mmtk::<Objects>::start(vm).map_err(WorkloadError::Refused)
}

fn bind(heap: &Heap) -> Result<Mutator<Objects>, WorkloadError> {
    heap.bind()
        .ok_or_else(|| "the thread is not a thread of the VM".into())
}

/// `Exception in thread "<name>" java.lang.OutOfMemoryError: Java heap space`.
fn out_of_memory(thread: &str) -> WorkloadError {
    WorkloadError::OutOfMemory {
        thread: thread.to_owned(),
    }
}

/// A node with the given children (the poll at allocation first).
#[inline]
fn node(
    m: &mut Mutator<Objects>,
    size_header: usize,
    left: Option<ObjRef>,
    right: Option<ObjRef>,
) -> Result<ObjRef, OutOfMemory> {
    rtvm::safepoint_poll();
    m.alloc(size_header >> 16, |o| {
        let (l, r) = (
            left.map_or(0, ObjRef::address),
            right.map_or(0, ObjRef::address),
        );
        // SAFETY: `o` is a fresh object of `size` bytes: every word is written here.
        unsafe {
            *o.word_ptr(0) = size_header;
            *o.word_ptr(1) = l;
            *o.word_ptr(2) = r;
            if size_header >> 16 > 24 {
                *o.word_ptr(3) = 0;
            }
        }
    })
}

#[inline]
fn left(o: ObjRef) -> Option<ObjRef> {
    // SAFETY: word 1 of a node is its left child (0 or a node reachable through `o`).
    unsafe { ObjRef::from_address(o.word(1)) }
}

#[inline]
fn right(o: ObjRef) -> Option<ObjRef> {
    // SAFETY: as `left`.
    unsafe { ObjRef::from_address(o.word(2)) }
}

fn bottom_up(m: &mut Mutator<Objects>, h: usize, depth: u32) -> Result<ObjRef, OutOfMemory> {
    if depth == 0 {
        return node(m, h, None, None);
    }
    let l = bottom_up(m, h, depth - 1)?;
    let r = bottom_up(m, h, depth - 1)?;
    node(m, h, Some(l), Some(r))
}

/// Nodes in the tree; a node whose children are not both present or both absent, or whose
/// header is not a node's, is a broken tree.
fn check(o: ObjRef, h: usize) -> Result<u64, String> {
    count(o, h).map_err(|broken| broken_node(broken, h))
}

/// Nodes in the tree, or the first broken node (the hot loop: the answer fits in registers).
fn count(o: ObjRef, h: usize) -> Result<u64, ObjRef> {
    if o.header() != h {
        return Err(o);
    }
    match (left(o), right(o)) {
        (None, None) => Ok(1),
        (Some(l), Some(r)) => Ok(1 + count(l, h)? + count(r, h)?),
        _ => Err(o),
    }
}

#[cold]
fn broken_node(o: ObjRef, h: usize) -> String {
    if o.header() != h {
        format!(
            "a tree node at {:#x} has header {:#x} (a lost root?)",
            o.address(),
            o.header()
        )
    } else {
        format!("a tree node at {:#x} has one child", o.address())
    }
}

fn parse_threads(arg: Option<&String>, usage: &str) -> Result<usize, String> {
    match arg {
        None => Ok(1),
        Some(a) => a
            .parse::<usize>()
            .ok()
            .filter(|&n| (1..=1024).contains(&n))
            .ok_or_else(|| usage.to_owned()),
    }
}

/// What one mutator thread ends with.
type Work<T> = Result<T, WorkError>;

enum WorkError {
    OutOfMemory,
    Broken(String),
}

impl From<OutOfMemory> for WorkError {
    fn from(_: OutOfMemory) -> Self {
        WorkError::OutOfMemory
    }
}

impl From<String> for WorkError {
    fn from(s: String) -> Self {
        WorkError::Broken(s)
    }
}

fn work_error(e: WorkError, thread: &str) -> WorkloadError {
    match e {
        WorkError::OutOfMemory => out_of_memory(thread),
        WorkError::Broken(why) => why.into(),
    }
}

/// Runs `work(k, share)` on `threads` mutator threads named `<prefix>#k`, `total` units of
/// work split between them; the sum of their results.
fn split<F>(
    vm: &Vm,
    heap: &Heap,
    prefix: &str,
    threads: usize,
    total: u64,
    work: F,
) -> Result<u64, WorkloadError>
where
    F: Fn(&mut Mutator<Objects>, u64) -> Work<u64> + Send + Sync + Clone + 'static,
{
    let mut handles = Vec::new();
    let results = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    for k in 0..threads {
        let share = total / threads as u64 + u64::from((k as u64) < total % threads as u64);
        let (heap, work, results) = (heap.clone(), work.clone(), results.clone());
        let name = format!("{prefix}#{k}");
        let thread_name = name.clone();
        handles.push(vm.spawn(&name, move || {
            let r = match heap.bind() {
                Some(mut m) => work(&mut m, share),
                None => Err(WorkError::Broken("not a VM thread".into())),
            };
            results
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((thread_name, r));
        })?);
    }
    for h in handles {
        h.join()?;
    }
    let mut sum = 0;
    let results = std::mem::take(&mut *results.lock().unwrap_or_else(|p| p.into_inner()));
    for (name, r) in results {
        sum += r.map_err(|e| work_error(e, &name))?;
    }
    Ok(sum)
}

fn print(line: &str) -> MainResult {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())?;
    Ok(())
}

/// `BinaryTrees <depth> [<mutator threads>]`: the Benchmarks Game's binary-trees.
pub fn binary_trees(vm: &Vm, args: &[String]) -> MainResult {
    let usage = "usage: BinaryTrees <depth> [<mutator threads>]";
    let n: u32 = args
        .first()
        .and_then(|a| a.parse().ok())
        .filter(|&n| n <= 30)
        .ok_or(usage)?;
    let threads = parse_threads(args.get(1), usage)?;
    let heap = start(vm)?;
    let mut m = bind(&heap)?;
    let (min_depth, max_depth) = (4u32, n.max(6));
    let stretch = max_depth + 1;
    let t = bottom_up(&mut m, NODE, stretch).map_err(|_| out_of_memory("main"))?;
    let c = check(t, NODE)?;
    print(&format!("stretch tree of depth {stretch}\t check: {c}"))?;
    let long_lived = bottom_up(&mut m, NODE, max_depth).map_err(|_| out_of_memory("main"))?;
    for d in (min_depth..=max_depth).step_by(2) {
        let iterations = 1u64 << (max_depth - d + min_depth);
        let sum = split(
            vm,
            &heap,
            "BinaryTrees",
            threads,
            iterations,
            move |m, share| {
                let mut sum = 0;
                for _ in 0..share {
                    rtvm::safepoint_poll();
                    let t = bottom_up(m, NODE, d)?;
                    sum += check(t, NODE)?;
                }
                Ok(sum)
            },
        )?;
        let want = iterations * ((1u64 << (d + 1)) - 1);
        if sum != want {
            return Err(format!("trees of depth {d}: check {sum}, expected {want}").into());
        }
        print(&format!("{iterations}\t trees of depth {d}\t check: {sum}"))?;
    }
    let c = check(long_lived, NODE)?;
    print(&format!(
        "long lived tree of depth {max_depth}\t check: {c}"
    ))?;
    drop(m);
    Ok(())
}

const STRETCH_DEPTH: u32 = 18;
const LONG_LIVED_DEPTH: u32 = 16;
const ARRAY_SIZE: usize = 500_000;
const MIN_DEPTH: u32 = 4;
const MAX_DEPTH: u32 = 16;

fn tree_size(depth: u32) -> u64 {
    (1 << (depth + 1)) - 1
}

/// GCBench's `Populate`: gives `node` children down to `depth`, top down.
fn populate(m: &mut Mutator<Objects>, depth: u32, n: ObjRef) -> Result<(), OutOfMemory> {
    if depth == 0 {
        return Ok(());
    }
    let l = node(m, GCBENCH_NODE, None, None)?;
    m.store(n, 1, Some(l));
    let r = node(m, GCBENCH_NODE, None, None)?;
    m.store(n, 2, Some(r));
    populate(m, depth - 1, l)?;
    populate(m, depth - 1, r)
}

/// A top-down tree of `depth`.
/// A way to build a GCBench tree of a depth.
type Build = fn(&mut Mutator<Objects>, u32) -> Result<ObjRef, OutOfMemory>;

fn top_down(m: &mut Mutator<Objects>, depth: u32) -> Result<ObjRef, OutOfMemory> {
    let t = node(m, GCBENCH_NODE, None, None)?;
    populate(m, depth, t)?;
    Ok(t)
}

/// `GCBench [<mutator threads>]`.
pub fn gcbench(vm: &Vm, args: &[String]) -> MainResult {
    let threads = parse_threads(args.first(), "usage: GCBench [<mutator threads>]")?;
    let heap = start(vm)?;
    let mut m = bind(&heap)?;
    let oom = |_| out_of_memory("main");
    print("Garbage Collector Test")?;
    print(&format!(
        " Stretching memory with a binary tree of depth {STRETCH_DEPTH}"
    ))?;
    let began = Instant::now();
    let t = bottom_up(&mut m, GCBENCH_NODE, STRETCH_DEPTH).map_err(oom)?;
    let c = check(t, GCBENCH_NODE)?;
    if c != tree_size(STRETCH_DEPTH) {
        return Err(format!("stretch tree: {c} nodes").into());
    }
    print(&format!(
        " Creating a long-lived binary tree of depth {LONG_LIVED_DEPTH}"
    ))?;
    let long_lived = top_down(&mut m, LONG_LIVED_DEPTH).map_err(oom)?;
    print(&format!(
        " Creating a long-lived array of {ARRAY_SIZE} doubles"
    ))?;
    let array = m
        .alloc(8 + 8 * ARRAY_SIZE, |o| {
            // SAFETY: a fresh object of 1 + ARRAY_SIZE words, all written here.
            unsafe {
                *o.word_ptr(0) = header(8 + 8 * ARRAY_SIZE, 0);
                std::ptr::write_bytes(o.word_ptr(1), 0, ARRAY_SIZE);
            }
        })
        .map_err(oom)?;
    let doubles = array.word_ptr(1) as *mut f64;
    for i in 0..ARRAY_SIZE / 2 {
        // SAFETY: within the array's ARRAY_SIZE doubles; `array` is pinned by this frame.
        unsafe { *doubles.add(i) = 1.0 / i as f64 };
    }
    for d in (MIN_DEPTH..=MAX_DEPTH).step_by(2) {
        let iterations = 2 * tree_size(STRETCH_DEPTH) / tree_size(d);
        print(&format!("Creating {iterations} trees of depth {d}"))?;
        let ways: [(&str, &str, Build); 2] = [
            ("top-down", "Top down", top_down),
            ("bottom-up", "Bottom up", |m, d| {
                bottom_up(m, GCBENCH_NODE, d)
            }),
        ];
        for (what, label, build) in ways {
            let t0 = Instant::now();
            split(
                vm,
                &heap,
                "GCBench",
                threads,
                iterations,
                move |m, share| {
                    let mut last = None;
                    for _ in 0..share {
                        rtvm::safepoint_poll();
                        last = Some(build(m, d)?);
                    }
                    // The last tree of each thread is checked (checking every one would
                    // double the work GCBench times).
                    match last {
                        Some(t) if check(t, GCBENCH_NODE)? != tree_size(d) => {
                            Err(format!("a {what} tree of depth {d} is broken").into())
                        }
                        _ => Ok(0),
                    }
                },
            )?;
            print(&format!(
                "\t{label} construction took {} msec",
                t0.elapsed().as_millis()
            ))?;
        }
    }
    let c = check(long_lived, GCBENCH_NODE)?;
    // SAFETY: element 1000 of the live array.
    let a1000 = unsafe { *doubles.add(1000) };
    if c != tree_size(LONG_LIVED_DEPTH)
        || a1000 != 1.0 / 1000.0
        || array.header() != header(8 + 8 * ARRAY_SIZE, 0)
    {
        return Err(format!(
            "Failed: the long-lived tree has {c} nodes (expected {}), array[1000] = {a1000}",
            tree_size(LONG_LIVED_DEPTH)
        )
        .into());
    }
    print(&format!("Completed in {} ms.", began.elapsed().as_millis()))?;
    drop(m);
    Ok(())
}
