//! Diagnostic commands in HotSpot's framework and words: a command line is
//! `<name> [key=value | key | argument]...`; each command declares its arguments (in order)
//! and options (by key) with a type, whether they are mandatory and a default, and `help`
//! prints them as HotSpot does (`Impact:`, `Permission:`, `Syntax :`, `Arguments:`,
//! `Options:`). Errors that HotSpot raises as Java exceptions come back as
//! [`Reply::Failed`] (`java.lang.IllegalArgumentException: …`, status -1 for the attach
//! client); what a command says about its own subject is a normal reply (status 0).
//!
//! | file | what |
//! | --- | --- |
//! | `parse` | the tokenizer, the types and their values, the parser |
//! | `commands` | rtvm's own commands |
//! | `embedder` | the embedder's commands: the builder and the checks of a registration |
//! | `table` | the VM's table of them, running a handler, the destroy's part |
//!
//! `help` lists rtvm's commands and the embedder's together, sorted as HotSpot sorts them.

mod commands;
mod embedder;
mod parse;
mod table;

pub use crate::error::DcmdError;
pub(crate) use commands::vm_arguments;
pub(crate) use embedder::Registered;
pub use embedder::{DcmdParam, DiagnosticCommand};
pub(crate) use parse::Value;
pub use parse::{DcmdArguments, DcmdType};
pub(crate) use table::{Deliver, EmbedderCommands, SHUTDOWN_GRACE};

use std::sync::Arc;

use super::context::Context;
use parse::{parse_args, Param};

/// What a command answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Status 0 and this text.
    Ok(String),
    /// Status -1 and this text (HotSpot's exception line).
    Failed(String),
}

impl Reply {
    fn illegal(message: impl std::fmt::Display) -> Reply {
        Reply::Failed(format!("java.lang.IllegalArgumentException: {message}\n"))
    }
}

/// A built-in command's declaration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) description: &'static str,
    pub(crate) impact: &'static str,
    pub(crate) permission: Option<&'static str>,
    pub(crate) arguments: &'static [Param],
    pub(crate) options: &'static [Param],
    pub(crate) run: fn(&Context, &Args) -> Reply,
}

/// The built-in commands' name for the parsed arguments.
pub(crate) type Args = DcmdArguments;

/// A command of the table `help` lists: one of rtvm's own or one the embedder registered.
pub(crate) enum Command {
    Builtin(&'static Spec),
    Embedder(Arc<Registered>),
}

impl Command {
    pub(crate) fn name(&self) -> &str {
        match self {
            Command::Builtin(s) => s.name,
            Command::Embedder(r) => &r.name,
        }
    }

    pub(crate) fn description(&self) -> &str {
        match self {
            Command::Builtin(s) => s.description,
            Command::Embedder(r) => &r.description,
        }
    }

    /// `help <command>`'s text.
    pub(crate) fn help(&self) -> String {
        match self {
            Command::Builtin(s) => help_for(s),
            Command::Embedder(r) => help_text(
                &r.name,
                &r.description,
                &r.impact,
                r.permission.as_deref(),
                &r.arguments,
                &r.options,
            ),
        }
    }
}

/// Every command rtvm has, sorted by name.
pub(crate) fn specs() -> &'static [Spec] {
    commands::SPECS
}

fn find(name: &str) -> Option<&'static Spec> {
    specs().iter().find(|s| s.name == name)
}

/// Whether `name` is one of rtvm's own commands.
pub(crate) fn is_builtin(name: &str) -> bool {
    find(name).is_some()
}

/// Every command — rtvm's and the embedder's — sorted by name as HotSpot's `help` sorts
/// them (`strcmp`: by bytes, so `help` comes last).
pub(crate) fn catalog(ctx: &Context) -> Vec<Command> {
    let mut all: Vec<Command> = specs().iter().map(Command::Builtin).collect();
    all.extend(ctx.dcmds.list().into_iter().map(Command::Embedder));
    all.sort_by(|a, b| a.name().as_bytes().cmp(b.name().as_bytes()));
    all
}

/// One command of the table by name.
pub(crate) fn lookup(ctx: &Context, name: &str) -> Option<Command> {
    find(name)
        .map(Command::Builtin)
        .or_else(|| ctx.dcmds.find(name).map(Command::Embedder))
}

/// A command line's name and the rest.
fn split(line: &str) -> (&str, &str) {
    let line = line.trim_matches(|c: char| c == ' ' || c == '\n' || c == '\r');
    line.split_once(' ').unwrap_or((line, ""))
}

/// Whether a command line runs one of the embedder's commands (which may take long: the
/// attach listener lets [`execute_detached`] answer its client).
pub(crate) fn is_embedders(ctx: &Context, line: &str) -> bool {
    let (name, _) = split(line);
    find(name).is_none() && ctx.dcmds.find(name).is_some()
}

/// Runs one of the embedder's command lines for a client: bad input is answered at once, a
/// run on the handler's thread when it returns, through `deliver` either way; the caller
/// goes on at once.
pub(crate) fn execute_detached(ctx: &Context, line: &str, deliver: Deliver) {
    let (name, rest) = split(line);
    let Some(command) = ctx.dcmds.find(name) else {
        return deliver(Reply::illegal("Unknown diagnostic command"));
    };
    match parse_args(&command.arguments, &command.options, rest) {
        Ok(args) => {
            log::debug!(target: "attach", "Executing the embedder's dcmd '{}'", line.trim());
            ctx.dcmds.run_detached(ctx, command, args, deliver);
        }
        Err(message) => deliver(Reply::illegal(message)),
    }
}

/// Runs one command line (`VM.native_memory summary scale=MB`). An empty line does nothing
/// and succeeds, as in HotSpot.
pub(crate) fn execute(ctx: &Context, line: &str) -> Reply {
    // The threads of runs that answered attach clients go first (a `Thread.print` lists
    // none that ended).
    ctx.dcmds.reap();
    let line = line.trim_matches(|c: char| c == ' ' || c == '\n' || c == '\r');
    if line.is_empty() {
        return Reply::Ok(String::new());
    }
    let (name, rest) = split(line);
    match lookup(ctx, name) {
        None => Reply::illegal("Unknown diagnostic command"),
        Some(Command::Builtin(spec)) => match parse_args(spec.arguments, spec.options, rest) {
            Ok(args) => {
                log::debug!(target: "attach", "Executing dcmd '{line}'");
                (spec.run)(ctx, &args)
            }
            Err(message) => Reply::illegal(message),
        },
        Some(Command::Embedder(command)) => {
            match parse_args(&command.arguments, &command.options, rest) {
                Ok(args) => {
                    log::debug!(target: "attach", "Executing the embedder's dcmd '{line}'");
                    ctx.dcmds.run(ctx, command, args)
                }
                Err(message) => Reply::illegal(message),
            }
        }
    }
}

/// `help <command>`: HotSpot's block for one built-in command.
pub(crate) fn help_for(spec: &Spec) -> String {
    help_text(
        spec.name,
        spec.description,
        spec.impact,
        spec.permission,
        spec.arguments,
        spec.options,
    )
}

/// HotSpot's `help <command>` block: name, description, `Impact:`, `Permission:`, then the
/// syntax — `Syntax: <name>` for a command without parameters (HotSpot's commands without a
/// parser), otherwise `Syntax : <name> [options] <argument>...` with the `Arguments:` and
/// `Options:` lists.
fn help_text<S: AsRef<str>>(
    name: &str,
    description: &str,
    impact: &str,
    permission: Option<&str>,
    arguments: &[Param<S>],
    options: &[Param<S>],
) -> String {
    let mut s = String::new();
    s.push_str(name);
    s.push('\n');
    s.push_str(description);
    s.push_str("\n\n");
    s.push_str(&format!("Impact: {impact}\n\n"));
    if let Some(p) = permission {
        s.push_str(&format!("Permission: {p}\n\n"));
    }
    if arguments.is_empty() && options.is_empty() {
        s.push_str(&format!("Syntax: {name}\n"));
        return s;
    }
    let mut syntax = format!(
        "Syntax : {name} {}",
        if options.is_empty() { "" } else { "[options]" }
    );
    for a in arguments {
        if a.mandatory {
            syntax.push_str(&format!(" <{}>", a.name.as_ref()));
        } else {
            syntax.push_str(&format!(" [<{}>]", a.name.as_ref()));
        }
    }
    s.push_str(&syntax);
    s.push('\n');
    let param = |s: &mut String, p: &Param<S>| {
        s.push_str(&format!(
            "\t{} : {}{} ({}, {})\n",
            p.name.as_ref(),
            if p.mandatory { " " } else { "[optional] " },
            p.description.as_ref(),
            p.ty.name(),
            p.default.as_ref().map_or("no default value", AsRef::as_ref)
        ));
    };
    if !arguments.is_empty() {
        s.push_str("\nArguments:\n");
        for a in arguments {
            param(&mut s, a);
        }
    }
    if !options.is_empty() {
        s.push_str(
            "\nOptions: (options must be specified using the <key> or <key>=<value> syntax)\n",
        );
        for o in options {
            param(&mut s, o);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_blocks_as_hotspot() {
        let nmt = find("VM.native_memory").unwrap();
        let h = help_for(nmt);
        assert!(h.starts_with("VM.native_memory\nPrint native memory usage\n\nImpact: Medium\n\nPermission: java.lang.management.ManagementPermission(monitor)\n\nSyntax : VM.native_memory [options]\n\nOptions: (options must be specified using the <key> or <key>=<value> syntax)\n\tsummary : [optional] request runtime"), "{h}");
        let set = help_for(find("VM.set_flag").unwrap());
        assert!(set.contains("Syntax : VM.set_flag  <flag name> [<string value>]\n\nArguments:\n\tflag name :  The name of the flag we want to set (STRING, no default value)\n"), "{set}");
        let v = help_for(find("VM.version").unwrap());
        assert!(v.ends_with("Syntax: VM.version\n"), "{v}");
    }

    fn parse(spec: &Spec, text: &str) -> Result<Args, Reply> {
        parse_args(spec.arguments, spec.options, text).map_err(Reply::illegal)
    }

    #[test]
    fn parse_errors_in_hotspots_words() {
        let flags = find("VM.flags").unwrap();
        assert_eq!(
            parse(flags, "-foo").unwrap_err(),
            Reply::Failed("java.lang.IllegalArgumentException: Unknown argument '-foo' in diagnostic command.\n".into())
        );
        assert!(parse(flags, "-all").unwrap().flag("-all"));
        let version = find("VM.version").unwrap();
        assert_eq!(
            parse(version, "x").unwrap_err(),
            Reply::Failed("java.lang.IllegalArgumentException: The argument list of this diagnostic command should be empty.\n".into())
        );
        let set = find("VM.set_flag").unwrap();
        assert_eq!(
            parse(set, "").unwrap_err(),
            Reply::Failed(
                "java.lang.IllegalArgumentException: The argument 'flag name' is mandatory.\n"
                    .into()
            )
        );
        let a = parse(set, "Foo 1").unwrap();
        assert_eq!(
            (a.get("flag name"), a.get("string value")),
            (Some("Foo"), Some("1"))
        );
        let nmt = find("VM.native_memory").unwrap();
        assert_eq!(parse(nmt, "").unwrap().get("scale"), Some("KB"));
        // HotSpot's message ends in a newline of its own: the reply ends in a blank line.
        assert_eq!(
            parse(nmt, "summary=maybe").unwrap_err(),
            Reply::Failed("java.lang.IllegalArgumentException: Boolean parsing error in command argument 'summary'. Could not parse: maybe.\n\n".into())
        );
    }
}
