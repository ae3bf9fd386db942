//! Argument errors.

use thiserror::Error;

/// What kind of argument problem stopped parsing; decides the JNI-style code an embedder sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgErrorKind {
    /// An option that is not a VM option at all (`-Xfoo`, `-foo`): HotSpot returns `JNI_ERR`.
    UnrecognizedOption,
    /// A `-XX:` option that is unknown, locked, malformed or out of range: `JNI_EINVAL`.
    InvalidOption,
    /// An options or settings file that cannot be read or tokenized.
    OptionsFile,
}

impl ArgErrorKind {
    /// The JNI return code HotSpot gives for this kind of error.
    pub const fn jni_code(self) -> i32 {
        match self {
            ArgErrorKind::UnrecognizedOption | ArgErrorKind::OptionsFile => -1,
            ArgErrorKind::InvalidOption => -6,
        }
    }
}

/// A fatal argument error. `message` is exactly what HotSpot prints for it — including the
/// trailing newline where HotSpot has one and none where it has none (`Did you mean ...? `).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{message}")]
pub struct ArgError {
    /// The text to print, verbatim.
    pub message: String,
    /// The kind of error.
    pub kind: ArgErrorKind,
}

impl ArgError {
    pub(crate) fn invalid(message: impl Into<String>) -> ArgError {
        ArgError {
            message: message.into(),
            kind: ArgErrorKind::InvalidOption,
        }
    }

    pub(crate) fn unrecognized(message: impl Into<String>) -> ArgError {
        ArgError {
            message: message.into(),
            kind: ArgErrorKind::UnrecognizedOption,
        }
    }

    pub(crate) fn file(message: impl Into<String>) -> ArgError {
        ArgError {
            message: message.into(),
            kind: ArgErrorKind::OptionsFile,
        }
    }
}
