//! The fields of an `-Xlog` option and the output it names, on the option's bytes: a file
//! name is used as given, bytes that are not UTF-8 included (the VM's messages show such
//! bytes as U+FFFD).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// An option's fields, and what followed a fourth colon.
pub(super) type Fields<'a> = (Vec<&'a [u8]>, Option<&'a [u8]>);

/// Splits the text after `-Xlog:` at colons outside quotes into at most four fields; returns
/// the rest after a fourth colon as "excess".
pub(super) fn split_fields(rest: &[u8]) -> Result<Fields<'_>, String> {
    let mut fields = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i <= rest.len() {
        if fields.len() == 4 {
            return Ok((fields, Some(&rest[start..])));
        }
        match rest.get(i) {
            Some(b'"') => match rest[i + 1..].iter().position(|&b| b == b'"') {
                Some(end) => i += end + 2,
                None => {
                    return Err(format!(
                        "Missing terminating quote in -Xlog option '{}'",
                        String::from_utf8_lossy(&rest[start..])
                    ))
                }
            },
            Some(b':') => {
                fields.push(&rest[start..i]);
                start = i + 1;
                i += 1;
            }
            Some(_) => i += 1,
            None => {
                fields.push(&rest[start..]);
                break;
            }
        }
    }
    Ok((fields, None))
}

/// The output an output field names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum OutputName {
    /// `stdout`, `stderr`, or an existing output named by its index (`#2`).
    Named(String),
    /// `file=<name>`: the name's bytes as given.
    File(Vec<u8>),
}

impl OutputName {
    /// The output's name as the configuration lists it (`file=gc.log`).
    pub(super) fn display(&self) -> String {
        match self {
            OutputName::Named(n) => n.clone(),
            OutputName::File(f) => format!("file={}", String::from_utf8_lossy(f)),
        }
    }
}

/// The output an output field names: `stdout`, `stderr`, `#<index>` of an output that
/// exists (`names`, in order), or `file=<name>` (a bare name is a file; quotes around the
/// whole name are removed).
pub(super) fn output_name(field: &[u8], names: &[String]) -> Result<OutputName, String> {
    match field {
        b"" | b"stdout" => return Ok(OutputName::Named("stdout".into())),
        b"stderr" => return Ok(OutputName::Named("stderr".into())),
        _ => {}
    }
    if let Some(index) = field.strip_prefix(b"#") {
        let n = std::str::from_utf8(index)
            .ok()
            .filter(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|i| i.parse::<usize>().ok());
        return match n.and_then(|n| names.get(n)) {
            Some(name) => Ok(OutputName::Named(name.clone())),
            None => Err(format!(
                "Invalid output index '{}'",
                String::from_utf8_lossy(field)
            )),
        };
    }
    let quote = field.iter().position(|&b| b == b'"');
    let equals = field
        .iter()
        .position(|&b| b == b'=')
        .filter(|&e| quote.is_none_or(|q| e < q));
    let (prefix, name) = match equals {
        Some(e) => field.split_at(e + 1),
        None => (&b"file="[..], field),
    };
    let name = match quote {
        None => name,
        Some(_) => {
            let inner = name.strip_prefix(b"\"").and_then(|n| n.strip_suffix(b"\""));
            match inner {
                Some(inner) if !inner.contains(&b'"') => inner,
                _ if name.iter().filter(|&&b| b == b'"').count() == 1 => {
                    return Err(
                        "Output name has opening quote but is missing a terminating quote.".into(),
                    )
                }
                _ => return Err(
                    "Output name can not be partially quoted. Either surround the whole name with quotation marks, or do not use quotation marks at all."
                        .into(),
                ),
            }
        }
    };
    if prefix != b"file=" {
        return Err(format!(
            "Unsupported log output type: {}{}",
            String::from_utf8_lossy(prefix),
            String::from_utf8_lossy(name)
        ));
    }
    Ok(OutputName::File(name.to_vec()))
}

/// `bytes` with every `from` replaced by `to`.
pub(super) fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// A file name's bytes as a path.
pub(super) fn path_of(name: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(field: &str) -> Result<String, String> {
        output_name(
            field.as_bytes(),
            &["stdout".into(), "stderr".into(), "file=a.log".into()],
        )
        .map(|n| n.display())
    }

    #[test]
    fn output_names() {
        assert_eq!(name("").unwrap(), "stdout");
        assert_eq!(
            name("STDOUT").unwrap(),
            "file=STDOUT",
            "names are case-sensitive"
        );
        assert_eq!(name("\"stdout\"").unwrap(), "file=stdout");
        assert_eq!(name("\"file=x.log\"").unwrap(), "file=file=x.log");
        assert_eq!(name("file=\"a b.log\"").unwrap(), "file=a b.log");
        assert_eq!(name("#0").unwrap(), "stdout");
        assert_eq!(name("#1").unwrap(), "stderr");
        assert_eq!(name("#2").unwrap(), "file=a.log");
        for bad in ["#3", "#x", "#", "#-1", "#+1"] {
            assert_eq!(
                name(bad).unwrap_err(),
                format!("Invalid output index '{bad}'")
            );
        }
        let raw = output_name(b"file=a\xffb.log", &[]).unwrap();
        assert_eq!(raw, OutputName::File(b"a\xffb.log".to_vec()));
        assert_eq!(raw.display(), "file=a\u{fffd}b.log");
    }

    #[test]
    fn fields() {
        let (f, excess) = split_fields(b"gc:file=\"a:b\"::filecount=0:x").unwrap();
        assert_eq!(f, [&b"gc"[..], b"file=\"a:b\"", b"", b"filecount=0"]);
        assert_eq!(excess, Some(&b"x"[..]));
        assert_eq!(replace(b"a%pb%p", b"%p", b"12"), b"a12b12");
    }
}
