//! Stack mappings and threads on them, through `/proc/self/maps` and `smaps`.

mod common;

use std::sync::mpsc;

use common::*;
use rtvm_os_linux::signals;
use rtvm_os_linux::stack::{
    kernel_marks_map_stack_nohugepage, recommended_alt_stack_size, StackMapping, StackSpec,
};
use rtvm_os_linux::thread::{spawn, ForeignCall, ThreadContext};
use rtvm_os_linux::{base_page_size, procfs, Errno, GuardZones};
use serial_test::serial;

fn spec(size: usize, mitigated: bool, name: &str) -> StackSpec {
    StackSpec {
        size,
        zones: GuardZones::hotspot_default(),
        alt_stack_size: recommended_alt_stack_size(),
        no_huge_pages: mitigated,
        guard_early: mitigated,
        name: name.into(),
    }
}

/// The maps entry that is exactly `range`.
fn entry_for(maps: &[procfs::MapsEntry], range: &std::ops::Range<usize>) -> procfs::MapsEntry {
    maps.iter()
        .find(|m| m.start == range.start && m.end == range.end)
        .unwrap_or_else(|| panic!("no mapping exactly {range:x?} in {maps:#x?}"))
        .clone()
}

#[test]
#[serial]
fn mitigated_stack_has_its_guards_and_nh_before_any_thread() {
    // Alone in a child: the range check after the unmap must not see another test's mapping.
    if isolated("mitigated_stack_has_its_guards_and_nh_before_any_thread") {
        return;
    }
    let s = StackMapping::map(&spec(2 * MIB + base_page_size(), true, "early")).unwrap();
    let l = s.layout().clone();
    let maps = maps_in(l.mapping.start, l.mapping.end);
    // Four parts, each its own mapping: guard zone, usable stack, alt guard, signal stack.
    assert_eq!(maps.len(), 4, "{maps:#x?}");
    let guard = entry_for(&maps, &l.guard);
    assert!(guard.is_protected_none(), "{guard:?}");
    assert_eq!(
        guard.len(),
        4 * base_page_size(),
        "HotSpot's 4-page guard zone"
    );
    assert!(entry_for(&maps, &l.alt_guard).is_protected_none());
    assert_eq!(entry_for(&maps, &l.usable).perms, "rw-p");
    assert_eq!(entry_for(&maps, &l.alt_stack).perms, "rw-p");
    assert_eq!(
        l.alt_guard.end, l.alt_stack.start,
        "the guard page lies right below it"
    );
    assert!(
        l.usable.end <= l.alt_guard.start,
        "the signal stack is above the stack top"
    );
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
#[serial]
fn unmitigated_stack_is_plain_until_the_thread_guards_it() {
    // Alone in a child: the range check after the unmap must not see another test's mapping.
    if isolated("unmitigated_stack_is_plain_until_the_thread_guards_it") {
        return;
    }
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
            None
        }),
        None::<rtvm_os_linux::thread::ExitHook>,
    )
    .unwrap();
    rx.recv().unwrap();
    let maps = maps_in(l.mapping.start, l.mapping.end);
    assert!(
        entry_for(&maps, &l.guard).is_protected_none(),
        "guard zone placed by the thread"
    );
    assert!(
        entry_for(&maps, &l.alt_guard).is_protected_none(),
        "and the signal stack's guard"
    );
    go_tx.send(()).unwrap();
    t.join();
    assert!(
        maps_in(l.mapping.start, l.mapping.end).is_empty(),
        "join unmaps the stack"
    );
}

/// The probe against the kernel's own answer for a `MAP_STACK` mapping this test makes.
#[test]
#[serial]
fn map_stack_probe_matches_smaps() {
    let page = base_page_size();
    // SAFETY: a fresh private anonymous page, unmapped below; nothing else refers to it.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    assert_ne!(addr, libc::MAP_FAILED);
    let nh = procfs::smaps_for(addr as usize)
        .unwrap()
        .expect("our page is mapped")
        .has_flag("nh");
    // SAFETY: the page mapped above.
    unsafe { libc::munmap(addr, page) };
    println!("this kernel marks MAP_STACK mappings nh: {nh}");
    assert_eq!(kernel_marks_map_stack_nohugepage(), nh);
}

#[test]
#[serial]
fn a_thread_can_use_most_of_its_stack_without_touching_the_guard() {
    let s = StackMapping::map(&spec(MIB, true, "deep")).unwrap();
    let usable = s.layout().usable.clone();
    // Recurse with 1 KiB frames until less than a quarter of the stack is left.
    let stop_at = usable.start + usable.len() / 4;
    let (tx, rx) = mpsc::channel();
    let t = spawn(
        s,
        Box::new(move |_: &mut ThreadContext| {
            fn recurse(stop_at: usize) -> usize {
                let buf = std::hint::black_box([7u8; 1024]);
                let here = &buf as *const u8 as usize;
                if here <= stop_at {
                    here
                } else {
                    recurse(stop_at).min(here) + buf[1] as usize - 7
                }
            }
            tx.send(recurse(stop_at)).unwrap();
            None
        }),
        None::<rtvm_os_linux::thread::ExitHook>,
    )
    .unwrap();
    let deepest = rx.recv().unwrap();
    t.join();
    let used = usable.end - deepest;
    assert!(
        used >= usable.len() * 3 / 4 && deepest >= usable.start,
        "the recursion reached {used} bytes deep of {}",
        usable.len()
    );
}

#[test]
#[serial]
fn stack_overflow_is_reported_with_its_zone_and_aborts() {
    if child_role().is_some() {
        let _handlers = signals::install(true).unwrap();
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
                None
            }),
            None::<rtvm_os_linux::thread::ExitHook>,
        )
        .unwrap();
        t.join();
        println!("NOT REACHED");
        return;
    }
    let out = run_child(
        "stack_overflow_is_reported_with_its_zone_and_aborts",
        "overflow",
    );
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
    // Small frames step into the top of the guard zone first: the reserved zone.
    assert!(
        line.contains(", reserved zone [0x")
            && line.contains(") of the guard zone [0x")
            && line.contains("), stack [0x"),
        "{line}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("NOT REACHED"));
}

#[test]
#[serial]
fn spawn_failure_leaks_no_mapping() {
    // Alone in a child: the range check after the unmap must not see another test's mapping.
    if isolated("spawn_failure_leaks_no_mapping") {
        return;
    }
    // A usable part below PTHREAD_STACK_MIN makes pthread_attr_setstack fail.
    let page = base_page_size();
    let s = StackMapping::map(&StackSpec {
        size: 6 * page,
        ..spec(MIB, true, "tiny")
    })
    .unwrap();
    let range = s.layout().mapping.clone();
    let err = spawn(
        s,
        Box::new(|_: &mut ThreadContext| None),
        None::<rtvm_os_linux::thread::ExitHook>,
    )
    .unwrap_err();
    assert_eq!(err.errno, Errno::EINVAL);
    assert_eq!(err.to_string(), "pthread_create failed (EINVAL)");
    assert!(
        maps_in(range.start, range.end).is_empty(),
        "the stack was unmapped"
    );
}

static EXITED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

unsafe extern "C-unwind" fn calls_pthread_exit(arg: *mut libc::c_void) {
    assert_eq!(arg as usize, 42);
    // SAFETY: ends this thread; the frames between here and glibc's start_thread hold
    // nothing to drop (the trampoline calls foreign bodies from a plain frame).
    unsafe { libc::pthread_exit(std::ptr::null_mut()) };
}

unsafe extern "C-unwind" fn returns(_: *mut libc::c_void) {}

/// A foreign body may end its thread with `pthread_exit`: the exit hook still runs (the
/// runtime learns the thread is gone) and the thread is joined and unmapped normally.
#[test]
#[serial]
fn foreign_bodies_may_pthread_exit() {
    // Alone in a child: the range check after the unmap must not see another test's mapping.
    if isolated("foreign_bodies_may_pthread_exit") {
        return;
    }
    for f in [
        calls_pthread_exit as unsafe extern "C-unwind" fn(_),
        returns,
    ] {
        let before = EXITED.load(std::sync::atomic::Ordering::SeqCst);
        let s = StackMapping::map(&spec(MIB, true, "foreign")).unwrap();
        let range = s.layout().mapping.clone();
        let t = spawn(
            s,
            Box::new(move |_: &mut ThreadContext| {
                Some(ForeignCall {
                    f,
                    arg: 42 as *mut libc::c_void,
                })
            }),
            Some(Box::new(|| {
                EXITED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })),
        )
        .unwrap();
        t.join();
        assert_eq!(EXITED.load(std::sync::atomic::Ordering::SeqCst), before + 1);
        assert!(maps_in(range.start, range.end).is_empty());
    }
}
