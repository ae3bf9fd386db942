/*
 * @test id=mitigated
 * @summary With 16 threads held in their start window (and the worker gang running), the
 *          kernel's view of every VM thread stack: its guard zone is PROT_NONE and exactly
 *          red + yellow + reserved pages; its signal stack lies above the stack top with a
 *          PROT_NONE page directly below it; every part carries nh (MADV_NOHUGEPAGE) in the
 *          THP mode the machine has; no stack mapping is named (names would stop merges)
 * @requires os.family == "linux"
 * @run main/othervm -Xmx32m -XX:ParallelGCThreads=2 TestStackLayout mitigated 16
 */

/*
 * @test id=mitigated-zones
 * @summary The same with -XX:StackRedPages=2 -XX:StackYellowPages=5 -XX:StackReservedPages=0
 *          (a 28 KiB guard zone)
 * @requires os.family == "linux"
 * @run main/othervm -Xmx32m -XX:StackRedPages=2 -XX:StackYellowPages=5 -XX:StackReservedPages=0 TestStackLayout mitigated 16
 */

/*
 * @test id=unmitigated
 * @summary With -XX:+DisableTHPStackMitigation, held threads' stacks are plain read-write
 *          mappings without nh, as glibc's were on the kernels of JDK-8312182; once the threads
 *          run they have placed their guard zone and the signal stack's guard page themselves
 * @requires os.family == "linux"
 * @run main/othervm -Xmx32m -XX:+UnlockDiagnosticVMOptions -XX:+DisableTHPStackMitigation TestStackLayout unmitigated 16
 */

use std::ops::Range;

use rtvm_os_linux::procfs::{self, SmapsEntry};
use rtvm::ThreadInfo;
use rtvm_jtreg::testlib::*;

fn covering<'a>(smaps: &'a [SmapsEntry], r: &Range<usize>) -> Vec<&'a SmapsEntry> {
    smaps.iter().filter(|e| e.map.start < r.end && e.map.end > r.start).collect()
}

/// Every byte of `r` is in mappings with these permissions (prefix of the perms field).
fn all_perms(smaps: &[SmapsEntry], r: &Range<usize>, perms: &str) -> bool {
    let parts = covering(smaps, r);
    let covered: usize = parts.iter().map(|e| e.map.end.min(r.end) - e.map.start.max(r.start)).sum();
    covered == r.len() && parts.iter().all(|e| e.map.perms.starts_with(perms))
}

#[derive(Clone, Copy)]
struct Expect {
    guard_bytes: usize,
    guards_in_place: bool,
    nh: bool,
}

fn check_stack(t: &ThreadInfo, smaps: &[SmapsEntry], e: &Expect) -> Result<(), TestFailure> {
    let l = &t.layout;
    let who = format!("{} {:?}", t.name, l.mapping);
    check(l.guard.len() == e.guard_bytes && l.guard.start == l.mapping.start && l.guard.end == l.usable.start, || format!("{who}: guard zone {:x?}, expected {} bytes at the bottom", l.guard, e.guard_bytes))?;
    check(l.alt_guard.len() == rtvm_os_linux::base_page_size() && l.alt_guard.start == l.usable.end && l.alt_stack.start == l.alt_guard.end, || format!("{who}: signal stack {:x?} is not directly above a guard page {:x?} above the stack top", l.alt_stack, l.alt_guard))?;
    check(all_perms(smaps, &l.usable, "rw") && all_perms(smaps, &l.alt_stack, "rw"), || format!("{who}: the usable stack or the signal stack is not read-write"))?;
    if e.guards_in_place {
        check(all_perms(smaps, &l.guard, "---"), || format!("{who}: the guard zone {:x?} is not PROT_NONE", l.guard))?;
        check(all_perms(smaps, &l.alt_guard, "---"), || format!("{who}: the page below the signal stack {:x?} is not PROT_NONE", l.alt_guard))?;
    } else {
        check(all_perms(smaps, &l.mapping, "rw"), || format!("{who}: an unmitigated held stack already has protected parts"))?;
    }
    for part in covering(smaps, &l.mapping) {
        check(part.has_flag("nh") == e.nh, || format!("{who}: {:#x}-{:#x} {} has VmFlags {:?} (nh expected: {})", part.map.start, part.map.end, part.map.perms, part.vm_flags, e.nh))?;
        check(!part.map.name.contains("rtvm stack"), || format!("{who}: the stack mapping is named {:?}", part.map.name))?;
    }
    Ok(())
}

/// The held threads, the main thread, the gang's workers and the service threads: every VM
/// thread. A thread that is not held but has not run yet (a service thread the VM started a
/// moment ago) places its own guards in the unmitigated mode: it is checked again until it has
/// (10 s at most).
fn check_held(vm: &Vm, held: &Expect) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
    let smaps = procfs::read_smaps()?;
    let mut checked = 0;
    for t in vm.threads() {
        if t.name.starts_with("Held#") {
            check_stack(&t, &smaps, held)?;
        } else {
            let e = Expect { guards_in_place: true, ..*held };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let mut result = check_stack(&t, &smaps, &e);
            while result.is_err() && !held.guards_in_place && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
                result = check_stack(&t, &procfs::read_smaps()?, &e);
            }
            result?;
        }
        checked += 1;
    }
    Ok(checked)
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    let mitigated = args.first().map(String::as_str) == Some("mitigated");
    let count: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(16);
    let stacks = vm.stack_config();
    let guard_bytes = stacks.red_zone + stacks.yellow_zone + stacks.reserved_zone;
    let thp = &vm.page_info().thp;
    println!("THP mode {:?} (the mode this machine has; the mitigation does not depend on it); guard zone {} KiB", thp.mode, guard_bytes / 1024);
    let gate = rtvm_launcher::IdleGate::new();
    let _release = gate.release_on_drop();
    let mut threads = Vec::new();
    for i in 0..count {
        threads.push(vm.thread(&format!("Held#{i}")).hold_at_start(true).spawn(gate.parked_body())?);
    }
    // Held: the window between the stack's mapping and the thread's own start-up.
    let held = Expect { guard_bytes, guards_in_place: mitigated, nh: mitigated };
    let checked = check_held(vm, &held);
    // Whatever the check found, the held threads start (and end when the gate's guard
    // releases them): the VM's destroy waits for them.
    for t in &threads {
        t.start();
    }
    gate.wait_started(count);
    println!("held: {} stacks checked", checked?);
    // Running: every thread has its guards, placed early (mitigated) or by itself.
    let smaps = procfs::read_smaps()?;
    let running = Expect { guard_bytes, guards_in_place: true, nh: mitigated };
    for t in vm.threads() {
        check_stack(&t, &smaps, &running)?;
    }
    println!("running: {} stacks checked", vm.threads().len());
    gate.release();
    for t in threads {
        t.join()?;
    }
    Ok(())
}
