//! A command line's arguments, parsed as HotSpot's `DCmdParser` parses them: tokens split at
//! spaces (HotSpot's `DCmdArgIter`), a token that names an option is `key` or `key=value`,
//! any other token is the next positional argument (its key alone: `help GC.run=x` asks for
//! `GC.run`), then the mandatory check and the defaults. Each type reads its value as
//! HotSpot 17 does and fails with HotSpot's words (messages that end in a newline in HotSpot
//! end in one here too, so the reply ends in a blank line as java's does).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The type of a diagnostic command's argument or option: how its value is read, and the
/// name `help` prints for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DcmdType {
    /// `STRING`: the text as given (quotes removed); given alone (`key`), the empty string.
    String,
    /// `BOOLEAN`: `true` or `false` in any case; given alone (`key`), true.
    Boolean,
    /// `INT`: a signed 64-bit decimal integer (HotSpot's `jlong`).
    Int,
    /// `MEMORY SIZE`: a byte count with an optional `k`, `m` or `g` suffix (any case, an
    /// optional `b` after it: `512`, `64k`, `1G`, `16mb`).
    MemorySize,
    /// `NANOTIME`: a time span with a unit, `ns`, `us`, `ms`, `s`, `m`, `h` or `d` (`0`
    /// alone is allowed); read as nanoseconds.
    NanoTime,
}

impl DcmdType {
    /// The name `help` prints (`STRING`, `BOOLEAN`, `INT`, `MEMORY SIZE`, `NANOTIME`).
    pub fn name(self) -> &'static str {
        match self {
            DcmdType::String => "STRING",
            DcmdType::Boolean => "BOOLEAN",
            DcmdType::Int => "INT",
            DcmdType::MemorySize => "MEMORY SIZE",
            DcmdType::NanoTime => "NANOTIME",
        }
    }
}

/// One argument or option of a command: `S` is `&'static str` for the built-in commands and
/// `String` for the embedder's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Param<S = &'static str> {
    pub(crate) name: S,
    pub(crate) description: S,
    pub(crate) ty: DcmdType,
    pub(crate) mandatory: bool,
    /// The default as `help` prints it (`None`: `no default value`).
    pub(crate) default: Option<S>,
}

/// A parsed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    String(String),
    Boolean(bool),
    Int(i64),
    MemorySize(u64),
    NanoTime(i64),
}

#[derive(Clone, Debug)]
struct Entry {
    /// The text as given (or the default).
    text: String,
    value: Value,
    /// Given on the command line (not a default).
    given: bool,
}

/// The values of one run of a diagnostic command: each argument and option that was given on
/// the command line or has a default, by its name.
#[derive(Clone, Debug, Default)]
pub struct DcmdArguments {
    values: HashMap<String, Entry>,
    cancelled: Option<Arc<AtomicBool>>,
}

impl DcmdArguments {
    /// The value of a `STRING` parameter (given, or its default); `None` if it has none or is
    /// of another type.
    pub fn string(&self, name: &str) -> Option<&str> {
        match &self.values.get(name)?.value {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value of a `BOOLEAN` parameter: `false` if it has none (HotSpot's rule) or is of
    /// another type.
    pub fn boolean(&self, name: &str) -> bool {
        matches!(
            self.values.get(name).map(|e| &e.value),
            Some(Value::Boolean(true))
        )
    }

    /// The value of an `INT` parameter; `None` if it has none or is of another type.
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.values.get(name)?.value {
            Value::Int(v) => Some(v),
            _ => None,
        }
    }

    /// The value of a `MEMORY SIZE` parameter in bytes; `None` if it has none or is of
    /// another type.
    pub fn memory_size(&self, name: &str) -> Option<u64> {
        match self.values.get(name)?.value {
            Value::MemorySize(v) => Some(v),
            _ => None,
        }
    }

    /// The value of a `NANOTIME` parameter in nanoseconds (it may be negative: `-5s`);
    /// `None` if it has none or is of another type.
    pub fn nanotime(&self, name: &str) -> Option<i64> {
        match self.values.get(name)?.value {
            Value::NanoTime(v) => Some(v),
            _ => None,
        }
    }

    /// The text of any parameter's value as given on the command line (quotes removed), or
    /// its default; `None` if it has no value.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|e| e.text.as_str())
    }

    /// Whether the parameter was given on the command line (HotSpot's `is_set`), as opposed
    /// to taking its default or having no value.
    pub fn is_set(&self, name: &str) -> bool {
        self.values.get(name).is_some_and(|e| e.given)
    }

    /// Whether the VM's destroy has begun while this command runs. A handler that waits —
    /// for a collection, say — should check it now and then and return: the destroy gives
    /// running handlers 5 s and then stops waiting for them. Always `false` outside an
    /// embedder's command.
    pub fn cancelled(&self) -> bool {
        self.cancelled
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Acquire))
    }

    pub(crate) fn set_cancel_flag(&mut self, flag: Arc<AtomicBool>) {
        self.cancelled = Some(flag);
    }

    /// The value of a string parameter, if given (or defaulted): the built-in commands' name.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.text(name)
    }

    /// Whether a boolean parameter is true.
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.boolean(name)
    }

    /// Whether a parameter was given (or defaulted).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The names of the parameters with a value (for the C API).
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    pub(crate) fn value(&self, name: &str) -> Option<&Value> {
        self.values.get(name).map(|e| &e.value)
    }
}

/// What HotSpot raises: the message of a `java.lang.IllegalArgumentException`.
pub(crate) type ParseError = String;

/// One token: its key and, for `key=value`, the value.
pub(crate) type Token = (String, Option<String>);

/// Splits a command's argument text into `(key, value)` tokens at spaces, as HotSpot's
/// `DCmdArgIter` does: a key or a value may be quoted with `"` or `'`; an empty key ends the
/// list (`help =x` is `help`).
pub(crate) fn tokens(text: &str) -> Result<Vec<Token>, ParseError> {
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
        if key.is_empty() {
            break;
        }
        out.push((key, value));
    }
    Ok(out)
}

/// `BOOLEAN`: HotSpot's `strncasecmp` with `true`/`false`; nothing means true.
fn parse_bool(name: &str, value: Option<&str>) -> Result<bool, ParseError> {
    match value.unwrap_or("") {
        "" => Ok(true),
        v if v.eq_ignore_ascii_case("true") => Ok(true),
        v if v.eq_ignore_ascii_case("false") => Ok(false),
        v => Err(format!(
            "Boolean parsing error in command argument '{name}'. Could not parse: {v}.\n"
        )),
    }
}

/// `INT`: a decimal `jlong` (leading blanks and a sign allowed, as `sscanf` reads it); the
/// text is quoted up to 64 characters in the error, as HotSpot does. A value beyond the
/// `jlong` range is an error here (HotSpot's `sscanf` would saturate silently).
fn parse_int(name: &str, value: Option<&str>) -> Result<i64, ParseError> {
    let v = value.unwrap_or("");
    let digits = v.trim_start_matches([' ', '\t']);
    let ok = !digits.is_empty()
        && digits
            .strip_prefix(['+', '-'])
            .unwrap_or(digits)
            .bytes()
            .all(|b| b.is_ascii_digit());
    match digits.parse::<i64>() {
        Ok(n) if ok => Ok(n),
        _ => {
            let shown: String = v.chars().take(64).collect();
            let more = if v.chars().count() > 64 { "..." } else { "" };
            Err(format!(
                "Integer parsing error in command argument '{name}'. Could not parse: {shown}{more}.\n"
            ))
        }
    }
}

/// Splits `12kb` into `("12", "kb")` at the first character that cannot be part of the number.
fn split_unit(v: &str) -> (&str, &str) {
    let start = usize::from(v.starts_with(['+', '-']));
    let end = v[start..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(v.len(), |i| i + start);
    (&v[..end], &v[end..])
}

/// `MEMORY SIZE`: with JDK 17's messages (as its `JFR.start maxsize=` reports them).
fn parse_memory_size(value: Option<&str>) -> Result<u64, ParseError> {
    let Some(v) = value else {
        return Err("Parsing error memory size value: syntax error, value is null\n".into());
    };
    let invalid = || "Parsing error memory size value: invalid value\n".to_owned();
    let (number, unit) = split_unit(v);
    let n: i64 = number.parse().map_err(|_| invalid())?;
    if n < 0 {
        return Err("Parsing error memory size value: negative values not allowed\n".into());
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kb" => 10,
        "m" | "mb" => 20,
        "g" | "gb" => 30,
        _ => return Err(invalid()),
    };
    let n = n as u64;
    n.checked_mul(1u64 << shift).ok_or_else(invalid)
}

/// `NANOTIME`: with JDK 17's messages (as its `JFR.start duration=` reports them).
fn parse_nanotime(value: Option<&str>) -> Result<i64, ParseError> {
    let Some(v) = value else {
        return Err("Integer parsing error nanotime value: syntax error, value is null\n".into());
    };
    let syntax = || "Integer parsing error nanotime value: syntax error\n".to_owned();
    let (number, unit) = split_unit(v);
    let n: i64 = number.parse().map_err(|_| syntax())?;
    let per: i64 = match unit {
        "" if n == 0 => return Ok(0),
        "" => return Err("Integer parsing error nanotime value: unit required\n".into()),
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        "d" => 86_400 * 1_000_000_000,
        _ => return Err("Integer parsing error nanotime value: illegal unit\n".into()),
    };
    n.checked_mul(per).ok_or_else(syntax)
}

/// Reads one value of type `ty` for the parameter `name` (`None`: given without `=value`).
pub(crate) fn parse_value(
    name: &str,
    ty: DcmdType,
    value: Option<&str>,
) -> Result<Value, ParseError> {
    Ok(match ty {
        DcmdType::String => Value::String(value.unwrap_or("").to_owned()),
        DcmdType::Boolean => Value::Boolean(parse_bool(name, value)?),
        DcmdType::Int => Value::Int(parse_int(name, value)?),
        DcmdType::MemorySize => Value::MemorySize(parse_memory_size(value)?),
        DcmdType::NanoTime => Value::NanoTime(parse_nanotime(value)?),
    })
}

/// HotSpot cuts the unknown token to 29 bytes in its message.
fn cut(s: &str, bytes: usize) -> &str {
    if s.len() <= bytes {
        return s;
    }
    let mut end = bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Parses a command's argument text against its declaration.
pub(crate) fn parse_args<S: AsRef<str>>(
    arguments: &[Param<S>],
    options: &[Param<S>],
    text: &str,
) -> Result<DcmdArguments, ParseError> {
    let mut args = DcmdArguments::default();
    let toks = tokens(text)?;
    if arguments.is_empty() && options.is_empty() {
        // HotSpot's commands without a parser (`GC.run`, `VM.version`).
        if toks.is_empty() {
            return Ok(args);
        }
        return Err("The argument list of this diagnostic command should be empty.".into());
    }
    let mut next_argument = arguments.iter();
    for (key, value) in toks {
        if let Some(o) = options.iter().find(|o| o.name.as_ref() == key) {
            let name = o.name.as_ref();
            if args.values.contains_key(name) {
                return Err("Duplicates in diagnostic command arguments\n".into());
            }
            let v = parse_value(name, o.ty, value.as_deref())?;
            let text = value.unwrap_or_default();
            args.values.insert(
                name.to_owned(),
                Entry {
                    text,
                    value: v,
                    given: true,
                },
            );
            continue;
        }
        let Some(a) = next_argument.next() else {
            return Err(format!(
                "Unknown argument '{}' in diagnostic command.",
                cut(&key, 29)
            ));
        };
        // A positional argument is the token's key (what follows a '=' is dropped).
        let v = parse_value(a.name.as_ref(), a.ty, Some(&key))?;
        args.values.insert(
            a.name.as_ref().to_owned(),
            Entry {
                text: key,
                value: v,
                given: true,
            },
        );
    }
    for (p, what) in arguments
        .iter()
        .map(|a| (a, "argument"))
        .chain(options.iter().map(|o| (o, "option")))
    {
        let name = p.name.as_ref();
        if args.values.contains_key(name) {
            continue;
        }
        if p.mandatory {
            return Err(format!("The {what} '{name}' is mandatory."));
        }
        if let Some(d) = &p.default {
            let d = d.as_ref();
            let value = parse_value(name, p.ty, Some(d))?;
            args.values.insert(
                name.to_owned(),
                Entry {
                    text: d.to_owned(),
                    value,
                    given: false,
                },
            );
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &'static str, ty: DcmdType, default: Option<&'static str>) -> Param {
        Param {
            name,
            description: "",
            ty,
            mandatory: false,
            default,
        }
    }

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
        // An empty key ends the list, as in HotSpot (`help =x` lists the commands).
        assert_eq!(tokens("=x").unwrap(), []);
        assert_eq!(tokens("a =x b").unwrap(), [("a".into(), None)]);
    }

    #[test]
    fn types_read_as_hotspot_and_jdk17_read_them() {
        let int = |v| parse_value("-parallel", DcmdType::Int, v);
        assert_eq!(int(Some("12")), Ok(Value::Int(12)));
        assert_eq!(int(Some("+1")), Ok(Value::Int(1)));
        assert_eq!(int(Some(" 1")), Ok(Value::Int(1)));
        assert_eq!(int(Some("-7")), Ok(Value::Int(-7)));
        for bad in ["abc", "12x", "-1x", "", "99999999999999999999", "1 "] {
            assert_eq!(
                int(Some(bad)),
                Err(format!("Integer parsing error in command argument '-parallel'. Could not parse: {bad}.\n"))
            );
        }
        assert_eq!(
            int(None),
            Err(
                "Integer parsing error in command argument '-parallel'. Could not parse: .\n"
                    .into()
            )
        );
        let long = "a".repeat(70);
        assert_eq!(
            int(Some(&long)),
            Err(format!(
                "Integer parsing error in command argument '-parallel'. Could not parse: {}....\n",
                "a".repeat(64)
            ))
        );

        let b = |v| parse_value("-all", DcmdType::Boolean, v);
        assert_eq!(b(None), Ok(Value::Boolean(true)));
        assert_eq!(b(Some("TRUE")), Ok(Value::Boolean(true)));
        assert_eq!(b(Some("False")), Ok(Value::Boolean(false)));
        assert_eq!(
            b(Some("yes")),
            Err("Boolean parsing error in command argument '-all'. Could not parse: yes.\n".into())
        );

        let m = |v| parse_value("maxsize", DcmdType::MemorySize, v);
        assert_eq!(m(Some("512")), Ok(Value::MemorySize(512)));
        assert_eq!(m(Some("64k")), Ok(Value::MemorySize(64 << 10)));
        assert_eq!(m(Some("12kb")), Ok(Value::MemorySize(12 << 10)));
        assert_eq!(m(Some("16MB")), Ok(Value::MemorySize(16 << 20)));
        assert_eq!(m(Some("1G")), Ok(Value::MemorySize(1 << 30)));
        for bad in [
            "abc",
            "12x",
            "",
            "99999999999999999999999",
            "9223372036854775807g",
        ] {
            assert_eq!(
                m(Some(bad)),
                Err("Parsing error memory size value: invalid value\n".into()),
                "{bad}"
            );
        }
        assert_eq!(
            m(Some("-1")),
            Err("Parsing error memory size value: negative values not allowed\n".into())
        );
        assert_eq!(
            m(None),
            Err("Parsing error memory size value: syntax error, value is null\n".into())
        );

        let t = |v| parse_value("duration", DcmdType::NanoTime, v);
        assert_eq!(t(Some("0")), Ok(Value::NanoTime(0)));
        assert_eq!(t(Some("5ns")), Ok(Value::NanoTime(5)));
        assert_eq!(t(Some("7us")), Ok(Value::NanoTime(7_000)));
        assert_eq!(t(Some("20ms")), Ok(Value::NanoTime(20_000_000)));
        assert_eq!(t(Some("3s")), Ok(Value::NanoTime(3_000_000_000)));
        assert_eq!(t(Some("2m")), Ok(Value::NanoTime(120_000_000_000)));
        assert_eq!(t(Some("1h")), Ok(Value::NanoTime(3_600_000_000_000)));
        assert_eq!(t(Some("1d")), Ok(Value::NanoTime(86_400_000_000_000)));
        assert_eq!(t(Some("-5s")), Ok(Value::NanoTime(-5_000_000_000)));
        for (bad, why) in [
            ("5", "unit required"),
            ("5x", "illegal unit"),
            ("5S", "illegal unit"),
            ("1.5s", "illegal unit"),
            ("x", "syntax error"),
            ("", "syntax error"),
            ("99999999999999999999s", "syntax error"),
            ("9999999999999d", "syntax error"),
        ] {
            assert_eq!(
                t(Some(bad)),
                Err(format!("Integer parsing error nanotime value: {why}\n")),
                "{bad}"
            );
        }
        assert_eq!(
            t(None),
            Err("Integer parsing error nanotime value: syntax error, value is null\n".into())
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3_000, failure_persistence: None, ..Default::default() })]

        /// Any command line: a typed result or one of HotSpot's messages, never a panic.
        #[test]
        fn any_input_parses_or_says_why(text in "[a-z0-9 =\"'+.kKmMgGsuhd-]{0,40}|\\PC{0,20}") {
            let arg = p("a", DcmdType::Int, None);
            let opts = [
                p("s", DcmdType::String, None),
                p("b", DcmdType::Boolean, Some("false")),
                p("i", DcmdType::Int, Some("0")),
                p("m", DcmdType::MemorySize, Some("1k")),
                p("t", DcmdType::NanoTime, Some("0")),
            ];
            match parse_args(&[arg], &opts, &text) {
                Ok(a) => {
                    proptest::prop_assert!(a.memory_size("m").is_some() && a.nanotime("t").is_some());
                    proptest::prop_assert!(a.int("i").is_some());
                }
                Err(e) => proptest::prop_assert!(
                    ["Integer parsing error", "Boolean parsing error", "Parsing error memory size", "Duplicates", "Unknown argument", "Format error"]
                        .iter()
                        .any(|m| e.starts_with(m)),
                    "{e}"
                ),
            }
        }
    }

    #[test]
    fn parsing_as_hotspots_parser() {
        let opts = [
            p("-all", DcmdType::Boolean, Some("false")),
            p("-parallel", DcmdType::Int, Some("0")),
        ];
        let a = parse_args::<&str>(&[], &opts, "").unwrap();
        assert!(!a.boolean("-all") && !a.is_set("-all") && a.has("-all"));
        assert_eq!(a.int("-parallel"), Some(0));
        let a = parse_args::<&str>(&[], &opts, "-all -parallel=3").unwrap();
        assert!(a.boolean("-all") && a.is_set("-all"));
        assert_eq!(a.int("-parallel"), Some(3));
        assert_eq!(a.text("-parallel"), Some("3"));
        // Wrong-typed look-ups find nothing.
        assert_eq!(a.string("-parallel"), None);
        assert_eq!(a.int("-all"), None);
        assert_eq!(
            parse_args::<&str>(&[], &opts, "-all -all").unwrap_err(),
            "Duplicates in diagnostic command arguments\n"
        );
        assert_eq!(
            parse_args::<&str>(&[], &opts, "abcdefghijklmnopqrstuvwxyz0123456789").unwrap_err(),
            "Unknown argument 'abcdefghijklmnopqrstuvwxyz012' in diagnostic command."
        );
        assert_eq!(
            parse_args::<&str>(&[], &[], "x").unwrap_err(),
            "The argument list of this diagnostic command should be empty."
        );
        let mut file = p("filename", DcmdType::String, None);
        file.mandatory = true;
        assert_eq!(
            parse_args(&[file], &opts, "-all").unwrap_err(),
            "The argument 'filename' is mandatory."
        );
        // A positional argument takes the token's key.
        let a = parse_args(&[file], &opts, "dump.hprof=x -parallel=2").unwrap();
        assert_eq!(a.string("filename"), Some("dump.hprof"));
        let mut must = p("level", DcmdType::Int, None);
        must.mandatory = true;
        assert_eq!(
            parse_args::<&str>(&[], &[must], "").unwrap_err(),
            "The option 'level' is mandatory."
        );
        let sized = [p("maxsize", DcmdType::MemorySize, Some("1m"))];
        let a = parse_args::<&str>(&[], &sized, "").unwrap();
        assert_eq!(a.memory_size("maxsize"), Some(1 << 20));
        assert!(!a.cancelled());
    }
}
