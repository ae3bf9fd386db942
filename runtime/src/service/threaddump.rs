//! Thread dumps in HotSpot's layout (`Thread.print`, `jstack`, `SIGQUIT`): a date line, the
//! `Full thread dump` header, then one entry per VM and attached thread —
//! `"name" #N [daemon] prio=… os_prio=0 cpu=…ms elapsed=…s tid=0x… nid=0x<kernel tid> <state>  [0x…]`
//! — followed by what rtvm knows and no JVM shows: for a mutator, what a handshake found it
//! doing (at a poll, in a safe region, stopped by the signal) and how deep its stack is (the
//! `[0x…]` is its stack pointer's page); the thread's stack, its guard zone, its signal stack
//! and how much of the stack is resident.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rtvm_flags::value::format_exact_size;

use crate::safepoint::{StopHow, StoppedThread};
use crate::threads::{Registry, ThreadInfo, ThreadKind};
use crate::version::{profile, VERSION, VM_NAME};

/// How much a dump says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DumpOptions {
    /// `-l`: HotSpot's locked ownable synchronizers (rtvm has none to list).
    pub(crate) locks: bool,
    /// `-e`: extended information (the stack's resident size per zone).
    pub(crate) extended: bool,
}

/// The dump of every thread the registry knows, in registration order.
pub(crate) fn thread_dump(registry: &Registry, options: DumpOptions) -> String {
    let mut s = String::new();
    let t = rtvm_os_linux::system::calendar_now(false);
    let _ = writeln!(
        s,
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    );
    let _ = writeln!(s, "Full thread dump {VM_NAME} ({VERSION} {}):", profile());
    let _ = writeln!(s);
    for info in registry.list() {
        write_thread(&mut s, registry, &info, options);
        let _ = writeln!(s);
    }
    s
}

fn state_words(state: char) -> &'static str {
    match state {
        'R' => "runnable",
        'S' | 'D' | 'I' => "waiting on condition",
        'T' | 't' => "stopped",
        _ => "runnable",
    }
}

/// What a handshake found a mutator doing.
struct MutatorState {
    how: StopHow,
    sp: usize,
    depth: usize,
}

/// A handshake with a mutator (run by it at its poll, or for it while it is safe): how it
/// was found and how deep its stack is. `None` for rtvm's own threads, or if the thread did
/// not answer in time.
fn mutator_state(registry: &Registry, info: &ThreadInfo) -> Option<MutatorState> {
    info.mutator?;
    let found = Arc::new(Mutex::new(None));
    let out = Arc::clone(&found);
    registry
        .safepoints()
        .handshake(
            info.id,
            "ThreadDump",
            Duration::from_millis(200),
            Box::new(move |t: &StoppedThread<'_>| {
                let scan = t.scan();
                *out.lock().unwrap_or_else(|p| p.into_inner()) = Some(MutatorState {
                    how: t.how(),
                    sp: scan.start,
                    depth: t.stack().end.saturating_sub(scan.start),
                });
            }),
        )
        .ok()?;
    let state = found.lock().unwrap_or_else(|p| p.into_inner()).take();
    state
}

fn write_thread(s: &mut String, registry: &Registry, info: &Arc<ThreadInfo>, options: DumpOptions) {
    let mutator = mutator_state(registry, info);
    let tid = info.tid();
    let stat = (tid > 0)
        .then(|| rtvm_os_linux::procfs::task_stat(tid))
        .flatten();
    let cpu_ms = stat.map_or(0.0, |st| st.cpu_ns as f64 / 1e6);
    let state = stat.map_or("runnable", |st| state_words(st.state));
    let elapsed = info.created.elapsed().as_secs_f64();
    let address = Arc::as_ptr(info) as usize;
    let _ = write!(s, "\"{}\" ", info.name);
    // The gang's workers and a collector's threads print as HotSpot's GC threads do: no id.
    let java_thread = !matches!(info.kind, ThreadKind::Worker | ThreadKind::Collector);
    if java_thread {
        let daemon = if info.kind.is_application() {
            ""
        } else {
            "daemon "
        };
        let prio = if info.kind == ThreadKind::Service {
            9
        } else {
            5
        };
        let _ = write!(s, "#{} {daemon}prio={prio} ", info.id);
    }
    let _ = write!(
        s,
        "os_prio=0 cpu={cpu_ms:.2}ms elapsed={elapsed:.2}s tid={address:#018x} nid={tid:#x} {state}  "
    );
    if java_thread {
        let _ = write!(
            s,
            "[{:#018x}]",
            mutator.as_ref().map_or(0, |m| m.sp & !0xfff)
        );
    }
    let _ = writeln!(s);
    if let Some(m) = &mutator {
        let how = match m.how {
            StopHow::Poll => "running (answered at a poll)",
            StopHow::SafeRegion => "in a safe region",
            _ => "running (stopped by the signal for the handshake)",
        };
        let _ = writeln!(
            s,
            "   Mutator: {how}, stack depth {} (sp {:#018x})",
            format_exact_size(m.depth as u64),
            m.sp
        );
    } else if info.mutator.is_some() {
        let _ = writeln!(s, "   Mutator: did not answer a handshake within 200 ms");
    }
    let l = &info.layout;
    let kb = |bytes: usize| format_exact_size(bytes as u64);
    let resident = info.stack_resident_bytes();
    let _ = write!(
        s,
        "   Stack: [{:#018x}, {:#018x}) {}",
        l.usable.start,
        l.usable.end,
        kb(l.usable.len())
    );
    if info.kind == ThreadKind::Attached {
        let _ = write!(s, " (the host's)");
    }
    if !l.guard.is_empty() {
        let _ = write!(
            s,
            ", guard zone [{:#018x}, {:#018x}) {}",
            l.guard.start,
            l.guard.end,
            kb(l.guard.len())
        );
    }
    if !l.alt_stack.is_empty() {
        let alt = &l.alt_stack;
        let _ = write!(
            s,
            ", signal stack [{:#018x}, {:#018x}) {}",
            alt.start,
            alt.end,
            kb(alt.len())
        );
    }
    let _ = writeln!(s, ", {} resident", kb(resident));
    if options.extended {
        let _ = writeln!(
            s,
            "   Mapping: [{:#018x}, {:#018x}) {}{}",
            l.mapping.start,
            l.mapping.end,
            kb(l.mapping.len()),
            if info.no_huge_pages {
                ", MADV_NOHUGEPAGE"
            } else {
                ""
            }
        );
    }
    if options.locks && java_thread {
        let _ = writeln!(s);
        let _ = writeln!(s, "   Locked ownable synchronizers:");
        let _ = writeln!(s, "\t- None");
    }
}
