//! jtreg's expression language, used by `@requires` and by `-k:` keyword selection.
//!
//! Precedence, lowest first: `|`, `&`, `== != ~=`, `< <= > >=`, `+ -`, `* / %`, unary
//! `! -`. Operands: numbers (with an optional `K`, `M` or `G` suffix, binary), `"strings"`,
//! `true`/`false`, `null` (the value of an unset `vm.opt.X`), and names whose value comes from the environment of the evaluation (test
//! properties, or keyword presence). `~=` matches a whole string against a regular
//! expression.

use std::fmt;

use regex::Regex;

/// A parse or evaluation error, with a message naming what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprError(pub String);

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Num(i64),
    Str(String),
    Name(String),
    Op(&'static str),
    LParen,
    RParen,
}

fn tokenize(src: &str) -> Result<Vec<Token>, ExprError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let digits: String = chars[start..i].iter().collect();
            let mut n: i64 = digits
                .parse()
                .map_err(|_| ExprError(format!("number too large: {digits}")))?;
            if let Some(&s) = chars.get(i) {
                let mult = match s {
                    'k' | 'K' => Some(1i64 << 10),
                    'm' | 'M' => Some(1 << 20),
                    'g' | 'G' => Some(1 << 30),
                    _ => None,
                };
                if let Some(m) = mult {
                    n = n
                        .checked_mul(m)
                        .ok_or_else(|| ExprError(format!("number too large: {digits}{s}")))?;
                    i += 1;
                }
            }
            if chars
                .get(i)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_')
            {
                return Err(ExprError(format!(
                    "invalid number at '{}'",
                    chars[start..].iter().take(12).collect::<String>()
                )));
            }
            out.push(Token::Num(n));
            continue;
        }
        if c == '"' {
            let start = i + 1;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            if i >= chars.len() {
                return Err(ExprError(format!("unterminated string in '{src}'")));
            }
            out.push(Token::Str(chars[start..i].iter().collect()));
            i += 1;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '.' | ':' | '$'))
            {
                i += 1;
            }
            out.push(Token::Name(chars[start..i].iter().collect()));
            continue;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let op = match two.as_str() {
            "==" | "!=" | "~=" | "<=" | ">=" => Some(two.as_str()),
            _ => None,
        };
        if let Some(op) = op {
            let op: &'static str = match op {
                "==" => "==",
                "!=" => "!=",
                "~=" => "~=",
                "<=" => "<=",
                _ => ">=",
            };
            out.push(Token::Op(op));
            i += 2;
            continue;
        }
        let tok = match c {
            '(' => Token::LParen,
            ')' => Token::RParen,
            '!' => Token::Op("!"),
            '&' => Token::Op("&"),
            '|' => Token::Op("|"),
            '<' => Token::Op("<"),
            '>' => Token::Op(">"),
            '+' => Token::Op("+"),
            '-' => Token::Op("-"),
            '*' => Token::Op("*"),
            '/' => Token::Op("/"),
            '%' => Token::Op("%"),
            other => {
                return Err(ExprError(format!(
                    "unexpected character '{other}' in '{src}'"
                )))
            }
        };
        out.push(tok);
        i += 1;
    }
    Ok(out)
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A number.
    Num(i64),
    /// A string literal.
    Str(String),
    /// `true` or `false`.
    Bool(bool),
    /// A name to look up.
    Name(String),
    /// A unary operator.
    Unary(&'static str, Box<Expr>),
    /// A binary operator.
    Binary(&'static str, Box<Expr>, Box<Expr>),
}

const LEVELS: [&[&str]; 5] = [
    &["|"],
    &["&"],
    &["==", "!=", "~="],
    &["<", "<=", ">", ">="],
    &["+", "-"],
];

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn binary(&mut self, level: usize) -> Result<Expr, ExprError> {
        if level == LEVELS.len() {
            return self.product();
        }
        let mut left = self.binary(level + 1)?;
        while let Some(Token::Op(op)) = self.tokens.get(self.pos) {
            if !LEVELS[level].contains(op) {
                break;
            }
            let op = *op;
            self.pos += 1;
            let right = self.binary(level + 1)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.unary()?;
        while let Some(Token::Op(op @ ("*" | "/" | "%"))) = self.tokens.get(self.pos) {
            let op = *op;
            self.pos += 1;
            let right = self.unary()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        self.depth += 1;
        if self.depth > 200 {
            return Err(ExprError("expression nested too deeply".into()));
        }
        let r = match self.tokens.get(self.pos).cloned() {
            Some(Token::Op(op @ ("!" | "-"))) => {
                self.pos += 1;
                Ok(Expr::Unary(op, Box::new(self.unary()?)))
            }
            Some(Token::LParen) => {
                self.pos += 1;
                let e = self.binary(0)?;
                if self.tokens.get(self.pos) != Some(&Token::RParen) {
                    return Err(ExprError("missing ')'".into()));
                }
                self.pos += 1;
                Ok(e)
            }
            Some(Token::Num(n)) => {
                self.pos += 1;
                Ok(Expr::Num(n))
            }
            Some(Token::Str(s)) => {
                self.pos += 1;
                Ok(Expr::Str(s))
            }
            Some(Token::Name(n)) => {
                self.pos += 1;
                Ok(match n.as_str() {
                    "true" => Expr::Bool(true),
                    "false" => Expr::Bool(false),
                    // The value VMProps gives an unset `vm.opt.X`.
                    "null" => Expr::Str("null".into()),
                    _ => Expr::Name(n),
                })
            }
            Some(t) => Err(ExprError(format!("unexpected {}", describe(&t)))),
            None => Err(ExprError("unexpected end of expression".into())),
        };
        self.depth -= 1;
        r
    }
}

fn describe(t: &Token) -> String {
    match t {
        Token::Num(n) => format!("number {n}"),
        Token::Str(s) => format!("string \"{s}\""),
        Token::Name(n) => format!("name {n}"),
        Token::Op(o) => format!("operator '{o}'"),
        Token::LParen => "'('".into(),
        Token::RParen => "')'".into(),
    }
}

impl Expr {
    /// Parses an expression.
    pub fn parse(src: &str) -> Result<Expr, ExprError> {
        let tokens = tokenize(src)?;
        if tokens.is_empty() {
            return Err(ExprError("empty expression".into()));
        }
        let mut p = Parser {
            tokens,
            pos: 0,
            depth: 0,
        };
        let e = p.binary(0)?;
        if p.pos != p.tokens.len() {
            return Err(ExprError(format!(
                "unexpected {} in '{src}'",
                describe(&p.tokens[p.pos])
            )));
        }
        Ok(e)
    }

    /// Every name the expression refers to.
    pub fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_names(&mut out);
        out
    }

    fn collect_names<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Name(n) => out.push(n),
            Expr::Unary(_, e) => e.collect_names(out),
            Expr::Binary(_, a, b) => {
                a.collect_names(out);
                b.collect_names(out);
            }
            _ => {}
        }
    }

    /// Evaluates to a boolean; `lookup` gives each name's value (`None`: unknown name).
    pub fn eval_bool(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<bool, ExprError> {
        match self.eval(lookup)? {
            Val::Bool(b) => Ok(b),
            other => Err(ExprError(format!(
                "expression does not yield true or false but {other}"
            ))),
        }
    }

    fn eval(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Val, ExprError> {
        Ok(match self {
            Expr::Num(n) => Val::Num(*n),
            Expr::Str(s) => Val::Str(s.clone()),
            Expr::Bool(b) => Val::Bool(*b),
            Expr::Name(n) => {
                let v = lookup(n).ok_or_else(|| ExprError(format!("invalid name: {n}")))?;
                Val::from_property(v)
            }
            Expr::Unary("!", e) => Val::Bool(!e.eval(lookup)?.as_bool("!")?),
            Expr::Unary(_, e) => Val::Num(
                e.eval(lookup)?
                    .as_num("-")?
                    .checked_neg()
                    .ok_or_else(overflow)?,
            ),
            Expr::Binary(op, a, b) => {
                let (a, b) = (a.eval(lookup)?, b.eval(lookup)?);
                match *op {
                    "|" => Val::Bool(a.as_bool(op)? | b.as_bool(op)?),
                    "&" => Val::Bool(a.as_bool(op)? & b.as_bool(op)?),
                    "==" => Val::Bool(a.equals(&b)),
                    "!=" => Val::Bool(!a.equals(&b)),
                    "~=" => {
                        let pattern = b.as_text();
                        // jtreg's `~=` is Java's String.matches: the whole text.
                        let re = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                            ExprError(format!("invalid regular expression '{pattern}': {e}"))
                        })?;
                        Val::Bool(re.is_match(&a.as_text()))
                    }
                    "<" => Val::Bool(a.as_num(op)? < b.as_num(op)?),
                    "<=" => Val::Bool(a.as_num(op)? <= b.as_num(op)?),
                    ">" => Val::Bool(a.as_num(op)? > b.as_num(op)?),
                    ">=" => Val::Bool(a.as_num(op)? >= b.as_num(op)?),
                    "+" => Val::Num(
                        a.as_num(op)?
                            .checked_add(b.as_num(op)?)
                            .ok_or_else(overflow)?,
                    ),
                    "-" => Val::Num(
                        a.as_num(op)?
                            .checked_sub(b.as_num(op)?)
                            .ok_or_else(overflow)?,
                    ),
                    "*" => Val::Num(
                        a.as_num(op)?
                            .checked_mul(b.as_num(op)?)
                            .ok_or_else(overflow)?,
                    ),
                    "/" | "%" => {
                        let (x, y) = (a.as_num(op)?, b.as_num(op)?);
                        if y == 0 {
                            return Err(ExprError("division by zero".into()));
                        }
                        Val::Num(
                            if *op == "/" {
                                x.checked_div(y)
                            } else {
                                x.checked_rem(y)
                            }
                            .ok_or_else(overflow)?,
                        )
                    }
                    other => unreachable!("operator {other}"),
                }
            }
        })
    }
}

fn overflow() -> ExprError {
    ExprError("arithmetic overflow".into())
}

#[derive(Clone, Debug, PartialEq)]
enum Val {
    Bool(bool),
    Num(i64),
    Str(String),
}

impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::Bool(b) => write!(f, "{b}"),
            Val::Num(n) => write!(f, "{n}"),
            Val::Str(s) => write!(f, "\"{s}\""),
        }
    }
}

impl Val {
    fn from_property(v: String) -> Val {
        match v.as_str() {
            "true" => Val::Bool(true),
            "false" => Val::Bool(false),
            _ => Val::Str(v),
        }
    }

    fn as_text(&self) -> String {
        match self {
            Val::Str(s) => s.clone(),
            other => other.to_string(),
        }
    }

    fn as_bool(&self, op: &str) -> Result<bool, ExprError> {
        match self {
            Val::Bool(b) => Ok(*b),
            other => Err(ExprError(format!(
                "operator '{op}' needs true or false, not {other}"
            ))),
        }
    }

    fn as_num(&self, op: &str) -> Result<i64, ExprError> {
        match self {
            Val::Num(n) => Ok(*n),
            Val::Str(s) => parse_number(s)
                .ok_or_else(|| ExprError(format!("operator '{op}' needs a number, not \"{s}\""))),
            Val::Bool(b) => Err(ExprError(format!(
                "operator '{op}' needs a number, not {b}"
            ))),
        }
    }

    fn equals(&self, other: &Val) -> bool {
        match (self, other) {
            (Val::Bool(a), Val::Bool(b)) => a == b,
            (a, b) => match (a.as_num("=="), b.as_num("==")) {
                (Ok(x), Ok(y)) => x == y,
                _ => a.as_text() == b.as_text(),
            },
        }
    }
}

fn parse_number(s: &str) -> Option<i64> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1i64 << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<i64>().ok()?.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(src: &str) -> Result<bool, ExprError> {
        let props = |n: &str| -> Option<String> {
            Some(
                match n {
                    "os.family" => "linux",
                    "os.arch" => "amd64",
                    "os.processors" => "2",
                    "os.maxMemory" => "25283264512",
                    "thp.mode" => "madvise",
                    "vm.flagless" => "true",
                    "vm.opt.AlwaysPreTouch" => "null",
                    _ => return None,
                }
                .to_owned(),
            )
        };
        Expr::parse(src)?.eval_bool(&props)
    }

    #[test]
    fn comparisons_and_logic() {
        assert_eq!(eval(r#"os.family == "linux""#), Ok(true));
        assert_eq!(eval(r#"os.family != "linux""#), Ok(false));
        assert_eq!(
            eval(r#"os.arch=="amd64" | os.arch=="x86_64" | os.arch=="aarch64""#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"thp.mode == "always" | thp.mode == "madvise""#),
            Ok(true)
        );
        assert_eq!(eval("vm.flagless"), Ok(true));
        assert_eq!(eval("!vm.flagless"), Ok(false));
        assert_eq!(
            eval(r#"vm.opt.AlwaysPreTouch == null | vm.opt.AlwaysPreTouch == false"#),
            Ok(true)
        );
        assert_eq!(eval(r#"vm.opt.AlwaysPreTouch == "null""#), Ok(true));
    }

    #[test]
    fn precedence() {
        // & binds tighter than |
        assert_eq!(eval("true | false & false"), Ok(true));
        assert_eq!(eval("(true | false) & false"), Ok(false));
        // == binds looser than +, which is looser than *
        assert_eq!(eval("1 + 2 * 3 == 7"), Ok(true));
        assert_eq!(eval("(1 + 2) * 3 == 9"), Ok(true));
        assert_eq!(eval("10 - 4 - 3 == 3"), Ok(true), "left associative");
        assert_eq!(eval("7 % 4 == 3 & 8 / 3 == 2"), Ok(true));
        // relational binds tighter than ==
        assert_eq!(eval("1 < 2 == true"), Ok(true));
        assert_eq!(eval("!false & -1 < 0"), Ok(true));
    }

    #[test]
    fn numbers_with_units() {
        assert_eq!(eval("os.maxMemory > 2G"), Ok(true));
        assert_eq!(eval("os.maxMemory > 64G"), Ok(false));
        assert_eq!(eval("os.processors >= 2"), Ok(true));
        assert_eq!(
            eval("1K == 1024 & 1M == 1048576 & 1g == 1073741824"),
            Ok(true)
        );
        assert_eq!(
            eval(r#""4k" == 4096"#),
            Ok(true),
            "numeric strings compare as numbers"
        );
    }

    #[test]
    fn regex_match() {
        assert_eq!(eval(r#"os.arch ~= "amd64|x86_64""#), Ok(true));
        assert_eq!(eval(r#"os.arch ~= "x86.*""#), Ok(false));
        assert_eq!(eval(r#"thp.mode ~= "mad.*se""#), Ok(true));
        assert!(eval(r#"os.arch ~= "(""#)
            .unwrap_err()
            .0
            .contains("invalid regular expression"));
    }

    #[test]
    fn errors() {
        for (src, want) in [
            ("", "empty expression"),
            ("os.family ==", "unexpected end of expression"),
            ("(true", "missing ')'"),
            ("true)", "unexpected ')'"),
            ("foo.bar", "invalid name: foo.bar"),
            ("1 + 1", "does not yield true or false"),
            ("1 / 0 == 1", "division by zero"),
            ("os.family < 3", "needs a number"),
            ("1 & true", "needs true or false"),
            ("\"abc", "unterminated string"),
            ("a # b", "unexpected character '#'"),
            ("99999999999999999999 > 1", "number too large"),
            ("9223372036854775807 + 1 > 0", "arithmetic overflow"),
            ("12abc > 1", "invalid number"),
            ("== 1", "unexpected operator '=='"),
        ] {
            let e = eval(src).expect_err(src);
            assert!(e.0.contains(want), "{src:?}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = format!("{}true{}", "(".repeat(500), ")".repeat(500));
        assert!(eval(&src).is_err());
        let src = format!("{}true", "!".repeat(500));
        assert!(eval(&src).is_err());
    }

    #[test]
    fn names_are_listed() {
        let e = Expr::parse(r#"os.family == "linux" & (thp.mode != "never" | thp.mthp.always)"#)
            .unwrap();
        assert_eq!(e.names(), ["os.family", "thp.mode", "thp.mthp.always"]);
    }
}
