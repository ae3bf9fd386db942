//! The attach listener: HotSpot's Linux attach protocol on a VM thread ("Attach Listener"),
//! so the JDK's own `jcmd`, `jstack` and `jinfo` work against rtvm.
//!
//! * The socket is `/tmp/.java_pid<pid>`, made private before it is visible (mode 0600,
//!   the effective uid and gid); a peer whose `SO_PEERCRED` euid and egid differ from the
//!   VM's (root excepted) is dropped.
//! * A request is `1\0<op>\0<arg0>\0<arg1>\0<arg2>\0`: another version is answered `101`; an
//!   operation name over 16 bytes or an argument over 1024 is closed without a reply once
//!   the request has been read (HotSpot reads up to 3095 bytes first). The reply is
//!   `<status>\n` and the text, then the connection is closed.
//! * Operations: `jcmd` (diagnostic commands), `threaddump` (`jstack`), `printflag` and
//!   `setflag` (`jinfo -flag`), `properties`, `agentProperties`, `datadump`; anything else
//!   gets `-1` and `Operation X not recognized!`.
//! * Better than HotSpot where it costs nothing: clients are served side by side on the one
//!   listener thread (up to 128 connections at once, polled; commands still run one at a
//!   time), so a client that connects and never writes, or never reads its reply, delays no
//!   other; it is dropped after 2 s without a complete request, or 10 s without reading.
//!   HotSpot serves one connection at a time and waits for a silent one for ever. The VM's
//!   destroy wakes the listener out of any wait. An embedder's command is answered by its
//!   own thread (`answer_later`), so one that runs long holds up only its client.
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
    bind_private_socket, effective_ids, peer_credentials, wait_any, Interest, Waker,
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

/// The listener's loop: every client is served as far as it lets itself be, and none waits
/// for another (only for the commands themselves, which run here one at a time). A client
/// is read while it sends, answered as soon as its request is complete, and written to while
/// it reads; one that stays silent past [`REQUEST_DEADLINE`] or stops reading for
/// [`REPLY_STALL`] is dropped — meanwhile the others go on.
fn serve(
    ctx: &Context,
    mut socket: UnixListener,
    waker: &Waker,
    stop: &AtomicBool,
    recreate: &AtomicBool,
) {
    let path = socket_path();
    let mut clients: Vec<Client> = Vec::new();
    if let Err(e) = socket.set_nonblocking(true) {
        log::warn!(target: "attach", "The attach listener stops: {e}");
        let _ = std::fs::remove_file(&path);
        return;
    }
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        clients.retain(|c| match c.expired(now) {
            Some(why) => {
                log::debug!(target: "attach", "Attach connection dropped: {why}");
                false
            }
            None => true,
        });
        let mut interests = Vec::with_capacity(clients.len() + 1);
        interests.push(Interest {
            fd: socket.as_raw_fd(),
            readable: clients.len() < MAX_CLIENTS,
            writable: false,
        });
        interests.extend(clients.iter().map(Client::interest));
        let timeout = clients
            .iter()
            .map(|c| c.due().saturating_duration_since(now))
            .min();
        let (woken, events) = match wait_any(&interests, waker, timeout) {
            Ok(seen) => seen,
            Err(e) => {
                log::warn!(target: "attach", "The attach listener stops: poll failed: {e}");
                break;
            }
        };
        if woken {
            waker.drain();
            if recreate.swap(false, Ordering::AcqRel) && std::fs::symlink_metadata(&path).is_err() {
                match bind_private_socket(&path, 64).and_then(|s| {
                    s.set_nonblocking(true)?;
                    Ok(s)
                }) {
                    Ok(s) => {
                        socket = s;
                        log::info!(target: "attach", "Attach socket {} re-created", path.display());
                    }
                    Err(e) => {
                        log::warn!(target: "attach", "Re-creating the attach socket {} failed: {e}", path.display())
                    }
                }
            }
            continue;
        }
        // Clients first (their events are for these descriptors), then new connections.
        let mut served = false;
        for (i, seen) in events.iter().enumerate().skip(1).rev() {
            if !seen.any() {
                continue;
            }
            match clients[i - 1].progress(ctx, &mut served) {
                Ok(true) => {}
                Ok(false) => {
                    clients.swap_remove(i - 1);
                }
                Err(why) => {
                    log::debug!(target: "attach", "Attach connection dropped: {why}");
                    clients.swap_remove(i - 1);
                }
            }
        }
        if events[0].readable {
            accept_all(&socket, &mut clients);
        }
        if served {
            // Idle again: give back what the command's frames touched (a thread dump of
            // many threads runs deep).
            let _ = ctx.registry.trim_current_stack();
        }
    }
    drop(clients);
    let _ = std::fs::remove_file(&path);
    log::debug!(target: "attach", "Attach listener stopped");
}

/// How many clients are served at once; more wait in the socket's backlog until one of
/// these is answered or dropped.
const MAX_CLIENTS: usize = 128;

/// Accepts every waiting connection (up to [`MAX_CLIENTS`]), dropping peers of another user
/// or group at once, as HotSpot does.
fn accept_all(socket: &UnixListener, clients: &mut Vec<Client>) {
    while clients.len() < MAX_CLIENTS {
        let stream = match socket.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::debug!(target: "attach", "accept failed: {e}");
                return;
            }
        };
        let (euid, egid) = effective_ids();
        match peer_credentials(&stream) {
            Ok(c) if c.uid == 0 || (c.uid == euid && c.gid == egid) => {}
            // HotSpot's words and level: the application's stdout is its own.
            Ok(c) => {
                log::debug!(target: "attach", "euid/egid check failed ({}/{} vs {euid}/{egid})", c.uid, c.gid);
                continue;
            }
            Err(e) => {
                log::debug!(target: "attach", "Failed to get socket option SO_PEERCRED ({e})");
                continue;
            }
        }
        if let Err(e) = stream.set_nonblocking(true) {
            log::debug!(target: "attach", "Attach connection dropped: {e}");
            continue;
        }
        clients.push(Client {
            stream,
            state: State::Reading {
                request: RequestReader::default(),
                deadline: Instant::now() + REQUEST_DEADLINE,
            },
        });
    }
}

/// One connection being served.
struct Client {
    stream: UnixStream,
    state: State,
}

enum State {
    /// Its request is coming; it must be complete by `deadline`.
    Reading {
        request: RequestReader,
        deadline: Instant,
    },
    /// Its reply is going out; `sent` bytes of it so far, the last at `progress`.
    Writing {
        reply: Vec<u8>,
        sent: usize,
        progress: Instant,
    },
}

impl Client {
    fn interest(&self) -> Interest {
        let reading = matches!(self.state, State::Reading { .. });
        Interest {
            fd: self.stream.as_raw_fd(),
            readable: reading,
            writable: !reading,
        }
    }

    /// When this client's time is up.
    fn due(&self) -> Instant {
        match &self.state {
            State::Reading { deadline, .. } => *deadline,
            State::Writing { progress, .. } => *progress + REPLY_STALL,
        }
    }

    /// Why the client is dropped now, if its time is up.
    fn expired(&self, now: Instant) -> Option<&'static str> {
        if now < self.due() {
            return None;
        }
        Some(match self.state {
            State::Reading { .. } => "no complete request within the deadline",
            State::Writing { .. } => "the client stopped reading its reply",
        })
    }

    /// Reads or writes what can be without waiting; runs the request once it is complete
    /// (`served` then set). `Ok(true)`: keep serving it; `Ok(false)`: done (answered, or
    /// closed without a reply as HotSpot closes a bad request); `Err`: dropped, and why.
    fn progress(&mut self, ctx: &Context, served: &mut bool) -> Result<bool, String> {
        if let State::Reading { request, .. } = &mut self.state {
            let mut buf = [0u8; 512];
            let reply = loop {
                match self.stream.read(&mut buf) {
                    Ok(0) => {
                        return Err(format!(
                            "incomplete request ({} of 5 strings)",
                            request.strings()
                        ))
                    }
                    Ok(n) => match request.feed(&buf[..n]) {
                        None => {}
                        Some(Request::Complete(parts))
                            if parts[1] == "jcmd" && dcmd::is_embedders(ctx, &parts[2]) =>
                        {
                            // The embedder's command runs, and answers, on its own thread:
                            // however long it takes, it holds up only its own client.
                            let stream = self
                                .stream
                                .try_clone()
                                .map_err(|e| format!("handing the client over: {e}"))?;
                            answer_later(ctx, stream, &parts[2]);
                            return Ok(false);
                        }
                        Some(Request::Complete(parts)) => {
                            *served = true;
                            break execute(ctx, &parts[1], &parts[2..]);
                        }
                        Some(Request::Version) => break (101, String::new()),
                        Some(Request::Drop(why)) => return Err(why),
                    },
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("reading the request: {e}")),
                }
            };
            let (status, text) = reply;
            let mut bytes = format!("{status}\n").into_bytes();
            bytes.extend_from_slice(text.as_bytes());
            self.state = State::Writing {
                reply: bytes,
                sent: 0,
                progress: Instant::now(),
            };
        }
        let State::Writing {
            reply,
            sent,
            progress,
        } = &mut self.state
        else {
            return Ok(true);
        };
        while *sent < reply.len() {
            match self.stream.write(&reply[*sent..]) {
                Ok(n) => {
                    *sent += n;
                    *progress = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reply not delivered: {e}")),
            }
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        Ok(false)
    }
}

/// What a request came to.
enum Request {
    /// The version, operation and three arguments.
    Complete(Vec<String>),
    /// Another protocol version: answered 101.
    Version,
    /// Too long: closed without a reply.
    Drop(String),
}

/// A request's bytes as they arrive, read as HotSpot reads them: up to [`REQUEST_MAX`]
/// bytes or five NUL-terminated strings (version, operation, three arguments), the version
/// checked as soon as it is complete; then the lengths (an operation over [`NAME_MAX`] or an
/// argument over [`ARG_MAX`] bytes is closed without a reply — after the whole request was
/// read, so the client sees the connection close, not a broken pipe).
#[derive(Default)]
struct RequestReader {
    bytes: Vec<u8>,
    strings: usize,
}

/// HotSpot's request buffer: `"1\0"`'s size plus one, then the name and three arguments
/// with their NULs.
const REQUEST_MAX: usize = 3 + (NAME_MAX + 1) + 3 * (ARG_MAX + 1);

impl RequestReader {
    /// Strings received so far.
    fn strings(&self) -> usize {
        self.strings
    }

    /// Takes more bytes; `Some` once the request is decided.
    fn feed(&mut self, bytes: &[u8]) -> Option<Request> {
        for &b in bytes {
            self.bytes.push(b);
            if b == 0 {
                self.strings += 1;
                if self.strings == 1 && self.bytes != b"1\0" {
                    return Some(Request::Version);
                }
            }
            if self.strings == 5 || self.bytes.len() == REQUEST_MAX {
                return Some(self.decide());
            }
        }
        None
    }

    fn decide(&mut self) -> Request {
        if self.strings != 5 {
            return Request::Drop(format!(
                "incomplete request ({} of 5 strings in {} bytes)",
                self.strings,
                self.bytes.len()
            ));
        }
        let parts: Vec<&[u8]> = self.bytes.split(|&b| b == 0).take(5).collect();
        if parts[1].len() > NAME_MAX {
            return Request::Drop(format!("operation name longer than {NAME_MAX} bytes"));
        }
        if let Some(i) = parts[2..].iter().position(|a| a.len() > ARG_MAX) {
            return Request::Drop(format!("argument {i} longer than {ARG_MAX} bytes"));
        }
        Request::Complete(
            parts
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
        )
    }
}

/// Answers an embedder's diagnostic command from the thread that runs it (blocking writes,
/// [`REPLY_STALL`] at most without progress).
fn answer_later(ctx: &Context, stream: UnixStream, line: &str) {
    let blocking = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_write_timeout(Some(REPLY_STALL)));
    if let Err(e) = blocking {
        log::debug!(target: "attach", "Attach connection dropped: {e}");
        return;
    }
    dcmd::execute_detached(
        ctx,
        line,
        Box::new(move |reply| {
            let mut stream = stream;
            let (status, text) = match reply {
                Reply::Ok(text) => (0, text),
                Reply::Failed(text) => (-1, text),
            };
            if let Err(e) = stream.write_all(format!("{status}\n{text}").as_bytes()) {
                log::debug!(target: "attach", "Attach reply not delivered: {e}");
            }
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }),
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(chunks: &[&[u8]]) -> Option<Request> {
        let mut r = RequestReader::default();
        chunks.iter().find_map(|c| r.feed(c))
    }

    #[test]
    fn requests_as_hotspot_reads_them() {
        match read(&[b"1\0jc", b"md\0VM.version\0\0\0"]) {
            Some(Request::Complete(p)) => assert_eq!(p, ["1", "jcmd", "VM.version", "", ""]),
            _ => panic!("a whole request in two pieces"),
        }
        assert!(matches!(read(&[b"2\0"]), Some(Request::Version)));
        assert!(matches!(read(&[b"11\0jcmd\0"]), Some(Request::Version)));
        // A long argument is read to the end of the request, then refused.
        let mut long = b"1\0jcmd\0".to_vec();
        long.extend(std::iter::repeat_n(b'x', 1100));
        long.extend_from_slice(b"\0\0");
        let mut r = RequestReader::default();
        assert!(
            r.feed(&long).is_none(),
            "not decided before the last string"
        );
        assert!(matches!(r.feed(b"\0"), Some(Request::Drop(_))));
        assert!(matches!(
            read(&[b"1\0jcmd_with_a_long_name\0\0\0\0"]),
            Some(Request::Drop(_))
        ));
        // No NUL at all: decided when HotSpot's buffer would be full.
        let mut r = RequestReader::default();
        assert!(r.feed(b"1\0").is_none());
        assert!(matches!(
            r.feed(&vec![b'y'; REQUEST_MAX]),
            Some(Request::Drop(_))
        ));
    }
}
