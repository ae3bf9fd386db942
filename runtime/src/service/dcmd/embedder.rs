//! The embedder's diagnostic commands (a collector's `GC.heap_info` and `GC.run`): the
//! public builder, [`DiagnosticCommand`], and the checks a registration passes. How a
//! registered command runs is in `table`.

use std::sync::Arc;

use super::parse::{parse_value, DcmdArguments, DcmdType, Param};
use crate::error::DcmdError;

/// A handler: writes its output into the `String`; an `Err` fails the command.
pub(crate) type Handler =
    dyn Fn(&DcmdArguments, &mut String) -> Result<(), String> + Send + Sync + 'static;

/// An argument or option of an embedder's diagnostic command: a name, a description, a
/// [`DcmdType`], whether it is mandatory and its default, as `help` prints them
/// (`\t-parallel : [optional] Number of parallel threads… (INT, 0)`).
#[derive(Clone, Debug)]
pub struct DcmdParam {
    name: String,
    description: String,
    ty: DcmdType,
    mandatory: bool,
    default: Option<String>,
}

impl DcmdParam {
    /// An optional parameter without a default. For an option the name is its key
    /// (`-all`, `scale`); an argument's name only appears in `help` (`flag name`).
    pub fn new(name: impl Into<String>, description: impl Into<String>, ty: DcmdType) -> Self {
        DcmdParam {
            name: name.into(),
            description: description.into(),
            ty,
            mandatory: false,
            default: None,
        }
    }

    /// Makes it mandatory: a command line without it fails with `The argument '<name>' is
    /// mandatory.` (`option` for an option). A mandatory parameter has no default.
    pub fn mandatory(mut self) -> Self {
        self.mandatory = true;
        self
    }

    /// Its default, as text read like a value given on the command line (`"false"`, `"0"`,
    /// `"1m"`, `"10s"`) and printed by `help`.
    pub fn default_value(mut self, default: impl Into<String>) -> Self {
        self.default = Some(default.into());
        self
    }

    /// The parameter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn param(&self) -> Param<String> {
        Param {
            name: self.name.clone(),
            description: self.description.clone(),
            ty: self.ty,
            mandatory: self.mandatory,
            default: self.default.clone(),
        }
    }
}

/// A diagnostic command for [`VmHandle::register_diagnostic_command`]: what `help` shows
/// (name, description, impact, permission, arguments and options) and the handler that runs
/// it.
///
/// ```
/// use rtvm::{DcmdParam, DcmdType, DiagnosticCommand};
///
/// let run = DiagnosticCommand::new("GC.run", "Call java.lang.System.gc().", |_args, _out| {
///     // trigger a collection and wait for it
///     Ok(())
/// })
/// .impact("Medium: Depends on Java heap size and content.");
/// let histogram = DiagnosticCommand::new(
///     "GC.class_histogram",
///     "Provide statistics about the Java heap usage.",
///     |args, out| {
///         out.push_str(&format!("parallel: {:?}\n", args.int("-parallel")));
///         Ok(())
///     },
/// )
/// .permission("java.lang.management.ManagementPermission(monitor)")
/// .option(DcmdParam::new("-all", "Inspect all objects", DcmdType::Boolean).default_value("false"))
/// .option(DcmdParam::new("-parallel", "Number of parallel threads", DcmdType::Int).default_value("0"));
/// # let _ = (run, histogram);
/// ```
///
/// [`VmHandle::register_diagnostic_command`]: crate::VmHandle::register_diagnostic_command
#[derive(Clone)]
pub struct DiagnosticCommand {
    name: String,
    description: String,
    impact: String,
    permission: Option<String>,
    arguments: Vec<DcmdParam>,
    options: Vec<DcmdParam>,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for DiagnosticCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiagnosticCommand")
            .field("name", &self.name)
            .field("impact", &self.impact)
            .field("permission", &self.permission)
            .field("arguments", &self.arguments)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl DiagnosticCommand {
    /// A command named `name` (HotSpot's `Area.name` form: `GC.run`), described by
    /// `description` (one line, `help`'s second), with impact `Low` and no permission line,
    /// taking no arguments, run by `handler`. The handler appends its output to the string;
    /// `Err(message)` fails the command: the reply is what it wrote, then
    /// `java.lang.RuntimeException: <message>` (status -1 for the attach client, `Err` for
    /// [`VmHandle::diagnostic_command`](crate::VmHandle::diagnostic_command)).
    pub fn new<F>(name: impl Into<String>, description: impl Into<String>, handler: F) -> Self
    where
        F: Fn(&DcmdArguments, &mut String) -> Result<(), String> + Send + Sync + 'static,
    {
        DiagnosticCommand {
            name: name.into(),
            description: description.into(),
            impact: "Low".into(),
            permission: None,
            arguments: Vec::new(),
            options: Vec::new(),
            handler: Arc::new(handler),
        }
    }

    /// The `Impact:` line's text (`Medium: Depends on Java heap size and content.`).
    pub fn impact(mut self, impact: impl Into<String>) -> Self {
        self.impact = impact.into();
        self
    }

    /// The `Permission:` line's text
    /// (`java.lang.management.ManagementPermission(monitor)`); without it `help` prints no
    /// permission line, as for HotSpot's `GC.run`.
    pub fn permission(mut self, permission: impl Into<String>) -> Self {
        self.permission = Some(permission.into());
        self
    }

    /// Adds a positional argument (in order: the first token that names no option is the
    /// first argument).
    pub fn argument(mut self, param: DcmdParam) -> Self {
        self.arguments.push(param);
        self
    }

    /// Adds an option, given as `key` or `key=value`.
    pub fn option(mut self, param: DcmdParam) -> Self {
        self.options.push(param);
        self
    }

    /// The command's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// HotSpot's names: `Area.name`.
pub(super) fn valid_name(name: &str) -> bool {
    let Some((area, rest)) = name.split_once('.') else {
        return false;
    };
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    name.len() <= 100
        && area.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && word(area)
        && word(rest)
}

/// A registered command.
pub(crate) struct Registered {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) impact: String,
    pub(crate) permission: Option<String>,
    pub(crate) arguments: Vec<Param<String>>,
    pub(crate) options: Vec<Param<String>>,
    pub(super) handler: Arc<Handler>,
}

impl Registered {
    /// Checks a command and makes it a table entry.
    pub(super) fn from_command(c: DiagnosticCommand) -> Result<Registered, DcmdError> {
        if !valid_name(&c.name) {
            return Err(DcmdError::InvalidName { name: c.name });
        }
        let text_error = |reason: String| DcmdError::InvalidText {
            command: c.name.clone(),
            reason,
        };
        let mut texts = vec![("description", &c.description), ("impact", &c.impact)];
        if let Some(p) = &c.permission {
            texts.push(("permission", p));
        }
        for (what, t) in texts {
            if t.is_empty() || t.contains('\0') {
                return Err(text_error(format!("the {what} is empty or has a NUL")));
            }
        }
        let mut seen: Vec<&str> = Vec::new();
        for (what, p) in c
            .arguments
            .iter()
            .map(|a| ("argument", a))
            .chain(c.options.iter().map(|o| ("option", o)))
        {
            let bad = |reason: &str| DcmdError::InvalidParameter {
                command: c.name.clone(),
                what,
                parameter: p.name.clone(),
                reason: reason.to_owned(),
            };
            if p.name.is_empty() || p.name.contains(['\0', '\n']) {
                return Err(bad("a name is not empty and has no NUL or newline"));
            }
            if what == "option" && p.name.contains([' ', '=', '"', '\'']) {
                return Err(bad(
                    "an option's name is its key: no space, '=' or quote in it",
                ));
            }
            if seen.contains(&p.name.as_str()) {
                return Err(bad("a second parameter of this name"));
            }
            seen.push(&p.name);
            if p.description.contains('\0') {
                return Err(bad("the description has a NUL"));
            }
            if p.mandatory && p.default.is_some() {
                return Err(bad("a mandatory parameter has no default"));
            }
            if let Some(d) = &p.default {
                if d.contains('\0') {
                    return Err(bad("the default has a NUL"));
                }
                if let Err(e) = parse_value(&p.name, p.ty, Some(d)) {
                    return Err(bad(&format!(
                        "its default '{d}' is not a {} value: {}",
                        p.ty.name(),
                        e.trim_end()
                    )));
                }
            }
        }
        Ok(Registered {
            arguments: c.arguments.iter().map(DcmdParam::param).collect(),
            options: c.options.iter().map(DcmdParam::param).collect(),
            name: c.name,
            description: c.description,
            impact: c.impact,
            permission: c.permission,
            handler: c.handler,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_hotspots_form() {
        for good in [
            "GC.run",
            "GC.heap_info",
            "Compiler.CodeHeap_Analytics",
            "A.b",
            "X1.2",
        ] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "", "GC", "GC.", ".run", "1GC.run", "GC.run.x", "GC.r un", "GC.run\n", "GC-x.run",
            "Gc.ü",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(!valid_name(&format!("A.{}", "b".repeat(99))));
    }
}
