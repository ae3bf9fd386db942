//! The process's logger: one [`log::Log`] that sends each record to every output whose
//! levels enable its tag set, through `env_logger` loggers that write HotSpot's decorations;
//! `-Xlog:async` puts a buffer and a writer thread between the call site and the outputs.
//!
//! The logger belongs to the embedder as much as to rtvm: rtvm installs its dispatcher only if
//! no logger is installed yet, changes the global `log` level only if it did, and gives the
//! level back when the VM is destroyed.
//!
//! **The hook's lifetime.** A record is dispatched under the configuration's read lock, and
//! the VM's destroy takes the write lock to remove the configuration: a log call in flight —
//! from any thread, an embedder's memory growing on a host thread included — finishes writing
//! to the VM's output hook before the destroy returns, and none starts after it. A log call
//! made while this thread is already dispatching one (an output hook that calls back into
//! rtvm) is dropped: it would otherwise wait for a lock its own thread holds.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::Instant;

use log::{Level, LevelFilter, Log, Metadata, Record};

use super::config::{Dest, LogConfig};
use super::format::{format_line, format_record, Decorator, Padding};
use super::tags::tag_set_index;
use crate::output::{Output, Stream};

type SharedWriter = Arc<Mutex<Box<dyn Write + Send>>>;

/// Writes to the VM's output (standard streams or the embedder's hook).
struct SinkWriter {
    output: Output,
    stream: Stream,
}

impl Write for SinkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output
            .write(self.stream, &String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `-Xlog:async`: lines wait here for the writer thread; a full buffer drops lines (and says
/// how many), so a call site never blocks on an output.
struct AsyncBuffer {
    state: Mutex<AsyncState>,
    cv: Condvar,
}

struct AsyncState {
    lines: VecDeque<(SharedWriter, Vec<u8>)>,
    bytes: usize,
    dropped: usize,
    stop: bool,
}

/// HotSpot's `AsyncLogBufferSize` default.
const ASYNC_BUFFER_BYTES: usize = 2 * 1024 * 1024;
/// HotSpot's estimate of one buffered message, for the entry count it reports.
const ASYNC_ENTRY_ESTIMATE: usize = 576;

impl AsyncBuffer {
    fn push(&self, writer: &SharedWriter, line: &[u8]) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.bytes + line.len() > ASYNC_BUFFER_BYTES {
            s.dropped += 1;
            return;
        }
        s.bytes += line.len();
        s.lines.push_back((Arc::clone(writer), line.to_vec()));
        self.cv.notify_one();
    }

    fn run(&self) {
        loop {
            let (batch, dropped, stop) = {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                while s.lines.is_empty() && !s.stop {
                    s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
                }
                s.bytes = 0;
                let batch: Vec<_> = s.lines.drain(..).collect();
                (batch, std::mem::take(&mut s.dropped), s.stop)
            };
            let last = batch.last().map(|(w, _)| Arc::clone(w));
            for (w, line) in batch {
                let _ = w.lock().unwrap_or_else(|p| p.into_inner()).write_all(&line);
            }
            if let (true, Some(w)) = (dropped > 0, last) {
                let _ = writeln!(
                    w.lock().unwrap_or_else(|p| p.into_inner()),
                    "[warning][logging] {dropped} messages dropped due to async logging"
                );
            }
            if stop {
                return;
            }
        }
    }
}

/// What `env_logger` writes to: the output's writer, directly or through the async buffer.
struct Pipe {
    writer: SharedWriter,
    asynchronous: Option<Arc<AsyncBuffer>>,
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.asynchronous {
            Some(a) => a.push(&self.writer, buf),
            None => self
                .writer
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.asynchronous.is_none() {
            self.writer
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .flush()?;
        }
        Ok(())
    }
}

/// One live output.
struct LiveOutput {
    name: String,
    logger: env_logger::Logger,
    levels: Vec<LevelFilter>,
    writer: SharedWriter,
    padding: Arc<Padding>,
}

struct Live {
    outputs: Vec<LiveOutput>,
}

struct Dispatcher {
    config: RwLock<Option<Arc<Live>>>,
}

static DISPATCHER: Dispatcher = Dispatcher {
    config: RwLock::new(None),
};
static INSTALLED: OnceLock<bool> = OnceLock::new();

thread_local! {
    /// This thread is dispatching a record (plain data: set and read on any thread, at any
    /// time, without allocating).
    static DISPATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as dispatching until dropped (a panic in a writer included).
struct Dispatching;

impl Dispatching {
    /// `None` if this thread dispatches already (a nested call).
    fn enter() -> Option<Dispatching> {
        let nested = DISPATCHING.try_with(|d| d.replace(true)).unwrap_or(true);
        (!nested).then_some(Dispatching)
    }
}

impl Drop for Dispatching {
    fn drop(&mut self) {
        let _ = DISPATCHING.try_with(|d| d.set(false));
    }
}

impl Dispatcher {
    fn live(&self) -> Option<Arc<Live>> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Log for Dispatcher {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        let Some(i) = tag_set_index(metadata.target()) else {
            return false;
        };
        self.live()
            .is_some_and(|c| c.outputs.iter().any(|o| metadata.level() <= o.levels[i]))
    }

    fn log(&self, record: &Record<'_>) {
        let Some(i) = tag_set_index(record.target()) else {
            return;
        };
        let Some(_dispatching) = Dispatching::enter() else {
            return;
        };
        // The outputs' locks are held from here: a mutator is not stopped by the stop signal
        // while it holds them (a stopper or a collector logs while the world is stopped).
        let _no_stop = rtvm_os_linux::safepoint::NoStop::enter();
        // Held while the outputs write: the destroy waits for this call (module docs).
        let config = self.config.read().unwrap_or_else(|p| p.into_inner());
        let Some(live) = config.as_ref() else { return };
        for o in &live.outputs {
            if record.level() <= o.levels[i] {
                o.logger.log(record);
            }
        }
    }

    fn flush(&self) {
        if let Some(live) = self.live() {
            for o in &live.outputs {
                o.logger.flush();
            }
        }
    }
}

/// The logging configuration a VM installed; dropping it gives back what it changed.
pub(crate) struct LogHandle {
    installed: bool,
    previous_max: LevelFilter,
    asynchronous: Option<(Arc<AsyncBuffer>, std::thread::JoinHandle<()>)>,
    control: Arc<LogControl>,
}

impl std::fmt::Debug for LogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogHandle")
            .field("installed", &self.installed)
            .finish()
    }
}

impl LogHandle {
    /// The configuration dump lines (` #0: stdout all=warning uptime,level,tags`).
    pub(crate) fn description(&self) -> Vec<String> {
        self.control.lock().config.describe()
    }

    /// The running configuration, for `jcmd VM.log`.
    pub(crate) fn control(&self) -> Arc<LogControl> {
        Arc::clone(&self.control)
    }
}

impl Drop for LogHandle {
    fn drop(&mut self) {
        log::logger().flush();
        if let Some((buffer, thread)) = self.asynchronous.take() {
            buffer.state.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
            buffer.cv.notify_all();
            let _ = thread.join();
        }
        // Nothing is published by this VM any more (a VM.log in flight changes nothing).
        self.control.lock().active = false;
        if self.installed {
            *DISPATCHER.config.write().unwrap_or_else(|p| p.into_inner()) = None;
            log::set_max_level(self.previous_max);
        }
    }
}

/// The configuration of a running VM, changeable while it runs (`jcmd VM.log`): every
/// change rebuilds the outputs' loggers and publishes them at once; outputs keep their
/// writers (and an output's padding) across changes.
pub(crate) struct LogControl {
    state: Mutex<ControlState>,
}

struct ControlState {
    config: LogConfig,
    output: Output,
    start: Instant,
    buffer: Option<Arc<AsyncBuffer>>,
    writers: Vec<(String, SharedWriter, Arc<Padding>)>,
    /// rtvm's dispatcher is the process's logger, and this VM's configuration is the one
    /// published.
    active: bool,
}

impl LogControl {
    fn lock(&self) -> std::sync::MutexGuard<'_, ControlState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the configuration with `change` and publishes it; the notices the change
    /// raised (warnings about selections, a file's trace lines) are logged on the outputs
    /// that show them, and also returned for the caller to print.
    pub(crate) fn change<R>(
        &self,
        change: impl FnOnce(&mut LogConfig) -> R,
    ) -> Result<(R, Vec<String>), String> {
        let mut s = self.lock();
        if !s.active {
            return Err("the VM's logging configuration is not the process's logger (another logger is installed, or the VM is shutting down)".into());
        }
        s.config.notices.clear();
        let r = change(&mut s.config);
        let notices = std::mem::take(&mut s.config.notices);
        let live = s.build();
        for n in &notices {
            for (name, decorators) in &n.to {
                if let Some(o) = live.outputs.iter().find(|o| &o.name == name) {
                    write_line(o, decorators, n.level, &n.text, s.start);
                }
            }
        }
        let max = s.config.max_level();
        *DISPATCHER.config.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(live));
        log::set_max_level(max);
        let texts = notices
            .iter()
            .filter(|n| n.level <= Level::Warn)
            .map(|n| n.text.clone())
            .collect();
        Ok((r, texts))
    }

    /// The configuration dump lines.
    pub(crate) fn describe(&self) -> Vec<String> {
        self.lock().config.describe()
    }

    /// Rotates every file output now; returns how many.
    pub(crate) fn rotate(&self) -> usize {
        let s = self.lock();
        let mut n = 0;
        for o in &s.config.outputs {
            if let Dest::File(f, _) = &o.dest {
                let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
                if f.rotate_now().is_ok() {
                    n += 1;
                }
            }
        }
        n
    }
}

impl ControlState {
    /// The shared writer and padding of the output named `name`, made on first use.
    fn writer_for(&mut self, name: &str, dest: &Dest) -> (SharedWriter, Arc<Padding>) {
        if let Some((_, w, p)) = self.writers.iter().find(|(n, _, _)| n == name) {
            return (Arc::clone(w), Arc::clone(p));
        }
        let writer: Box<dyn Write + Send> = match dest {
            Dest::Stdout => Box::new(SinkWriter {
                output: self.output.clone(),
                stream: Stream::Stdout,
            }),
            Dest::Stderr => Box::new(SinkWriter {
                output: self.output.clone(),
                stream: Stream::Stderr,
            }),
            Dest::File(file, _) => Box::new(FileWriter(Arc::clone(file))),
        };
        let w: SharedWriter = Arc::new(Mutex::new(writer));
        let p = Arc::new(Padding::default());
        self.writers
            .push((name.to_owned(), Arc::clone(&w), Arc::clone(&p)));
        (w, p)
    }

    /// The loggers of the current configuration; writers of outputs no longer configured
    /// are dropped (a file output that went is closed).
    fn build(&mut self) -> Live {
        let names: Vec<String> = self.config.outputs.iter().map(|o| o.name.clone()).collect();
        self.writers.retain(|(n, _, _)| names.contains(n));
        let mut outputs = Vec::new();
        let specs: Vec<(String, Vec<Decorator>, Vec<LevelFilter>)> = self
            .config
            .outputs
            .iter()
            .map(|o| (o.name.clone(), o.decorators.clone(), o.levels.clone()))
            .collect();
        for (k, (name, decorators, levels)) in specs.into_iter().enumerate() {
            let dest = match &self.config.outputs[k].dest {
                Dest::Stdout => Dest::Stdout,
                Dest::Stderr => Dest::Stderr,
                Dest::File(f, o) => Dest::File(Arc::clone(f), *o),
            };
            let (writer, padding) = self.writer_for(&name, &dest);
            let p = Arc::clone(&padding);
            let start = self.start;
            let logger = env_logger::Builder::new()
                .target(env_logger::Target::Pipe(Box::new(Pipe {
                    writer: Arc::clone(&writer),
                    asynchronous: self.buffer.clone(),
                })))
                .write_style(env_logger::WriteStyle::Never)
                .filter_level(LevelFilter::Trace)
                .format(move |buf, record| {
                    writeln!(buf, "{}", format_record(&decorators, &p, record, start))
                })
                .build();
            outputs.push(LiveOutput {
                name,
                logger,
                levels,
                writer,
                padding,
            });
        }
        Live { outputs }
    }
}

/// A file output's writer: the shared file (rotated by a `VM.log rotate` too).
struct FileWriter(super::config::SharedFile);

impl Write for FileWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}

/// Installs `config` as the process's logging configuration (stdout and stderr outputs
/// write to `output`), timing uptime from `start`.
pub(crate) fn install(mut config: LogConfig, output: &Output, start: Instant) -> LogHandle {
    let installed = *INSTALLED.get_or_init(|| log::set_logger(&DISPATCHER).is_ok());
    let mut asynchronous = None;
    if config.async_mode {
        let buffer = Arc::new(AsyncBuffer {
            state: Mutex::new(AsyncState {
                lines: VecDeque::new(),
                bytes: 0,
                dropped: 0,
                stop: false,
            }),
            cv: Condvar::new(),
        });
        let b = Arc::clone(&buffer);
        match std::thread::Builder::new()
            .name("AsyncLog Thread".into())
            .spawn(move || b.run())
        {
            Ok(thread) => asynchronous = Some((buffer, thread)),
            Err(e) => output.write(
                Stream::Stderr,
                &format!("rtvm warning: -Xlog:async: the writer thread could not start ({e}); logging synchronously\n"),
            ),
        }
    }
    let buffer = asynchronous.as_ref().map(|(b, _)| Arc::clone(b));
    let max = config.max_level();
    let notices = std::mem::take(&mut config.notices);
    let mut state = ControlState {
        config,
        output: output.clone(),
        start,
        buffer,
        writers: Vec::new(),
        active: installed,
    };
    let live = state.build();
    // Messages about the configuration itself, on the outputs (and with the decorators) that
    // showed warnings when they arose.
    for n in &notices {
        for (name, decorators) in &n.to {
            if let Some(o) = live.outputs.iter().find(|o| &o.name == name) {
                write_line(o, decorators, n.level, &n.text, start);
            }
        }
    }
    let previous_max = log::max_level();
    if installed {
        *DISPATCHER.config.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(live));
        log::set_max_level(max);
    } else if max > LevelFilter::Warn {
        output.write(
            Stream::Stderr,
            "rtvm warning: another logger is installed in this process; -Xlog output goes to it\n",
        );
    }
    if asynchronous.is_some() {
        log::info!(
            target: "logging",
            "The maximum entries of AsyncLogBuffer: {}, estimated memory use: {ASYNC_BUFFER_BYTES} bytes",
            ASYNC_BUFFER_BYTES / ASYNC_ENTRY_ESTIMATE
        );
    }
    LogHandle {
        installed,
        previous_max,
        asynchronous,
        control: Arc::new(LogControl {
            state: Mutex::new(state),
        }),
    }
}

fn write_line(o: &LiveOutput, decorators: &[Decorator], level: Level, text: &str, start: Instant) {
    let mut line = format_line(
        decorators,
        &o.padding,
        level,
        "logging",
        &format_args!("{text}"),
        start,
    );
    line.push('\n');
    let _ = o
        .writer
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .write_all(line.as_bytes());
}
