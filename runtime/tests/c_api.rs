//! The C API from C, as a C embedder gets it: `tools/install-c.sh` installs the header, the
//! shared and static libraries and the pkg-config files into a temporary prefix (building
//! the real `librtvm.so` — linked `-z nodelete` — and `librtvm.a` with a nested cargo into a
//! target directory of its own, so nothing stale is picked up), and every C program is
//! compiled with `pkg-config --cflags --libs rtvm` (or `rtvm-static`):
//!
//! * `examples/embed.c`, shared and static, and under `valgrind --error-exitcode=1`;
//! * README's C example;
//! * `tests/c/capi_test.c`, one process per mode (versions, exit requests, the output hook,
//!   allocation, attach and stack bounds, the soft limit, the NMT idiom, threads, the
//!   pretouch hold, embedder memory, giving memory back: the C heap trimmed, the heap
//!   shrunk, memories discarded and shrunk, stacks trimmed);
//! * `tests/c/dcmd_test.c`, one process per mode: the embedder's diagnostic commands
//!   (registration and refusals, help, every type, HotSpot's messages, failures, `release`;
//!   the real `jcmd` against the C host; a destroy with a cooperative and with a hung
//!   command), the first mode also under `valgrind`;
//! * `tests/c/safepoint_test.c` at -O0 and -O2 (stops, churn, refusals, handshakes, `-Xrs`),
//!   and its `world` and `churn` modes again under `-XX:+SafepointALot -XX:+HandshakeALot`;
//! * `tests/c/dlopen_test.c`: 100 rounds of dlopen/create/destroy/dlclose with a host
//!   SIGSEGV handler;
//! * `tests/c/host_safety_test.c`, one process per mode: host signal handlers across VM
//!   generations (two fixed sequences, and 300 random orders over up to 5 generations), the
//!   stack, mask and flags of chained delivery, the output hook against a destroy, NMT
//!   snapshots per VM, background reservations behind a busy gang, the nursery, `fork()`,
//!   racing creates, a hook that calls back, `-Xss136k`'s soft limit, a host's own `SIGQUIT`
//!   handler next to rtvm's with the real `jcmd` attaching;
//! * `tests/c/heap_race_test.c`, one process per mode: allocations and figures racing
//!   `rtvm_heap_shrink`, failures that say what happened and lose nothing while the heap
//!   shrinks and grows, a held background pretouch that holds nothing else.
//!
//! Without `cc`, `pkg-config` or `sh` (or `valgrind`, for the memory check) a test is
//! reported ignored with the missing tool named; with `RTVM_CI` set (CI machines have them)
//! a missing tool fails the test instead.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[path = "../../jtreg-like-tests/src/ctools.rs"]
mod ctools;

use ctools::{command, have, Install, Link};
use rtvm_testkit::{require_tool, Outcome};

rtvm_testkit::tests!(
    the_install_has_header_libraries_and_pkg_config_files,
    example_embedder_builds_and_runs,
    example_embedder_is_valgrind_clean,
    readme_c_example_compiles_and_runs,
    c_versions_and_default_args,
    c_exit_requests_deliver_output_and_their_own_code,
    c_output_hook_gets_flags_logs_and_the_nmt_report,
    c_allocation_shared_tlab_zero_and_full,
    c_attach_detach_and_stack_bounds,
    c_soft_limit_stops_a_recursion_before_the_guard,
    c_nmt_size_query_idiom_while_the_report_changes,
    c_threads_pthread_exit_and_error_codes,
    c_destroy_rules,
    c_pretouch_hold_and_release,
    c_embedder_memory_reserve_grow_nmt_release,
    c_trim_shrink_discard_and_trimmed_stacks,
    c_dlopen_dlclose_100_times_with_a_host_signal_handler,
    host_handlers_survive_vm_generations,
    host_handler_chains_in_random_orders_over_5_generations,
    chained_delivery_has_the_kernels_stack_mask_and_flags,
    the_output_hook_is_never_called_after_destroy,
    nmt_snapshots_belong_to_their_vm,
    background_reservations_never_pretouch_on_the_caller,
    the_nursery_from_c,
    a_forked_child_gets_efork_instead_of_a_hang,
    racing_creates_end_with_one_vm,
    a_hook_calling_back_gets_einval_not_a_deadlock,
    the_smallest_stack_keeps_hotspots_40k,
    a_hosts_sigquit_handler_runs_and_jcmd_still_works,
    a_hosts_sigterm_handler_stays_and_destroy_gives_sig_dfl_back,
    sigint_removes_the_vms_files_then_ends_the_host_by_default,
    c_stops_find_every_pointer_in_frames_at_o0,
    c_stops_find_every_pointer_in_registers_at_o2,
    c_a_signal_during_enter_and_leave_keeps_the_published_registers,
    c_a_value_only_in_r12_survives_a_flood_of_signals_at_enter_and_leave,
    c_stops_while_threads_start_exit_attach_and_detach,
    c_stop_refusals_and_a_leave_that_waits,
    c_handshakes_by_the_target_and_by_the_caller,
    c_stops_under_xrs_time_out_on_a_thread_that_never_polls,
    c_collectors_malloc_while_mutators_that_malloc_are_stopped,
    c_a_world_stopped_on_one_thread_resumes_on_another,
    c_a_thread_blocked_in_libc_is_named_with_its_proc_state,
    c_a_handshake_op_may_enter_and_leave_a_safe_region,
    c_a_stray_stop_signal_during_a_handshake_op,
    c_a_requester_allocates_while_its_target_is_in_a_malloc_loop,
    c_a_poll_inside_a_safe_region_leaves_it_safe,
    c_fibers_and_signal_stacks_report_where_the_thread_runs,
    c_vm_threads_and_attached_threads_unblock_the_stop_signal,
    c_an_overflow_under_an_inherited_full_mask_is_reported,
    c_a_blocked_stop_signal_never_queues_up_nor_outlives_the_vm,
    c_a_full_signal_queue_is_reported,
    c_a_thread_gone_without_detaching_is_forgotten,
    c_a_fork_during_a_stop_gets_efork_not_a_hang,
    c_diagnostic_commands_register_help_types_errors_release,
    c_diagnostic_commands_are_valgrind_clean,
    c_diagnostic_commands_through_the_real_jcmd,
    c_diagnostic_commands_at_destroy_cooperative_and_hung,
    c_stops_find_every_pointer_under_safepoint_alot_and_handshake_alot,
    c_stops_during_thread_churn_under_safepoint_alot_and_handshake_alot,
    c_allocations_racing_shrinks_never_fail_with_room,
    c_failures_racing_shrinks_say_why_and_lose_nothing,
    c_a_held_heap_pretouch_holds_nothing_else,
);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_owned()
}

/// The C toolchain: present, or the test is ignored naming what is missing (a failure with
/// `RTVM_CI` set).
fn c_toolchain() -> Outcome {
    let missing = ctools::missing_tools();
    require_tool(&missing.join(", "), missing.is_empty())
}

fn scratch() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-api");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The install `tools/install-c.sh --debug` made (once per test process).
fn install() -> &'static Install {
    static INSTALL: OnceLock<Install> = OnceLock::new();
    INSTALL.get_or_init(|| Install::new(&scratch().join("prefix"), env!("CARGO")).unwrap())
}

fn prefix() -> &'static Path {
    &install().prefix
}

fn pkg_config(package: &str, what: &[&str]) -> Vec<String> {
    install().pkg_config(package, what).unwrap()
}

/// Compiles `source` into `scratch()/name` against the installed library.
fn compile(source: &Path, name: &str, link: Link, extra: &[&str]) -> PathBuf {
    let out = scratch().join(name);
    install().compile(source, &out, link, extra).unwrap();
    out
}

fn run(binary: &Path, args: &[&str]) -> (i32, String, String) {
    let o = command(binary).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn valgrind_clean(binary: &Path, args: &[&str]) {
    let o = command(Path::new("valgrind"))
        .args(["--error-exitcode=1", "-q"])
        .arg(binary)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "valgrind found errors:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn the_install_has_header_libraries_and_pkg_config_files() -> Outcome {
    c_toolchain()?;
    let flags = pkg_config("rtvm", &["--cflags", "--libs"]).join(" ");
    let p = prefix().display().to_string();
    assert!(
        flags.contains(&format!("-I{p}/include"))
            && flags.contains(&format!("-L{p}/lib"))
            && flags.contains("-lrtvm"),
        "{flags}"
    );
    let flags = pkg_config("rtvm-static", &["--cflags", "--libs"]).join(" ");
    assert!(flags.contains(&format!("{p}/lib/librtvm.a")), "{flags}");
    // The shared library stays loaded once loaded (hooks and handlers point into it).
    // readelf comes with the binutils every C toolchain has.
    require_tool("readelf", have("readelf"))?;
    let o = std::process::Command::new("readelf")
        .arg("-d")
        .arg(prefix().join("lib/librtvm.so"))
        .output()
        .unwrap();
    assert!(o.status.success(), "readelf -d failed: {o:?}");
    let dynamic = String::from_utf8_lossy(&o.stdout);
    assert!(
        dynamic.contains("NODELETE"),
        "librtvm.so is not -z nodelete:\n{dynamic}"
    );
    Ok(())
}

fn example_embedder_builds_and_runs() -> Outcome {
    c_toolchain()?;
    let bin = compile(&root().join("examples/embed.c"), "embed", Link::Shared, &[]);
    let (code, out, err) = run(&bin, &[]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "bad option: code -6, message: Unrecognized VM option 'NoSuchFlag'",
        "second VM: code -5",
        "main thread attached: stack ",
        "TLAB: 100000 cells, sum 4999950000",
        "stopped their recursion at the soft limit",
    ] {
        assert!(out.contains(expected), "no '{expected}' in:\n{out}");
    }
    // The NMT report twice: the one the program asked for, and the one the destroy printed
    // through the output hook (-XX:+PrintNMTStatistics).
    assert_eq!(out.matches("Native Memory Tracking:").count(), 2, "{out}");
    assert!(
        out.contains("[vm] "),
        "nothing came through the output hook:\n{out}"
    );
    assert!(out.ends_with("embed: ok\n"), "{out}");
    // The same program against the static library.
    let bin = compile(
        &root().join("examples/embed.c"),
        "embed-static",
        Link::Static,
        &[],
    );
    let (code, out, err) = run(&bin, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("embed: ok\n"));
    Ok(())
}

fn example_embedder_is_valgrind_clean() -> Outcome {
    c_toolchain()?;
    require_tool("valgrind", have("valgrind"))?;
    // A binary of its own: tests run in parallel, and one may not run a file another writes.
    let bin = compile(
        &root().join("examples/embed.c"),
        "embed-valgrind",
        Link::Shared,
        &[],
    );
    valgrind_clean(&bin, &[]);
    Ok(())
}

fn readme_c_example_compiles_and_runs() -> Outcome {
    c_toolchain()?;
    let readme = std::fs::read_to_string(root().join("../README.md")).unwrap();
    let start = readme.find("```c\n").expect("README has a C example") + 5;
    let end = start + readme[start..].find("```").unwrap();
    let src = scratch().join("readme.c");
    std::fs::write(&src, &readme[start..end]).unwrap();
    let bin = compile(&src, "readme", Link::Shared, &[]);
    let (code, out, err) = run(&bin, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("committed 16777216, resident 16777216"),
        "{out}"
    );
    Ok(())
}

fn capi_test_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        compile(
            &root().join("tests/c/capi_test.c"),
            "capi_test",
            Link::Shared,
            &["-O0", "-fno-stack-clash-protection"],
        )
    })
}

fn capi_mode(mode: &str) -> Outcome {
    c_toolchain()?;
    let (code, out, err) = run(capi_test_binary(), &[mode]);
    println!("{out}");
    assert!(
        code == 0 && out.contains(&format!("PASS {mode}")),
        "capi_test {mode}: exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    );
    Ok(())
}

fn c_versions_and_default_args() -> Outcome {
    capi_mode("version")
}

fn c_exit_requests_deliver_output_and_their_own_code() -> Outcome {
    capi_mode("exit-requests")
}

fn c_output_hook_gets_flags_logs_and_the_nmt_report() -> Outcome {
    c_toolchain()?;
    capi_mode("output-hook")?;
    // Nothing of it reached the process's own stdout/stderr.
    let (_, out, err) = run(capi_test_binary(), &["output-hook"]);
    assert!(
        !out.contains("[Global flags]") && !err.contains("Native Memory Tracking"),
        "{out}{err}"
    );
    Ok(())
}

fn c_allocation_shared_tlab_zero_and_full() -> Outcome {
    capi_mode("alloc")
}

fn c_attach_detach_and_stack_bounds() -> Outcome {
    capi_mode("attach")
}

fn c_soft_limit_stops_a_recursion_before_the_guard() -> Outcome {
    capi_mode("soft-limit")
}

fn c_nmt_size_query_idiom_while_the_report_changes() -> Outcome {
    capi_mode("nmt-idiom")
}

fn c_threads_pthread_exit_and_error_codes() -> Outcome {
    capi_mode("threads")
}

fn c_destroy_rules() -> Outcome {
    capi_mode("destroy-rules")
}

fn c_pretouch_hold_and_release() -> Outcome {
    capi_mode("pretouch-hold")
}

fn c_embedder_memory_reserve_grow_nmt_release() -> Outcome {
    capi_mode("memory")
}

fn c_trim_shrink_discard_and_trimmed_stacks() -> Outcome {
    capi_mode("give-back")
}

fn c_dlopen_dlclose_100_times_with_a_host_signal_handler() -> Outcome {
    c_toolchain()?;
    let bin = compile(
        &root().join("tests/c/dlopen_test.c"),
        "dlopen_test",
        Link::Runtime,
        &[],
    );
    let lib = prefix().join("lib/librtvm.so");
    let (code, out, err) = run(&bin, &[lib.to_str().unwrap()]);
    assert!(
        code == 0 && out.contains("PASS dlopen"),
        "exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    );
    println!("{out}");
    Ok(())
}

/// Runs `binary <mode>` (a C test program called `program`): it must print `PASS <mode>` and
/// exit 0; its output is shown.
fn c_mode(binary: &Path, program: &str, mode: &str) -> Outcome {
    c_toolchain()?;
    let (code, out, err) = run(binary, &[mode]);
    println!("{out}");
    assert!(
        code == 0 && out.contains(&format!("PASS {mode}")),
        "{program} {mode}: exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    );
    Ok(())
}

/// safepoint_test.c at -O0 (pointers in the frames) or -O2 (pointers in registers).
fn safepoint_binary(optimized: bool) -> &'static Path {
    static O0: OnceLock<PathBuf> = OnceLock::new();
    static O2: OnceLock<PathBuf> = OnceLock::new();
    let (cell, name, level) = if optimized {
        (&O2, "safepoint_test_o2", "-O2")
    } else {
        (&O0, "safepoint_test_o0", "-O0")
    };
    cell.get_or_init(|| {
        compile(
            &root().join("tests/c/safepoint_test.c"),
            name,
            Link::Shared,
            &[level, "-pthread"],
        )
    })
}

fn safepoint_mode(mode: &str, optimized: bool) -> Outcome {
    c_mode(safepoint_binary(optimized), "safepoint_test", mode)
}

fn c_stops_find_every_pointer_in_frames_at_o0() -> Outcome {
    safepoint_mode("world", false)
}

fn c_stops_find_every_pointer_in_registers_at_o2() -> Outcome {
    safepoint_mode("world", true)
}

fn c_a_signal_during_enter_and_leave_keeps_the_published_registers() -> Outcome {
    safepoint_mode("world-nodelay", true)
}

fn c_a_value_only_in_r12_survives_a_flood_of_signals_at_enter_and_leave() -> Outcome {
    safepoint_mode("enter-flood", true)
}

fn c_stops_while_threads_start_exit_attach_and_detach() -> Outcome {
    safepoint_mode("churn", true)
}

fn c_stop_refusals_and_a_leave_that_waits() -> Outcome {
    safepoint_mode("refusals", false)
}

fn c_handshakes_by_the_target_and_by_the_caller() -> Outcome {
    safepoint_mode("handshake", true)
}

fn c_stops_under_xrs_time_out_on_a_thread_that_never_polls() -> Outcome {
    safepoint_mode("xrs", true)
}

fn dcmd_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        compile(
            &root().join("tests/c/dcmd_test.c"),
            "dcmd_test",
            Link::Shared,
            &["-O1", "-pthread", "-Wall", "-Wextra", "-Werror"],
        )
    })
}

fn dcmd_mode(mode: &str) -> Outcome {
    c_mode(dcmd_binary(), "dcmd_test", mode)
}

fn c_diagnostic_commands_register_help_types_errors_release() -> Outcome {
    dcmd_mode("api")
}

fn c_diagnostic_commands_are_valgrind_clean() -> Outcome {
    c_toolchain()?;
    require_tool("valgrind", have("valgrind"))?;
    valgrind_clean(dcmd_binary(), &["api"]);
    Ok(())
}

fn c_diagnostic_commands_through_the_real_jcmd() -> Outcome {
    require_tool("jcmd", have("jcmd"))?;
    dcmd_mode("jcmd")
}

fn c_diagnostic_commands_at_destroy_cooperative_and_hung() -> Outcome {
    dcmd_mode("hang")
}

fn collector_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        compile(
            &root().join("tests/c/collector_test.c"),
            "collector_test",
            Link::Shared,
            &["-O2", "-pthread"],
        )
    })
}

fn collector_mode(mode: &str) -> Outcome {
    c_mode(collector_binary(), "collector_test", mode)
}

fn c_collectors_malloc_while_mutators_that_malloc_are_stopped() -> Outcome {
    collector_mode("malloc-stops")
}

fn c_a_world_stopped_on_one_thread_resumes_on_another() -> Outcome {
    collector_mode("handoff")
}

fn c_a_thread_blocked_in_libc_is_named_with_its_proc_state() -> Outcome {
    collector_mode("blocked-libc")
}

fn c_a_handshake_op_may_enter_and_leave_a_safe_region() -> Outcome {
    collector_mode("handshake-region")
}

fn c_a_stray_stop_signal_during_a_handshake_op() -> Outcome {
    collector_mode("handshake-stray")
}

fn c_a_requester_allocates_while_its_target_is_in_a_malloc_loop() -> Outcome {
    collector_mode("handshake-malloc")
}

fn c_a_poll_inside_a_safe_region_leaves_it_safe() -> Outcome {
    collector_mode("poll-in-region")
}

fn c_fibers_and_signal_stacks_report_where_the_thread_runs() -> Outcome {
    collector_mode("fiber")
}

fn c_vm_threads_and_attached_threads_unblock_the_stop_signal() -> Outcome {
    collector_mode("inherited-mask")
}

fn c_an_overflow_under_an_inherited_full_mask_is_reported() -> Outcome {
    c_toolchain()?;
    let (code, out, err) = run(collector_binary(), &["overflow-masked"]);
    assert!(
        code != 0 && err.contains("stack overflow in thread \"C-OverflowMasked\""),
        "exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    );
    println!(
        "{}",
        err.lines()
            .find(|l| l.contains("stack overflow"))
            .unwrap_or("")
    );
    Ok(())
}

fn c_a_blocked_stop_signal_never_queues_up_nor_outlives_the_vm() -> Outcome {
    collector_mode("blocked-signal")
}

fn c_a_full_signal_queue_is_reported() -> Outcome {
    collector_mode("eagain")
}

fn c_a_thread_gone_without_detaching_is_forgotten() -> Outcome {
    collector_mode("vanished")
}

fn c_a_fork_during_a_stop_gets_efork_not_a_hang() -> Outcome {
    collector_mode("fork-in-region")
}

/// `safepoint_test <mode>` with `-XX:+SafepointALot -XX:+HandshakeALot` every 5 ms added
/// through `RTVM_OPTIONS` (which `rtvm_create` reads before the program's own options): a
/// service thread stops the world and handshakes every mutator between the program's own
/// stops, verifying each (a failed check is a fatal error). The mode must pass as it does
/// alone, and the stress must have run (its `-Xlog:safepoint,handshake` file counts them).
fn safepoint_mode_under_stress(mode: &str, optimized: bool) -> Outcome {
    c_toolchain()?;
    let log = scratch().join(format!("stress-{mode}-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let options = format!(
        "-XX:+UnlockDiagnosticVMOptions -XX:+SafepointALot -XX:+HandshakeALot -XX:GuaranteedSafepointInterval=5 -Xlog:safepoint=info,handshake=info:file={}",
        log.display()
    );
    let o = command(safepoint_binary(optimized))
        .arg(mode)
        .env("RTVM_OPTIONS", &options)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        o.status.success() && out.contains(&format!("PASS {mode}")),
        "safepoint_test {mode} under {options}: {:?}\nstdout:\n{out}\nstderr:\n{err}",
        o.status
    );
    assert!(
        err.contains("Picked up RTVM_OPTIONS: "),
        "the options were not read:\n{err}"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let stops = text.matches("Safepoint \"None\", ").count();
    let handshakes = text.matches("Handshake \"HandshakeALot\", ").count();
    assert!(
        stops > 0 && handshakes > 0,
        "the stress did not run: {stops} stops, {handshakes} handshakes\n{text}"
    );
    println!("under SafepointALot and HandshakeALot ({stops} verified stops, {handshakes} verified handshakes):\n{out}");
    Ok(())
}

fn c_stops_find_every_pointer_under_safepoint_alot_and_handshake_alot() -> Outcome {
    safepoint_mode_under_stress("world", true)
}

fn c_stops_during_thread_churn_under_safepoint_alot_and_handshake_alot() -> Outcome {
    safepoint_mode_under_stress("churn", true)
}

fn heap_race_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        compile(
            &root().join("tests/c/heap_race_test.c"),
            "heap_race_test",
            Link::Shared,
            &["-O2", "-pthread"],
        )
    })
}

fn c_allocations_racing_shrinks_never_fail_with_room() -> Outcome {
    c_mode(heap_race_binary(), "heap_race_test", "shrink-race")
}

fn c_failures_racing_shrinks_say_why_and_lose_nothing() -> Outcome {
    c_mode(heap_race_binary(), "heap_race_test", "shrink-race-full")
}

fn c_a_held_heap_pretouch_holds_nothing_else() -> Outcome {
    c_mode(heap_race_binary(), "heap_race_test", "hold")
}

fn host_safety_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        compile(
            &root().join("tests/c/host_safety_test.c"),
            "host_safety_test",
            Link::Shared,
            &["-O0", "-fno-stack-clash-protection", "-pthread"],
        )
    })
}

fn host_safety(mode: &str) -> Outcome {
    c_mode(host_safety_binary(), "host_safety_test", mode)
}

fn host_handlers_survive_vm_generations() -> Outcome {
    host_safety("chain-generations")
}

fn host_handler_chains_in_random_orders_over_5_generations() -> Outcome {
    host_safety("chain-property")
}

fn chained_delivery_has_the_kernels_stack_mask_and_flags() -> Outcome {
    host_safety("chain-stack")
}

fn the_output_hook_is_never_called_after_destroy() -> Outcome {
    host_safety("hook-after-destroy")
}

fn nmt_snapshots_belong_to_their_vm() -> Outcome {
    host_safety("nmt-snapshot")
}

fn background_reservations_never_pretouch_on_the_caller() -> Outcome {
    host_safety("background-reserve")
}

fn the_nursery_from_c() -> Outcome {
    host_safety("nursery")
}

fn a_forked_child_gets_efork_instead_of_a_hang() -> Outcome {
    host_safety("fork")
}

fn racing_creates_end_with_one_vm() -> Outcome {
    host_safety("create-race")
}

fn a_hook_calling_back_gets_einval_not_a_deadlock() -> Outcome {
    host_safety("hook-reentry")
}

fn the_smallest_stack_keeps_hotspots_40k() -> Outcome {
    host_safety("soft-limit-136k")
}

fn a_hosts_sigquit_handler_runs_and_jcmd_still_works() -> Outcome {
    require_tool("jcmd", have("jcmd"))?;
    host_safety("quit-host")
}

fn a_hosts_sigterm_handler_stays_and_destroy_gives_sig_dfl_back() -> Outcome {
    host_safety("terminate-host")
}

/// An embedder without a SIGINT handler of its own, and no exit hook (C has none): the
/// VM's socket and perf data are removed, then the process ends by SIGINT, as it would have
/// without rtvm.
fn sigint_removes_the_vms_files_then_ends_the_host_by_default() -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    c_toolchain()?;
    let o = command(host_safety_binary())
        .arg("terminate-default")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let pid: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("VM UP "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no VM UP line: {o:?}"));
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGINT),
        "the host did not end by SIGINT: {o:?}"
    );
    let socket = PathBuf::from(format!("/tmp/.java_pid{pid}"));
    let perf = rtvm_os_linux::perfmem::user_directory().join(pid.to_string());
    assert!(
        !socket.exists() && !perf.exists(),
        "left behind: socket {}, perf data {}",
        socket.exists(),
        perf.exists()
    );
    println!(
        "SIGINT: the socket and the perf data of {pid} removed, then the host ended by SIGINT"
    );
    Ok(())
}
