//! Where the VM's output goes: standard output and error, or the embedder's hook.
//!
//! Everything the VM prints — `-XX:+PrintFlagsFinal` and the other listings, the NMT
//! report, warnings, `-Xlog` lines for `stdout`/`stderr`, `-Xlog:help` — goes through the
//! [`Output`] the VM was created with. By default that is file descriptors 1 and 2, written
//! as HotSpot writes them (`jio_fprintf`): a failed write (a closed pipe, a full disk) is
//! dropped, never a panic and never an exit. An embedder passes its own hook (JNI's
//! `vfprintf` option) in [`InitArgs::output`](crate::InitArgs::output) to receive every line.
//!
//! The one exception is the stack-overflow report, written with `write(2)` by a signal
//! handler, where no hook can safely run.

use std::fmt;
use std::io::Write as _;
use std::sync::Arc;

pub use rtvm_flags::Stream;

type Hook = dyn Fn(Stream, &str) + Send + Sync + 'static;

thread_local! {
    /// This thread is inside an embedder's output hook (plain data: no destructor).
    static IN_HOOK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is inside an embedder's output hook right now: the C API
/// refuses calls from there (`rtvm.h`: the hook must not call back into rtvm), which would
/// otherwise wait for locks the printing thread holds.
pub(crate) fn in_output_hook() -> bool {
    IN_HOOK.try_with(std::cell::Cell::get).unwrap_or(false)
}

/// Marks this thread as inside the hook until dropped (a panicking hook included).
struct InHook(bool);

impl InHook {
    fn enter() -> InHook {
        InHook(IN_HOOK.try_with(|h| h.replace(true)).unwrap_or(false))
    }
}

impl Drop for InHook {
    fn drop(&mut self) {
        let was = self.0;
        let _ = IN_HOOK.try_with(|h| h.set(was));
    }
}

/// A destination for the VM's output. Cheap to clone.
#[derive(Clone)]
pub struct Output(Option<Arc<Hook>>);

impl Output {
    /// The process's standard output and error.
    pub fn standard() -> Output {
        Output(None)
    }

    /// Every line goes to `hook`, with the stream it would have been printed on. Called from
    /// whichever thread prints (VM threads included), possibly concurrently.
    pub fn hook(hook: impl Fn(Stream, &str) + Send + Sync + 'static) -> Output {
        Output(Some(Arc::new(hook)))
    }

    /// Whether this is the process's standard streams.
    pub fn is_standard(&self) -> bool {
        self.0.is_none()
    }

    /// Writes `text` to `stream`. A failure of the standard streams is dropped, as HotSpot's
    /// own output drops it.
    pub fn write(&self, stream: Stream, text: &str) {
        match &self.0 {
            Some(hook) => {
                let _inside = InHook::enter();
                hook(stream, text)
            }
            None if rtvm_os_linux::safepoint::stopping(rtvm_os_linux::safepoint::world()) => {
                // While the world is stopped a mutator may be stopped inside the embedder's
                // own print, holding std's stdout lock: write the file descriptor directly.
                let fd = match stream {
                    Stream::Stdout => 1,
                    Stream::Stderr => 2,
                };
                rtvm_os_linux::system::write_fd(fd, text.as_bytes());
            }
            None => {
                let _no_stop = rtvm_os_linux::safepoint::NoStop::enter();
                let _ = match stream {
                    Stream::Stdout => {
                        let mut out = std::io::stdout().lock();
                        out.write_all(text.as_bytes()).and_then(|()| out.flush())
                    }
                    Stream::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
                };
            }
        }
    }
}

impl Default for Output {
    fn default() -> Self {
        Output::standard()
    }
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Output(hook)"
        } else {
            "Output(standard)"
        })
    }
}

/// A `std::io::Write` that sends what is written to one stream of an [`Output`] (for the
/// flag listings, which are written with `io::Write`).
pub(crate) struct OutputWriter<'a> {
    pub(crate) output: &'a Output,
    pub(crate) stream: Stream,
}

impl std::io::Write for OutputWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.output
            .write(self.stream, &String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
