//! Flag types and values, and the JVM's number syntax.
//!
//! HotSpot numbers are integers that start with a digit (a `-` is allowed for the signed
//! types), may be hexadecimal with a `0x` prefix, and may carry one binary suffix
//! `k`/`m`/`g`/`t` (either case). Anything else — spaces, a `+` sign, fractions, two
//! suffixes, overflow — is rejected. Doubles go through an ordinary float parse.

use std::borrow::Cow;
use std::fmt;

/// One kibibyte.
pub const K: u64 = 1024;
/// One mebibyte.
pub const M: u64 = K * K;
/// One gibibyte.
pub const G: u64 = M * K;
/// One tebibyte.
pub const T: u64 = G * K;

/// The declared type of a flag, named as HotSpot names it in `-XX:+PrintFlagsFinal`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FlagType {
    /// `bool`
    Bool,
    /// `int` (32-bit signed)
    Int,
    /// `uint` (32-bit unsigned)
    Uint,
    /// `intx` (pointer-sized signed)
    Intx,
    /// `uintx` (pointer-sized unsigned)
    Uintx,
    /// `uint64_t`
    Uint64,
    /// `size_t`
    SizeT,
    /// `double`
    Double,
    /// `ccstr` (a string)
    Ccstr,
}

impl FlagType {
    /// The name used in listings and in range messages (`size_t`, `intx`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            FlagType::Bool => "bool",
            FlagType::Int => "int",
            FlagType::Uint => "uint",
            FlagType::Intx => "intx",
            FlagType::Uintx => "uintx",
            FlagType::Uint64 => "uint64_t",
            FlagType::SizeT => "size_t",
            FlagType::Double => "double",
            FlagType::Ccstr => "ccstr",
        }
    }

    /// Whether values of this type are integers.
    pub const fn is_integer(self) -> bool {
        !matches!(self, FlagType::Bool | FlagType::Double | FlagType::Ccstr)
    }

    /// Whether values of this type are signed integers.
    pub const fn is_signed(self) -> bool {
        matches!(self, FlagType::Int | FlagType::Intx)
    }

    /// The range of values the type itself can hold, for numeric types.
    ///
    /// A flag with a constraint but no declared range prints this range in
    /// `-XX:+PrintFlagsRanges`, as HotSpot does.
    pub fn type_range(self) -> Option<(Value, Value)> {
        Some(match self {
            FlagType::Int => (Value::Int(i32::MIN as i64), Value::Int(i32::MAX as i64)),
            FlagType::Intx => (Value::Int(i64::MIN), Value::Int(i64::MAX)),
            FlagType::Uint => (Value::Uint(0), Value::Uint(u32::MAX as u64)),
            FlagType::Uintx | FlagType::Uint64 | FlagType::SizeT => {
                (Value::Uint(0), Value::Uint(u64::MAX))
            }
            FlagType::Double => (Value::Double(-f64::MAX), Value::Double(f64::MAX)),
            FlagType::Bool | FlagType::Ccstr => return None,
        })
    }

    /// Parses the text after `Name=` as a value of this type.
    ///
    /// Returns `None` when the text is not a well-formed value of the type (the caller
    /// reports `Improperly specified VM option`). Range checks are separate.
    pub fn parse(self, text: &str) -> Option<Value> {
        match self {
            FlagType::Bool => match text {
                "true" | "1" => Some(Value::Bool(true)),
                "false" | "0" => Some(Value::Bool(false)),
                _ => None,
            },
            // HotSpot 17 reads the magnitude as a 64-bit unsigned number, casts it to the
            // flag's width and then applies the sign: values beyond the width wrap
            // (`-XX:ActiveProcessorCount=4294967297` is 1), as `java` 17 does.
            FlagType::Int => {
                let (negative, magnitude) = signed_magnitude(text)?;
                let v = magnitude as u32 as i32;
                Some(Value::Int(i64::from(if negative {
                    v.wrapping_neg()
                } else {
                    v
                })))
            }
            FlagType::Intx => {
                let (negative, magnitude) = signed_magnitude(text)?;
                let v = magnitude as i64;
                Some(Value::Int(if negative { v.wrapping_neg() } else { v }))
            }
            FlagType::Uint => parse_unsigned(text).map(|v| Value::Uint(u64::from(v as u32))),
            FlagType::Uintx | FlagType::Uint64 | FlagType::SizeT => {
                parse_unsigned(text).map(Value::Uint)
            }
            FlagType::Double => parse_double(text).map(Value::Double),
            FlagType::Ccstr => Some(Value::Str(Cow::Owned(text.to_owned()))),
        }
    }
}

impl fmt::Display for FlagType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A flag's value. Integers of every width are held as `i64` (signed types) or `u64`
/// (unsigned types); the flag's [`FlagType`] says which width applies.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// A `bool` flag's value.
    Bool(bool),
    /// A signed integer (`int`, `intx`).
    Int(i64),
    /// An unsigned integer (`uint`, `uintx`, `uint64_t`, `size_t`).
    Uint(u64),
    /// A `double`.
    Double(f64),
    /// A `ccstr`.
    Str(Cow<'static, str>),
}

impl Value {
    /// Compares two numeric values of the same kind; `None` for mixed or non-numeric kinds.
    pub fn partial_cmp_num(&self, other: &Value) -> Option<std::cmp::Ordering> {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
            (Value::Uint(a), Value::Uint(b)) => Some(a.cmp(b)),
            (Value::Double(a), Value::Double(b)) => a.partial_cmp(b),
            _ => None,
        }
    }

    /// The value as HotSpot prints it in `-XX:+PrintFlagsFinal` and `-XX:+PrintCommandLineFlags`
    /// (doubles with six decimals, like C's `%f`).
    pub fn display(&self) -> String {
        match self {
            Value::Bool(b) => b.to_string(),
            Value::Int(v) => v.to_string(),
            Value::Uint(v) => v.to_string(),
            Value::Double(d) => format!("{d:.6}"),
            Value::Str(s) => s.to_string(),
        }
    }

    /// The value as printed inside a `-XX:+PrintFlagsRanges` bracket (doubles with three
    /// decimals).
    pub fn display_range_bound(&self) -> String {
        match self {
            Value::Double(d) => format!("{d:.3}"),
            other => other.display(),
        }
    }
}

/// Parses an unsigned JVM number: `123`, `0x7f`, `64k`, `2G`, `1t`.
///
/// ```
/// use rtvm_flags::value::parse_unsigned;
/// assert_eq!(parse_unsigned("64k"), Some(65536));
/// assert_eq!(parse_unsigned("0x10"), Some(16));
/// assert_eq!(parse_unsigned("1.5"), None);
/// assert_eq!(parse_unsigned("1kk"), None);
/// ```
pub fn parse_unsigned(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if !bytes.first()?.is_ascii_digit() {
        return None;
    }
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    let end = digits
        .char_indices()
        .find(|&(_, c)| !c.is_digit(radix))
        .map_or(digits.len(), |(i, _)| i);
    let (number, suffix) = digits.split_at(end);
    if number.is_empty() {
        return None;
    }
    let n = u64::from_str_radix(number, radix).ok()?;
    let multiplier = match suffix {
        "" => 1,
        "k" | "K" => K,
        "m" | "M" => M,
        "g" | "G" => G,
        "t" | "T" => T,
        _ => return None,
    };
    n.checked_mul(multiplier)
}

/// An optional `-` and an unsigned JVM number, as HotSpot's flag parser reads them.
fn signed_magnitude(text: &str) -> Option<(bool, u64)> {
    match text.strip_prefix('-') {
        Some(rest) => Some((true, parse_unsigned(rest)?)),
        None => Some((false, parse_unsigned(text)?)),
    }
}

/// Parses a signed JVM number: an optional `-` followed by an unsigned number.
pub fn parse_signed(text: &str) -> Option<i64> {
    match text.strip_prefix('-') {
        Some(rest) => {
            let magnitude = parse_unsigned(rest)?;
            if magnitude == i64::MIN.unsigned_abs() {
                Some(i64::MIN)
            } else {
                i64::try_from(magnitude).ok().map(|m| -m)
            }
        }
        None => i64::try_from(parse_unsigned(text)?).ok(),
    }
}

/// Parses a `double` flag value. Like `strtod` on the whole string: no leading or trailing
/// garbage, no `inf`/`nan` spelled out by a user.
pub fn parse_double(text: &str) -> Option<f64> {
    // HotSpot 17's two forms. A decimal fraction — digits (or '-'), a '.', then digits,
    // exponent characters or signs — read whole as a float ("50.5", "-1.5", "1.5e3");
    // anything else is an unsigned integer (hex and k/m/g/t allowed) made a double ("25",
    // "0x10", "1k"); ".5", "5." and "1e1" fit neither.
    let (int_part, frac) = text.split_once('.').unwrap_or((text, ""));
    let fraction_form = text.contains('.')
        && !int_part.is_empty()
        && int_part.bytes().all(|b| b.is_ascii_digit() || b == b'-')
        && !frac.is_empty()
        && frac
            .bytes()
            .all(|b| b.is_ascii_digit() || b"eE+-".contains(&b));
    if fraction_form {
        // strtod's ERANGE, which HotSpot refuses: an overflow, and an underflow — a result
        // below the smallest normal double (4.9e-324), or zero from digits that are not.
        let nonzero_digits = text
            .split(['e', 'E'])
            .next()
            .is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
        return text.parse::<f64>().ok().filter(|d| {
            d.is_finite() && !(d.abs() < f64::MIN_POSITIVE && (*d != 0.0 || nonzero_digits))
        });
    }
    parse_unsigned(text).map(|v| v as f64)
}

/// Formats a byte count the way HotSpot's `EXACTFMT` does: the largest binary unit that
/// divides it exactly (`2M`, `4K`, `1536K`, `100B`).
pub fn format_exact_size(bytes: u64) -> String {
    for (unit, suffix) in [(T, "T"), (G, "G"), (M, "M"), (K, "K")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{}", bytes / unit, suffix);
        }
    }
    format!("{bytes}B")
}

/// Formats a byte count in the largest unit that leaves at least 100 of it, truncated, as
/// HotSpot's `byte_size_in_proper_unit` does (`24105M`, `83716K`, `512M`, `0B`).
pub fn format_proper_size(bytes: u64) -> String {
    for (unit, suffix) in [(G, "G"), (M, "M"), (K, "K")] {
        if bytes >= 100 * unit {
            return format!("{}{}", bytes / unit, suffix);
        }
    }
    format!("{bytes}B")
}

/// Formats a byte count with a lowercase unit as HotSpot's page-size lists do (`4k`, `2M` →
/// `2M`): kilobytes in lowercase, larger units in uppercase.
pub fn format_page_size(bytes: u64) -> String {
    let exact = format_exact_size(bytes);
    match exact.strip_suffix('K') {
        Some(n) => format!("{n}k"),
        None => exact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proper_sizes() {
        assert_eq!(format_proper_size(0), "0B");
        assert_eq!(format_proper_size(99 * K), "101376B");
        assert_eq!(format_proper_size(83_716 * K + 5), "83716K");
        assert_eq!(format_proper_size(512 * M), "512M");
        assert_eq!(format_proper_size(24_105 * M), "24105M");
        assert_eq!(format_proper_size(100 * G), "100G");
    }

    #[test]
    fn unsigned_forms() {
        assert_eq!(parse_unsigned("0"), Some(0));
        assert_eq!(parse_unsigned("4096"), Some(4096));
        assert_eq!(parse_unsigned("4k"), Some(4096));
        assert_eq!(parse_unsigned("4K"), Some(4096));
        assert_eq!(parse_unsigned("2m"), Some(2 * M));
        assert_eq!(parse_unsigned("3G"), Some(3 * G));
        assert_eq!(parse_unsigned("1t"), Some(T));
        assert_eq!(parse_unsigned("0x400"), Some(1024));
        assert_eq!(parse_unsigned("0X1fK"), Some(31 * K));
        assert_eq!(parse_unsigned("18446744073709551615"), Some(u64::MAX));
    }

    #[test]
    fn unsigned_rejects() {
        for bad in [
            "",
            " 1",
            "+1",
            "-1",
            "1.5",
            "1kk",
            "1q",
            "abc",
            "0x",
            "0xg",
            "1 k",
            "18446744073709551616",
            "99999999999999999999",
            "16777216t",
            "k",
        ] {
            assert_eq!(parse_unsigned(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn signed_forms() {
        assert_eq!(parse_signed("-1"), Some(-1));
        assert_eq!(parse_signed("-4k"), Some(-4096));
        assert_eq!(parse_signed("9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_signed("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_signed("9223372036854775808"), None);
        assert_eq!(parse_signed("--1"), None);
        assert_eq!(parse_signed("-"), None);
    }

    #[test]
    fn typed_parse_limits_widths() {
        assert_eq!(
            FlagType::Int.parse("2147483647"),
            Some(Value::Int(i32::MAX as i64))
        );
        // HotSpot 17 casts the 64-bit magnitude to the flag's width.
        assert_eq!(
            FlagType::Int.parse("2147483648"),
            Some(Value::Int(i32::MIN as i64))
        );
        assert_eq!(
            FlagType::Int.parse("-2147483649"),
            Some(Value::Int(i32::MAX as i64))
        );
        assert_eq!(
            FlagType::Uint.parse("4294967295"),
            Some(Value::Uint(u32::MAX as u64))
        );
        assert_eq!(FlagType::Uint.parse("4294967296"), Some(Value::Uint(0)));
        assert_eq!(
            FlagType::Uint.parse("18446744073709551616"),
            None,
            "beyond 64 bits"
        );
        assert_eq!(FlagType::Uint.parse("-1"), None);
        assert_eq!(FlagType::SizeT.parse("-1"), None);
        assert_eq!(FlagType::Bool.parse("true"), Some(Value::Bool(true)));
        assert_eq!(FlagType::Bool.parse("yes"), None);
    }

    #[test]
    fn doubles() {
        assert_eq!(parse_double("25"), Some(25.0));
        assert_eq!(parse_double("0.5"), Some(0.5));
        // HotSpot 17's forms: a decimal fraction, or an unsigned integer (hex, k/m/g/t).
        assert_eq!(parse_double("1.5e3"), Some(1500.0));
        assert_eq!(parse_double("-1.5"), Some(-1.5));
        assert_eq!(parse_double("0x10"), Some(16.0));
        assert_eq!(parse_double("1k"), Some(1024.0));
        // strtod's underflow is refused, as java refuses it; the smallest normal double is not.
        assert_eq!(parse_double("4.9e-324"), None);
        assert_eq!(parse_double("1.0e-400"), None);
        assert_eq!(parse_double("0.0e-400"), Some(0.0));
        assert_eq!(
            parse_double("2.2250738585072014e-308"),
            Some(f64::MIN_POSITIVE)
        );
        for improper in ["1e3", ".5", "5.", "-1", "1.5x"] {
            assert_eq!(parse_double(improper), None, "{improper}");
        }
        assert_eq!(parse_double("abc"), None);
        assert_eq!(parse_double("inf"), None);
        assert_eq!(parse_double(""), None);
        assert_eq!(parse_double("1e999"), None);
    }

    #[test]
    fn display_forms() {
        assert_eq!(Value::Double(25.0).display(), "25.000000");
        assert_eq!(Value::Double(100.0).display_range_bound(), "100.000");
        assert_eq!(Value::Uint(4096).display(), "4096");
        assert_eq!(Value::Int(-1).display(), "-1");
        assert_eq!(format_exact_size(2 * M), "2M");
        assert_eq!(format_exact_size(1536 * K), "1536K");
        assert_eq!(format_exact_size(6028 * M), "6028M");
        assert_eq!(format_exact_size(100), "100B");
        assert_eq!(format_page_size(4096), "4k");
        assert_eq!(format_page_size(2 * M), "2M");
    }
}
