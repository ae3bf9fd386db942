//! # rtvm-launcher
//!
//! The `rtvm` program: `rtvm [options] <Main> [args...]`, as java's launcher is to libjvm —
//! a program apart from the embedding library, built on its public API only. The library
//! half (`launch`, [`Mains`]) lets another binary (the jtreg test VM) reuse it with mains of
//! its own; [`IdleGate`] and [`memory_line`] are what the built-in `IdleThreads` main (and the
//! tests that reproduce JDK-8312182) are made of.
//!
//! Arguments are read as bytes (`OsString`): an argument that is not UTF-8 is converted
//! lossily and earns the message its text earns (`Unrecognized VM option 'Fo\u{fffd}'`),
//! never a panic — except an `-Xlog` file name, used as the bytes given. As in `java`, `-version`, `-help`/`-h`/`-?`/`--help` and `-X` end option
//! processing where they stand; the VM is created with the options before them (their
//! errors are reported), then the version or help is printed and the launcher exits 0.
//!
//! Exit status: 0 on success (and for `-version`, `-help`, `-X`, `-Xlog:help`,
//! `-XX:+PrintFlagsInitial`), 1 when the VM cannot be created or the main fails, else what
//! the main asks for; 143, 130 or 129 after a `SIGTERM`, `SIGINT` or `SIGHUP` (java's: the VM
//! removes its files, then the launcher exits with 128 + the signal's number — unless the
//! signal was ignored when it started, or `-Xrs`). Output the launcher prints itself (usage, version) is written as
//! `java` writes it: a closed pipe or a full disk is ignored. The main runs on a VM thread
//! named `main`, sized by `-Xss` like any Java thread.

use std::error::Error;
use std::ffi::OsString;
use std::fmt;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use rtvm::{lossy, ErrorCode, ErrorKind, InitArgs, Stream, Vm};

mod gc_mains;
mod mains;
mod safepoint_mains;

pub use gc_mains::{binary_trees, gcbench};
pub use mains::{idle_threads, memory_line, IdleGate, ReleaseOnDrop};
pub use safepoint_mains::{native_transitions, stop_straggler, thread_start_exit};

/// What the launcher prints on stderr after an argument error, as java's launcher does
/// (`JVM_ERROR1`, then the fatal-exception line), with rtvm's name for the VM.
pub const CREATE_FAILED: &str =
    "Error: Could not create the virtual machine.\nError: A fatal exception has occurred. Program will exit.\n";

/// What a main returns: `Ok` for exit status 0; an error is printed as
/// `Exception in thread "main" <error>` and gives exit status 1, unless it is an [`Exit`].
pub type MainResult = Result<(), Box<dyn Error + Send + Sync>>;

/// A main: runs with the VM and its arguments.
pub type MainFn = fn(&Vm, &[String]) -> MainResult;

/// An error that ends the launcher with a chosen status (and an optional message on
/// stderr), without the `Exception in thread "main"` prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// The exit status.
    pub status: i32,
    /// Printed on stderr, if any.
    pub message: Option<String>,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(m) => f.write_str(m),
            None => write!(f, "exit {}", self.status),
        }
    }
}

impl Error for Exit {}

/// A registered main.
#[derive(Clone, Copy, Debug)]
pub struct MainEntry {
    /// The name typed on the command line.
    pub name: &'static str,
    /// Usage, e.g. `<count> [<hold-seconds>]`.
    pub usage: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// The function.
    pub main: MainFn,
}

/// The mains a launcher knows.
#[derive(Clone, Debug, Default)]
pub struct Mains {
    entries: Vec<MainEntry>,
    /// Mains whose heap is the collector's (MMTk's): their VM reserves no heap of its own.
    collector_heap: Vec<&'static str>,
}

impl Mains {
    /// No mains.
    pub fn new() -> Mains {
        Mains::default()
    }

    /// rtvm's built-in mains (`IdleThreads`, `NativeTransitions`, `ThreadStartExit`,
    /// `BinaryTrees`, `GCBench`, `StopStraggler`).
    pub fn builtin() -> Mains {
        let mut m = Mains::new();
        m.add(MainEntry {
            name: "IdleThreads",
            usage: "<count> [<hold-seconds>]",
            summary: "start <count> idle threads, print RSS, threads and AnonHugePages, hold, stop",
            main: mains::idle_threads,
        });
        m.add(MainEntry {
            name: "NativeTransitions",
            usage: "<threads> <calls> [<sleep-us> [<polls>]]",
            summary: "threads alternating short blocking calls in safe regions with polls; print the count, JOINED",
            main: safepoint_mains::native_transitions,
        });
        m.add(MainEntry {
            name: "ThreadStartExit",
            usage: "<rounds> <threads>",
            summary: "start and join short threads while a handshaker walks every thread; print what the walks found",
            main: safepoint_mains::thread_start_exit,
        });
        m.add(MainEntry {
            name: "BinaryTrees",
            usage: "<depth> [<mutator threads>]",
            summary: "the Benchmarks Game's binary-trees on the MMTk heap (-XX:MMTkPlan), every tree checked",
            main: gc_mains::binary_trees,
        });
        m.add(MainEntry {
            name: "GCBench",
            usage: "[<mutator threads>]",
            summary: "Ellis, Kovac and Boehm's GCBench on the MMTk heap (-XX:MMTkPlan)",
            main: gc_mains::gcbench,
        });
        m.uses_collector_heap("BinaryTrees")
            .uses_collector_heap("GCBench");
        m.add(MainEntry {
            name: "StopStraggler",
            usage: "blocked-in-libc|no-stop-section|polling <seconds>",
            summary:
                "a thread no stop can reach (or, polling, one every stop reaches) for <seconds>",
            main: safepoint_mains::stop_straggler,
        });
        m
    }

    /// Marks the main `name` as one that runs on a collector's heap (the MMTk mains): the
    /// launcher creates its VM with [`InitArgs::collector_heap`].
    pub fn uses_collector_heap(&mut self, name: &'static str) -> &mut Mains {
        self.collector_heap.push(name);
        self
    }

    /// Registers a main; a later entry with the same name replaces an earlier one.
    pub fn add(&mut self, entry: MainEntry) -> &mut Mains {
        self.entries.retain(|e| e.name != entry.name);
        self.entries.push(entry);
        self
    }

    /// Looks a main up.
    pub fn get(&self, name: &str) -> Option<&MainEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// All mains, in registration order.
    pub fn entries(&self) -> &[MainEntry] {
        &self.entries
    }
}

/// Writes to a standard stream as `java` does: a failed write is dropped.
fn emit(stream: Stream, text: &str) {
    let _ = match stream {
        Stream::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|()| out.flush())
        }
        Stream::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
    };
}

fn usage(program: &str, mains: &Mains) -> String {
    let mut s = format!(
        "Usage: {program} [options] <main> [args...]\n\
         \x20          (to run a registered main)\n\n\
         \x20Arguments following the main are passed as arguments to it.\n\n\
         \x20where options include:\n\n\
         \x20   -version      print product version to the error stream and exit\n\
         \x20   -showversion  print product version to the error stream and continue\n\
         \x20   -? -h -help\n\
         \x20                 print this help message to the error stream\n\
         \x20   --help        print this help message to the output stream\n\
         \x20   -X            print help on extra options to the error stream\n\
         \x20   --help-extra  print help on extra options to the output stream\n\
         \x20   -XX:+Name, -XX:-Name, -XX:Name=value\n\
         \x20                 set a VM flag; -XX:+PrintFlagsFinal lists them all\n\
         \x20   -XX:Flags=<file>, -XX:VMOptionsFile=<file>\n\
         \x20                 read flags or options from a file\n\n\
         \x20The environment variable RTVM_OPTIONS is read for options before the command line.\n\n\
         \x20mains:\n"
    );
    for e in mains.entries() {
        s.push_str(&format!(
            "    {} {}\n                  {}\n",
            e.name, e.usage, e.summary
        ));
    }
    s
}

fn extra_usage() -> String {
    "    -Xlog:<opts>      Configure or enable logging with the Java Virtual Machine\n\
     \x20                     Unified Logging framework. Use -Xlog:help for details.\n\
     \x20   -Xmn<size>        sets the size of the nursery (NewSize and MaxNewSize)\n\
     \x20   -Xms<size>        set initial (and minimum) heap size\n\
     \x20   -Xmx<size>        set maximum heap size\n\
     \x20   -Xrs              install no signal handlers (ReduceSignalUsage)\n\
     \x20   -Xss<size>        set thread stack size\n\n\
     These extra options are subject to change without notice.\n"
        .to_owned()
}

/// What the launcher prints once the VM exists, instead of running a main.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Info {
    Help(Stream),
    Extra(Stream),
}

/// Runs the launcher on `args` (without the program name) with `mains`; returns the exit
/// status. `program` names the binary in the usage text.
pub fn launch(program: &str, args: &[OsString], mains: &Mains) -> i32 {
    let mut vm_options: Vec<&OsString> = Vec::new();
    let mut info = None;
    let mut rest = args.iter();
    let mut main_name = None;
    for raw in rest.by_ref() {
        let arg = lossy(raw);
        match arg.as_str() {
            "-help" | "-h" | "-?" => info = Some(Info::Help(Stream::Stderr)),
            "--help" => info = Some(Info::Help(Stream::Stdout)),
            "-X" => info = Some(Info::Extra(Stream::Stderr)),
            "--help-extra" => info = Some(Info::Extra(Stream::Stdout)),
            "-version" => {
                // The VM prints the version once it exists, and stops.
                vm_options.push(raw);
                break;
            }
            a if a.starts_with('-') => {
                vm_options.push(raw);
                continue;
            }
            _ => main_name = Some(arg),
        }
        break;
    }
    let main_args: Vec<String> = rest.map(|a| lossy(a)).collect();

    // As java: a SIGTERM, SIGINT or SIGHUP ends the process with 128 + the signal's number,
    // once the VM has removed its files.
    let mut init = InitArgs::from_os(vm_options)
        .launcher("SUN_STANDARD")
        .exit_hook(|status| std::process::exit(status));
    if let Some(main) = &main_name {
        if mains.collector_heap.iter().any(|m| m == main) {
            init = init.collector_heap(true);
        }
        let mut command = main.clone();
        for a in &main_args {
            command.push(' ');
            command.push_str(a);
        }
        init = init.command(command);
    }
    let vm = match Vm::create(init) {
        Ok(vm) => vm,
        Err(e) => {
            return match e.kind {
                ErrorKind::ExitRequested => 0,
                ErrorKind::Initialization => {
                    emit(
                        Stream::Stdout,
                        &format!("Error occurred during initialization of VM\n{}", e.message),
                    );
                    1
                }
                ErrorKind::ArgumentsStdout => {
                    emit(Stream::Stdout, &e.message);
                    emit(Stream::Stderr, CREATE_FAILED);
                    1
                }
                ErrorKind::OutOfMemory => {
                    emit(Stream::Stdout, &e.message);
                    1
                }
                _ => {
                    if e.code != ErrorCode::Exited {
                        emit(Stream::Stderr, &e.message);
                        emit(Stream::Stderr, CREATE_FAILED);
                    }
                    1
                }
            };
        }
    };
    match info {
        Some(Info::Help(stream)) => {
            emit(stream, &usage(program, mains));
            return finish(vm, 0);
        }
        Some(Info::Extra(stream)) => {
            emit(stream, &extra_usage());
            return finish(vm, 0);
        }
        None => {}
    }
    // As java does: the VM is created (options take effect) before a missing main is
    // reported.
    let Some(name) = main_name else {
        emit(Stream::Stderr, &usage(program, mains));
        return finish(vm, 1);
    };
    let Some(entry) = mains.get(&name).copied() else {
        emit(
            Stream::Stderr,
            &format!(
                "Error: Could not find or load main class {name}\n\
                 Caused by: no main named '{name}' is registered (see {program} -help)\n"
            ),
        );
        return finish(vm, 1);
    };
    let vm = Arc::new(vm);
    let status = run_main(Arc::clone(&vm), entry, main_args);
    match Arc::try_unwrap(vm) {
        Ok(vm) => finish(vm, status),
        // The main left a thread holding the VM; the VM is torn down when that reference
        // goes (a reaper waits for the thread).
        Err(_) => status,
    }
}

fn finish(vm: Vm, status: i32) -> i32 {
    match vm.shutdown() {
        Ok(()) => status,
        Err(e) => {
            emit(Stream::Stderr, &format!("rtvm: {e}\n"));
            if status == 0 {
                1
            } else {
                status
            }
        }
    }
}

/// Runs the main on a Java thread named `main` and maps its result to an exit status.
fn run_main(vm: Arc<Vm>, entry: MainEntry, args: Vec<String>) -> i32 {
    let result: Arc<Mutex<Option<MainResult>>> = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&result);
    let shared = Arc::clone(&vm);
    let spawned = vm.spawn("main", move || {
        let r = (entry.main)(&shared, &args);
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    });
    let thread = match spawned {
        Ok(t) => t,
        Err(e) => {
            emit(Stream::Stderr, &format!("Error: {e}\n"));
            return 1;
        }
    };
    if let Err(e) = thread.join() {
        emit(
            Stream::Stderr,
            &format!("Exception in thread \"main\" {e}\n"),
        );
        return 1;
    }
    let r = result.lock().unwrap_or_else(|p| p.into_inner()).take();
    match r {
        Some(Ok(())) => 0,
        Some(Err(e)) => match e.downcast::<Exit>() {
            Ok(exit) => {
                if let Some(m) = &exit.message {
                    emit(Stream::Stderr, &format!("{m}\n"));
                }
                exit.status
            }
            Err(e) => {
                emit(
                    Stream::Stderr,
                    &format!("Exception in thread \"main\" {e}\n"),
                );
                1
            }
        },
        None => 1,
    }
}
