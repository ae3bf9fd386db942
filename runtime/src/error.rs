//! What goes wrong, as values: creation, shutdown.

use std::fmt;

use rtvm_flags::{ArgError, ArgErrorKind};

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
        let code = match e.kind {
            ArgErrorKind::InvalidOption => ErrorCode::Inval,
            _ => ErrorCode::Err,
        };
        CreateError::args(code, e.message)
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
    /// The VM was shut down, but some of its threads or its background pretouch had
    /// failed; everything was released regardless.
    #[error("{}", messages.join("; "))]
    Failures {
        /// One message per problem.
        messages: Vec<String>,
    },
}
