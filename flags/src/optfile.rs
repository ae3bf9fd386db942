//! Tokenizers for the three places options come from besides the command line: an
//! environment variable, a `-XX:VMOptionsFile=` file and a `-XX:Flags=` settings file.

use std::io::Read as _;

use crate::error::ArgError;

/// The most a `-XX:Flags=` settings file is read: it is read to its end like HotSpot's, but a
/// device (`/dev/zero`) never ends.
pub const SETTINGS_FILE_LIMIT: u64 = 1 << 20;

/// HotSpot's settings-file token buffer: a longer token is cut into pieces of this size.
const SETTINGS_TOKEN_MAX: usize = 1023;

fn lossy(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Reads a `-XX:VMOptionsFile` as HotSpot does: as many bytes as `stat` says it has (a device
/// or a FIFO has none: no options), never more. Bytes that are not UTF-8 become U+FFFD, so
/// an option with bad bytes earns the message its text earns.
pub fn read_options_file(path: &str) -> Result<String, ArgError> {
    let mut file = std::fs::File::open(path)
        .map_err(|_| ArgError::file(format!("Could not open options file '{path}'\n")))?;
    let size = file
        .metadata()
        .map_err(|_| ArgError::file(format!("Could not stat options file '{path}'\n")))?
        .len();
    let mut bytes = Vec::new();
    if bytes
        .try_reserve(usize::try_from(size).unwrap_or(usize::MAX))
        .is_err()
    {
        return Err(ArgError::file(
            "Could not allocate read buffer for options file parse\n",
        ));
    }
    file.by_ref()
        .take(size)
        .read_to_end(&mut bytes)
        .map_err(|_| ArgError::file(format!("Could not read options file '{path}'\n")))?;
    Ok(lossy(bytes))
}

/// Reads a `-XX:Flags=` settings file: to its end, as HotSpot does, but at most
/// [`SETTINGS_FILE_LIMIT`] bytes; a read error (a directory) ends it like an end of file.
pub fn read_settings_file(path: &str) -> Result<String, ArgError> {
    let file = std::fs::File::open(path)
        .map_err(|_| ArgError::file(format!("Could not open settings file {path}\n")))?;
    let mut bytes = Vec::new();
    let _ = file.take(SETTINGS_FILE_LIMIT).read_to_end(&mut bytes);
    Ok(lossy(bytes))
}

/// The two option syntaxes HotSpot reads outside the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Syntax {
    /// An environment variable or a `-XX:VMOptionsFile`: whitespace separates options;
    /// `'...'` and `"..."` group characters, spaces and line breaks included, anywhere in an
    /// option, and are dropped; an unmatched quote is an error.
    Options,
    /// A `-XX:Flags=` settings file, read as HotSpot reads it: a token's first character is
    /// kept as it is (a quote too); after it a quote opens or closes a group (dropped) in
    /// which spaces are kept; a line break always ends a token; `#` where a token would start
    /// comments out the rest of the line; a token is a C string (a NUL ends it); and reading
    /// stops once a token reaches 1023 characters.
    Settings,
}

/// The one tokenizer behind both syntaxes; `Err(())` for an unmatched quote (options only).
fn tokenize(text: &str, syntax: Syntax) -> Result<Vec<String>, ()> {
    let settings = syntax == Syntax::Settings;
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut in_token = false;
    let mut in_comment = false;
    let mut quote: Option<char> = None;
    let finish = |current: &mut String, tokens: &mut Vec<String>| {
        let t = std::mem::take(current);
        // A settings-file token is handed on as a C string.
        let t = if settings {
            t.split('\0').next().unwrap_or("").to_owned()
        } else {
            t
        };
        tokens.push(t);
    };
    for c in text.chars() {
        if settings && in_token && current.chars().count() >= SETTINGS_TOKEN_MAX {
            // HotSpot's token buffer is full: it processes this token and reads no further.
            finish(&mut current, &mut tokens);
            return Ok(tokens);
        }
        if !in_token {
            if in_comment {
                in_comment = c != '\n';
                continue;
            }
            if settings && c == '#' {
                in_comment = true;
                continue;
            }
            if c.is_whitespace() {
                continue;
            }
            in_token = true;
            if settings {
                current.push(c);
                continue;
            }
        }
        let ends_token = if settings {
            c == '\n' || (quote.is_none() && c.is_whitespace())
        } else {
            quote.is_none() && c.is_whitespace()
        };
        match quote {
            _ if ends_token => {
                finish(&mut current, &mut tokens);
                in_token = false;
                quote = None;
            }
            None if c == '\'' || c == '"' => quote = Some(c),
            Some(q) if c == q => quote = None,
            _ => current.push(c),
        }
    }
    if quote.is_some() && !settings {
        return Err(());
    }
    if in_token {
        finish(&mut current, &mut tokens);
    }
    Ok(tokens)
}

/// Splits an options string (an environment variable or a `-XX:VMOptionsFile`) into
/// options: whitespace separates them, and `'...'` or `"..."` groups characters — spaces
/// included — into one option; the quotes themselves are dropped. `origin` names the string
/// in the error HotSpot gives for an unmatched quote.
pub fn tokenize_options(text: &str, origin: &str) -> Result<Vec<String>, ArgError> {
    tokenize(text, Syntax::Options)
        .map_err(|()| ArgError::file(format!("Unmatched quote in {origin}\n")))
}

/// Splits a `-XX:Flags=` settings file into its bare flag settings (`+AlwaysPreTouch`,
/// `MaxHeapSize=1g`), with HotSpot's rules for quotes, comments and long tokens: a token's
/// first character is kept as it is (a quote too); after it a quote opens or closes a group
/// (dropped) in which spaces are kept; a line break always ends a token; `#` where a token
/// would start comments out the rest of the line; a NUL ends a token; and reading stops once
/// a token reaches 1023 characters.
pub fn tokenize_settings(text: &str) -> Vec<String> {
    tokenize(text, Syntax::Settings).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_split_and_quote() {
        let t = tokenize_options("  -Xmx64m \"-XX:Foo=a b\" 'x\"y'  -Dq=\"1 2\"", "T").unwrap();
        assert_eq!(t, ["-Xmx64m", "-XX:Foo=a b", "x\"y", "-Dq=1 2"]);
        assert_eq!(tokenize_options("", "T").unwrap(), Vec::<String>::new());
        assert_eq!(tokenize_options("\"\"", "T").unwrap(), [""]);
        assert_eq!(
            tokenize_options("# not a comment", "T").unwrap(),
            ["#", "not", "a", "comment"]
        );
    }

    #[test]
    fn unmatched_quote() {
        let e = tokenize_options("\"-Xmx16m", "RTVM_OPTIONS").unwrap_err();
        assert_eq!(e.message, "Unmatched quote in RTVM_OPTIONS\n");
    }

    /// What `java` 17 made of each line as a `-XX:Flags=` file (from its messages).
    #[test]
    fn settings_as_hotspot_reads_them() {
        for (text, tokens) in [
            ("\"+AlwaysPreTouch\"\n", &["\"+AlwaysPreTouch"][..]),
            ("'+AlwaysPreTouch'\n", &["'+AlwaysPreTouch"][..]),
            ("+Always\"PreTouch\"\n", &["+AlwaysPreTouch"][..]),
            ("MaxHeapSize=\"64m\"\n", &["MaxHeapSize=64m"][..]),
            (
                "\"MaxHeapSize=64m\" +AlwaysPreTouch\n",
                &["\"MaxHeapSize=64m +AlwaysPreTouch"][..],
            ),
            ("+AlwaysPreTouch#x\n", &["+AlwaysPreTouch#x"][..]),
            ("MaxHeapSize=64m #c +Foo\n", &["MaxHeapSize=64m"][..]),
            ("\"a b\"\n", &["\"a", "b"][..]),
            ("x\"a b\"y\n", &["xa by"][..]),
            (
                "+AlwaysPreTouch # trailing\n# whole line\nMaxHeapSize=1g\n",
                &["+AlwaysPreTouch", "MaxHeapSize=1g"][..],
            ),
        ] {
            assert_eq!(tokenize_settings(text), tokens, "{text:?}");
        }
        // /dev/zero: a token of NULs fills the buffer; it is the empty C string, and the end.
        assert_eq!(tokenize_settings(&"\0".repeat(5000)), [""]);
        let long = format!("+{} +AlwaysPreTouch", "x".repeat(2000));
        assert_eq!(
            tokenize_settings(&long).len(),
            1,
            "reading stops at a 1023-character token"
        );
    }
}
