//! A small backtracking regular-expression matcher for `@requires` `~=`, which (like Java's
//! `String.matches`) must match the whole string.
//!
//! Supported: literals, `.`, classes `[a-z0-9_]` and `[^...]`, escapes `\d \w \s \D \W \S`
//! and escaped metacharacters, groups `( )` with alternation `|`, quantifiers `* + ?
//! {m} {m,} {m,n}` (greedy), and `^`/`$` at the ends.

use std::fmt;

/// A regex syntax error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegexError(pub String);

impl fmt::Display for RegexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Debug)]
enum ClassItem {
    Char(char),
    Range(char, char),
    Digit(bool),
    Word(bool),
    Space(bool),
}

impl ClassItem {
    fn matches(&self, c: char) -> bool {
        match *self {
            ClassItem::Char(x) => c == x,
            ClassItem::Range(a, b) => a <= c && c <= b,
            ClassItem::Digit(neg) => c.is_ascii_digit() != neg,
            ClassItem::Word(neg) => (c.is_ascii_alphanumeric() || c == '_') != neg,
            ClassItem::Space(neg) => c.is_whitespace() != neg,
        }
    }
}

#[derive(Clone, Debug)]
enum Node {
    Any,
    Class {
        items: Vec<ClassItem>,
        negated: bool,
    },
    Group(Vec<Vec<Node>>),
    Repeat {
        node: Box<Node>,
        min: usize,
        max: Option<usize>,
    },
}

/// A compiled pattern.
#[derive(Clone, Debug)]
pub struct Regex {
    alternatives: Vec<Vec<Node>>,
}

const MAX_REPEAT: usize = 1000;

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    source: &'a str,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> RegexError {
        RegexError(format!(
            "invalid regular expression '{}': {what} at index {}",
            self.source, self.pos
        ))
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn alternatives(&mut self, depth: usize) -> Result<Vec<Vec<Node>>, RegexError> {
        if depth > 64 {
            return Err(self.err("groups nested too deeply"));
        }
        let mut alts = vec![self.sequence(depth)?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alts.push(self.sequence(depth)?);
        }
        Ok(alts)
    }

    fn sequence(&mut self, depth: usize) -> Result<Vec<Node>, RegexError> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            self.pos += 1;
            let atom = match c {
                '.' => Node::Any,
                '^' if seq.is_empty() && depth == 0 => continue,
                '$' if depth == 0 && self.pos == self.chars.len() => continue,
                '(' => {
                    if self.chars.get(self.pos..self.pos + 2) == Some(&['?', ':']) {
                        self.pos += 2;
                    }
                    let alts = self.alternatives(depth + 1)?;
                    if self.peek() != Some(')') {
                        return Err(self.err("unclosed group"));
                    }
                    self.pos += 1;
                    Node::Group(alts)
                }
                '[' => self.class()?,
                '\\' => {
                    let e = self.peek().ok_or_else(|| self.err("trailing backslash"))?;
                    self.pos += 1;
                    Node::Class {
                        items: vec![escape(e)],
                        negated: false,
                    }
                }
                '*' | '+' | '?' | '{' => return Err(self.err("quantifier without an operand")),
                c => Node::Class {
                    items: vec![ClassItem::Char(c)],
                    negated: false,
                },
            };
            seq.push(self.quantified(atom)?);
        }
        Ok(seq)
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, RegexError> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                let close = self.chars[self.pos..]
                    .iter()
                    .position(|&c| c == '}')
                    .ok_or_else(|| self.err("unclosed {"))?;
                let body: String = self.chars[self.pos + 1..self.pos + close].iter().collect();
                let num = |s: &str| s.trim().parse::<usize>().ok().filter(|&n| n <= MAX_REPEAT);
                let (min, max) = match body.split_once(',') {
                    None => {
                        let n = num(&body).ok_or_else(|| self.err("bad repetition"))?;
                        (n, Some(n))
                    }
                    Some((a, "")) => (num(a).ok_or_else(|| self.err("bad repetition"))?, None),
                    Some((a, b)) => {
                        let (a, b) = (num(a), num(b));
                        match (a, b) {
                            (Some(a), Some(b)) if a <= b => (a, Some(b)),
                            _ => return Err(self.err("bad repetition")),
                        }
                    }
                };
                self.pos += close;
                (min, max)
            }
            _ => return Ok(atom),
        };
        self.pos += 1;
        if matches!(self.peek(), Some('*' | '+' | '?' | '{')) {
            return Err(self.err("nested quantifier"));
        }
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
        })
    }

    fn class(&mut self) -> Result<Node, RegexError> {
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut items = Vec::new();
        let mut first = true;
        loop {
            let c = self
                .peek()
                .ok_or_else(|| self.err("unclosed character class"))?;
            self.pos += 1;
            if c == ']' && !first {
                break;
            }
            first = false;
            let item = if c == '\\' {
                let e = self.peek().ok_or_else(|| self.err("trailing backslash"))?;
                self.pos += 1;
                escape(e)
            } else {
                ClassItem::Char(c)
            };
            if let (ClassItem::Char(lo), Some('-')) = (&item, self.peek()) {
                if self.chars.get(self.pos + 1).is_some_and(|&n| n != ']') {
                    let hi = self.chars[self.pos + 1];
                    self.pos += 2;
                    if hi < *lo {
                        return Err(self.err("range out of order"));
                    }
                    items.push(ClassItem::Range(*lo, hi));
                    continue;
                }
            }
            items.push(item);
        }
        Ok(Node::Class { items, negated })
    }
}

fn escape(e: char) -> ClassItem {
    match e {
        'd' => ClassItem::Digit(false),
        'D' => ClassItem::Digit(true),
        'w' => ClassItem::Word(false),
        'W' => ClassItem::Word(true),
        's' => ClassItem::Space(false),
        'S' => ClassItem::Space(true),
        't' => ClassItem::Char('\t'),
        'n' => ClassItem::Char('\n'),
        other => ClassItem::Char(other),
    }
}

impl Regex {
    /// Compiles a pattern.
    pub fn new(pattern: &str) -> Result<Regex, RegexError> {
        let mut p = Parser {
            chars: pattern.chars().collect(),
            pos: 0,
            source: pattern,
        };
        let alternatives = p.alternatives(0)?;
        if p.pos != p.chars.len() {
            return Err(p.err("unbalanced ')'"));
        }
        Ok(Regex { alternatives })
    }

    /// Whether the pattern matches the whole of `text`.
    pub fn is_full_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let mut budget = 1_000_000usize;
        let end = |i: usize, _: &mut usize| i == chars.len();
        match_alternatives(&self.alternatives, &chars, 0, &mut budget, &end)
    }
}

type Cont<'a> = dyn Fn(usize, &mut usize) -> bool + 'a;

fn match_alternatives(
    alts: &[Vec<Node>],
    s: &[char],
    i: usize,
    budget: &mut usize,
    k: &Cont<'_>,
) -> bool {
    alts.iter().any(|seq| match_seq(seq, s, i, budget, k))
}

fn match_seq(seq: &[Node], s: &[char], i: usize, budget: &mut usize, k: &Cont<'_>) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    let Some((first, rest)) = seq.split_first() else {
        return k(i, budget);
    };
    let next = |j: usize, b: &mut usize| match_seq(rest, s, j, b, k);
    match_node(first, s, i, budget, &next)
}

fn match_node(node: &Node, s: &[char], i: usize, budget: &mut usize, k: &Cont<'_>) -> bool {
    match node {
        Node::Any => i < s.len() && k(i + 1, budget),
        Node::Class { items, negated } => {
            i < s.len() && (items.iter().any(|it| it.matches(s[i])) != *negated) && k(i + 1, budget)
        }
        Node::Group(alts) => match_alternatives(alts, s, i, budget, k),
        Node::Repeat { node, min, max } => match_repeat(node, *min, *max, 0, s, i, budget, k),
    }
}

#[allow(clippy::too_many_arguments)]
fn match_repeat(
    node: &Node,
    min: usize,
    max: Option<usize>,
    count: usize,
    s: &[char],
    i: usize,
    budget: &mut usize,
    k: &Cont<'_>,
) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    let can_more = max.is_none_or(|m| count < m);
    // Greedy: try one more repetition first (it must consume input to avoid looping).
    if can_more {
        let more =
            |j: usize, b: &mut usize| j > i && match_repeat(node, min, max, count + 1, s, j, b, k);
        if match_node(node, s, i, budget, &more) {
            return true;
        }
    }
    count >= min && k(i, budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Regex::new(p).unwrap().is_full_match(t)
    }

    #[test]
    fn basics() {
        assert!(m("linux", "linux"));
        assert!(!m("linux", "linux2"), "full match only");
        assert!(m("lin.x", "linux"));
        assert!(m("(amd64|x86_64|aarch64)", "x86_64"));
        assert!(m("amd64|x86_64", "amd64"));
        assert!(!m("amd64|x86_64", "arm"));
        assert!(m("a*b+c?", "aaabb"));
        assert!(m("[a-z]+[0-9]{2}", "abc42"));
        assert!(!m("[a-z]+[0-9]{2}", "abc4"));
        assert!(m("[^ ]+", "no-spaces"));
        assert!(!m("[^ ]+", "a space"));
        assert!(m("\\d{1,3}\\.\\d+", "17.0"));
        assert!(m("^always$", "always"));
        assert!(m(".*madvise.*", "always [madvise] never"));
        assert!(m("(ab)*", ""));
        assert!(m("(a|ab)(c|bcd)(d*)", "abcd"));
        assert!(m("x{0,}y", "xxxy"));
        assert!(m("[-a]", "-"));
        assert!(m("[]a]", "]"));
    }

    #[test]
    fn errors() {
        for bad in [
            "(", ")", "[a", "*a", "a**", "a{2", "a{3,1}", "\\", "[z-a]", "a{99999}",
        ] {
            assert!(Regex::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pathological_patterns_terminate() {
        let r = Regex::new("(a*)*b").unwrap();
        assert!(!r.is_full_match(&"a".repeat(40)));
        let r = Regex::new("(a|aa)*c").unwrap();
        assert!(!r.is_full_match(&"a".repeat(60)));
    }
}
