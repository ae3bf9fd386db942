//! Stack mappings and threads on them, through `/proc/self/maps` and `smaps`.

mod common;

use std::sync::mpsc;

use common::*;
use rtvm_os_linux::stack::{
    kernel_marks_map_stack_nohugepage, recommended_alt_stack_size, spawn, StackMapping, StackSpec,
    ThreadContext,
};
use rtvm_os_linux::{base_page_size, procfs, Errno};

fn spec(size: usize, mitigated: bool, name: &str) -> StackSpec {
    StackSpec {
        size,
        guard_size: base_page_size(),
        alt_stack_size: recommended_alt_stack_size(),
        no_huge_pages: mitigated,
        guard_early: mitigated,
        name: name.into(),
    }
}

#[test]
fn mitigated_stack_is_guarded_and_nh_before_any_thread() {
    let s = StackMapping::map(&spec(2 * MIB + base_page_size(), true, "early")).unwrap();
    let l = s.layout().clone();
    let maps = maps_in(l.mapping.start, l.mapping.end);
    let guard = maps
        .iter()
        .find(|m| m.start == l.guard.start)
        .expect("guard is its own mapping");
    assert_eq!(guard.end, l.guard.end);
    assert!(guard.is_protected_none(), "{guard:?}");
    let smaps = procfs::smaps_overlapping(l.mapping.start, l.mapping.end).unwrap();
    assert!(
        smaps.iter().all(|e| e.has_flag("nh")),
        "every part is MADV_NOHUGEPAGE: {smaps:?}"
    );
    assert_eq!(
        s.collapse(2 * MIB).unwrap_err().errno,
        Errno::EINVAL,
        "khugepaged cannot touch it"
    );
    drop(s);
    assert!(maps_in(l.mapping.start, l.mapping.end).is_empty());
}

#[test]
fn unmitigated_stack_is_plain_until_the_thread_guards_it() {
    let s = StackMapping::map(&spec(2 * MIB, false, "late")).unwrap();
    let l = s.layout().clone();
    let maps = maps_in(l.mapping.start, l.mapping.end);
    assert!(
        maps.iter().all(|m| m.perms == "rw-p"),
        "no guard yet: {maps:?}"
    );
    let smaps = procfs::smaps_overlapping(l.mapping.start, l.mapping.end).unwrap();
    assert!(
        smaps.iter().all(|e| !e.has_flag("nh")),
        "no MADV_NOHUGEPAGE, no MAP_STACK: {smaps:?}"
    );
    let (tx, rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let t = spawn(
        s,
        Box::new(move |ctx: &mut ThreadContext| {
            assert!(!ctx.guard_installed());
            ctx.install_guard().unwrap();
            tx.send(()).unwrap();
            go_rx.recv().unwrap();
        }),
    )
    .unwrap();
    rx.recv().unwrap();
    let maps = maps_in(l.mapping.start, l.mapping.end);
    let guard = maps
        .iter()
        .find(|m| m.start == l.guard.start)
        .expect("guard placed by the thread");
    assert!(guard.is_protected_none() && guard.end == l.guard.end);
    go_tx.send(()).unwrap();
    t.join();
    assert!(
        maps_in(l.mapping.start, l.mapping.end).is_empty(),
        "join unmaps the stack"
    );
}

#[test]
fn map_stack_probe_matches_smaps() {
    let marks = kernel_marks_map_stack_nohugepage();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    println!(
        "kernel {} marks MAP_STACK mappings nh: {marks}",
        release.trim()
    );
    let (major, minor) = {
        let mut it = release
            .trim()
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().unwrap_or(0));
        (it.next().unwrap(), it.next().unwrap())
    };
    if (major, minor) >= (6, 8) {
        assert!(marks, "6.8+ kernels map MAP_STACK to VM_NOHUGEPAGE");
    }
}

#[test]
fn altstack_and_alloca_deep_recursion_within_limits() {
    // A thread uses most of its stack without touching the guard.
    let s = StackMapping::map(&spec(MIB, true, "deep")).unwrap();
    let (tx, rx) = mpsc::channel();
    let t = spawn(
        s,
        Box::new(move |_: &mut ThreadContext| {
            fn recurse(n: usize) -> usize {
                let buf = std::hint::black_box([n as u8; 1024]);
                if n == 0 {
                    buf[0] as usize
                } else {
                    recurse(n - 1) + buf[1] as usize
                }
            }
            tx.send(recurse(400)).unwrap();
        }),
    )
    .unwrap();
    assert!(rx.recv().is_ok());
    t.join();
}

#[test]
fn stack_overflow_is_reported_and_aborts() {
    if child_role().is_some() {
        let s = StackMapping::map(&spec(256 * 1024, true, "overflower")).unwrap();
        let t = spawn(
            s,
            Box::new(|_: &mut ThreadContext| {
                #[allow(unconditional_recursion)]
                fn recurse(n: u64) -> u64 {
                    let buf = std::hint::black_box([n; 64]);
                    recurse(n + 1) + buf[3]
                }
                println!("{}", recurse(0));
            }),
        )
        .unwrap();
        t.join();
        println!("NOT REACHED");
        return;
    }
    let out = run_child("stack_overflow_is_reported_and_aborts", "overflow");
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "{}",
        describe(&out)
    );
    let line = value_after(
        &stderr,
        "stack overflow in thread \"overflower\": fault address 0x",
    );
    let line = line.unwrap_or_else(|| panic!("{}", describe(&out)));
    assert!(
        line.contains(", guard zone [0x") && line.contains("), stack [0x"),
        "{line}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("NOT REACHED"));
}

#[test]
fn spawn_failure_leaks_no_mapping() {
    // A usable part below PTHREAD_STACK_MIN makes pthread_attr_setstack fail.
    let page = base_page_size();
    let alt = recommended_alt_stack_size();
    let s = StackMapping::map(&StackSpec {
        size: alt + 2 * page,
        ..spec(MIB, true, "tiny")
    })
    .unwrap();
    let range = s.layout().mapping.clone();
    let err = spawn(s, Box::new(|_: &mut ThreadContext| {})).unwrap_err();
    assert_eq!(err.errno, Errno::EINVAL);
    assert_eq!(err.to_string(), "pthread_create failed (EINVAL)");
    assert!(
        maps_in(range.start, range.end).is_empty(),
        "the stack was unmapped"
    );
}

static PREVIOUS_HANDLER_RAN: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

extern "C" fn previous_handler(
    _sig: libc::c_int,
    _info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
    PREVIOUS_HANDLER_RAN.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn faults_that_are_not_guard_hits_go_to_the_previous_handler() {
    if child_role().is_some() {
        // SAFETY: installs a handler that only stores to an atomic (async-signal-safe); the
        // sigaction struct is zeroed and then filled in.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = previous_handler as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut()),
                0
            );
        }
        rtvm_os_linux::stack::install_overflow_handler();
        // SAFETY: raise only delivers SIGSEGV to this thread; the chained handler returns.
        unsafe { libc::raise(libc::SIGSEGV) };
        assert!(
            PREVIOUS_HANDLER_RAN.load(std::sync::atomic::Ordering::SeqCst),
            "the earlier handler was not called"
        );
        println!("CHAINED");
        return;
    }
    let out = run_child(
        "faults_that_are_not_guard_hits_go_to_the_previous_handler",
        "chain",
    );
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("CHAINED"),
        "{}",
        describe(&out)
    );
}
