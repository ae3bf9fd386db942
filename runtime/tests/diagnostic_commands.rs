//! The embedder's diagnostic commands from Rust, each case in a child process (one VM per
//! process; the attach socket is the process's):
//!
//! * commands shaped like HotSpot's `GC.heap_info`, `GC.run`, `GC.class_histogram` and
//!   `GC.heap_dump`: listed by `help` among rtvm's own in HotSpot's order, `help <name>` in
//!   HotSpot's layout, every type's values reaching the handler, HotSpot's messages for bad
//!   input, registrations refused with clear errors;
//! * where handlers run: a service thread `DCmd <name>`, never the calling mutator, which
//!   waits in a safe region — a stop of the world succeeds while a handler blocks; runs
//!   overlap;
//! * a failing and a panicking handler: `java.lang.RuntimeException` after the output, the
//!   VM runs on;
//! * the attach protocol's bytes (status `-1` for failures, `0` otherwise);
//! * destroy: a handler that watches `cancelled()` lets it finish at once with its reply
//!   delivered; one that never returns is left running after 5 s, the destroy says so, and
//!   what it holds is dropped only when it returns.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use rtvm::{
    DcmdArguments, DcmdError, DcmdParam, DcmdType, DiagnosticCommand, InitArgs, ShutdownError,
    StopHow, Vm,
};
use rtvm_testkit::child::{check_child, child_role};

fn create(options: &[&str]) -> Vm {
    Vm::create(InitArgs::new(options.iter().copied())).unwrap()
}

/// The calling thread's name as the kernel knows it.
fn comm() -> String {
    std::fs::read_to_string("/proc/thread-self/comm")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The kernel tid of the calling thread.
fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

const MONITOR: &str = "java.lang.management.ManagementPermission(monitor)";

/// HotSpot 17's `GC.*` commands as a collector would declare them (HotSpot's own texts).
fn hotspot_shaped(log: Arc<Mutex<Vec<String>>>) -> Vec<DiagnosticCommand> {
    let l = Arc::clone(&log);
    let histogram = DiagnosticCommand::new(
        "GC.class_histogram",
        "Provide statistics about the Java heap usage.",
        move |a: &DcmdArguments, out: &mut String| {
            l.lock().unwrap().push(format!(
                "histogram all={} set={} parallel={:?} set={}",
                a.boolean("-all"),
                a.is_set("-all"),
                a.int("-parallel"),
                a.is_set("-parallel")
            ));
            out.push_str(" num     #instances         #bytes  class name (module)\n");
            Ok(())
        },
    )
    .impact("High: Depends on Java heap size and content.")
    .permission(MONITOR)
    .option(DcmdParam::new("-all", "Inspect all objects, including unreachable objects", DcmdType::Boolean).default_value("false"))
    .option(DcmdParam::new("-parallel", "Number of parallel threads to use for heap inspection. 0 (the default) means let the VM determine the number of threads to use. 1 means use one thread (disable parallelism). For any other value the VM will try to use the specified number of threads, but might use fewer.", DcmdType::Int).default_value("0"));
    let l = Arc::clone(&log);
    let dump = DiagnosticCommand::new(
        "GC.heap_dump",
        "Generate a HPROF format dump of the Java heap.",
        move |a: &DcmdArguments, out: &mut String| {
            l.lock().unwrap().push(format!(
                "dump {:?} gz={:?}",
                a.string("filename"),
                a.int("-gz")
            ));
            out.push_str(&format!(
                "Dumping heap to {} ...\n",
                a.string("filename").unwrap_or_default()
            ));
            Ok(())
        },
    )
    .impact("High: Depends on Java heap size and content. Request a full GC unless the '-all' option is specified.")
    .permission(MONITOR)
    .argument(DcmdParam::new("filename", "Name of the dump file", DcmdType::String).mandatory())
    .option(DcmdParam::new("-all", "Dump all objects, including unreachable objects", DcmdType::Boolean).default_value("false"))
    .option(DcmdParam::new("-gz", "If specified, the heap dump is written in gzipped format using the given compression level. 1 (recommended) is the fastest, 9 the strongest compression.", DcmdType::Int).default_value("1"))
    .option(DcmdParam::new("-overwrite", "If specified, the dump file will be overwritten if it exists", DcmdType::Boolean).default_value("false"));
    let info = DiagnosticCommand::new(
        "GC.heap_info",
        "Provide generic Java heap information.",
        |_: &DcmdArguments, out: &mut String| {
            out.push_str(&format!(" rtvm heap, on \"{}\"\n", comm()));
            Ok(())
        },
    )
    .impact("Medium")
    .permission(MONITOR);
    let l = log;
    let run = DiagnosticCommand::new(
        "GC.run",
        "Call java.lang.System.gc().",
        move |_: &DcmdArguments, _: &mut String| {
            l.lock().unwrap().push("gc".into());
            Ok(())
        },
    )
    .impact("Medium: Depends on Java heap size and content.");
    vec![histogram, dump, info, run]
}

/// A command of every type, echoing what it got.
fn typed() -> DiagnosticCommand {
    DiagnosticCommand::new(
        "Test.typed",
        "Every type.",
        |a: &DcmdArguments, out: &mut String| {
            out.push_str(&format!(
                "name={:?} s={:?} b={} i={:?} m={:?} t={:?} text={:?} is_set={}\n",
                a.string("name"),
                a.string("s"),
                a.boolean("b"),
                a.int("i"),
                a.memory_size("m"),
                a.nanotime("t"),
                a.text("m"),
                a.is_set("m")
            ));
            Ok(())
        },
    )
    .argument(DcmdParam::new("name", "a name", DcmdType::String))
    .option(DcmdParam::new("s", "a string", DcmdType::String))
    .option(DcmdParam::new("b", "a boolean", DcmdType::Boolean))
    .option(DcmdParam::new("i", "an int", DcmdType::Int).default_value("-3"))
    .option(DcmdParam::new("m", "a size", DcmdType::MemorySize).default_value("1k"))
    .option(DcmdParam::new("t", "a time", DcmdType::NanoTime).default_value("10ms"))
}

#[test]
fn help_lists_and_runs_the_embedders_commands() {
    if child_role().is_none() {
        return check_child("help_lists_and_runs_the_embedders_commands");
    }
    let vm = create(&["-Xmx32m"]);
    let log = Arc::new(Mutex::new(Vec::new()));
    for c in hotspot_shaped(Arc::clone(&log)) {
        vm.register_diagnostic_command(c).unwrap();
    }
    vm.register_diagnostic_command(typed()).unwrap();

    // help: one list, sorted by bytes as HotSpot's strcmp sorts (GC.* first, help last).
    let help = vm.diagnostic_command("help").unwrap();
    let names: Vec<&str> = help.lines().skip(1).take_while(|l| !l.is_empty()).collect();
    let mut sorted = names.clone();
    sorted.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(names, sorted, "{help}");
    assert_eq!(
        &names[..4],
        [
            "GC.class_histogram",
            "GC.heap_dump",
            "GC.heap_info",
            "GC.run"
        ]
    );
    assert!(names.contains(&"Test.typed") && names.last() == Some(&"help"));
    let all = vm.diagnostic_command("help -all").unwrap();
    assert!(
        all.contains("GC.heap_info\n\tProvide generic Java heap information.\n\nGC.run\n\tCall java.lang.System.gc().\n\n"),
        "{all}"
    );
    // help <name>: HotSpot's blocks (java 17's texts; TestJcmdEmbedderCommands compares
    // them with a running java).
    assert_eq!(
        vm.diagnostic_command("help GC.run").unwrap(),
        "GC.run\nCall java.lang.System.gc().\n\nImpact: Medium: Depends on Java heap size and content.\n\nSyntax: GC.run\n"
    );
    assert_eq!(
        vm.diagnostic_command("help GC.heap_info").unwrap(),
        format!("GC.heap_info\nProvide generic Java heap information.\n\nImpact: Medium\n\nPermission: {MONITOR}\n\nSyntax: GC.heap_info\n")
    );
    let h = vm.diagnostic_command("help GC.heap_dump").unwrap();
    assert!(h.contains("\n\nSyntax : GC.heap_dump [options] <filename>\n\nArguments:\n\tfilename :  Name of the dump file (STRING, no default value)\n\nOptions: (options must be specified using the <key> or <key>=<value> syntax)\n\t-all : [optional] Dump all objects, including unreachable objects (BOOLEAN, false)\n"), "{h}");
    let h = vm.diagnostic_command("help Test.typed").unwrap();
    assert!(
        h.contains("Syntax : Test.typed [options] [<name>]\n")
            && h.contains("\tm : [optional] a size (MEMORY SIZE, 1k)\n")
            && h.contains("\tt : [optional] a time (NANOTIME, 10ms)\n")
            && h.contains("\ti : [optional] an int (INT, -3)\n"),
        "{h}"
    );

    // Runs, with the values reaching the handler.
    assert_eq!(vm.diagnostic_command("GC.run").unwrap(), "");
    vm.diagnostic_command("GC.class_histogram").unwrap();
    vm.diagnostic_command("GC.class_histogram -all=TRUE -parallel=4")
        .unwrap();
    assert_eq!(
        vm.diagnostic_command("GC.heap_dump -gz=9 /tmp/x.hprof=ignored")
            .unwrap(),
        "Dumping heap to /tmp/x.hprof ...\n"
    );
    assert_eq!(
        *log.lock().unwrap(),
        [
            "gc",
            "histogram all=false set=false parallel=Some(0) set=false",
            "histogram all=true set=true parallel=Some(4) set=true",
            "dump Some(\"/tmp/x.hprof\") gz=Some(9)",
        ]
    );
    assert_eq!(
        vm.diagnostic_command("Test.typed").unwrap(),
        "name=None s=None b=false i=Some(-3) m=Some(1024) t=Some(10000000) text=Some(\"1k\") is_set=false\n"
    );
    assert_eq!(
        vm.diagnostic_command("Test.typed 'a b' s=\"x y\" b i=+7 m=2G t=-5s").unwrap(),
        "name=Some(\"a b\") s=Some(\"x y\") b=true i=Some(7) m=Some(2147483648) t=Some(-5000000000) text=Some(\"2G\") is_set=true\n"
    );
    assert_eq!(
        vm.diagnostic_command("Test.typed s").unwrap(),
        "name=None s=Some(\"\") b=false i=Some(-3) m=Some(1024) t=Some(10000000) text=Some(\"1k\") is_set=false\n"
    );
    // The handler ran on its own service thread.
    let info = vm.diagnostic_command("GC.heap_info").unwrap();
    // The kernel keeps 15 bytes of a thread's name.
    assert_eq!(info, " rtvm heap, on \"DCmd GC.heap_in\"\n");

    // Bad input: HotSpot's exception lines, the handler not called.
    let before = log.lock().unwrap().len();
    for (line, message) in [
        (
            "GC.class_histogram -parallel=abc",
            "Integer parsing error in command argument '-parallel'. Could not parse: abc.\n",
        ),
        (
            "GC.class_histogram -parallel",
            "Integer parsing error in command argument '-parallel'. Could not parse: .\n",
        ),
        (
            "GC.class_histogram -all -all",
            "Duplicates in diagnostic command arguments\n",
        ),
        (
            "GC.class_histogram -all=yes",
            "Boolean parsing error in command argument '-all'. Could not parse: yes.\n",
        ),
        (
            "GC.class_histogram abcdefghijklmnopqrstuvwxyz0123456789",
            "Unknown argument 'abcdefghijklmnopqrstuvwxyz012' in diagnostic command.",
        ),
        ("GC.heap_dump -all", "The argument 'filename' is mandatory."),
        (
            "GC.run x",
            "The argument list of this diagnostic command should be empty.",
        ),
        (
            "GC.heap_info \"x",
            "Format error in diagnostic command arguments",
        ),
        (
            "Test.typed m=12x",
            "Parsing error memory size value: invalid value\n",
        ),
        (
            "Test.typed m=-1",
            "Parsing error memory size value: negative values not allowed\n",
        ),
        (
            "Test.typed m",
            "Parsing error memory size value: syntax error, value is null\n",
        ),
        (
            "Test.typed t=5",
            "Integer parsing error nanotime value: unit required\n",
        ),
        (
            "Test.typed t=5x",
            "Integer parsing error nanotime value: illegal unit\n",
        ),
        (
            "Test.typed t",
            "Integer parsing error nanotime value: syntax error, value is null\n",
        ),
        (
            "Test.typed a c",
            "Unknown argument 'c' in diagnostic command.",
        ),
    ] {
        assert_eq!(
            vm.diagnostic_command(line).unwrap_err(),
            format!("java.lang.IllegalArgumentException: {message}\n"),
            "{line}"
        );
    }
    assert_eq!(log.lock().unwrap().len(), before, "no handler ran");
    assert_eq!(
        vm.diagnostic_command("help GC.nope").unwrap(),
        "Help unavailable : 'GC.nope' : No such command\n"
    );

    // Registrations refused, nothing registered.
    let noop = |_: &DcmdArguments, _: &mut String| Ok(());
    let refused = |c: DiagnosticCommand| vm.register_diagnostic_command(c).unwrap_err();
    assert_eq!(
        refused(DiagnosticCommand::new("GC.run", "again", noop)),
        DcmdError::Exists {
            name: "GC.run".into(),
            builtin: false
        }
    );
    for builtin in ["VM.version", "Thread.print"] {
        assert!(matches!(
            refused(DiagnosticCommand::new(builtin, "mine", noop)),
            DcmdError::Exists { builtin: true, .. }
        ));
    }
    // `help` is rtvm's, and not of the Area.name form either.
    assert!(matches!(
        refused(DiagnosticCommand::new("help", "mine", noop)),
        DcmdError::InvalidName { .. }
    ));
    for bad in ["gc", "GC.", "GC.run now", "GC.run;ls", "9.x"] {
        let e = refused(DiagnosticCommand::new(bad, "d", noop));
        assert!(
            matches!(e, DcmdError::InvalidName { .. }) && e.to_string().contains("Area.name"),
            "{bad}: {e}"
        );
    }
    let e = refused(
        DiagnosticCommand::new("GC.x", "d", noop)
            .option(DcmdParam::new("t", "", DcmdType::NanoTime).default_value("5")),
    );
    assert_eq!(e.to_string(), "diagnostic command 'GC.x': option 't': its default '5' is not a NANOTIME value: Integer parsing error nanotime value: unit required");
    assert_eq!(
        vm.diagnostic_command("GC.x").unwrap_err(),
        "java.lang.IllegalArgumentException: Unknown diagnostic command\n"
    );
    println!("help, help <name>, help -all, runs, HotSpot's messages, refusals: as expected");
    vm.shutdown().unwrap();
    println!("CHILD OK");
}

#[test]
fn handlers_run_off_the_mutator_fail_cleanly_and_overlap() {
    if child_role().is_none() {
        return check_child("handlers_run_off_the_mutator_fail_cleanly_and_overlap");
    }
    let vm = create(&["-Xmx32m", "-XX:+StartAttachListener"]);
    // A handler that blocks until released, recording its thread.
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (g, s) = (Arc::clone(&gate), Arc::clone(&seen));
    vm.register_diagnostic_command(DiagnosticCommand::new(
        "Test.block",
        "Blocks until released.",
        move |_: &DcmdArguments, out: &mut String| {
            s.lock().unwrap().push((tid(), comm()));
            let (m, cv) = &*g;
            let mut open = m.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
            out.push_str("released\n");
            Ok(())
        },
    ))
    .unwrap();
    let h = vm.handle();
    let caller = std::thread::spawn(move || {
        let _attached = h.attach_current_thread("caller").unwrap();
        let me = tid();
        (me, h.diagnostic_command("Test.block"))
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the handler never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The caller — a mutator — waits in a safe region: the world stops around it while the
    // handler blocks on a thread that is not a mutator.
    {
        let world = vm
            .stop_the_world("dcmd test", Duration::from_secs(5))
            .expect("the world stops while a command runs");
        let caller = world
            .threads()
            .find(|t| t.name() == "caller")
            .expect("the caller is a stopped mutator");
        assert_eq!(caller.how(), StopHow::SafeRegion);
        assert!(
            world.threads().all(|t| !t.name().starts_with("DCmd")),
            "the handler's thread is no mutator"
        );
    }
    let dump = vm.thread_dump();
    assert!(dump.contains("\"DCmd Test.block\""), "{dump}");
    {
        let (m, cv) = &*gate;
        *m.lock().unwrap() = true;
        cv.notify_all();
    }
    let (caller_tid, reply) = caller.join().unwrap();
    assert_eq!(reply.unwrap(), "released\n");
    let (handler_tid, handler_name) = seen.lock().unwrap()[0].clone();
    assert_ne!(handler_tid, caller_tid);
    assert_eq!(handler_name, "DCmd Test.block");
    assert!(
        !vm.thread_dump().contains("\"DCmd Test.block\""),
        "the handler's thread was joined"
    );
    println!("handler on \"{handler_name}\" (tid {handler_tid}), caller {caller_tid} stopped in a safe region meanwhile");

    // Runs overlap: 4 callers meet inside the handler.
    let barrier = Arc::new(Barrier::new(4));
    let b = Arc::clone(&barrier);
    vm.register_diagnostic_command(DiagnosticCommand::new(
        "Test.meet",
        "Four runs meet.",
        move |_: &DcmdArguments, out: &mut String| {
            b.wait();
            out.push_str("met\n");
            Ok(())
        },
    ))
    .unwrap();
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let h = vm.handle();
            std::thread::spawn(move || h.diagnostic_command("Test.meet"))
        })
        .collect();
    for c in callers {
        assert_eq!(c.join().unwrap().unwrap(), "met\n");
    }

    // Failures: the output so far, then the exception line; the VM and the command go on.
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    vm.register_diagnostic_command(
        DiagnosticCommand::new(
            "Test.fail",
            "Fails or panics.",
            move |a: &DcmdArguments, out: &mut String| {
                c.fetch_add(1, Ordering::SeqCst);
                out.push_str("partial\n");
                match a.string("how") {
                    Some("panic") => panic!("handler bug"),
                    Some("err") => Err("heap is not initialized".into()),
                    _ => Ok(()),
                }
            },
        )
        .argument(DcmdParam::new("how", "how to end", DcmdType::String)),
    )
    .unwrap();
    assert_eq!(
        vm.diagnostic_command("Test.fail err").unwrap_err(),
        "partial\njava.lang.RuntimeException: heap is not initialized\n"
    );
    assert_eq!(
        vm.diagnostic_command("Test.fail panic").unwrap_err(),
        "partial\njava.lang.RuntimeException: diagnostic command Test.fail panicked: handler bug\n"
    );
    assert_eq!(vm.diagnostic_command("Test.fail ok").unwrap(), "partial\n");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(vm.diagnostic_command("VM.version").is_ok());

    // The attach protocol: status -1 for a failure, 0 for output.
    let reply = |line: &str| {
        let path = format!("/tmp/.java_pid{}", std::process::id());
        let mut s = UnixStream::connect(path).unwrap();
        s.write_all(format!("1\0jcmd\0{line}\0\0\0").as_bytes())
            .unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    };
    assert_eq!(reply("Test.fail ok"), "0\npartial\n");
    assert_eq!(
        reply("Test.fail err"),
        "-1\npartial\njava.lang.RuntimeException: heap is not initialized\n"
    );
    assert_eq!(
        reply("Test.fail x y"),
        "-1\njava.lang.IllegalArgumentException: Unknown argument 'y' in diagnostic command.\n"
    );
    assert_eq!(
        reply("Test.block -x=1"),
        "-1\njava.lang.IllegalArgumentException: The argument list of this diagnostic command should be empty.\n"
    );
    // The runs that answered attach clients were joined by the next run.
    assert_eq!(vm.diagnostic_command("Test.fail ok").unwrap(), "partial\n");
    let dump = vm.thread_dump();
    assert!(!dump.contains("\"DCmd "), "{dump}");
    println!("failures and panics: RuntimeException after the output; attach status -1");
    vm.shutdown().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    println!("CHILD OK");
}

/// Sends one attach request and returns the connection, to read the reply from later.
fn send(line: &str) -> UnixStream {
    let path = format!("/tmp/.java_pid{}", std::process::id());
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(format!("1\0jcmd\0{line}\0\0\0").as_bytes())
        .unwrap();
    s
}

fn read_reply(mut s: UnixStream) -> String {
    let mut r = String::new();
    s.read_to_string(&mut r).expect("a reply within 20 s");
    r
}

#[test]
fn a_hung_command_holds_only_its_own_jcmd_client() {
    if child_role().is_none() {
        return check_child("a_hung_command_holds_only_its_own_jcmd_client");
    }
    let vm = create(&["-Xmx32m", "-XX:+StartAttachListener"]);
    let release = Arc::new(AtomicBool::new(false));
    let entered = Arc::new(AtomicUsize::new(0));
    let (r, e) = (Arc::clone(&release), Arc::clone(&entered));
    vm.register_diagnostic_command(DiagnosticCommand::new(
        "Test.hang",
        "Runs until released.",
        move |_: &DcmdArguments, out: &mut String| {
            e.fetch_add(1, Ordering::SeqCst);
            while !r.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            out.push_str("released\n");
            Ok(())
        },
    ))
    .unwrap();
    vm.register_diagnostic_command(DiagnosticCommand::new(
        "Test.quick",
        "Answers.",
        |_: &DcmdArguments, out: &mut String| {
            out.push_str("quick\n");
            Ok(())
        },
    ))
    .unwrap();
    // Three clients of a command that does not return yet.
    let hung: Vec<UnixStream> = (0..3).map(|_| send("Test.hang")).collect();
    let started = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while entered.load(Ordering::SeqCst) < n {
            assert!(Instant::now() < deadline, "the handlers never started");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    started(3);
    assert_eq!(
        vm.thread_dump().matches("\"DCmd Test.hang\"").count(),
        3,
        "each run on a thread of its own"
    );
    // Others are served meanwhile, at once.
    let t = Instant::now();
    for _ in 0..20 {
        assert!(read_reply(send("VM.uptime")).starts_with("0\n"));
        assert_eq!(read_reply(send("Test.quick")), "0\nquick\n");
    }
    let took = t.elapsed();
    assert!(took < Duration::from_secs(5), "40 requests took {took:?}");
    // One is released: its client gets its reply from the handler's thread.
    release.store(true, Ordering::SeqCst);
    for s in hung {
        assert_eq!(read_reply(s), "0\nreleased\n");
    }
    release.store(false, Ordering::SeqCst);
    // A client still waiting when the VM is destroyed gets a failure after the grace.
    let waiting = send("Test.hang");
    started(4);
    let reader = std::thread::spawn(move || read_reply(waiting));
    let e = vm.shutdown().unwrap_err();
    assert!(
        e.to_string()
            .contains("diagnostic command Test.hang was still running"),
        "{e}"
    );
    assert_eq!(
        reader.join().unwrap(),
        "-1\njava.lang.RuntimeException: diagnostic command Test.hang did not finish before the VM shut down\n"
    );
    assert!(!std::path::Path::new(&format!("/tmp/.java_pid{}", std::process::id())).exists());
    release.store(true, Ordering::SeqCst);
    println!("3 hung clients; 40 others served in {took:?}; the hung ones answered when released; one answered at destroy");
    println!("CHILD OK");
}

/// Counts drops of what a handler holds.
struct Held(Arc<AtomicBool>);
impl Drop for Held {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn destroy_waits_for_a_cooperative_handler_and_leaves_a_hung_one() {
    if child_role().is_none() {
        return check_child("destroy_waits_for_a_cooperative_handler_and_leaves_a_hung_one");
    }
    // A handler that waits for a "collection" until the destroy cancels it: the destroy is
    // prompt and the caller gets the handler's reply.
    let vm = create(&["-Xmx32m"]);
    let started = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&started);
    vm.register_diagnostic_command(DiagnosticCommand::new(
        "GC.run",
        "Waits for a collection.",
        move |a: &DcmdArguments, out: &mut String| {
            s.store(true, Ordering::SeqCst);
            while !a.cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            out.push_str("collection abandoned: the VM shuts down\n");
            Ok(())
        },
    ))
    .unwrap();
    let h = vm.handle();
    let caller = std::thread::spawn(move || h.diagnostic_command("GC.run"));
    while !started.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = Instant::now();
    vm.shutdown().unwrap();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(3), "destroy took {took:?}");
    assert_eq!(
        caller.join().unwrap().unwrap(),
        "collection abandoned: the VM shuts down\n"
    );
    assert!(matches!(
        vm.register_diagnostic_command(DiagnosticCommand::new("GC.late", "d", |_, _| Ok(()))),
        Err(DcmdError::ShuttingDown { .. })
    ));
    drop(vm);
    println!("a cooperative handler: destroy in {took:?}, its reply delivered");

    // A handler that never returns (until the test lets it, after the destroy).
    let vm = create(&["-Xmx32m"]);
    let release = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let returned = Arc::new(AtomicBool::new(false));
    let (r, held, done) = (
        Arc::clone(&release),
        Held(Arc::clone(&dropped)),
        Arc::clone(&returned),
    );
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let sc = Arc::clone(&saw_cancel);
    vm.register_diagnostic_command(DiagnosticCommand::new(
        "Test.hang",
        "Never returns.",
        move |a: &DcmdArguments, out: &mut String| {
            let _keep = &held;
            while !r.load(Ordering::SeqCst) {
                if a.cancelled() {
                    sc.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            out.push_str("late\n");
            done.store(true, Ordering::SeqCst);
            Ok(())
        },
    ))
    .unwrap();
    let h = vm.handle();
    let caller = std::thread::spawn(move || h.diagnostic_command("Test.hang"));
    while !vm.thread_dump().contains("\"DCmd Test.hang\"") {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = Instant::now();
    let e = vm.shutdown().unwrap_err();
    let took = t.elapsed();
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(8),
        "destroy took {took:?}"
    );
    match &e {
        ShutdownError::Failures { messages } => assert!(
            messages.iter().any(|m| m == "diagnostic command Test.hang was still running 5 s into the VM's destroy: its thread \"DCmd Test.hang\" is left running"),
            "{messages:?}"
        ),
        e => panic!("{e}"),
    }
    assert_eq!(
        caller.join().unwrap().unwrap_err(),
        "java.lang.RuntimeException: diagnostic command Test.hang did not finish before the VM shut down\n"
    );
    assert!(saw_cancel.load(Ordering::SeqCst), "cancelled() turned true");
    assert!(
        !dropped.load(Ordering::SeqCst),
        "what the running handler holds is kept"
    );
    drop(vm);
    // A new VM while the old handler still runs.
    let vm = create(&["-Xmx32m"]);
    assert!(vm.diagnostic_command("VM.version").is_ok());
    release.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dropped.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the handler's state never went");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(returned.load(Ordering::SeqCst));
    let task_names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut names = task_names;
    while names.iter().any(|n| n.starts_with("DCmd")) {
        assert!(
            Instant::now() < deadline,
            "the handler's thread never ended: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
        names = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
            .collect();
    }
    vm.shutdown().unwrap();
    println!("a hung handler: destroy after {took:?} reported it; it finished later, its state dropped then, no crash");
    println!("CHILD OK");
}
