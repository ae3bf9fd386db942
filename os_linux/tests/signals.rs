//! rtvm's SIGSEGV/SIGBUS handler: chaining as the kernel would deliver, restoring what was
//! there, and signal-stack overflows. Each case runs in a child process: dispositions are
//! process-wide.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::*;
use rtvm_os_linux::signals;
use rtvm_os_linux::stack::{recommended_alt_stack_size, StackMapping, StackSpec};
use rtvm_os_linux::thread::{spawn, ThreadContext};
use rtvm_os_linux::GuardZones;

static CALLS: AtomicUsize = AtomicUsize::new(0);
static USR1_BLOCKED: AtomicBool = AtomicBool::new(false);
static SEGV_BLOCKED: AtomicBool = AtomicBool::new(false);

fn is_blocked(sig: libc::c_int) -> bool {
    // SAFETY: queries the calling thread's mask into a local.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
        libc::sigismember(&set, sig) == 1
    }
}

extern "C" fn previous(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    CALLS.fetch_add(1, Ordering::SeqCst);
    USR1_BLOCKED.store(is_blocked(libc::SIGUSR1), Ordering::SeqCst);
    SEGV_BLOCKED.store(is_blocked(libc::SIGSEGV), Ordering::SeqCst);
}

extern "C" fn previous_plain(_: libc::c_int) {
    CALLS.fetch_add(1, Ordering::SeqCst);
}

/// Installs `handler` for SIGSEGV with `flags` and `SIGUSR1` in its mask.
fn install_previous(handler: usize, flags: libc::c_int) {
    // SAFETY: a zeroed-then-filled sigaction naming an async-signal-safe handler (or
    // SIG_DFL/SIG_IGN).
    unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = handler;
        a.sa_flags = flags;
        libc::sigemptyset(&mut a.sa_mask);
        libc::sigaddset(&mut a.sa_mask, libc::SIGUSR1);
        assert_eq!(libc::sigaction(libc::SIGSEGV, &a, std::ptr::null_mut()), 0);
    }
}

fn current_segv_handler() -> usize {
    // SAFETY: a NULL new action only queries.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut old);
        old.sa_sigaction
    }
}

fn raise_segv() {
    // SAFETY: sends SIGSEGV to this thread (si_code SI_TKILL); the handlers return.
    unsafe { libc::raise(libc::SIGSEGV) };
}

fn child_ok(test: &str, role: &str) {
    let out = run_child(test, role);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("CHILD OK"),
        "{}",
        describe(&out)
    );
}

#[test]
fn chains_with_the_previous_mask_and_flags_and_restores_it() {
    if child_role().is_some() {
        install_previous(previous as *const () as usize, libc::SA_SIGINFO);
        let h = signals::install(true).unwrap();
        assert!(signals::handler_installed());
        assert_eq!(
            signals::install(true).unwrap_err(),
            rtvm_os_linux::Errno::EBUSY
        );
        raise_segv();
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "the earlier handler ran");
        assert!(
            USR1_BLOCKED.load(Ordering::SeqCst),
            "its sa_mask was blocked during the call"
        );
        assert!(
            SEGV_BLOCKED.load(Ordering::SeqCst),
            "and the signal itself (no SA_NODEFER)"
        );
        assert!(
            !is_blocked(libc::SIGUSR1),
            "the mask is put back afterwards"
        );
        h.restore();
        assert_eq!(
            current_segv_handler(),
            previous as *const () as usize,
            "restored"
        );
        assert!(!signals::handler_installed());
        // A new installation after a restore works the same.
        let h = signals::install(true).unwrap();
        raise_segv();
        assert_eq!(CALLS.load(Ordering::SeqCst), 2);
        drop(h);
        assert_eq!(current_segv_handler(), previous as *const () as usize);
        println!("CHILD OK");
        return;
    }
    child_ok(
        "chains_with_the_previous_mask_and_flags_and_restores_it",
        "chain",
    );
}

#[test]
fn honours_sa_nodefer_and_plain_handlers() {
    if child_role().is_some() {
        install_previous(
            previous as *const () as usize,
            libc::SA_SIGINFO | libc::SA_NODEFER,
        );
        let h = signals::install(true).unwrap();
        raise_segv();
        assert!(
            !SEGV_BLOCKED.load(Ordering::SeqCst),
            "SA_NODEFER: the signal is not blocked"
        );
        drop(h);
        install_previous(previous_plain as *const () as usize, 0);
        let _h = signals::install(true).unwrap();
        raise_segv();
        assert_eq!(
            CALLS.load(Ordering::SeqCst),
            2,
            "a one-argument handler is called too"
        );
        println!("CHILD OK");
        return;
    }
    child_ok("honours_sa_nodefer_and_plain_handlers", "nodefer");
}

#[test]
fn sa_resethand_delivers_once_then_the_default_kills() {
    if child_role().is_some() {
        install_previous(
            previous as *const () as usize,
            libc::SA_SIGINFO | libc::SA_RESETHAND,
        );
        let _h = signals::install(true).unwrap();
        raise_segv();
        println!("FIRST DELIVERED {}", CALLS.load(Ordering::SeqCst));
        raise_segv();
        println!("NOT REACHED");
        return;
    }
    let out = run_child(
        "sa_resethand_delivers_once_then_the_default_kills",
        "resethand",
    );
    use std::os::unix::process::ExitStatusExt;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FIRST DELIVERED 1"), "{}", describe(&out));
    assert!(!stdout.contains("NOT REACHED"), "{}", describe(&out));
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_sent_segv_with_default_action_is_not_swallowed() {
    if child_role().is_some() {
        install_previous(libc::SIG_DFL, 0);
        let _h = signals::install(true).unwrap();
        raise_segv();
        println!("NOT REACHED");
        return;
    }
    let out = run_child("a_sent_segv_with_default_action_is_not_swallowed", "dfl");
    use std::os::unix::process::ExitStatusExt;
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("NOT REACHED"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_sent_segv_with_previous_ignore_is_ignored() {
    if child_role().is_some() {
        install_previous(libc::SIG_IGN, 0);
        let _h = signals::install(true).unwrap();
        raise_segv();
        println!("CHILD OK");
        return;
    }
    child_ok("a_sent_segv_with_previous_ignore_is_ignored", "ign");
}

extern "C" fn deep_handler(_: libc::c_int) {
    #[allow(unconditional_recursion)]
    fn recurse(n: u64) -> u64 {
        let buf = std::hint::black_box([n; 64]);
        recurse(n + 1) + buf[5]
    }
    recurse(0);
}

/// A handler that overflows the signal stack faults in the signal stack's guard page, and
/// the report says so — never a write into the thread's stack or TLS.
#[test]
fn a_signal_stack_overflow_is_reported_as_one() {
    if child_role().is_some() {
        let _h = signals::install(true).unwrap();
        // SAFETY: installs a SIGUSR1 handler that runs on the alternate stack.
        unsafe {
            let mut a: libc::sigaction = std::mem::zeroed();
            a.sa_sigaction = deep_handler as *const () as usize;
            a.sa_flags = libc::SA_ONSTACK;
            libc::sigemptyset(&mut a.sa_mask);
            libc::sigaction(libc::SIGUSR1, &a, std::ptr::null_mut());
        }
        let s = StackMapping::map(&StackSpec {
            size: 1 << 20,
            zones: GuardZones::hotspot_default(),
            alt_stack_size: recommended_alt_stack_size(),
            no_huge_pages: true,
            guard_early: true,
            name: "signalled".into(),
        })
        .unwrap();
        let t = spawn(
            s,
            Box::new(|_: &mut ThreadContext| {
                // SAFETY: delivers SIGUSR1 to this thread, whose handler recurses.
                unsafe { libc::raise(libc::SIGUSR1) };
                None
            }),
            None::<rtvm_os_linux::thread::ExitHook>,
        )
        .unwrap();
        t.join();
        println!("NOT REACHED");
        return;
    }
    let out = run_child("a_signal_stack_overflow_is_reported_as_one", "altstack");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "{}",
        describe(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = value_after(
        &stderr,
        "signal stack overflow in thread \"signalled\": fault address 0x",
    )
    .unwrap_or_else(|| panic!("{}", describe(&out)));
    assert!(
        line.contains(", signal stack guard [0x") && line.contains("), signal stack [0x"),
        "{line}"
    );
}

/// `-XX:-CreateCoredumpOnCrash`: the report, then `_exit(1)` instead of `abort()`.
#[test]
fn without_core_dumps_a_guard_hit_exits_1() {
    if child_role().is_some() {
        let _h = signals::install(false).unwrap();
        let s = StackMapping::map(&StackSpec {
            size: 256 * 1024,
            zones: GuardZones::hotspot_default(),
            alt_stack_size: recommended_alt_stack_size(),
            no_huge_pages: true,
            guard_early: true,
            name: "nocore".into(),
        })
        .unwrap();
        let t = spawn(
            s,
            Box::new(|_: &mut ThreadContext| {
                #[allow(unconditional_recursion)]
                fn recurse(n: u64) -> u64 {
                    let buf = std::hint::black_box([n; 64]);
                    recurse(n + 1) + buf[3]
                }
                recurse(0);
                None
            }),
            None::<rtvm_os_linux::thread::ExitHook>,
        )
        .unwrap();
        t.join();
        return;
    }
    let out = run_child("without_core_dumps_a_guard_hit_exits_1", "nocore");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stack overflow in thread \"nocore\""));
}
