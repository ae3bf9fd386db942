//! Tokenizers for the three places options come from besides the command line: an
//! environment variable, a `-XX:VMOptionsFile=` file and a `-XX:Flags=` settings file.

use crate::error::ArgError;

/// Splits an options string (an environment variable or a `-XX:VMOptionsFile`) into
/// options: whitespace separates them, and `'...'` or `"..."` groups characters — spaces
/// included — into one option; the quotes themselves are dropped. `origin` names the string
/// in the error HotSpot gives for an unmatched quote.
pub fn tokenize_options(text: &str, origin: &str) -> Result<Vec<String>, ArgError> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut in_token = false;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_token = true;
            }
            None if c.is_whitespace() => {
                if in_token {
                    tokens.push(std::mem::take(&mut current));
                    in_token = false;
                }
            }
            None => {
                current.push(c);
                in_token = true;
            }
        }
    }
    if quote.is_some() {
        return Err(ArgError::file(format!("Unmatched quote in {origin}\n")));
    }
    if in_token {
        tokens.push(current);
    }
    Ok(tokens)
}

/// Splits a `-XX:Flags=` settings file into its bare flag settings (`+AlwaysPreTouch`,
/// `MaxHeapSize=1g`). A `#` where a token would start comments out the rest of the line;
/// quotes group characters within a line; a line break always ends a token.
pub fn tokenize_settings(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    for line in text.lines() {
        let mut current = String::new();
        let mut in_token = false;
        let mut quote: Option<char> = None;
        for c in line.chars() {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => current.push(c),
                None if !in_token && c == '#' => break,
                None if c == '\'' || c == '"' => {
                    quote = Some(c);
                    in_token = true;
                }
                None if c.is_whitespace() => {
                    if in_token {
                        tokens.push(std::mem::take(&mut current));
                        in_token = false;
                    }
                }
                None => {
                    current.push(c);
                    in_token = true;
                }
            }
        }
        if in_token {
            tokens.push(current);
        }
    }
    tokens
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

    #[test]
    fn settings_comments_and_lines() {
        let t = tokenize_settings(
            "+AlwaysPreTouch # trailing\n# whole line\nMaxHeapSize=1g\n\"a b\nc\"\n",
        );
        assert_eq!(t, ["+AlwaysPreTouch", "MaxHeapSize=1g", "a b", "c"]);
        assert_eq!(tokenize_settings("x#y"), ["x#y"]);
    }
}
