//! What goes wrong, as values: creation, shutdown — and the one mapping of every error to the
//! JNI-style code an embedder sees ([`ErrorCode`], `From<&E>`), used by [`Vm::create`],
//! the C API and the launcher alike.
//!
//! [`Vm::create`]: crate::Vm::create

use std::fmt;

use rtvm_flags::ArgError;
use rtvm_os_linux::Errno;

use crate::heap::HeapError;
use crate::memory::MemoryError;
use crate::threads::ThreadError;

/// JNI-style result codes, with rtvm's additions after JNI's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `JNI_ERR` (-1): unknown error, unrecognized option.
    Err,
    /// `JNI_EDETACHED` (-2): the calling thread is not attached.
    Detached,
    /// `JNI_EVERSION` (-3): an interface version rtvm does not know.
    Version,
    /// `JNI_ENOMEM` (-4): not enough memory.
    NoMem,
    /// `JNI_EEXIST` (-5): a VM already exists in this process.
    Exists,
    /// `JNI_EINVAL` (-6): invalid arguments.
    Inval,
    /// (-7) The options asked to print something and stop (`-version`, `-Xlog:help`,
    /// `-XX:+PrintFlagsInitial`): the output was delivered and no VM was created.
    Exited,
    /// (-8) A system limit: threads, processes or mappings (`EAGAIN`).
    Again,
    /// (-9) The VM is shutting down: no new threads.
    ShuttingDown,
    /// (-10) Called in a child of `fork()`: the VM belongs to the parent (its threads do not
    /// exist in the child).
    Forked,
    /// (-11) A stop of the world or a handshake timed out: threads neither polled, nor were
    /// in a safe region, nor took the stop signal in time.
    TimedOut,
}

impl ErrorCode {
    /// The numeric code.
    pub const fn code(self) -> i32 {
        match self {
            ErrorCode::Err => -1,
            ErrorCode::Detached => -2,
            ErrorCode::Version => -3,
            ErrorCode::NoMem => -4,
            ErrorCode::Exists => -5,
            ErrorCode::Inval => -6,
            ErrorCode::Exited => -7,
            ErrorCode::Again => -8,
            ErrorCode::ShuttingDown => -9,
            ErrorCode::Forked => -10,
            ErrorCode::TimedOut => -11,
        }
    }

    /// The code with this number.
    pub const fn from_code(code: i32) -> Option<ErrorCode> {
        Some(match code {
            -1 => ErrorCode::Err,
            -2 => ErrorCode::Detached,
            -3 => ErrorCode::Version,
            -4 => ErrorCode::NoMem,
            -5 => ErrorCode::Exists,
            -6 => ErrorCode::Inval,
            -7 => ErrorCode::Exited,
            -8 => ErrorCode::Again,
            -9 => ErrorCode::ShuttingDown,
            -10 => ErrorCode::Forked,
            -11 => ErrorCode::TimedOut,
            _ => return None,
        })
    }
}

impl From<&crate::safepoint::SafepointError> for ErrorCode {
    fn from(e: &crate::safepoint::SafepointError) -> ErrorCode {
        match e {
            crate::safepoint::SafepointError::Timeout { .. } => ErrorCode::TimedOut,
            _ => ErrorCode::Inval,
        }
    }
}

/// Why [`VmHandle::register_diagnostic_command`] refused a command (nothing was registered).
///
/// [`VmHandle::register_diagnostic_command`]: crate::VmHandle::register_diagnostic_command
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DcmdError {
    /// The name is not of HotSpot's `Area.name` form.
    #[error("diagnostic command name '{name}' is invalid: a name is Area.name (an ASCII letter, then letters, digits or '_'; a '.'; then letters, digits or '_'; at most 100 bytes), like GC.run")]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A command of that name exists: one of rtvm's own, or one registered before.
    #[error("a diagnostic command named '{name}' exists already ({})", if *.builtin { "one of rtvm's own" } else { "registered before" })]
    Exists {
        /// The name given.
        name: String,
        /// Whether it is one of rtvm's own commands.
        builtin: bool,
    },
    /// An argument or option is malformed: an empty or duplicate name, an option name with a
    /// space, `=` or a quote, a default its type cannot read, a mandatory parameter with a
    /// default, text with a NUL.
    #[error("diagnostic command '{command}': {what} '{parameter}': {reason}")]
    InvalidParameter {
        /// The command's name.
        command: String,
        /// `argument` or `option`.
        what: &'static str,
        /// The parameter's name.
        parameter: String,
        /// What is wrong.
        reason: String,
    },
    /// The command's own text (description, impact, permission) has a NUL or is empty.
    #[error("diagnostic command '{command}': {reason}")]
    InvalidText {
        /// The command's name.
        command: String,
        /// What is wrong.
        reason: String,
    },
    /// The VM's destroy has begun.
    #[error("diagnostic command '{name}' not registered: the VM is shutting down")]
    ShuttingDown {
        /// The name given.
        name: String,
    },
}

impl From<&DcmdError> for ErrorCode {
    fn from(e: &DcmdError) -> ErrorCode {
        match e {
            DcmdError::Exists { .. } => ErrorCode::Exists,
            DcmdError::ShuttingDown { .. } => ErrorCode::ShuttingDown,
            _ => ErrorCode::Inval,
        }
    }
}

/// Memory or address space ran out (`ENOMEM`): [`ErrorCode::NoMem`], else `other`.
fn no_mem_or(out_of_memory: bool, other: ErrorCode) -> ErrorCode {
    if out_of_memory {
        ErrorCode::NoMem
    } else {
        other
    }
}

impl From<&HeapError> for ErrorCode {
    fn from(e: &HeapError) -> ErrorCode {
        match e {
            HeapError::Reserve { os, .. } | HeapError::Commit(os) | HeapError::Pretouch(os) => {
                no_mem_or(os.is_out_of_memory(), ErrorCode::Err)
            }
            HeapError::Exhausted { .. } => ErrorCode::NoMem,
            HeapError::Shrink { .. } => ErrorCode::Inval,
            _ => ErrorCode::Err,
        }
    }
}

impl From<&ThreadError> for ErrorCode {
    fn from(e: &ThreadError) -> ErrorCode {
        match e {
            ThreadError::Start { errno, .. } | ThreadError::Attach { errno, .. } => match *errno {
                Errno::EAGAIN => ErrorCode::Again,
                Errno::ENOMEM => ErrorCode::NoMem,
                Errno::EINVAL => ErrorCode::Inval,
                _ => ErrorCode::Err,
            },
            ThreadError::ShuttingDown { .. } => ErrorCode::ShuttingDown,
            ThreadError::Forked { .. } => ErrorCode::Forked,
            ThreadError::NotAttached { started: None } => ErrorCode::Detached,
            ThreadError::NotAttached { started: Some(_) } => ErrorCode::Inval,
            _ => ErrorCode::Err,
        }
    }
}

impl From<&MemoryError> for ErrorCode {
    fn from(e: &MemoryError) -> ErrorCode {
        match e {
            MemoryError::Invalid { .. } => ErrorCode::Inval,
            MemoryError::Capacity { .. } => ErrorCode::NoMem,
            MemoryError::ShuttingDown { .. } => ErrorCode::ShuttingDown,
            e => no_mem_or(e.is_out_of_memory(), ErrorCode::Err),
        }
    }
}

/// How a failed creation is reported by a launcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A bad option: the message goes to stderr, then
    /// `Error: Could not create the virtual machine.`; exit status 1.
    Arguments,
    /// The VM could not initialize: `Error occurred during initialization of VM` and the
    /// message on stdout; exit status 1.
    Initialization,
    /// The options asked to print something and exit (`-XX:+PrintFlagsInitial`,
    /// `-Xlog:help`, `-version`); the output has been printed; exit status 0.
    ExitRequested,
    /// An argument check of HotSpot's that prints its own message on stdout and fails like
    /// an argument error (`The Java thread stack size specified is too small...`): the
    /// message goes to stdout, then `Error: Could not create the virtual machine.` on stderr.
    ArgumentsStdout,
    /// Native memory ran out while the VM set itself up (HotSpot's `vm_exit_out_of_memory`:
    /// the initial heap could not be committed). The VM has printed HotSpot's
    /// `INFO: os::commit_memory(...) failed; error='Not enough space' (errno=12)` warning;
    /// the message — `# There is insufficient memory for the rtvm Runtime Environment to
    /// continue.` and what failed — goes to stdout; exit status 1. (No error report file is
    /// written.)
    OutOfMemory,
}

/// Why [`Vm::create`](crate::Vm::create) failed. Nothing the creation made is left behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateError {
    /// The JNI-style code.
    pub code: ErrorCode,
    /// How to report it.
    pub kind: ErrorKind,
    /// The message, exactly as to print (with the trailing newline HotSpot has, or without).
    pub message: String,
}

impl CreateError {
    pub(crate) fn args(code: ErrorCode, message: impl Into<String>) -> CreateError {
        CreateError {
            code,
            kind: ErrorKind::Arguments,
            message: message.into(),
        }
    }

    pub(crate) fn args_stdout(message: impl Into<String>) -> CreateError {
        CreateError {
            code: ErrorCode::Err,
            kind: ErrorKind::ArgumentsStdout,
            message: message.into(),
        }
    }

    pub(crate) fn init(code: ErrorCode, message: impl Into<String>) -> CreateError {
        CreateError {
            code,
            kind: ErrorKind::Initialization,
            message: message.into(),
        }
    }

    pub(crate) fn exit() -> CreateError {
        CreateError {
            code: ErrorCode::Exited,
            kind: ErrorKind::ExitRequested,
            message: String::new(),
        }
    }
}

impl fmt::Display for CreateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message.trim())
    }
}

impl std::error::Error for CreateError {}

impl From<ArgError> for CreateError {
    fn from(e: ArgError) -> CreateError {
        let code = ErrorCode::from_code(e.kind.jni_code()).unwrap_or(ErrorCode::Err);
        CreateError::args(code, e.message)
    }
}

/// The heap could not be set up: `Error occurred during initialization of VM` and the message
/// — or, when committing the initial heap ran out of memory, HotSpot's out-of-memory report.
impl From<HeapError> for CreateError {
    fn from(e: HeapError) -> CreateError {
        match &e {
            HeapError::Commit(os) if os.is_out_of_memory() => CreateError {
                code: ErrorCode::NoMem,
                kind: ErrorKind::OutOfMemory,
                message: out_of_memory_report(os.len, "committing reserved memory."),
            },
            _ => CreateError::init(ErrorCode::from(&e), format!("{e}\n")),
        }
    }
}

/// HotSpot's report when native memory runs out (`vm_exit_out_of_memory` for a failed
/// `mmap`), without the line about an error report file (rtvm writes none).
pub(crate) fn out_of_memory_report(bytes: usize, detail: &str) -> String {
    format!(
        "#\n# There is insufficient memory for the rtvm Runtime Environment to continue.\n\
         # Native memory allocation (mmap) failed to map {bytes} bytes. Error detail: {detail}\n"
    )
}

/// A thread the VM needed could not start: `ENOMEM` for memory, `EAGAIN` for limits.
impl From<ThreadError> for CreateError {
    fn from(e: ThreadError) -> CreateError {
        CreateError::init(ErrorCode::from(&e), format!("{e}\n"))
    }
}

/// Why [`Vm::shutdown`](crate::Vm::shutdown) did not complete cleanly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShutdownError {
    /// Called from one of the VM's own threads, which would wait for itself: nothing was
    /// done, the VM runs on (JNI's `DestroyJavaVM` refuses a daemon thread the same way).
    #[error("rtvm: the VM cannot be destroyed from its own thread \"{thread}\"; destroy it from a thread that is not a VM thread")]
    OnVmThread {
        /// The calling thread's name.
        thread: String,
    },
    /// Called in a child of `fork()`: the VM belongs to the parent, whose threads do not
    /// exist in the child; nothing was done (exec or exit).
    #[error("rtvm: the VM cannot be destroyed in a child process after fork(): it belongs to the parent process; exec or exit instead")]
    Forked,
    /// Called by the thread that holds the world stopped (its callback, or before its
    /// `WorldStopped` is dropped) or runs a handshake operation: the destroy would wait for
    /// threads that wait for it. Nothing was done; resume the world first. (From any other
    /// thread a destroy during a stop waits until the world resumes.)
    #[error("rtvm: the VM cannot be destroyed while this thread holds the world stopped; resume it first")]
    WorldStopped,
    /// The VM was shut down, but some of its threads or its background pretouch had
    /// failed; everything was released regardless.
    #[error("{}", messages.join("; "))]
    Failures {
        /// One message per problem.
        messages: Vec<String>,
    },
}
