//! Diagnostic commands in HotSpot's framework and words: a command line is
//! `<name> [key=value | key | argument]...`; each command declares its arguments (in order)
//! and options (by key) with a type, whether they are mandatory and a default, and `help`
//! prints them as HotSpot does (`Impact:`, `Permission:`, `Syntax :`, `Arguments:`,
//! `Options:`). Errors that HotSpot raises as Java exceptions come back as
//! [`Reply::Failed`] (`java.lang.IllegalArgumentException: …`, status -1 for the attach
//! client); what a command says about its own subject is a normal reply (status 0).

mod commands;

pub(crate) use commands::vm_arguments;

use std::collections::HashMap;

use super::context::Context;

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

/// The type of an argument or option, as `help` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArgType {
    /// `STRING`
    Str,
    /// `BOOLEAN`: given alone it means true.
    Bool,
}

impl ArgType {
    fn name(self) -> &'static str {
        match self {
            ArgType::Str => "STRING",
            ArgType::Bool => "BOOLEAN",
        }
    }
}

/// One argument or option of a command.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Param {
    pub(crate) name: &'static str,
    pub(crate) description: &'static str,
    pub(crate) ty: ArgType,
    pub(crate) mandatory: bool,
    /// The default as `help` prints it (`None`: `no default value`).
    pub(crate) default: Option<&'static str>,
}

/// A command's declaration.
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

/// The values a command line gave, by parameter name.
#[derive(Debug, Default)]
pub(crate) struct Args {
    values: HashMap<&'static str, String>,
}

impl Args {
    /// The value of a string parameter, if given (or defaulted).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Whether a boolean parameter is true.
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.values.get(name).is_some_and(|v| v == "true")
    }

    /// Whether a parameter was given (or defaulted).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }
}

/// Splits a command's argument text into `(key, value)` tokens at spaces, as HotSpot's
/// `DCmdArgIter` does: a value (or a whole token) may be quoted with `"` or `'`.
fn tokens(text: &str) -> Result<Vec<(String, Option<String>)>, String> {
    let b: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i] == ' ' {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let mut key = String::new();
        let mut value: Option<String> = None;
        while i < b.len() && b[i] != ' ' {
            if b[i] == '=' && value.is_none() {
                value = Some(String::new());
                i += 1;
                continue;
            }
            let cur = match value.as_mut() {
                Some(v) => v,
                None => &mut key,
            };
            match b[i] {
                q @ ('"' | '\'') => {
                    i += 1;
                    let start = i;
                    while i < b.len() && b[i] != q {
                        i += 1;
                    }
                    if i == b.len() {
                        return Err("Format error in diagnostic command arguments".into());
                    }
                    cur.extend(&b[start..i]);
                    i += 1;
                }
                c => {
                    cur.push(c);
                    i += 1;
                }
            }
        }
        out.push((key, value));
    }
    Ok(out)
}

fn parse_bool(param: &Param, value: &str) -> Result<String, Reply> {
    match value {
        "" | "true" => Ok("true".into()),
        "false" => Ok("false".into()),
        v => Err(Reply::illegal(format!(
            "Boolean parsing error in command argument '{}'. Could not parse: {v}.",
            param.name
        ))),
    }
}

/// Parses a command's argument text against its declaration.
fn parse_args(spec: &Spec, text: &str) -> Result<Args, Reply> {
    let mut args = Args::default();
    let toks = tokens(text).map_err(Reply::illegal)?;
    if spec.arguments.is_empty() && spec.options.is_empty() && !toks.is_empty() {
        return Err(Reply::illegal(
            "The argument list of this diagnostic command should be empty.",
        ));
    }
    let mut next_argument = 0;
    for (key, value) in toks {
        if let Some(o) = spec.options.iter().find(|o| o.name == key) {
            let v = match o.ty {
                ArgType::Bool => parse_bool(o, value.as_deref().unwrap_or(""))?,
                ArgType::Str => value.unwrap_or_default(),
            };
            args.values.insert(o.name, v);
            continue;
        }
        let Some(a) = spec.arguments.get(next_argument) else {
            return Err(Reply::illegal(format!(
                "Unknown argument '{key}' in diagnostic command."
            )));
        };
        next_argument += 1;
        let whole = match value {
            Some(v) => format!("{key}={v}"),
            None => key,
        };
        let v = match a.ty {
            ArgType::Bool => parse_bool(a, &whole)?,
            ArgType::Str => whole,
        };
        args.values.insert(a.name, v);
    }
    for p in spec.arguments.iter().chain(spec.options) {
        if args.values.contains_key(p.name) {
            continue;
        }
        if p.mandatory {
            return Err(Reply::illegal(format!(
                "The argument '{}' is mandatory.",
                p.name
            )));
        }
        if let Some(d) = p.default {
            args.values.insert(p.name, d.to_owned());
        }
    }
    Ok(args)
}

/// Every command rtvm has, sorted by name.
pub(crate) fn specs() -> &'static [Spec] {
    commands::SPECS
}

fn find(name: &str) -> Option<&'static Spec> {
    specs().iter().find(|s| s.name == name)
}

/// Runs one command line (`VM.native_memory summary scale=MB`). An empty line does nothing
/// and succeeds, as in HotSpot.
pub(crate) fn execute(ctx: &Context, line: &str) -> Reply {
    let line = line.trim_matches(|c: char| c == ' ' || c == '\n' || c == '\r');
    if line.is_empty() {
        return Reply::Ok(String::new());
    }
    let (name, rest) = line.split_once(' ').unwrap_or((line, ""));
    let Some(spec) = find(name) else {
        return Reply::illegal("Unknown diagnostic command");
    };
    match parse_args(spec, rest) {
        Ok(args) => {
            log::debug!(target: "attach", "Executing dcmd '{line}'");
            (spec.run)(ctx, &args)
        }
        Err(reply) => reply,
    }
}

/// `help <command>`: HotSpot's block for one command.
pub(crate) fn help_for(spec: &Spec) -> String {
    let mut s = String::new();
    s.push_str(spec.name);
    s.push('\n');
    s.push_str(spec.description);
    s.push_str("\n\n");
    s.push_str(&format!("Impact: {}\n\n", spec.impact));
    if let Some(p) = spec.permission {
        s.push_str(&format!("Permission: {p}\n\n"));
    }
    if spec.arguments.is_empty() && spec.options.is_empty() {
        s.push_str(&format!("Syntax: {}\n", spec.name));
        return s;
    }
    let mut syntax = format!(
        "Syntax : {} {}",
        spec.name,
        if spec.options.is_empty() {
            ""
        } else {
            "[options]"
        }
    );
    for a in spec.arguments {
        if a.mandatory {
            syntax.push_str(&format!(" <{}>", a.name));
        } else {
            syntax.push_str(&format!(" [<{}>]", a.name));
        }
    }
    s.push_str(&syntax);
    s.push('\n');
    let param = |s: &mut String, p: &Param| {
        s.push_str(&format!(
            "\t{} : {}{} ({}, {})\n",
            p.name,
            if p.mandatory { " " } else { "[optional] " },
            p.description,
            p.ty.name(),
            p.default.unwrap_or("no default value")
        ));
    };
    if !spec.arguments.is_empty() {
        s.push_str("\nArguments:\n");
        for a in spec.arguments {
            param(&mut s, a);
        }
    }
    if !spec.options.is_empty() {
        s.push_str(
            "\nOptions: (options must be specified using the <key> or <key>=<value> syntax)\n",
        );
        for o in spec.options {
            param(&mut s, o);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer() {
        assert_eq!(
            tokens("summary scale=MB").unwrap(),
            [
                ("summary".into(), None),
                ("scale".into(), Some("MB".into()))
            ]
        );
        assert_eq!(
            tokens("output=\"a b.log\" what='gc=debug'").unwrap(),
            [
                ("output".into(), Some("a b.log".into())),
                ("what".into(), Some("gc=debug".into()))
            ]
        );
        assert!(tokens("x=\"open").is_err());
    }

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

    #[test]
    fn parse_errors_in_hotspots_words() {
        let flags = find("VM.flags").unwrap();
        assert_eq!(
            parse_args(flags, "-foo").unwrap_err(),
            Reply::Failed("java.lang.IllegalArgumentException: Unknown argument '-foo' in diagnostic command.\n".into())
        );
        assert!(parse_args(flags, "-all").unwrap().flag("-all"));
        let version = find("VM.version").unwrap();
        assert_eq!(
            parse_args(version, "x").unwrap_err(),
            Reply::Failed("java.lang.IllegalArgumentException: The argument list of this diagnostic command should be empty.\n".into())
        );
        let set = find("VM.set_flag").unwrap();
        assert_eq!(
            parse_args(set, "").unwrap_err(),
            Reply::Failed(
                "java.lang.IllegalArgumentException: The argument 'flag name' is mandatory.\n"
                    .into()
            )
        );
        let a = parse_args(set, "Foo 1").unwrap();
        assert_eq!(
            (a.get("flag name"), a.get("string value")),
            (Some("Foo"), Some("1"))
        );
        let nmt = find("VM.native_memory").unwrap();
        assert_eq!(parse_args(nmt, "").unwrap().get("scale"), Some("KB"));
        assert!(
            matches!(parse_args(nmt, "summary=maybe"), Err(Reply::Failed(m)) if m.contains("Boolean parsing error in command argument 'summary'"))
        );
    }
}
