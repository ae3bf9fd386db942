//! The launcher: `rtvm [options] <Main> [args...]`, as a library entry point so another
//! binary (the jtreg test VM) can reuse it with its own mains.
//!
//! Exit status: 0 on success (and for `-version`, `-help`, `-X`, `-Xlog:help`,
//! `-XX:+PrintFlagsInitial`), 1 when the VM cannot be created or the main fails, else what
//! the main asks for. Launcher options are `-version`, `-showversion`, `-help`/`-h`/`-?` and
//! `-X`; every other option before the main is a VM option. The main runs on a VM thread
//! named `main`, sized by `-Xss` like any Java thread.

use std::error::Error;
use std::fmt;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use crate::vm::{ErrorKind, InitArgs, Vm};

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
}

impl Mains {
    /// No mains.
    pub fn new() -> Mains {
        Mains::default()
    }

    /// rtvm's built-in mains (`IdleThreads`).
    pub fn builtin() -> Mains {
        let mut m = Mains::new();
        m.add(MainEntry {
            name: "IdleThreads",
            usage: "<count> [<hold-seconds>]",
            summary: "start <count> idle threads, print RSS, threads and AnonHugePages, hold, stop",
            main: crate::mains::idle_threads,
        });
        m
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

/// The version text `-version` prints (to stderr).
pub fn version_text() -> String {
    let v = env!("CARGO_PKG_VERSION");
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    format!(
        "rtvm version \"{v}\"\nrtvm Runtime Environment (build {v}, {profile})\nrtvm 64-Bit VM (build {v}, {profile}, {}-linux)\n",
        std::env::consts::ARCH
    )
}

fn usage(program: &str, mains: &Mains) -> String {
    let mut s = format!(
        "Usage: {program} [options] <main> [args...]\n\
         \x20          (to run a registered main)\n\n\
         \x20Arguments following the main are passed as arguments to it.\n\n\
         \x20where options include:\n\n\
         \x20   -version      print product version to the error stream and exit\n\
         \x20   -showversion  print product version to the error stream and continue\n\
         \x20   -help, -h, -? print this help message to the output stream\n\
         \x20   -X            print help on extra options to the output stream\n\
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
     \x20   -Xss<size>        set thread stack size\n\n\
     These extra options are subject to change without notice.\n"
        .to_owned()
}

/// Runs the launcher on `args` (without the program name) with `mains`; returns the exit
/// status. `program` names the binary in the usage text.
pub fn launch(program: &str, args: &[String], mains: &Mains) -> i32 {
    let mut vm_options = Vec::new();
    let mut version = false;
    let mut show_version = false;
    let mut rest = args.iter();
    let mut main_name = None;
    for arg in rest.by_ref() {
        match arg.as_str() {
            "-version" => version = true,
            "-showversion" => show_version = true,
            "-help" | "-h" | "-?" | "--help" => {
                print!("{}", usage(program, mains));
                return 0;
            }
            "-X" => {
                print!("{}", extra_usage());
                return 0;
            }
            a if a.starts_with('-') => vm_options.push(arg.clone()),
            _ => {
                main_name = Some(arg.clone());
                break;
            }
        }
    }
    let main_args: Vec<String> = rest.cloned().collect();

    let vm = match Vm::create(InitArgs::new(vm_options)) {
        Ok(vm) => vm,
        Err(e) => {
            return match e.kind {
                ErrorKind::Arguments => {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "{}", e.message);
                    let _ = writeln!(err, "Error: Could not create the virtual machine.");
                    1
                }
                ErrorKind::Initialization => {
                    let mut out = std::io::stdout().lock();
                    let _ = write!(
                        out,
                        "Error occurred during initialization of VM\n{}",
                        e.message
                    );
                    let _ = out.flush();
                    1
                }
                ErrorKind::ExitRequested => 0,
            };
        }
    };
    if version || show_version {
        eprint!("{}", version_text());
    }
    if version {
        return finish(vm, 0);
    }
    // As java does: the VM is created (options take effect, -Xlog:help and
    // -XX:+PrintFlagsInitial exit 0) before a missing main is reported.
    let Some(name) = main_name else {
        eprint!("{}", usage(program, mains));
        return finish(vm, 1);
    };
    let Some(entry) = mains.get(&name).copied() else {
        eprintln!("Error: Could not find or load main class {name}");
        eprintln!("Caused by: no main named '{name}' is registered (see {program} -help)");
        return finish(vm, 1);
    };
    let vm = Arc::new(vm);
    let status = run_main(Arc::clone(&vm), entry, main_args);
    match Arc::try_unwrap(vm) {
        Ok(vm) => finish(vm, status),
        // The main left a thread holding the VM; it shuts down when that reference goes.
        Err(_) => status,
    }
}

fn finish(vm: Vm, status: i32) -> i32 {
    let _ = std::io::stdout().flush();
    match vm.shutdown() {
        Ok(()) => status,
        Err(e) => {
            eprintln!("rtvm: {e}");
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
            eprintln!("Error: {e}");
            return 1;
        }
    };
    if let Err(e) = thread.join() {
        eprintln!("Exception in thread \"main\" {e}");
        return 1;
    }
    let r = result.lock().unwrap_or_else(|p| p.into_inner()).take();
    match r {
        Some(Ok(())) => 0,
        Some(Err(e)) => match e.downcast::<Exit>() {
            Ok(exit) => {
                if let Some(m) = &exit.message {
                    eprintln!("{m}");
                }
                exit.status
            }
            Err(e) => {
                eprintln!("Exception in thread \"main\" {e}");
                1
            }
        },
        None => 1,
    }
}
