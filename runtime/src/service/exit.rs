//! The end a `SIGTERM`, `SIGINT` or `SIGHUP` brings (where rtvm handles them:
//! [`rtvm_os_linux::terminate`]), as java's exit on these signals, without the shutdown hooks
//! rtvm has no notion of: the VM's files go — the attach socket, the perf data (saved first
//! with `-XX:+PerfDataSaveToFile`) — the NMT statistics are printed
//! (`-XX:+PrintNMTStatistics`), and the process ends: through the embedder's exit hook with
//! java's status, 128 + the signal's number, or by the signal's default action, which is what
//! it would have done without rtvm. rtvm ends the process in no other way.
//!
//! It runs on the Signal Dispatcher, or — for a signal that arrived once the dispatcher had
//! stopped — on the thread destroying the VM, after the files are gone.

use std::ffi::c_int;
use std::sync::Mutex;

use rtvm_flags::flag;
use rtvm_os_linux::terminate;

use super::attach::Listener;
use super::context::Context;
use super::perfdata::PerfData;
use crate::output::Stream;

/// Removes what is left of the VM's files, prints the NMT statistics if asked, and ends the
/// process for `sig`. Returns only if the process did not end (the exit hook returned and a
/// handler the host installed meanwhile took the signal).
pub(crate) fn end_for_signal(
    ctx: &Context,
    listener: &Mutex<Option<Listener>>,
    perf: &Mutex<Option<PerfData>>,
    sig: c_int,
) {
    let status = 128 + sig;
    log::debug!(target: "os", "{}: removing the VM's files; the process ends with status {status}", terminate::name(sig));
    let running = listener.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(l) = running {
        if let Some(e) = l.stop() {
            log::debug!(target: "attach", "{e}");
        }
    }
    if let Some(p) = perf.lock().unwrap_or_else(|p| p.into_inner()).take() {
        p.finish(ctx);
    }
    if ctx.flags.get(flag::PrintNMTStatistics) {
        if let Some(n) = ctx.native_memory() {
            ctx.output.write(Stream::Stdout, &n.report());
        }
    }
    log::logger().flush();
    if let Some(hook) = &ctx.exit {
        hook.call(status);
    }
    terminate::end_by_default(sig);
}
