//! The attach listener: HotSpot's Linux attach protocol on a VM thread ("Attach Listener"),
//! so the JDK's own `jcmd`, `jstack` and `jinfo` work against rtvm.
//!
//! * The socket is `/tmp/.java_pid<pid>`, made private before it is visible (mode 0600,
//!   the effective uid and gid); a peer whose `SO_PEERCRED` euid and egid differ from the
//!   VM's (root excepted) is dropped.
//! * A request is `1\0<op>\0<arg0>\0<arg1>\0<arg2>\0`: another version is answered `101`; an
//!   operation name over 16 bytes or an argument over 1024 is closed without a reply. The
//!   reply is `<status>\n` and the text, then the connection is closed.
//! * Operations: `jcmd` (diagnostic commands), `threaddump` (`jstack`), `printflag` and
//!   `setflag` (`jinfo -flag`), `properties`, `agentProperties`, `datadump`; anything else
//!   gets `-1` and `Operation X not recognized!`.
//! * Better than HotSpot where it costs nothing: a client has 2 s to send its request and
//!   must keep reading the reply (10 s without progress ends it), so a client that connects
//!   and never writes, or never reads, cannot hold up the next ones; the VM's destroy wakes
//!   the listener out of any wait.
//! * The socket is removed when the listener stops; if it disappears meanwhile (a tmp
//!   cleaner), the next `SIGQUIT` with a trigger file makes it again (JDK-8225690).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtvm_flags::{flag, Source, Value, WriteError};
use rtvm_os_linux::attach::{
    bind_private_socket, effective_ids, peer_credentials, wait_readable, Readiness, Waker,
};

use super::context::Context;
use super::dcmd::{self, Reply};
use super::properties::{store_format, system_properties};
use super::threaddump::{thread_dump, DumpOptions};
use crate::threads::{self, Body, ThreadKind, VmThread};

/// The socket of this process: `/tmp/.java_pid<pid>`.
pub(crate) fn socket_path() -> PathBuf {
    PathBuf::from(format!("/tmp/.java_pid{}", std::process::id()))
}

/// HotSpot's limits on a request.
const NAME_MAX: usize = 16;
const ARG_MAX: usize = 1024;
/// How long a client may take to send its request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// How long a reply may make no progress before the client is dropped.
const REPLY_STALL: Duration = Duration::from_secs(10);

/// A running listener.
pub(crate) struct Listener {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    recreate: Arc<AtomicBool>,
    thread: Option<VmThread>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").finish_non_exhaustive()
    }
}

impl Listener {
    /// Binds the socket and starts the listener thread.
    pub(crate) fn start(ctx: &Arc<Context>) -> Result<Listener, String> {
        let path = socket_path();
        let socket = bind_private_socket(&path, 64)
            .map_err(|e| format!("binding {} failed: {e}", path.display()))?;
        let waker = Arc::new(Waker::new().map_err(|e| format!("a waker pipe: {e}"))?);
        let stop = Arc::new(AtomicBool::new(false));
        let recreate = Arc::new(AtomicBool::new(false));
        let (c, w, s, r) = (
            Arc::clone(ctx),
            Arc::clone(&waker),
            Arc::clone(&stop),
            Arc::clone(&recreate),
        );
        let body = Body::Rust(Box::new(move || serve(&c, socket, &w, &s, &r)));
        let thread = threads::spawn(
            &ctx.registry,
            &ctx.stacks,
            "Attach Listener",
            ThreadKind::Service,
            None,
            false,
            body,
        );
        match thread {
            Ok(t) => {
                log::info!(target: "attach", "Attach listener started on {}", path.display());
                Ok(Listener {
                    waker,
                    stop,
                    recreate,
                    thread: Some(t),
                })
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e.to_string())
            }
        }
    }

    /// Whether the socket is there (a tmp cleaner may have removed it).
    pub(crate) fn socket_exists(&self) -> bool {
        std::fs::symlink_metadata(socket_path()).is_ok()
    }

    /// Makes the socket again if it has gone (the listener does it, between clients).
    pub(crate) fn ensure_socket(&self) {
        if !self.socket_exists() {
            self.recreate.store(true, Ordering::Release);
            self.waker.wake();
        }
    }

    /// Stops the listener (a client being served is dropped) and removes the socket.
    pub(crate) fn stop(mut self) -> Option<String> {
        self.stop.store(true, Ordering::Release);
        self.waker.wake();
        let t = self.thread.take()?;
        t.join().err().map(|e| e.to_string())
    }
}

fn serve(
    ctx: &Context,
    mut socket: UnixListener,
    waker: &Waker,
    stop: &AtomicBool,
    recreate: &AtomicBool,
) {
    let path = socket_path();
    loop {
        if stop.load(Ordering::Acquire) {
            break;
        }
        match wait_readable(socket.as_raw_fd(), waker, None) {
            Ok(Readiness::Woken) => {
                waker.drain();
                if recreate.swap(false, Ordering::AcqRel) && !path.exists() {
                    match bind_private_socket(&path, 64) {
                        Ok(s) => {
                            socket = s;
                            log::info!(target: "attach", "Attach socket {} re-created", path.display());
                        }
                        Err(e) => {
                            log::warn!(target: "attach", "Re-creating the attach socket {} failed: {e}", path.display())
                        }
                    }
                }
            }
            Ok(Readiness::Ready) => match socket.accept() {
                Ok((stream, _)) => {
                    serve_client(ctx, stream, waker, stop);
                    // Idle again: give back what the command's frames touched (a thread
                    // dump of many threads runs deep).
                    let _ = ctx.registry.trim_current_stack();
                }
                Err(e) => log::debug!(target: "attach", "accept failed: {e}"),
            },
            Ok(Readiness::TimedOut) => {}
            Err(e) => {
                log::warn!(target: "attach", "The attach listener stops: poll failed: {e}");
                break;
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    log::debug!(target: "attach", "Attach listener stopped");
}

/// Reads up to `buf.len()` bytes, waiting at most until `deadline` (or a wake).
fn read_some(
    stream: &mut UnixStream,
    waker: &Waker,
    buf: &mut [u8],
    deadline: Instant,
) -> io::Result<usize> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "request deadline"));
        }
        match wait_readable(stream.as_raw_fd(), waker, Some(left))? {
            Readiness::Ready => match stream.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            },
            Readiness::Woken => return Err(io::Error::new(io::ErrorKind::Interrupted, "stopping")),
            Readiness::TimedOut => {}
        }
    }
}

/// The request's strings: version, operation and three arguments, with HotSpot's limits.
enum Request {
    Complete(Vec<String>),
    /// Another protocol version: answered 101.
    Version,
    /// Too long, incomplete or unreadable: closed without a reply.
    Drop(String),
}

fn read_request(stream: &mut UnixStream, waker: &Waker) -> Request {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let mut parts: Vec<String> = Vec::with_capacity(5);
    let mut current = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let n = match read_some(stream, waker, &mut buf, deadline) {
            Ok(0) => {
                return Request::Drop(format!("incomplete request ({} of 5 strings)", parts.len()))
            }
            Ok(n) => n,
            Err(e) => return Request::Drop(format!("reading the request: {e}")),
        };
        for &b in &buf[..n] {
            if b != 0 {
                current.push(b);
                let limit = match parts.len() {
                    0 => 8,
                    1 => NAME_MAX,
                    _ => ARG_MAX,
                };
                if current.len() > limit {
                    return Request::Drop(format!(
                        "string {} longer than {limit} bytes",
                        parts.len()
                    ));
                }
                continue;
            }
            parts.push(String::from_utf8_lossy(&current).into_owned());
            current.clear();
            if parts.len() == 1 && parts[0] != "1" {
                return Request::Version;
            }
            if parts.len() == 5 {
                return Request::Complete(parts);
            }
        }
    }
}

/// Writes all of `data`, giving up when the client makes no progress for [`REPLY_STALL`]
/// or the listener is told to stop.
fn write_all(
    stream: &mut UnixStream,
    waker: &Waker,
    stop: &AtomicBool,
    mut data: &[u8],
) -> io::Result<()> {
    let mut last_progress = Instant::now();
    while !data.is_empty() {
        if stop.load(Ordering::Acquire) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "stopping"));
        }
        match stream.write(data) {
            Ok(n) => {
                data = &data[n..];
                last_progress = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if last_progress.elapsed() > REPLY_STALL {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client stopped reading",
                    ));
                }
                rtvm_os_linux::attach::wait_writable(
                    stream.as_raw_fd(),
                    waker,
                    Some(Duration::from_millis(200)),
                )?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn serve_client(ctx: &Context, mut stream: UnixStream, waker: &Waker, stop: &AtomicBool) {
    let (euid, egid) = effective_ids();
    match peer_credentials(&stream) {
        Ok(c) if c.uid == 0 || (c.uid == euid && c.gid == egid) => {}
        // HotSpot's words and level: the application's stdout is its own.
        Ok(c) => {
            log::debug!(target: "attach", "euid/egid check failed ({}/{} vs {euid}/{egid})", c.uid, c.gid);
            return;
        }
        Err(e) => {
            log::debug!(target: "attach", "Failed to get socket option SO_PEERCRED ({e})");
            return;
        }
    }
    if let Err(e) = stream.set_nonblocking(true) {
        log::debug!(target: "attach", "Attach connection dropped: {e}");
        return;
    }
    let (status, text) = match read_request(&mut stream, waker) {
        Request::Complete(parts) => execute(ctx, &parts[1], &parts[2..]),
        Request::Version => (101, String::new()),
        Request::Drop(why) => {
            log::debug!(target: "attach", "Attach connection dropped: {why}");
            return;
        }
    };
    let mut reply = format!("{status}\n").into_bytes();
    reply.extend_from_slice(text.as_bytes());
    if let Err(e) = write_all(&mut stream, waker, stop, &reply) {
        log::debug!(target: "attach", "Attach reply not delivered: {e}");
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// One operation: `(status, text)`.
pub(crate) fn execute(ctx: &Context, op: &str, args: &[String]) -> (i32, String) {
    let arg = |i: usize| args.get(i).map_or("", String::as_str);
    log::debug!(target: "attach", "Attach operation {op} '{}'", arg(0));
    match op {
        "jcmd" => match dcmd::execute(ctx, arg(0)) {
            Reply::Ok(text) => (0, text),
            Reply::Failed(text) => (-1, text),
        },
        "threaddump" => {
            let options = DumpOptions {
                locks: arg(0).contains("-l"),
                extended: arg(0).contains("-e"),
            };
            (0, thread_dump(&ctx.registry, options))
        }
        "printflag" => (0, print_flag(ctx, arg(0))),
        "setflag" => {
            let name = arg(0);
            match ctx.flags.set_writeable(name, Some(arg(1)), Source::Attach) {
                Ok(()) => {
                    ctx.flags_changed();
                    (0, String::new())
                }
                Err(WriteError::NotWriteable(_)) => {
                    (-1, format!("flag '{name}' cannot be changed\n"))
                }
                Err(e) => (-1, format!("{e}\n")),
            }
        }
        "properties" => (0, store_format(&system_properties(ctx))),
        "agentProperties" => (0, store_format(&[])),
        "datadump" => (0, String::new()),
        _ => (-1, format!("Operation {op} not recognized!")),
    }
}

/// `printflag`: `-XX:Name=value`, `-XX:+Name`/`-XX:-Name` for booleans.
fn print_flag(ctx: &Context, name: &str) -> String {
    let settings = ctx.flags.snapshot();
    match settings.value_by_name(name) {
        Some(Value::Bool(b)) => format!("-XX:{}{name}\n", if *b { '+' } else { '-' }),
        Some(v) => format!("-XX:{name}={}\n", v.display()),
        None => format!("no such flag '{name}'\n"),
    }
}

/// Whether `-XX:+DisableAttachMechanism` leaves the listener off.
pub(crate) fn attach_disabled(ctx: &Context) -> bool {
    ctx.flags.get(flag::DisableAttachMechanism)
}
