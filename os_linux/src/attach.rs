//! The OS side of HotSpot's attach mechanism on Linux: the listener's Unix socket, made
//! private before anyone can connect to it (bound under a temporary name, `chmod 0600`,
//! `chown` to the effective ids, then renamed into place), the peer's credentials
//! (`SO_PEERCRED`), the trigger file's owner, and a waker that interrupts a listener's wait.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The credentials of a socket's peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCredentials {
    /// The peer's pid.
    pub pid: i32,
    /// Its effective uid.
    pub uid: u32,
    /// Its effective gid.
    pub gid: u32,
}

/// The process's effective uid and gid.
pub fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid cannot fail and touch no memory.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// The process's id as its own pid namespace numbers it (what the attach client computes
/// from `NSpid`), which is `getpid()`.
pub fn pid() -> u32 {
    std::process::id()
}

/// Binds a listening socket at `path`, private to the effective user: bound at
/// `<path>.tmp`, listening, mode 0600, owned by the effective uid and gid, then renamed to
/// `path` — a client never sees it with other permissions. A stale file at either name is
/// removed first.
pub fn bind_private_socket(path: &Path, backlog: i32) -> io::Result<UnixListener> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let _ = fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)?;
    let result = (|| {
        // SAFETY: listen(2) on the listener's own descriptor.
        if unsafe { libc::listen(listener.as_raw_fd(), backlog) } != 0 {
            return Err(io::Error::last_os_error());
        }
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))?;
        let (uid, gid) = effective_ids();
        std::os::unix::fs::chown(&tmp, Some(uid), Some(gid))?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(listener)
}

/// The peer of a connected Unix socket (`SO_PEERCRED`).
pub fn peer_credentials(stream: &UnixStream) -> io::Result<PeerCredentials> {
    // SAFETY: a zeroed ucred is a valid out-parameter of the size passed.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a local.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCredentials {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// The owner uid of `path` if it exists and is a regular file.
pub fn file_owner(path: &Path) -> Option<u32> {
    let m = fs::symlink_metadata(path).ok()?;
    m.file_type().is_file().then(|| m.uid())
}

/// The owner, group and mode of a file (not following a symlink at `path` itself).
pub fn file_identity(path: &Path) -> Option<(u32, u32, u32)> {
    let m = fs::symlink_metadata(path).ok()?;
    Some((m.uid(), m.gid(), m.mode()))
}

/// A pipe that wakes a [`wait_readable`] from another thread.
#[derive(Debug)]
pub struct Waker {
    read: OwnedFd,
    write: OwnedFd,
}

impl Waker {
    /// A new waker (a close-on-exec, non-blocking pipe).
    pub fn new() -> io::Result<Waker> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into the local array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Waker { read, write })
    }

    /// Wakes the waiter (and every later wait, until [`Waker::drain`]).
    pub fn wake(&self) {
        let b = 1u8;
        // SAFETY: a one-byte write from a local into the pipe's write end (a full pipe only
        // means it is already awake).
        unsafe { libc::write(self.write.as_raw_fd(), (&b as *const u8).cast(), 1) };
    }

    /// Empties the pipe.
    pub fn drain(&self) {
        let mut buf = [0u8; 64];
        // SAFETY: reads into a local buffer from the non-blocking read end.
        while unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {
        }
    }
}

/// What [`wait_readable`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// The descriptor is readable (a connection to accept, data to read).
    Ready,
    /// The waker was woken.
    Woken,
    /// The timeout passed.
    TimedOut,
}

/// Waits until `fd` is readable, `waker` is woken, or `timeout` passes (`None`: no limit).
/// Interrupted waits are resumed.
pub fn wait_readable(fd: RawFd, waker: &Waker, timeout: Option<Duration>) -> io::Result<Readiness> {
    wait_for(fd, libc::POLLIN, waker, timeout)
}

/// Waits until `fd` can take more data, `waker` is woken, or `timeout` passes.
pub fn wait_writable(fd: RawFd, waker: &Waker, timeout: Option<Duration>) -> io::Result<Readiness> {
    wait_for(fd, libc::POLLOUT, waker, timeout)
}

fn wait_for(
    fd: RawFd,
    events: libc::c_short,
    waker: &Waker,
    timeout: Option<Duration>,
) -> io::Result<Readiness> {
    let mut fds = [
        libc::pollfd {
            fd,
            events,
            revents: 0,
        },
        libc::pollfd {
            fd: waker.read.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    loop {
        // SAFETY: poll on a local array of two pollfds.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(if fds[1].revents != 0 {
            Readiness::Woken
        } else if fds[0].revents != 0 {
            Readiness::Ready
        } else {
            Readiness::TimedOut
        });
    }
}

/// What [`wait_any`] waits for on one descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest {
    /// The descriptor.
    pub fd: RawFd,
    /// Wait until it is readable (a connection to accept, data to read, or the peer gone).
    pub readable: bool,
    /// Wait until it can take more data.
    pub writable: bool,
}

/// What [`wait_any`] saw on one descriptor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// Readable.
    pub readable: bool,
    /// Writable.
    pub writable: bool,
    /// Hung up or in error: a read or write now says why.
    pub closed: bool,
}

impl Events {
    /// Whether anything happened.
    pub fn any(&self) -> bool {
        self.readable || self.writable || self.closed
    }
}

/// Waits until one of `interests` is ready, `waker` is woken, or `timeout` passes (`None`:
/// no limit); returns whether the waker was woken and what each descriptor saw, in the
/// order given. Interrupted waits are resumed.
pub fn wait_any(
    interests: &[Interest],
    waker: &Waker,
    timeout: Option<Duration>,
) -> io::Result<(bool, Vec<Events>)> {
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(interests.len() + 1);
    fds.push(libc::pollfd {
        fd: waker.read.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    for i in interests {
        let mut events = 0;
        if i.readable {
            events |= libc::POLLIN;
        }
        if i.writable {
            events |= libc::POLLOUT;
        }
        fds.push(libc::pollfd {
            fd: i.fd,
            events,
            revents: 0,
        });
    }
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    loop {
        // SAFETY: poll on a local vector of `fds.len()` pollfds.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let seen = fds[1..]
            .iter()
            .map(|p| Events {
                readable: p.revents & libc::POLLIN != 0,
                writable: p.revents & libc::POLLOUT != 0,
                closed: p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0,
            })
            .collect();
        return Ok((fds[0].revents != 0, seen));
    }
}

/// The effective user's name (`getpwuid_r`), or its uid in decimal if it has none.
pub fn effective_user_name() -> String {
    let (uid, _) = effective_ids();
    let mut buf = vec![0u8; 4096];
    // SAFETY: a zeroed passwd is a valid out-parameter.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r fills `pw` with pointers into `buf`, both locals that outlive the
    // reads below.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc == 0 && !result.is_null() && !pw.pw_name.is_null() {
        // SAFETY: pw_name is a NUL-terminated string in `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
        if let Ok(n) = name.to_str() {
            if !n.is_empty() {
                return n.to_owned();
            }
        }
    }
    uid.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn private_socket_and_peer() {
        let dir = std::env::temp_dir().join(format!("rtvm-attach-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(".java_pid1");
        let listener = bind_private_socket(&path, 5).unwrap();
        let (uid, gid, mode) = file_identity(&path).unwrap();
        assert_eq!((uid, gid), effective_ids());
        assert_eq!(mode & 0o777, 0o600);
        assert!(!dir.join(".java_pid1.tmp").exists());
        let client = UnixStream::connect(&path).unwrap();
        let (server, _) = listener.accept().unwrap();
        let cred = peer_credentials(&server).unwrap();
        assert_eq!((cred.uid, cred.gid), effective_ids());
        assert_eq!(cred.pid as u32, std::process::id());
        drop(client);
        let waker = Waker::new().unwrap();
        assert_eq!(
            wait_readable(
                listener.as_raw_fd(),
                &waker,
                Some(Duration::from_millis(10))
            )
            .unwrap(),
            Readiness::TimedOut
        );
        waker.wake();
        assert_eq!(
            wait_readable(listener.as_raw_fd(), &waker, None).unwrap(),
            Readiness::Woken
        );
        waker.drain();
        // Several descriptors at once: a connection waiting on the listener, a peer's data.
        let mut a = UnixStream::connect(&path).unwrap();
        let listening = Interest {
            fd: listener.as_raw_fd(),
            readable: true,
            writable: false,
        };
        let (woken, seen) = wait_any(&[listening], &waker, Some(Duration::from_secs(5))).unwrap();
        assert!(!woken && seen[0].readable);
        let (b, _) = listener.accept().unwrap();
        let quiet = Interest {
            fd: b.as_raw_fd(),
            readable: true,
            writable: false,
        };
        let (_, seen) = wait_any(&[quiet], &waker, Some(Duration::from_millis(10))).unwrap();
        assert!(!seen[0].any(), "nothing sent yet");
        a.write_all(b"x").unwrap();
        let writing = Interest {
            fd: b.as_raw_fd(),
            readable: true,
            writable: true,
        };
        let (_, seen) = wait_any(&[listening, writing], &waker, None).unwrap();
        assert!(!seen[0].any() && seen[1].readable && seen[1].writable);
        drop(a);
        waker.wake();
        let (woken, _) = wait_any(&[quiet], &waker, None).unwrap();
        assert!(woken);
        waker.drain();
        fs::remove_dir_all(&dir).unwrap();
        assert!(!effective_user_name().is_empty());
    }
}
