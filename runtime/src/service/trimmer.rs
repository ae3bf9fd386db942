//! `-XX:TrimNativeHeapInterval=<ms>`: HotSpot 17.0.15's periodic native heap trimmer (JDK-8293114),
//! a VM thread ("Native Heap Trimmer") that calls glibc's `malloc_trim(0)` at the interval
//! and logs what each trim gave back, in HotSpot's `-Xlog:trimnative` lines:
//! `Periodic native trim enabled (interval: N ms)`, `Native heap trimmer start`, the trace
//! `Times: S suspended, T timed, P safepoint` before each trim, `Periodic Trim (n): A->B
//! (±C) T ms`, `Native heap trimmer stop`. A tick that finds a stop of the world in progress
//! skips its trim (HotSpot's trimmer pauses around safepoints, counted as "safepoint"): the
//! collector's pause is not lengthened by a trim competing for the allocator's locks, and a
//! thread the signal stopped inside malloc holds its arena. After each trim the thread gives
//! back its own stack pages below its frame.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::context::Context;
use super::trim::trim_native_heap;
use crate::threads::{self, Body, ThreadError, ThreadKind, VmThread};

#[derive(Debug, Default)]
struct State {
    stop: bool,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The running trimmer.
#[derive(Debug)]
pub(crate) struct Trimmer {
    shared: Arc<Shared>,
    thread: Option<VmThread>,
}

impl Trimmer {
    /// Starts trimming every `interval_ms` (logged as HotSpot logs it).
    pub(crate) fn start(ctx: &Arc<Context>, interval_ms: u32) -> Result<Trimmer, ThreadError> {
        log::info!(target: "trimnative", "Periodic native trim enabled (interval: {interval_ms} ms)");
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        let c = Arc::clone(ctx);
        let interval = Duration::from_millis(u64::from(interval_ms));
        let body = Body::Rust(Box::new(move || run(&c, &s, interval)));
        let thread = threads::spawn(
            &ctx.registry,
            &ctx.stacks,
            "Native Heap Trimmer",
            ThreadKind::Service,
            None,
            false,
            body,
        )?;
        Ok(Trimmer {
            shared,
            thread: Some(thread),
        })
    }

    /// Stops and joins the thread.
    pub(crate) fn stop(mut self) -> Option<String> {
        self.shared.lock().stop = true;
        self.shared.cv.notify_all();
        self.thread.take()?.join().err().map(|e| e.to_string())
    }
}

fn run(ctx: &Context, shared: &Shared, interval: Duration) {
    log::info!(target: "trimnative", "Native heap trimmer start");
    let (mut timed, mut at_safepoint, mut trims) = (0u64, 0u64, 0u64);
    let mut s = shared.lock();
    loop {
        // A stop may have come before this thread first got here (a VM destroyed as soon as
        // it was created, `-version`): nobody would wake a wait begun after it.
        if s.stop {
            break;
        }
        let (next, timeout) = shared
            .cv
            .wait_timeout(s, interval)
            .unwrap_or_else(|p| p.into_inner());
        s = next;
        if s.stop {
            break;
        }
        if !timeout.timed_out() {
            continue;
        }
        timed += 1;
        if rtvm_os_linux::safepoint::stopping(rtvm_os_linux::safepoint::world()) {
            at_safepoint += 1;
            continue;
        }
        drop(s);
        // The wake-ups of this wait, by reason, as HotSpot counts them per trim (rtvm has no
        // explicit suspension: none are "suspended").
        log::trace!(target: "trimnative", "Times: 0 suspended, {timed} timed, {at_safepoint} safepoint");
        (timed, at_safepoint) = (0, 0);
        if let Some(t) = trim_native_heap() {
            trims += 1;
            log::info!(
                target: "trimnative",
                "Periodic Trim ({trims}): {} {:.3}ms",
                t.change(),
                t.took.as_secs_f64() * 1e3
            );
        }
        // An idle service thread gives back what the trim's frames touched below it.
        let _ = ctx.registry.trim_current_stack();
        s = shared.lock();
    }
    drop(s);
    log::info!(target: "trimnative", "Native heap trimmer stop");
}
