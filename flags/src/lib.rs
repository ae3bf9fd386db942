//! # rtvm-flags
//!
//! rtvm's flag system, shaped like HotSpot's: one declarative [table](FLAGS) of flags with
//! a kind (product, diagnostic, experimental, manageable), a type, a default (possibly
//! platform-dependent), an optional range and constraint, and a one-line doc; a parser for
//! the `java` command-line forms (`-XX:+Name`, `-XX:Name=value`, `-Xms`, `-Xmx`, `-Xss`,
//! `-Xmn`, `-XX:Flags=`, `-XX:VMOptionsFile=`, an environment variable); and the
//! `-XX:+PrintFlagsFinal` family of listings in HotSpot's exact layout.
//!
//! The parsed result is a value: [`Settings`] while the VM's ergonomics adjust it, then an
//! immutable, cheaply cloneable [`Flags`]. There is no global mutable flag state.
//!
//! ```
//! use rtvm_flags::{flag, parse, ParseOptions};
//!
//! let args = ["-Xmx64m".to_string(), "-XX:+AlwaysPreTouch".to_string()];
//! let parsed = parse(&args, &ParseOptions::default(), &mut |_, _| {}).unwrap();
//! let flags = parsed.settings.freeze();
//! assert!(flags.get(flag::AlwaysPreTouch));
//! assert_eq!(flags.get(flag::MaxHeapSize), 64 << 20);
//! assert_eq!(flags.origin(flag::MaxHeapSize).to_string(), "command line");
//! ```
#![forbid(unsafe_code)]

#[macro_use]
mod macros;
mod constraints;
mod error;
mod kind;
pub mod optfile;
mod parse;
mod print;
mod similarity;
mod table;
pub mod value;

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;

pub use error::{ArgError, ArgErrorKind};
pub use kind::{FlagKind, Origin, Source};
pub use parse::{
    parse, EnvOptions, ParseOptions, Parsed, StopReason, Stream, XlogAction, XlogHook,
};
pub use print::{print_command_line_flags, print_flags, print_flags_ranges, PrintWhich};
pub use similarity::similarity;
pub use table::{flag, FLAGS};
pub use value::{FlagType, Value};

/// When a constraint runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Whenever the flag is set while arguments are parsed.
    AtParse,
    /// Once, after the VM's ergonomics have chosen their values.
    AfterErgo,
}

/// A check that involves more than a range: it sees every flag's current value and returns
/// the exact message to print when it fails.
#[derive(Clone, Copy, Debug)]
pub struct Constraint {
    /// The check.
    pub check: fn(&Settings) -> Result<(), String>,
    /// When it runs.
    pub phase: Phase,
}

/// One row of the flag table.
#[derive(Debug)]
pub struct FlagInfo {
    /// The flag's name, as typed after `-XX:`.
    pub name: &'static str,
    /// Who may set it.
    pub kind: FlagKind,
    /// Whether the default is platform-dependent (`{pd product}`).
    pub platform_dependent: bool,
    /// Its type.
    pub ty: FlagType,
    /// Its default value.
    pub default: Value,
    /// Its allowed range, inclusive, if declared.
    pub range: Option<(Value, Value)>,
    /// Its constraint, if any.
    pub constraint: Option<Constraint>,
    /// Printed with its type's range (HotSpot checks it with a constraint function).
    pub type_range: bool,
    /// A one-line description.
    pub doc: &'static str,
}

impl FlagInfo {
    /// Whether this is a `bool` flag (set with `+`/`-`).
    pub fn is_bool(&self) -> bool {
        self.ty == FlagType::Bool
    }

    /// The range `-XX:+PrintFlagsRanges` shows: the declared one, or the type's own range for
    /// a flag that has only a constraint, or none.
    pub fn printed_range(&self) -> Option<(Value, Value)> {
        match (&self.range, &self.constraint) {
            (Some(range), _) => Some(range.clone()),
            (None, Some(_)) => self.ty.type_range(),
            (None, None) if self.type_range => self.ty.type_range(),
            (None, None) => None,
        }
    }

    /// Checks a value against the declared range; the error is HotSpot's message
    /// (`size_t Name=1 is outside the allowed range [ 4096 ... 9223372036854775807 ]`).
    pub fn check_range(&self, value: &Value) -> Result<(), String> {
        let Some((min, max)) = &self.range else {
            return Ok(());
        };
        let below = value.partial_cmp_num(min) == Some(std::cmp::Ordering::Less);
        let above = value.partial_cmp_num(max) == Some(std::cmp::Ordering::Greater);
        if below || above {
            return Err(format!(
                "{} {}={} is outside the allowed range [ {} ... {} ]\n",
                self.ty,
                self.name,
                value.display(),
                min.display(),
                max.display()
            ));
        }
        Ok(())
    }

    /// Whether this flag is one of the two unlock flags.
    pub fn is_unlocker(&self) -> bool {
        table::UNLOCKERS.contains(&self.name)
    }
}

/// Looks a flag up by its exact name.
pub fn find(name: &str) -> Option<&'static FlagInfo> {
    find_index(name).map(|i| &FLAGS[i])
}

fn find_index(name: &str) -> Option<usize> {
    FLAGS.iter().position(|f| f.name == name)
}

/// A typed handle to one flag; see [`flag`] for the handles.
pub struct Flag<T: ?Sized> {
    index: usize,
    _type: PhantomData<fn() -> Box<T>>,
}

impl<T: ?Sized> Clone for Flag<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: ?Sized> Copy for Flag<T> {}

impl<T: ?Sized> std::fmt::Debug for Flag<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Flag({})", self.info().name)
    }
}

impl<T: ?Sized> Flag<T> {
    /// Creates the handle for the table row `index`; only the table does this.
    #[doc(hidden)]
    pub const fn new(index: usize) -> Self {
        Flag {
            index,
            _type: PhantomData,
        }
    }

    /// The flag's table row.
    pub fn info(self) -> &'static FlagInfo {
        &FLAGS[self.index]
    }

    /// The flag's name.
    pub fn name(self) -> &'static str {
        self.info().name
    }
}

/// The Rust types flag values are read as.
pub trait FlagRepr {
    /// What a read returns (`bool`, `usize`, `&str`, ...).
    type Out<'a>;
    /// What a write takes.
    type In;
    /// Reads the value.
    fn read(value: &Value) -> Self::Out<'_>;
    /// Wraps a value for writing.
    fn write(value: Self::In) -> Value;
}

macro_rules! int_repr {
    ($($t:ty => $variant:ident),*) => {$(
        impl FlagRepr for $t {
            type Out<'a> = $t;
            type In = $t;
            fn read(value: &Value) -> $t {
                match value {
                    // The table declares the width; values are range-checked on write.
                    Value::$variant(v) => <$t>::try_from(*v).unwrap_or(<$t>::MAX),
                    other => unreachable!("flag holds {other:?}, not an integer"),
                }
            }
            fn write(value: $t) -> Value {
                Value::$variant(value as _)
            }
        }
    )*};
}
int_repr!(i32 => Int, i64 => Int, u32 => Uint, u64 => Uint, usize => Uint);

impl FlagRepr for bool {
    type Out<'a> = bool;
    type In = bool;
    fn read(value: &Value) -> bool {
        matches!(value, Value::Bool(true))
    }
    fn write(value: bool) -> Value {
        Value::Bool(value)
    }
}

impl FlagRepr for f64 {
    type Out<'a> = f64;
    type In = f64;
    fn read(value: &Value) -> f64 {
        match value {
            Value::Double(d) => *d,
            other => unreachable!("flag holds {other:?}, not a double"),
        }
    }
    fn write(value: f64) -> Value {
        Value::Double(value)
    }
}

impl FlagRepr for str {
    type Out<'a> = &'a str;
    type In = String;
    fn read(value: &Value) -> &str {
        match value {
            Value::Str(s) => s,
            other => unreachable!("flag holds {other:?}, not a string"),
        }
    }
    fn write(value: String) -> Value {
        Value::Str(value.into())
    }
}

/// Every flag's value and origin, while they are still being decided (parsing, then the
/// VM's ergonomics). [`Settings::freeze`] turns it into the immutable [`Flags`].
#[derive(Clone, Debug)]
pub struct Settings {
    values: Vec<Value>,
    origins: Vec<Origin>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::defaults()
    }
}

impl Settings {
    /// Every flag at its default.
    pub fn defaults() -> Settings {
        Settings {
            values: FLAGS.iter().map(|f| f.default.clone()).collect(),
            origins: vec![Origin::DEFAULT; FLAGS.len()],
        }
    }

    /// A flag's current value.
    pub fn get<T: FlagRepr + ?Sized>(&self, flag: Flag<T>) -> T::Out<'_> {
        T::read(&self.values[flag.index])
    }

    /// A flag's current origin.
    pub fn origin<T: ?Sized>(&self, flag: Flag<T>) -> Origin {
        self.origins[flag.index]
    }

    /// Whether nobody — user or ergonomics — has set the flag (HotSpot's `FLAG_IS_DEFAULT`).
    pub fn is_default<T: ?Sized>(&self, flag: Flag<T>) -> bool {
        self.origins[flag.index].is_default()
    }

    /// The value of the flag with this name, for generic code (listings, tests).
    pub fn value_by_name(&self, name: &str) -> Option<&Value> {
        find_index(name).map(|i| &self.values[i])
    }

    /// The origin of the flag with this name.
    pub fn origin_by_name(&self, name: &str) -> Option<Origin> {
        find_index(name).map(|i| self.origins[i])
    }

    /// Sets a flag as a user would, from `source`; checks the range and any `AtParse`
    /// constraint and returns HotSpot's message when one fails (the value is then unchanged).
    pub fn set<T: FlagRepr + ?Sized>(
        &mut self,
        flag: Flag<T>,
        value: T::In,
        source: Source,
    ) -> Result<(), String> {
        self.set_value(flag.index, T::write(value), Origin::from(source))
    }

    /// Sets a flag ergonomically (`FLAG_SET_ERGO`): the origin keeps its source and gains
    /// the `ergonomic` mark.
    pub fn set_ergo<T: FlagRepr + ?Sized>(
        &mut self,
        flag: Flag<T>,
        value: T::In,
    ) -> Result<(), String> {
        let origin = Origin {
            ergonomic: true,
            ..self.origins[flag.index]
        };
        self.set_value(flag.index, T::write(value), origin)
    }

    /// Changes a flag's value but keeps it looking untouched (`FLAG_SET_DEFAULT`), for values
    /// the VM derives the way HotSpot presents as defaults (e.g. `ParallelGCThreads`).
    pub fn set_default<T: FlagRepr + ?Sized>(
        &mut self,
        flag: Flag<T>,
        value: T::In,
    ) -> Result<(), String> {
        let origin = self.origins[flag.index];
        self.set_value(flag.index, T::write(value), origin)
    }

    pub(crate) fn set_value(
        &mut self,
        index: usize,
        value: Value,
        origin: Origin,
    ) -> Result<(), String> {
        let info = &FLAGS[index];
        info.check_range(&value)?;
        let old = std::mem::replace(&mut self.values[index], value);
        if let Some(Constraint {
            check,
            phase: Phase::AtParse,
        }) = info.constraint
        {
            if let Err(message) = check(self) {
                self.values[index] = old;
                return Err(message);
            }
        }
        self.origins[index] = origin;
        Ok(())
    }

    /// Runs every constraint of `phase`, in table order; the first failure's message is
    /// returned.
    pub fn check_constraints(&self, phase: Phase) -> Result<(), String> {
        FLAGS
            .iter()
            .filter_map(|f| f.constraint)
            .filter(|c| c.phase == phase)
            .try_for_each(|c| (c.check)(self))
    }

    /// Whether a flag of this kind may be set or listed now.
    pub fn is_unlocked(&self, info: &FlagInfo) -> bool {
        match info.kind {
            FlagKind::Diagnostic => self.get(flag::UnlockDiagnosticVMOptions),
            FlagKind::Experimental => self.get(flag::UnlockExperimentalVMOptions),
            FlagKind::Product | FlagKind::Manageable => true,
        }
    }

    /// Every flag with its value and origin, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static FlagInfo, &Value, Origin)> + '_ {
        FLAGS
            .iter()
            .zip(&self.values)
            .zip(&self.origins)
            .map(|((f, v), o)| (f, v, *o))
    }

    /// Freezes the settings into the VM's immutable flags.
    pub fn freeze(self) -> Flags {
        Flags {
            live: Arc::new(std::sync::RwLock::new(self.clone())),
            start: Arc::new(self),
        }
    }
}

/// The VM's flag values once it runs. Cloning is cheap and every clone sees the same values.
///
/// Reads through `Deref` ([`Settings::get`] and the rest) see the values the VM started with;
/// only `manageable` flags change after that ([`Flags::set_writeable`], HotSpot's
/// `WriteableFlags`), and code that honours a change reads them with [`Flags::current`];
/// [`Flags::snapshot`] has every current value (for listings).
#[derive(Clone, Debug)]
pub struct Flags {
    start: Arc<Settings>,
    live: Arc<std::sync::RwLock<Settings>>,
}

impl Deref for Flags {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        &self.start
    }
}

/// Why [`Flags::set_writeable`] refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteError {
    /// No flag has this name (`flag X does not exist`).
    NoSuchFlag(String),
    /// The flag is not manageable (`only 'writeable' flags can be set`, or through attach
    /// `flag 'X' cannot be changed`).
    NotWriteable(String),
    /// No value was given (`flag value is missing`).
    MissingValue,
    /// The value does not parse or is out of range: HotSpot's line for it.
    Invalid(String),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::NoSuchFlag(n) => write!(f, "flag {n} does not exist"),
            WriteError::NotWriteable(_) => f.write_str("only 'writeable' flags can be set"),
            WriteError::MissingValue => f.write_str("flag value is missing"),
            WriteError::Invalid(m) => f.write_str(m),
        }
    }
}

impl Flags {
    /// A flag's current value (a manageable flag may have changed since start-up).
    pub fn current<T: FlagRepr + ?Sized>(&self, flag: Flag<T>) -> Value {
        self.live.read().unwrap_or_else(|p| p.into_inner()).values[flag.index].clone()
    }

    /// Every flag's current value and origin.
    pub fn snapshot(&self) -> Settings {
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sets a manageable flag while the VM runs, from `source` (`Management` for
    /// `VM.set_flag`, `Attach` for `jinfo -flag`), with HotSpot's checks and messages:
    /// booleans take `1`/`0`/`true`/`false`, numbers their type's syntax and range.
    pub fn set_writeable(
        &self,
        name: &str,
        value: Option<&str>,
        source: Source,
    ) -> Result<(), WriteError> {
        let index = find_index(name).ok_or_else(|| WriteError::NoSuchFlag(name.to_owned()))?;
        let info = &FLAGS[index];
        if info.kind != FlagKind::Manageable {
            return Err(WriteError::NotWriteable(name.to_owned()));
        }
        let text = value.ok_or(WriteError::MissingValue)?;
        let invalid = |what: &str| WriteError::Invalid(format!("flag value must be {what}"));
        let parsed = match info.ty {
            FlagType::Bool => match text {
                "1" | "true" => Value::Bool(true),
                "0" | "false" => Value::Bool(false),
                _ => return Err(invalid("a boolean (1/0 or true/false)")),
            },
            FlagType::Int | FlagType::Intx => {
                Value::Int(value::parse_signed(text).ok_or_else(|| invalid("an integer"))?)
            }
            FlagType::Uint | FlagType::Uintx | FlagType::Uint64 | FlagType::SizeT => Value::Uint(
                value::parse_unsigned(text).ok_or_else(|| invalid("an unsigned integer"))?,
            ),
            FlagType::Double => {
                Value::Double(value::parse_double(text).ok_or_else(|| invalid("a double"))?)
            }
            FlagType::Ccstr => Value::Str(text.to_owned().into()),
        };
        if info.check_range(&parsed).is_err() {
            let range = info
                .printed_range()
                .map(|(lo, hi)| {
                    format!(
                        "{}...{}",
                        lo.display_range_bound(),
                        hi.display_range_bound()
                    )
                })
                .unwrap_or_default();
            return Err(WriteError::Invalid(format!(
                "{name} error: must have value in range [{range}]"
            )));
        }
        let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
        live.set_value(index, parsed, Origin::from(source))
            .map_err(WriteError::Invalid)
    }
}

impl Default for Flags {
    fn default() -> Self {
        Settings::defaults().freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_well_formed() {
        let mut names: Vec<_> = FLAGS.iter().map(|f| f.name).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "duplicate flag names");
        for f in FLAGS {
            assert!(!f.doc.is_empty(), "{} has no doc", f.name);
            assert!(f
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_'));
            assert!(
                f.check_range(&f.default).is_ok(),
                "{} default out of range",
                f.name
            );
            let kind_matches = matches!(
                (&f.default, f.ty),
                (Value::Bool(_), FlagType::Bool)
                    | (Value::Int(_), FlagType::Int | FlagType::Intx)
                    | (
                        Value::Uint(_),
                        FlagType::Uint | FlagType::Uintx | FlagType::Uint64 | FlagType::SizeT
                    )
                    | (Value::Double(_), FlagType::Double)
                    | (Value::Str(_), FlagType::Ccstr)
            );
            assert!(kind_matches, "{} default has the wrong kind", f.name);
            if let Some((min, max)) = &f.range {
                assert_ne!(min.partial_cmp_num(max), Some(std::cmp::Ordering::Greater));
            }
        }
    }

    #[test]
    fn the_issue_flags_exist_with_their_kinds() {
        use FlagKind::*;
        for (name, kind, ty) in [
            ("AlwaysPreTouch", Product, FlagType::Bool),
            ("PreTouchParallelChunkSize", Product, FlagType::SizeT),
            ("ParallelGCThreads", Product, FlagType::Uint),
            ("ActiveProcessorCount", Product, FlagType::Int),
            ("InitialHeapSize", Product, FlagType::SizeT),
            ("MinHeapSize", Product, FlagType::SizeT),
            ("MaxHeapSize", Product, FlagType::SizeT),
            ("ThreadStackSize", Product, FlagType::Intx),
            ("VMThreadStackSize", Product, FlagType::Intx),
            ("UseTransparentHugePages", Product, FlagType::Bool),
            ("NativeMemoryTracking", Product, FlagType::Ccstr),
            ("PrintFlagsFinal", Product, FlagType::Bool),
            ("PrintFlagsInitial", Product, FlagType::Bool),
            ("PrintFlagsRanges", Product, FlagType::Bool),
            ("PrintCommandLineFlags", Product, FlagType::Bool),
            ("PrintVMOptions", Product, FlagType::Bool),
            ("IgnoreUnrecognizedVMOptions", Product, FlagType::Bool),
            ("UnlockDiagnosticVMOptions", Diagnostic, FlagType::Bool),
            ("UnlockExperimentalVMOptions", Experimental, FlagType::Bool),
            ("DisableTHPStackMitigation", Diagnostic, FlagType::Bool),
            ("AlwaysPreTouchStacks", Diagnostic, FlagType::Bool),
            ("UseMadvPopulateWrite", Diagnostic, FlagType::Bool),
            ("DelayThreadStartALot", Diagnostic, FlagType::Bool),
            ("PrintNMTStatistics", Diagnostic, FlagType::Bool),
            ("BackgroundPreTouch", Experimental, FlagType::Bool),
        ] {
            let f = find(name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!((f.kind, f.ty), (kind, ty), "{name}");
        }
        let chunk = flag::PreTouchParallelChunkSize.info();
        assert!(chunk.platform_dependent);
        assert_eq!(chunk.default, Value::Uint(4 << 20));
        assert_eq!(
            chunk.range,
            Some((Value::Uint(4096), Value::Uint(u64::MAX / 2)))
        );
        assert!(flag::ThreadStackSize.info().platform_dependent);
        assert!(Settings::defaults().get(flag::UseMadvPopulateWrite));
    }

    #[test]
    fn typed_access_and_origins() {
        let mut s = Settings::defaults();
        assert!(s.is_default(flag::MaxHeapSize));
        s.set(flag::MaxHeapSize, 1 << 30, Source::CommandLine)
            .unwrap();
        assert_eq!(s.get(flag::MaxHeapSize), 1 << 30);
        s.set_ergo(flag::MaxHeapSize, 1 << 29).unwrap();
        assert_eq!(
            s.origin(flag::MaxHeapSize).to_string(),
            "command line, ergonomic"
        );
        s.set_default(flag::ParallelGCThreads, 2).unwrap();
        assert!(s.is_default(flag::ParallelGCThreads));
        assert_eq!(s.get(flag::ParallelGCThreads), 2);
        assert_eq!(s.get(flag::NativeMemoryTracking), "off");
        let err = s
            .set(flag::PreTouchParallelChunkSize, 1, Source::CommandLine)
            .unwrap_err();
        assert_eq!(
            err,
            "size_t PreTouchParallelChunkSize=1 is outside the allowed range \
             [ 4096 ... 9223372036854775807 ]\n"
        );
        assert_eq!(
            s.get(flag::PreTouchParallelChunkSize),
            4 << 20,
            "unchanged on error"
        );
        let frozen = s.freeze();
        assert_eq!(frozen.get(flag::MaxHeapSize), 1 << 29);
    }

    #[test]
    fn at_parse_constraint_rejects_and_restores() {
        let mut s = Settings::defaults();
        let err = s
            .set(
                flag::NativeMemoryTracking,
                "bogus".to_string(),
                Source::CommandLine,
            )
            .unwrap_err();
        assert_eq!(
            err,
            "Syntax error, expecting -XX:NativeMemoryTracking=[off|summary|detail]"
        );
        assert_eq!(s.get(flag::NativeMemoryTracking), "off");
        s.set(
            flag::NativeMemoryTracking,
            "summary".into(),
            Source::CommandLine,
        )
        .unwrap();
        assert_eq!(s.get(flag::NativeMemoryTracking), "summary");
    }

    #[test]
    fn after_ergo_constraint() {
        let mut s = Settings::defaults();
        assert!(s.check_constraints(Phase::AfterErgo).is_ok());
        s.set(flag::BackgroundPreTouch, true, Source::CommandLine)
            .unwrap();
        let msg = s.check_constraints(Phase::AfterErgo).unwrap_err();
        assert!(msg.contains("BackgroundPreTouch"), "{msg}");
        s.set(flag::AlwaysPreTouch, true, Source::CommandLine)
            .unwrap();
        assert!(s.check_constraints(Phase::AfterErgo).is_ok());
    }
}
