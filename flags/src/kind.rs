//! Flag kinds (who may set a flag) and origins (who did).

use std::fmt;

/// The kind of a flag, as in HotSpot's `globals.hpp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FlagKind {
    /// Supported, documented, settable by anyone.
    Product,
    /// For diagnosing the VM; locked until `-XX:+UnlockDiagnosticVMOptions`.
    Diagnostic,
    /// Not yet supported; locked until `-XX:+UnlockExperimentalVMOptions`.
    Experimental,
    /// A product flag that may also be changed while the VM runs.
    Manageable,
}

impl FlagKind {
    /// The unlock flag a locked flag of this kind needs, if any.
    pub const fn unlock_flag(self) -> Option<&'static str> {
        match self {
            FlagKind::Diagnostic => Some("UnlockDiagnosticVMOptions"),
            FlagKind::Experimental => Some("UnlockExperimentalVMOptions"),
            FlagKind::Product | FlagKind::Manageable => None,
        }
    }

    /// The word used in the locked-flag message (`diagnostic`, `experimental`).
    pub const fn word(self) -> &'static str {
        match self {
            FlagKind::Product => "product",
            FlagKind::Diagnostic => "diagnostic",
            FlagKind::Experimental => "experimental",
            FlagKind::Manageable => "manageable",
        }
    }

    /// The label inside the kind braces of `-XX:+PrintFlagsFinal`: `product`, `pd product`,
    /// `diagnostic`, ... (HotSpot drops `product` when another kind word is present, and
    /// prints `pd` first).
    pub fn label(self, platform_dependent: bool) -> String {
        let pd = if platform_dependent { "pd " } else { "" };
        format!("{pd}{}", self.word())
    }
}

/// Where a flag's value came from. Printed in the second brace of `-XX:+PrintFlagsFinal`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// The table's default.
    Default,
    /// The command line (or a `-XX:VMOptionsFile`, which is spliced into it).
    CommandLine,
    /// The `RTVM_OPTIONS` environment variable.
    Environment,
    /// A `-XX:Flags=` settings file.
    ConfigFile,
    /// Set at run time by a diagnostic command (`jcmd VM.set_flag`) or the embedding API
    /// (manageable flags).
    Management,
    /// Set at run time through the attach mechanism's `setflag` (`jinfo -flag`).
    Attach,
    /// Set by the VM itself for its own reasons.
    Internal,
}

/// A flag's origin: its source, and whether ergonomics changed the value afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    /// Who set the value.
    pub source: Source,
    /// Whether the VM's ergonomics adjusted it.
    pub ergonomic: bool,
}

impl Origin {
    /// The origin of an untouched flag.
    pub const DEFAULT: Origin = Origin {
        source: Source::Default,
        ergonomic: false,
    };

    /// An origin with the given source and no ergonomic adjustment.
    pub const fn from(source: Source) -> Origin {
        Origin {
            source,
            ergonomic: false,
        }
    }

    /// Whether nobody set the flag (ergonomics may still have chosen its value).
    pub const fn is_default(self) -> bool {
        matches!(self.source, Source::Default) && !self.ergonomic
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match self.source {
            Source::Default => None,
            Source::CommandLine => Some("command line"),
            Source::Environment => Some("environment"),
            Source::ConfigFile => Some("config file"),
            Source::Management => Some("management"),
            Source::Attach => Some("attach"),
            Source::Internal => Some("internal"),
        };
        // As HotSpot 17 prints it: an ergonomic change replaces the origin, except that a flag
        // set on the command line keeps saying so (its ORIG_COMMAND_LINE bit).
        match (source, self.ergonomic) {
            (None, false) => f.write_str("default"),
            (Some(s), false) => f.write_str(s),
            (Some("command line"), true) => f.write_str("command line, ergonomic"),
            (_, true) => f.write_str("ergonomic"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_origins() {
        assert_eq!(FlagKind::Product.label(true), "pd product");
        assert_eq!(FlagKind::Diagnostic.label(false), "diagnostic");
        assert_eq!(Origin::DEFAULT.to_string(), "default");
        assert_eq!(
            Origin {
                source: Source::Default,
                ergonomic: true
            }
            .to_string(),
            "ergonomic"
        );
        assert_eq!(
            Origin {
                source: Source::CommandLine,
                ergonomic: true
            }
            .to_string(),
            "command line, ergonomic"
        );
        // java 17: -XX:InitialHeapSize from JAVA_TOOL_OPTIONS or a settings file, then
        // aligned by the collector, prints {ergonomic}.
        for source in [Source::Environment, Source::ConfigFile] {
            let o = Origin {
                source,
                ergonomic: true,
            };
            assert_eq!(o.to_string(), "ergonomic");
        }
        assert_eq!(Origin::from(Source::Environment).to_string(), "environment");
        assert_eq!(Origin::from(Source::ConfigFile).to_string(), "config file");
    }
}
