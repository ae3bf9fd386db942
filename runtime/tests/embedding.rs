//! The embedding API: every `CreateError` code, `ignore_unrecognized` both ways, one VM per
//! process, create → drop → create with no mapping left behind, heap and thread access, NMT.
//! One VM per process means these tests take turns (`#[serial]`).

mod common;

use std::sync::atomic::Ordering;

use rtvm::{ErrorCode, ErrorKind, InitArgs, ThreadKind, Vm};
use rtvm_os_linux::procfs;
use serial_test::serial;

fn create(options: &[&str]) -> Result<Vm, rtvm::CreateError> {
    Vm::create(InitArgs::new(options.iter().copied()))
}

#[test]
#[serial]
fn every_error_code() {
    // JNI_EINVAL: a bad -XX option, a locked flag, a bad value, inconsistent heap sizes.
    for opts in [
        &["-XX:+NoSuchFlag"][..],
        &["-XX:+PrintNMTStatistics"],
        &["-XX:ThreadStackSize=abc"],
        &["-Xms2g", "-Xmx1g"],
    ] {
        let e = create(opts).unwrap_err();
        assert_eq!(e.code, ErrorCode::Inval, "{opts:?}: {e}");
        assert_eq!(e.code.code(), -6);
        assert!(!e.message.is_empty());
    }
    let e = create(&["-Xmx1"]).unwrap_err();
    assert_eq!(
        (e.code, e.kind, e.message.as_str()),
        (
            ErrorCode::Inval,
            ErrorKind::Initialization,
            "Too small maximum heap\n"
        )
    );
    // JNI_ERR: an option that is not a VM option at all.
    let e = create(&["-Xfoo"]).unwrap_err();
    assert_eq!(
        (e.code.code(), e.message.as_str()),
        (-1, "Unrecognized option: -Xfoo\n")
    );
    // JNI_ENOMEM is fault_injection.rs's `uncommittable_heap`: a commit refused under a
    // lowered RLIMIT_DATA in a child process. A huge -Xms here would depend on the machine
    // (overcommit mode, RAM) rather than on rtvm.
    // JNI_EEXIST: a second VM while one lives.
    let vm = create(&["-Xmx64m"]).unwrap();
    let e = create(&["-Xmx64m"]).unwrap_err();
    assert_eq!((e.code, e.code.code()), (ErrorCode::Exists, -5));
    drop(vm);
    create(&["-Xmx64m"]).expect("a VM can be created once the first is gone");
}

#[test]
#[serial]
fn ignore_unrecognized_both_ways() {
    let args = [
        "-XX:+NoSuchFlag",
        "-Xfoo",
        "-XX:+AlwaysPreTouch",
        "-Xms8m",
        "-Xmx8m",
    ];
    let e = Vm::create(InitArgs::new(args)).unwrap_err();
    assert_eq!(e.code, ErrorCode::Inval);
    let vm =
        Vm::create(InitArgs::new(args).ignore_unrecognized(true)).expect("unknown options skipped");
    assert!(vm.flags().get(rtvm::flags::flag::AlwaysPreTouch));
    drop(vm);
    // Locked flags and bad values still fail, as in HotSpot.
    for bad in ["-XX:+PrintNMTStatistics", "-XX:ThreadStackSize=abc"] {
        let e = Vm::create(InitArgs::new([bad]).ignore_unrecognized(true)).unwrap_err();
        assert_eq!(e.code, ErrorCode::Inval, "{bad}");
    }
}

fn mapping_count() -> usize {
    procfs::read_maps().unwrap().len()
}

#[test]
#[serial]
fn create_drop_create_leaves_nothing_behind() {
    // Alone in a child: the comparison must see only what this test maps.
    if common::isolated("create_drop_create_leaves_nothing_behind") {
        return;
    }
    // Warm up what the first VM creates once per process (logger, probes, the signal
    // handler) so the comparison sees only what a VM owns.
    drop(create(&["-Xms16m", "-Xmx64m"]).unwrap());
    let before = procfs::read_maps().unwrap();
    let tasks_before = tasks();
    let vm = create(&[
        "-Xms32m",
        "-Xmx256m",
        "-XX:+AlwaysPreTouch",
        "-XX:ParallelGCThreads=2",
    ])
    .unwrap();
    let heap = vm.heap().range();
    let threads: Vec<_> = (0..8)
        .map(|i| vm.spawn(&format!("t{i}"), || ()).unwrap())
        .collect();
    let stacks: Vec<_> = vm
        .threads()
        .iter()
        .map(|t| t.layout.mapping.clone())
        .collect();
    assert!(mapping_count() > before.len());
    assert!(!procfs::maps_overlapping(heap.start, heap.end)
        .unwrap()
        .is_empty());
    for t in threads {
        t.join().unwrap();
    }
    let vm_tasks = tasks();
    assert!(
        vm_tasks.len() >= tasks_before.len() + 3,
        "workers and the dispatcher: {vm_tasks:?}"
    );
    drop(vm);
    // The kernel's view, at once: every thread of the VM joined and released.
    assert_eq!(tasks(), tasks_before, "threads left behind by the destroy");
    assert!(
        procfs::maps_overlapping(heap.start, heap.end)
            .unwrap()
            .is_empty(),
        "heap unmapped"
    );
    for s in &stacks {
        assert!(
            procfs::maps_overlapping(s.start, s.end).unwrap().is_empty(),
            "stack {s:x?} unmapped"
        );
    }
    let leaked = common::new_mappings_besides_arenas(&before);
    assert!(leaked.is_empty(), "mappings left behind: {leaked:#?}");
    let vm = create(&["-Xmx64m"]).expect("create again");
    vm.shutdown().unwrap();
}

/// This process's threads as the kernel lists them (`/proc/self/task`): ids, sorted.
fn tasks() -> Vec<i32> {
    let mut ids: Vec<i32> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
#[serial]
fn heap_threads_flags_and_shutdown() {
    let vm = create(&["-Xms8m", "-Xmx64m", "-Xmn2m", "-XX:ParallelGCThreads=1"]).unwrap();
    assert_eq!(vm.flags().get(rtvm::flags::flag::MaxHeapSize), 64 << 20);
    let block = vm.allocate(1 << 20).unwrap();
    block.words()[0].store(42, Ordering::Relaxed);
    assert_eq!(vm.heap_stats().used, 1 << 20);
    assert!(vm.allocate(64 << 20).is_none(), "beyond the committed heap");
    vm.expand_heap(8 << 20).unwrap();
    assert_eq!(vm.heap_stats().committed, 16 << 20);
    // A VM thread of each kind, with the stack sizes of the flags.
    let heap = std::sync::Arc::clone(vm.heap());
    let t = vm.thread("writer").kind(ThreadKind::Vm).spawn(move || {
        let b = heap.allocate(4096).unwrap();
        b.words()[1].store(7, Ordering::Relaxed);
    });
    t.unwrap().join().unwrap();
    let names: Vec<String> = vm.threads().iter().map(|t| t.name.clone()).collect();
    assert_eq!(
        names,
        ["Worker#0", "Signal Dispatcher"],
        "joined threads leave the registry"
    );
    // A panicking body is reported at join, not propagated.
    let e = vm
        .spawn("panicker", || panic!("deliberate test panic"))
        .unwrap()
        .join()
        .unwrap_err();
    assert!(e.to_string().contains("deliberate test panic"), "{e}");
    // The nursery: allocations end with the scope.
    let used = vm.heap().with_nursery(|n| {
        assert_eq!(n.capacity(), 2 << 20);
        n.allocate(1 << 20).unwrap().words()[0].store(1, Ordering::Relaxed);
        assert!(n.allocate(2 << 20).is_none(), "the nursery is 2 MiB");
        n.used()
    });
    assert_eq!(used, 1 << 20);
    vm.heap()
        .with_nursery(|n| assert_eq!(n.used(), 0, "a new scope starts empty"));
    vm.shutdown().unwrap();
}

#[test]
#[serial]
fn native_memory_summary() {
    let vm = create(&["-Xmx64m", "-Xms16m"]).unwrap();
    assert!(vm.native_memory_summary().is_none(), "off by default");
    drop(vm);
    let vm = create(&[
        "-Xmx64m",
        "-Xms16m",
        "-XX:NativeMemoryTracking=summary",
        "-XX:ParallelGCThreads=2",
    ])
    .unwrap();
    let t = vm
        .spawn("sleeper", || {
            std::thread::sleep(std::time::Duration::from_millis(50))
        })
        .unwrap();
    let n = vm.native_memory_summary().unwrap();
    assert_eq!(n.heap.reserved, 64 << 20);
    assert_eq!(n.heap.committed, 16 << 20);
    // The gang starts one of its two workers with the VM, the other when a task needs it.
    assert_eq!(
        n.thread_count, 3,
        "the first worker, the Signal Dispatcher and the sleeper"
    );
    assert!(
        n.stacks.reserved >= 2 << 20
            && n.stacks.committed > 0
            && n.stacks.committed < n.stacks.reserved
    );
    let report = n.report();
    assert!(report.starts_with("\nNative Memory Tracking:\n\nTotal: reserved="));
    assert!(
        report.contains("\n-                 Java Heap (reserved=67108864, committed=16777216)\n")
    );
    assert!(report.contains("\n                            (thread #3)\n"));
    t.join().unwrap();
    drop(vm);
    let vm = create(&[
        "-Xmx64m",
        "-XX:NativeMemoryTracking=detail",
        "-XX:ParallelGCThreads=1",
    ])
    .unwrap();
    let n = vm.native_memory_summary().unwrap();
    assert_eq!(
        n.stack_details.len(),
        2,
        "the worker and the Signal Dispatcher"
    );
    assert!(n.report().contains(" for Thread Stack \"Worker#0\"\n"));
    assert!(n
        .report()
        .contains(" for Thread Stack \"Signal Dispatcher\"\n"));
}

/// What a collecting hook kept: (stdout, stderr).
type Collected = std::sync::Arc<std::sync::Mutex<(String, String)>>;

/// A hook that keeps everything, per stream.
fn collecting() -> (
    Collected,
    impl Fn(rtvm::Stream, &str) + Send + Sync + 'static,
) {
    let text = std::sync::Arc::new(std::sync::Mutex::new((String::new(), String::new())));
    let sink = std::sync::Arc::clone(&text);
    (text, move |stream, s: &str| {
        let mut t = sink.lock().unwrap();
        match stream {
            rtvm::Stream::Stdout => t.0.push_str(s),
            rtvm::Stream::Stderr => t.1.push_str(s),
        }
    })
}

#[test]
#[serial]
fn output_hook_receives_flags_logs_and_the_nmt_report() {
    let (text, hook) = collecting();
    let args = InitArgs::new([
        "-Xmx64m",
        "-XX:+PrintFlagsFinal",
        "-XX:NativeMemoryTracking=summary",
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+PrintNMTStatistics",
        "-Xlog:os+thread=info:stderr",
        "-XX:ThreadStackSize=1",
    ])
    .output(hook);
    // -XX:ThreadStackSize=1 is too small: HotSpot's message, on the hook's stdout.
    let e = Vm::create(args.clone()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::ArgumentsStdout, "{e}");
    let mut args = args;
    args.options.pop();
    let vm = Vm::create(args).unwrap();
    vm.spawn("logged", || {}).unwrap().join().unwrap();
    vm.shutdown().unwrap();
    let (out, err) = text.lock().unwrap().clone();
    assert!(
        out.contains("[Global flags]") && out.contains("MaxHeapSize"),
        "{out}"
    );
    assert_eq!(
        out.matches("Native Memory Tracking:").count(),
        1,
        "the NMT report of the shutdown, once: {out}"
    );
    assert_eq!(out.matches("[Global flags]").count(), 1, "{out}");
    assert!(err.contains("Thread \"logged\""), "-Xlog to stderr: {err}");
}

#[test]
#[serial]
fn exit_requests_come_back_as_exited_with_their_output_in_the_hook() {
    for (option, expected, on_stdout) in [
        ("-XX:+PrintFlagsInitial", "bool AlwaysPreTouch", true),
        ("-Xlog:help", "Available log levels:", true),
        ("-version", "rtvm version", false),
    ] {
        let (text, hook) = collecting();
        let e = Vm::create(InitArgs::new([option]).output(hook)).unwrap_err();
        assert_eq!(
            (e.code, e.code.code(), e.kind),
            (ErrorCode::Exited, -7, ErrorKind::ExitRequested),
            "{option}"
        );
        let (out, err) = text.lock().unwrap().clone();
        let got = if on_stdout { &out } else { &err };
        assert!(
            got.contains(expected),
            "{option}: stdout {out:?} stderr {err:?}"
        );
        // Nothing stays behind: the next VM can be created.
        create(&["-Xmx64m"]).unwrap().shutdown().unwrap();
    }
}

/// Memory an embedder maps through the VM, as the kernel sees it: `initial` bytes read-write
/// and the rest of the capacity plus the guard PROT_NONE, at an address that never moves;
/// growing commits (and with AlwaysPreTouch pretouches: mincore finds every page) more; a
/// growth beyond the capacity is refused and changes nothing; NMT counts it in its category
/// (summary and detail); dropping it unmaps it.
#[test]
#[serial]
fn embedder_memory_reserve_grow_nmt_and_release() {
    // Alone in a child: the range check after the unmap must not see another test's mapping.
    if common::isolated("embedder_memory_reserve_grow_nmt_and_release") {
        return;
    }
    const MIB: usize = 1 << 20;
    let vm = create(&[
        "-Xmx32m",
        "-XX:+AlwaysPreTouch",
        "-XX:NativeMemoryTracking=detail",
    ])
    .unwrap();
    let mut m = vm
        .reserve_memory(
            rtvm::MemoryRequest::new("Wasm Memory", 64 * MIB)
                .guard(32 * MIB)
                .initial(MIB),
        )
        .unwrap();
    let base = m.base() as usize;
    assert_eq!(
        (m.size(), m.capacity(), m.guard()),
        (MIB, 64 * MIB, 32 * MIB)
    );
    let maps = procfs::maps_overlapping(base, base + 96 * MIB).unwrap();
    let rw: usize = maps
        .iter()
        .filter(|e| e.perms.starts_with("rw"))
        .map(|e| e.len())
        .sum();
    let none: usize = maps
        .iter()
        .filter(|e| e.is_protected_none())
        .map(|e| e.len())
        .sum();
    assert_eq!((rw, none), (MIB, 95 * MIB), "{maps:?}");
    assert_eq!(m.resident_bytes(), MIB, "pretouched at creation");

    m.grow_to(16 * MIB + 1).unwrap();
    assert_eq!(m.size(), 16 * MIB + 4096, "rounded up to the page");
    assert_eq!(m.base() as usize, base, "grown in place");
    assert_eq!(m.resident_bytes(), m.size(), "the growth is pretouched");
    let e = m.grow_to(65 * MIB).unwrap_err();
    assert!(matches!(e, rtvm::MemoryError::Capacity { .. }), "{e}");
    assert_eq!(m.size(), 16 * MIB + 4096);

    let n = vm.native_memory_summary().unwrap();
    let report = n.report();
    assert!(
        report.contains(&format!(
            "\n-               Wasm Memory (reserved={}, committed={})\n",
            96 * MIB,
            16 * MIB + 4096
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!("] reserved {} for Wasm Memory\n", 96 * MIB)),
        "{report}"
    );
    assert!(report.contains("Type=Wasm Memory)"), "{report}");
    let total_mmap = n.mmap();
    assert!(total_mmap.reserved >= (32 + 96) as u64 * MIB as u64);

    drop(m);
    assert!(procfs::maps_overlapping(base, base + 96 * MIB)
        .unwrap()
        .is_empty());
    assert!(!vm
        .native_memory_summary()
        .unwrap()
        .report()
        .contains("Wasm Memory"));
    // Requests that make no sense are refused with the category named.
    let e = vm
        .reserve_memory(rtvm::MemoryRequest::new("Bad", 0))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid memory request for Bad: capacity is zero"
    );
    let e = vm
        .reserve_memory(rtvm::MemoryRequest::new("Bad", MIB).initial(2 * MIB))
        .unwrap_err();
    assert!(
        e.to_string().ends_with("initial size beyond the capacity"),
        "{e}"
    );
    vm.shutdown().unwrap();
}

/// With BackgroundPreTouch the reservation returns at once and the gang pretouches; with
/// UseTransparentHugePages (madvise mode) the memory is THP-aligned and advised (`hg`).
#[test]
#[serial]
fn embedder_memory_background_pretouch_and_thp() {
    const MIB: usize = 1 << 20;
    let thp_madvise = rtvm_testkit::kernel::thp_mode().as_deref() == Some("madvise");
    let vm = create(&[
        "-Xmx32m",
        "-XX:+AlwaysPreTouch",
        "-XX:+UnlockExperimentalVMOptions",
        "-XX:+BackgroundPreTouch",
        "-XX:+UseTransparentHugePages",
        "-XX:ParallelGCThreads=2",
    ])
    .unwrap();
    vm.wait_for_pretouch().unwrap();
    let mut m = vm
        .reserve_memory(rtvm::MemoryRequest::new("Arena", 256 * MIB).initial(128 * MIB))
        .unwrap();
    let report = m
        .wait_for_pretouch()
        .unwrap()
        .expect("a background pretouch ran");
    assert_eq!(report.bytes, 128 * MIB);
    assert_eq!(m.resident_bytes(), 128 * MIB);
    if let Some(pmd) = rtvm_testkit::kernel::thp_pmd_size() {
        if thp_madvise {
            assert_eq!(m.page_size(), pmd);
            assert_eq!(m.base() as usize % pmd, 0, "aligned to the THP size");
            let smaps = procfs::smaps_overlapping(m.base() as usize, m.base() as usize + 256 * MIB)
                .unwrap();
            assert!(smaps.iter().all(|e| e.has_flag("hg")), "{smaps:?}");
        }
    }
    vm.shutdown().unwrap();
    // The memory outlives the VM; a growth is then pretouched by the caller.
    m.grow_to(160 * MIB).unwrap();
    assert_eq!(m.resident_bytes(), 160 * MIB);
}
