//! The Signal Dispatcher: a VM thread that waits for `SIGQUIT` (posted by the handler of
//! `rtvm_os_linux::quit`, which does nothing else) and decides what it meant, as HotSpot's
//! signal thread does:
//!
//! * a trigger file `.attach_pid<pid>` in the working directory or in `/tmp`, owned by the
//!   VM's effective user or by root, attach not disabled, and no listener running: start the
//!   attach listener and print nothing; with the listener running, a trigger file counts
//!   only if its socket has gone (made again, nothing printed);
//! * otherwise print a thread dump on stdout (or the embedder's output hook), then call the
//!   `SIGQUIT` handler the process had before the VM, if it had one — on this thread, not in
//!   signal context.
//!
//! A `SIGTERM`, `SIGINT` or `SIGHUP` it was posted (where rtvm handles them) ends the
//! process the way java's exit does (`exit`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rtvm_os_linux::quit;

use super::attach::{attach_disabled, Listener};
use super::context::Context;
use super::perfdata::PerfData;
use super::threaddump::{thread_dump, DumpOptions};
use crate::output::Stream;

/// Where the attach client leaves its trigger: the working directory, then `/tmp`.
fn trigger_files() -> Vec<PathBuf> {
    let name = format!(".attach_pid{}", std::process::id());
    let mut v = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        v.push(cwd.join(&name));
    }
    v.push(PathBuf::from("/tmp").join(&name));
    v
}

/// Whether a trigger file of the VM's effective user (or root) is there.
fn triggered() -> bool {
    let (euid, _) = rtvm_os_linux::attach::effective_ids();
    trigger_files().iter().any(|p| {
        rtvm_os_linux::attach::file_owner(p).is_some_and(|owner| owner == euid || owner == 0)
    })
}

/// The dispatcher's loop: handles each `SIGQUIT` counted beyond `seen` (the count when the
/// handler went in), one by one, and a `SIGTERM`, `SIGINT` or `SIGHUP` (the process ends),
/// until `stop` is set (and the waiters kicked).
pub(crate) fn run(
    ctx: &Arc<Context>,
    listener: &Mutex<Option<Listener>>,
    perf: &Mutex<Option<PerfData>>,
    stop: &AtomicBool,
    mut seen: u32,
) {
    loop {
        let events = quit::events();
        if stop.load(Ordering::Acquire) {
            return;
        }
        if let Some(sig) = rtvm_os_linux::terminate::take_pending() {
            super::exit::end_for_signal(ctx, listener, perf, sig);
            continue;
        }
        let quits = quit::quit_count();
        if quits == seen {
            quit::wait_for_event(events, None);
            continue;
        }
        // One at a time, as HotSpot's signal thread takes its pending signals: `SIGQUIT`s
        // that arrived while an earlier one was being served each get their turn (a dump
        // each, or the attach), none is merged into another.
        seen = seen.wrapping_add(1);
        on_quit(ctx, listener);
        let _ = ctx.registry.trim_current_stack();
    }
}

/// Whether this `SIGQUIT` was the attach mechanism's, as HotSpot's signal thread decides:
/// with no listener, a trigger file starts one; with a listener running, the trigger file is
/// not looked at — a `kill -3` prints its dump even if a stale `.attach_pid<pid>` is left
/// lying around — unless the socket has gone (JDK-8225690): then a trigger file makes it
/// again. A listener that cannot start leaves the signal to the thread dump.
fn attach_signal(ctx: &Arc<Context>, listener: &Mutex<Option<Listener>>) -> bool {
    if attach_disabled(ctx) {
        return false;
    }
    let mut l = listener.lock().unwrap_or_else(|p| p.into_inner());
    match l.as_ref() {
        Some(running) => {
            if running.socket_exists() || !triggered() {
                return false;
            }
            log::debug!(target: "attach", "Socket file {} does not exist - Restart Attach Listener", super::attach::socket_path().display());
            running.ensure_socket();
            true
        }
        None => {
            if !triggered() {
                return false;
            }
            match Listener::start(ctx) {
                Ok(started) => {
                    *l = Some(started);
                    true
                }
                Err(e) => {
                    log::debug!(target: "attach", "The attach listener could not start: {e}");
                    false
                }
            }
        }
    }
}

fn on_quit(ctx: &Arc<Context>, listener: &Mutex<Option<Listener>>) {
    if attach_signal(ctx, listener) {
        return;
    }
    let dump = thread_dump(&ctx.registry, DumpOptions::default());
    ctx.output.write(Stream::Stdout, &dump);
    if quit::forward_to_previous() {
        log::debug!(target: "os", "SIGQUIT forwarded to the handler installed before the VM");
    }
}
