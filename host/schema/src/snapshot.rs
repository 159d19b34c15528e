//! The lossless snapshot: a strict, stack-safe JSON reader and the same
//! checks for values that arrive already in memory.
//!
//! `serde_json::from_str` is not enough at an untrusted boundary: it keeps
//! the last of two duplicate keys (other readers keep the first, so a policy
//! and a tool could see different arguments), it accepts integers that a
//! JavaScript client would have rounded, and it recurses once per nesting
//! level. This reader refuses all three, and keeps its own stack of open
//! containers so nesting depth costs heap, bounded by [`Limits::max_depth`].
//!
//! The number contract: an integer literal (no fraction, no exponent) must
//! lie within ±[`MAX_SAFE_INTEGER`](crate::MAX_SAFE_INTEGER) and is kept as
//! an exact integer. Any other number is read as the nearest IEEE-754 double,
//! as every JSON client does, and must be finite.

use std::fmt;

use serde_json::{Map, Number, Value};

use crate::limits::{Limits, MAX_SAFE_INTEGER};
use crate::pointer::{Segment, from_segments};

/// A line and column (both from 1; columns count characters) in JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Line number, from 1.
    pub line: usize,
    /// Column number in characters, from 1.
    pub column: usize,
}

/// Why a JSON text or value was refused by the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotErrorKind {
    /// The text is not JSON.
    #[error("invalid JSON: {0}")]
    Syntax(String),
    /// The bytes are not UTF-8.
    #[error("invalid UTF-8 at byte {offset}")]
    InvalidUtf8 {
        /// Offset of the first byte that is not valid UTF-8.
        offset: usize,
    },
    /// A `\u` escape names half of a UTF-16 surrogate pair, alone.
    #[error("lone UTF-16 surrogate \\u{code:04x} in a string (not a Unicode character)")]
    LoneSurrogate {
        /// The surrogate code unit.
        code: u16,
    },
    /// An object has the same key twice.
    #[error("duplicate key {key:?} (JSON readers disagree on which value counts)")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
    /// An integer outside ±(2^53−1).
    #[error(
        "integer {literal} is outside ±9007199254740991, the range JSON clients carry exactly (send it as a string)"
    )]
    IntegerOutOfRange {
        /// The integer as written.
        literal: String,
    },
    /// A number that is not finite (overflows a double, or NaN/infinity in
    /// an in-memory value).
    #[error("number {literal} is not a finite double")]
    NumberOutOfRange {
        /// The number as written.
        literal: String,
    },
    /// Arrays and objects nested deeper than [`Limits::max_depth`].
    #[error("nesting deeper than {max_depth} levels")]
    TooDeep {
        /// The limit.
        max_depth: usize,
    },
    /// JSON larger than [`Limits::max_bytes`].
    #[error("JSON larger than {max_bytes} bytes (at least {at_least})")]
    TooLarge {
        /// The limit.
        max_bytes: usize,
        /// The size seen when the reader stopped.
        at_least: usize,
    },
}

/// A JSON text or value the snapshot refused, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}{}", Location(.pointer, .position))]
pub struct SnapshotError {
    /// JSON pointer to the offending value (`""` is the root).
    pub pointer: String,
    /// Line and column, for errors found in JSON text.
    pub position: Option<Position>,
    /// What is wrong.
    pub kind: SnapshotErrorKind,
}

struct Location<'a>(&'a String, &'a Option<Position>);

impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.0.is_empty() {
            write!(f, " at {}", self.0)?;
        }
        if let Some(p) = self.1 {
            write!(f, " (line {}, column {})", p.line, p.column)?;
        }
        Ok(())
    }
}

impl SnapshotError {
    /// The same error as a [`Violation`](crate::Violation), so that a host can
    /// report limits and snapshot failures in the same `INVALID_ARGS` shape as
    /// schema violations.
    pub fn to_violation(&self) -> crate::Violation {
        use SnapshotErrorKind as K;
        let at = match self.position {
            Some(p) => format!(" at line {}, column {}", p.line, p.column),
            None => String::new(),
        };
        let (expected, got) = match &self.kind {
            K::Syntax(message) => ("valid JSON".to_owned(), format!("{message}{at}")),
            K::InvalidUtf8 { offset } => (
                "UTF-8 text".to_owned(),
                format!("invalid byte at offset {offset}"),
            ),
            K::LoneSurrogate { code } => (
                "a string of Unicode characters".to_owned(),
                format!("lone surrogate \\u{code:04x}{at}"),
            ),
            K::DuplicateKey { key } => (
                "each key at most once".to_owned(),
                format!("duplicate key {}", crate::describe::quote(key)),
            ),
            K::IntegerOutOfRange { literal } => (
                format!("integer within ±{MAX_SAFE_INTEGER} (send larger integers as strings)"),
                format!("integer {literal}"),
            ),
            K::NumberOutOfRange { literal } => {
                ("finite number".to_owned(), format!("number {literal}"))
            }
            K::TooDeep { max_depth } => (
                format!("arrays and objects nested at most {max_depth} levels deep"),
                format!("nesting deeper than {max_depth} levels"),
            ),
            K::TooLarge {
                max_bytes,
                at_least,
            } => (
                format!("at most {max_bytes} bytes of JSON"),
                format!("at least {at_least} bytes"),
            ),
        };
        crate::Violation {
            path: self.pointer.clone(),
            expected,
            got,
        }
    }
}

/// Reads JSON text strictly into a value, refusing anything that JSON cannot
/// carry losslessly between the model, the host and the tool.
///
/// Refused, each with the pointer of the value (and line/column): syntax
/// errors (including NaN, Infinity, comments, trailing commas and a byte
/// order mark), duplicate keys, lone surrogate escapes, integer literals
/// outside ±[`MAX_SAFE_INTEGER`](crate::MAX_SAFE_INTEGER), numbers that
/// overflow a double, nesting deeper than `limits.max_depth` and text longer
/// than `limits.max_bytes`. Never recurses: any depth of input is safe.
///
/// ```
/// use toolgate_schema::{Limits, SnapshotErrorKind, parse};
///
/// let err = parse(r#"{"a": {"b": 1, "b": 2}}"#, &Limits::default()).unwrap_err();
/// assert_eq!(err.pointer, "/a/b");
/// assert!(matches!(err.kind, SnapshotErrorKind::DuplicateKey { .. }));
/// assert_eq!(err.to_string(), r#"duplicate key "b" (JSON readers disagree on which value counts) at /a/b (line 1, column 16)"#);
/// ```
pub fn parse(text: &str, limits: &Limits) -> Result<Value, SnapshotError> {
    if text.len() > limits.max_bytes {
        return Err(SnapshotError {
            pointer: String::new(),
            position: None,
            kind: SnapshotErrorKind::TooLarge {
                max_bytes: limits.max_bytes,
                at_least: text.len(),
            },
        });
    }
    Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        max_depth: limits.max_depth,
        stack: Vec::new(),
    }
    .run()
}

/// [`parse`] for bytes: anything that is not UTF-8 is refused first.
pub fn parse_bytes(bytes: &[u8], limits: &Limits) -> Result<Value, SnapshotError> {
    if bytes.len() > limits.max_bytes {
        return Err(SnapshotError {
            pointer: String::new(),
            position: None,
            kind: SnapshotErrorKind::TooLarge {
                max_bytes: limits.max_bytes,
                at_least: bytes.len(),
            },
        });
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text, limits),
        Err(e) => {
            let offset = e.valid_up_to();
            Err(SnapshotError {
                pointer: String::new(),
                position: Some(position_of(bytes, offset)),
                kind: SnapshotErrorKind::InvalidUtf8 { offset },
            })
        }
    }
}

fn position_of(bytes: &[u8], offset: usize) -> Position {
    let before = &bytes[..offset.min(bytes.len())];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    // Count characters, not bytes: skip UTF-8 continuation bytes.
    let column = before[line_start..]
        .iter()
        .filter(|&&b| b & 0xC0 != 0x80)
        .count()
        + 1;
    Position { line, column }
}

/// An array or object whose members are still being read.
enum Frame {
    Array(Vec<Value>),
    Object {
        map: Map<String, Value>,
        key: String,
    },
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    max_depth: usize,
    stack: Vec<Frame>,
}

impl Parser<'_> {
    fn run(mut self) -> Result<Value, SnapshotError> {
        self.skip_ws();
        if self.bytes.starts_with("\u{feff}".as_bytes()) {
            return Err(self.syntax_at(self.pos, "a byte order mark is not allowed"));
        }
        'value: loop {
            // Read one value; an opening bracket pushes a frame and reads on.
            let value = match self.peek() {
                Some(b'{') => {
                    let start = self.pos;
                    self.open(start)?;
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        Value::Object(Map::new())
                    } else {
                        self.stack.push(Frame::Object {
                            map: Map::new(),
                            key: String::new(),
                        });
                        self.key()?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    let start = self.pos;
                    self.open(start)?;
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        Value::Array(Vec::new())
                    } else {
                        self.stack.push(Frame::Array(Vec::new()));
                        continue 'value;
                    }
                }
                Some(b'"') => Value::String(self.string()?),
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b't') => self.literal("true", Value::Bool(true))?,
                Some(b'f') => self.literal("false", Value::Bool(false))?,
                Some(b'n') => self.literal("null", Value::Null)?,
                Some(b'N' | b'I') => {
                    return Err(self.syntax_at(self.pos, "NaN and Infinity are not JSON numbers"));
                }
                Some(_) => return Err(self.syntax_at(self.pos, "expected a JSON value")),
                None => return Err(self.syntax_at(self.pos, "unexpected end of input")),
            };
            // Attach the finished value to its parent; a closing bracket
            // finishes the parent in turn.
            let mut value = value;
            loop {
                self.skip_ws();
                match self.stack.last_mut() {
                    None => {
                        if self.pos < self.bytes.len() {
                            return Err(self.syntax_at(
                                self.pos,
                                "unexpected characters after the JSON value",
                            ));
                        }
                        return Ok(value);
                    }
                    Some(Frame::Array(items)) => {
                        items.push(value);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                continue 'value;
                            }
                            Some(b']') => {
                                self.pos += 1;
                                let Some(Frame::Array(items)) = self.stack.pop() else {
                                    unreachable!("the top frame is an array")
                                };
                                value = Value::Array(items);
                            }
                            _ => return Err(self.syntax_at(self.pos, "expected `,` or `]`")),
                        }
                    }
                    Some(Frame::Object { map, key }) => {
                        map.insert(std::mem::take(key), value);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                self.key()?;
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                let Some(Frame::Object { map, .. }) = self.stack.pop() else {
                                    unreachable!("the top frame is an object")
                                };
                                value = Value::Object(map);
                            }
                            _ => return Err(self.syntax_at(self.pos, "expected `,` or `}`")),
                        }
                    }
                }
            }
        }
    }

    /// Checks that one more level of nesting is allowed.
    fn open(&self, at: usize) -> Result<(), SnapshotError> {
        if self.stack.len() >= self.max_depth {
            return Err(self.error_at(
                at,
                SnapshotErrorKind::TooDeep {
                    max_depth: self.max_depth,
                },
            ));
        }
        Ok(())
    }

    /// Reads `"key" :` into the top (object) frame, refusing duplicates.
    fn key(&mut self) -> Result<(), SnapshotError> {
        let start = self.pos;
        if self.peek() != Some(b'"') {
            return Err(self.syntax_at(self.pos, "expected a string key"));
        }
        let key = self.string()?;
        let duplicate = match self.stack.last_mut() {
            Some(Frame::Object { map, key: slot }) => {
                let duplicate = map.contains_key(&key);
                *slot = key;
                duplicate
            }
            _ => false,
        };
        if duplicate {
            let key = match self.stack.last() {
                Some(Frame::Object { key, .. }) => key.clone(),
                _ => String::new(),
            };
            return Err(self.error_at(start, SnapshotErrorKind::DuplicateKey { key }));
        }
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.syntax_at(self.pos, "expected `:` after an object key"));
        }
        self.pos += 1;
        self.skip_ws();
        Ok(())
    }

    fn string(&mut self) -> Result<String, SnapshotError> {
        let open = self.pos;
        self.pos += 1;
        let mut out = String::new();
        let mut chunk = self.pos;
        loop {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err(self.syntax_at(open, "unterminated string"));
            };
            match b {
                b'"' => {
                    out.push_str(&self.text[chunk..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.text[chunk..self.pos]);
                    let escape = self.pos;
                    self.pos += 1;
                    let simple = match self.bytes.get(self.pos) {
                        Some(b'"') => Some('"'),
                        Some(b'\\') => Some('\\'),
                        Some(b'/') => Some('/'),
                        Some(b'b') => Some('\u{8}'),
                        Some(b'f') => Some('\u{c}'),
                        Some(b'n') => Some('\n'),
                        Some(b'r') => Some('\r'),
                        Some(b't') => Some('\t'),
                        Some(b'u') => None,
                        _ => return Err(self.syntax_at(escape, "invalid escape in a string")),
                    };
                    self.pos += 1;
                    let c = match simple {
                        Some(c) => c,
                        None => self.unicode_escape(escape)?,
                    };
                    out.push(c);
                    chunk = self.pos;
                }
                0x00..=0x1f => {
                    return Err(
                        self.syntax_at(self.pos, "control characters must be escaped in a string")
                    );
                }
                _ => self.pos += 1,
            }
        }
    }

    /// Reads the four hex digits after `\u` (and a low surrogate after a
    /// high one). `escape` is the offset of the backslash, for errors.
    fn unicode_escape(&mut self, escape: usize) -> Result<char, SnapshotError> {
        let high = self.hex4(escape)?;
        let code = match high {
            0xD800..=0xDBFF => {
                let low = if self.bytes.get(self.pos) == Some(&b'\\')
                    && self.bytes.get(self.pos + 1) == Some(&b'u')
                {
                    let save = self.pos;
                    self.pos += 2;
                    let low = self.hex4(save)?;
                    if (0xDC00..=0xDFFF).contains(&low) {
                        Some(low)
                    } else {
                        None
                    }
                } else {
                    None
                };
                let Some(low) = low else {
                    return Err(
                        self.error_at(escape, SnapshotErrorKind::LoneSurrogate { code: high })
                    );
                };
                0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
            }
            0xDC00..=0xDFFF => {
                return Err(self.error_at(escape, SnapshotErrorKind::LoneSurrogate { code: high }));
            }
            _ => u32::from(high),
        };
        char::from_u32(code).ok_or_else(|| self.syntax_at(escape, "invalid \\u escape"))
    }

    fn hex4(&mut self, escape: usize) -> Result<u16, SnapshotError> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.syntax_at(escape, "\\u needs four hex digits"))?;
        let mut code: u16 = 0;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.syntax_at(escape, "\\u needs four hex digits")),
            };
            code = code << 4 | u16::from(v);
        }
        self.pos += 4;
        Ok(code)
    }

    fn number(&mut self) -> Result<Value, SnapshotError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return Err(self.syntax_at(start, "leading zeros are not allowed in numbers"));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            Some(b'I') => {
                return Err(self.syntax_at(start, "NaN and Infinity are not JSON numbers"));
            }
            _ => return Err(self.syntax_at(start, "expected a digit")),
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.syntax_at(start, "expected a digit after the decimal point"));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            integer = false;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.syntax_at(start, "expected a digit in the exponent"));
            }
            self.digits();
        }
        let literal = &self.text[start..self.pos];
        if integer {
            let magnitude = literal.trim_start_matches('-');
            // 2^53 − 1 has 16 digits; longer literals are out of range.
            let n = if magnitude.len() <= 16 {
                literal.parse::<i64>().ok()
            } else {
                None
            };
            match n {
                Some(n) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&n) => {
                    Ok(Value::Number(Number::from(n)))
                }
                _ => Err(self.error_at(
                    start,
                    SnapshotErrorKind::IntegerOutOfRange {
                        literal: crate::describe::truncate(literal, 40),
                    },
                )),
            }
        } else {
            match literal.parse::<f64>().ok().and_then(Number::from_f64) {
                Some(n) => Ok(Value::Number(n)),
                None => Err(self.error_at(
                    start,
                    SnapshotErrorKind::NumberOutOfRange {
                        literal: crate::describe::truncate(literal, 40),
                    },
                )),
            }
        }
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Value, SnapshotError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.syntax_at(self.pos, "expected a JSON value"))
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn syntax_at(&self, at: usize, message: &str) -> SnapshotError {
        self.error_at(at, SnapshotErrorKind::Syntax(message.to_owned()))
    }

    fn error_at(&self, at: usize, kind: SnapshotErrorKind) -> SnapshotError {
        let pointer = from_segments(self.stack.iter().map(|frame| match frame {
            Frame::Array(items) => Segment::Index(items.len()),
            Frame::Object { key, .. } => Segment::Key(key),
        }));
        SnapshotError {
            pointer,
            position: Some(position_of(self.bytes, at)),
            kind,
        }
    }
}

/// Checks a value that is already in memory (an embedder may hand one over)
/// against the same contract as [`parse`]: depth, size of its compact
/// serialization, integers within ±(2^53−1), finite numbers.
///
/// Stack-safe at any depth. Note that `serde_json::Value` itself is not:
/// dropping, cloning, comparing or serializing a value recurses, so a value
/// deeper than a few thousand levels must never have been built; the depth
/// limit checked here is what keeps the rest of the host safe.
pub fn check_value(value: &Value, limits: &Limits) -> Result<(), SnapshotError> {
    enum Open<'a> {
        Array(std::iter::Enumerate<std::slice::Iter<'a, Value>>, usize),
        Object(serde_json::map::Iter<'a>, &'a str, bool),
    }
    fn pointer(stack: &[Open<'_>]) -> String {
        from_segments(stack.iter().map(|open| match open {
            Open::Array(_, i) => Segment::Index(*i),
            Open::Object(_, key, _) => Segment::Key(key),
        }))
    }
    let error = |stack: &[Open<'_>], kind| SnapshotError {
        pointer: pointer(stack),
        position: None,
        kind,
    };

    let mut size = 0usize;
    let mut stack: Vec<Open<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Null => size += 4,
                Value::Bool(b) => size += if *b { 4 } else { 5 },
                Value::String(s) => size += json_string_len(s),
                Value::Number(n) => {
                    check_number(n).map_err(|kind| error(&stack, kind))?;
                    size += display_len(n);
                }
                Value::Array(items) => {
                    if stack.len() >= limits.max_depth {
                        return Err(error(
                            &stack,
                            SnapshotErrorKind::TooDeep {
                                max_depth: limits.max_depth,
                            },
                        ));
                    }
                    size += 2;
                    stack.push(Open::Array(items.iter().enumerate(), 0));
                }
                Value::Object(map) => {
                    if stack.len() >= limits.max_depth {
                        return Err(error(
                            &stack,
                            SnapshotErrorKind::TooDeep {
                                max_depth: limits.max_depth,
                            },
                        ));
                    }
                    size += 2;
                    stack.push(Open::Object(map.iter(), "", true));
                }
            }
            if size > limits.max_bytes {
                return Err(error(
                    &stack,
                    SnapshotErrorKind::TooLarge {
                        max_bytes: limits.max_bytes,
                        at_least: size,
                    },
                ));
            }
        }
        match stack.last_mut() {
            None => return Ok(()),
            Some(Open::Array(items, current)) => match items.next() {
                Some((i, item)) => {
                    if i > 0 {
                        size += 1;
                    }
                    *current = i;
                    next = Some(item);
                }
                None => {
                    stack.pop();
                }
            },
            Some(Open::Object(members, current, first)) => match members.next() {
                Some((key, item)) => {
                    size += json_string_len(key) + 1 + usize::from(!*first);
                    *first = false;
                    *current = key;
                    next = Some(item);
                }
                None => {
                    stack.pop();
                }
            },
        }
    }
}

fn check_number(n: &Number) -> Result<(), SnapshotErrorKind> {
    let in_range = if let Some(i) = n.as_i64() {
        (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i)
    } else if n.is_u64() {
        false
    } else {
        return match n.as_f64() {
            Some(f) if f.is_finite() => Ok(()),
            _ => Err(SnapshotErrorKind::NumberOutOfRange {
                literal: n.to_string(),
            }),
        };
    };
    if in_range {
        Ok(())
    } else {
        Err(SnapshotErrorKind::IntegerOutOfRange {
            literal: n.to_string(),
        })
    }
}

/// Length of `s` as a JSON string literal, escaped the way serde_json does.
fn json_string_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

fn display_len(n: &Number) -> usize {
    struct Count(usize);
    impl fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = fmt::write(&mut count, format_args!("{n}"));
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(text: &str) -> Result<Value, SnapshotError> {
        parse(text, &Limits::default())
    }

    #[test]
    fn reads_ordinary_json() {
        let v =
            p(r#" {"a": [1, -2, 3.5, 1e2, true, false, null, "x\n\u00e9\ud83d\ude00"], "b": {}} "#)
                .unwrap();
        assert_eq!(
            v,
            json!({"a": [1, -2, 3.5, 100.0, true, false, null, "x\né😀"], "b": {}})
        );
        assert_eq!(p("[]").unwrap(), json!([]));
        assert_eq!(p("\"\"").unwrap(), json!(""));
        assert_eq!(p("0").unwrap(), json!(0));
    }

    #[test]
    fn integers_within_the_contract_stay_exact() {
        assert_eq!(
            p("9007199254740991").unwrap().as_i64(),
            Some(MAX_SAFE_INTEGER)
        );
        assert_eq!(
            p("-9007199254740991").unwrap().as_i64(),
            Some(-MAX_SAFE_INTEGER)
        );
        for text in [
            "9007199254740992",
            "-9007199254740992",
            "123456789012345678901234",
        ] {
            let err = p(text).unwrap_err();
            assert!(
                matches!(err.kind, SnapshotErrorKind::IntegerOutOfRange { ref literal } if literal == text),
                "{text}: {err}"
            );
        }
        // A float may carry a large magnitude: it promises a double, not an integer.
        assert_eq!(p("1e20").unwrap().as_f64(), Some(1e20));
    }

    #[test]
    fn refuses_non_finite_numbers() {
        let err = p(r#"{"x": 1e999}"#).unwrap_err();
        assert_eq!(err.pointer, "/x");
        assert!(matches!(
            err.kind,
            SnapshotErrorKind::NumberOutOfRange { .. }
        ));
        for text in ["NaN", "Infinity", "-Infinity", "[NaN]"] {
            let err = p(text).unwrap_err();
            assert_eq!(
                err.kind,
                SnapshotErrorKind::Syntax("NaN and Infinity are not JSON numbers".into()),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_duplicate_keys_with_pointer_and_position() {
        let err = p("{\"a\": 1,\n \"a\": 2}").unwrap_err();
        assert_eq!(err.pointer, "/a");
        assert_eq!(err.position, Some(Position { line: 2, column: 2 }));
        assert_eq!(
            err.kind,
            SnapshotErrorKind::DuplicateKey { key: "a".into() }
        );
        // Escapes are decoded before comparing.
        assert!(p(r#"{"a": 1, "\u0061": 2}"#).is_err());
    }

    #[test]
    fn refuses_lone_surrogates() {
        for text in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#""\ud800x""#,
        ] {
            let err = p(text).unwrap_err();
            assert!(
                matches!(err.kind, SnapshotErrorKind::LoneSurrogate { .. }),
                "{text}: {err}"
            );
        }
        let err = p(r#"["ok", "\udfff"]"#).unwrap_err();
        assert_eq!(err.pointer, "/1");
        assert_eq!(
            err.to_string(),
            "lone UTF-16 surrogate \\udfff in a string (not a Unicode character) at /1 (line 1, column 9)"
        );
    }

    #[test]
    fn refuses_invalid_utf8() {
        let err = parse_bytes(b"{\"a\":\n \"\xff\"}", &Limits::default()).unwrap_err();
        assert_eq!(err.kind, SnapshotErrorKind::InvalidUtf8 { offset: 8 });
        assert_eq!(err.position, Some(Position { line: 2, column: 3 }));
        assert_eq!(parse_bytes(b"[1]", &Limits::default()).unwrap(), json!([1]));
    }

    #[test]
    fn syntax_errors_have_line_and_column() {
        let cases = [
            ("", "unexpected end of input", 1, 1),
            ("[1,]", "expected a JSON value", 1, 4),
            ("{\"a\" 1}", "expected `:` after an object key", 1, 6),
            ("{\"a\": 1,}", "expected a string key", 1, 9),
            ("[1 2]", "expected `,` or `]`", 1, 4),
            ("{\"a\": 1 2}", "expected `,` or `}`", 1, 9),
            ("[1]x", "unexpected characters after the JSON value", 1, 4),
            ("\"abc", "unterminated string", 1, 1),
            (
                "\"a\tb\"",
                "control characters must be escaped in a string",
                1,
                3,
            ),
            ("\"\\x\"", "invalid escape in a string", 1, 2),
            ("\"\\u12\"", "\\u needs four hex digits", 1, 2),
            ("01", "leading zeros are not allowed in numbers", 1, 1),
            ("1.", "expected a digit after the decimal point", 1, 1),
            ("1e", "expected a digit in the exponent", 1, 1),
            ("-", "expected a digit", 1, 1),
            ("tru", "expected a JSON value", 1, 1),
            ("// c\n1", "expected a JSON value", 1, 1),
            ("\u{feff}1", "a byte order mark is not allowed", 1, 1),
            ("[\n  \"é\", x]", "expected a JSON value", 2, 8),
        ];
        for (text, message, line, column) in cases {
            let err = p(text).unwrap_err();
            assert_eq!(
                err.kind,
                SnapshotErrorKind::Syntax(message.into()),
                "{text:?}"
            );
            assert_eq!(err.position, Some(Position { line, column }), "{text:?}");
        }
    }

    #[test]
    fn depth_limit_counts_containers() {
        let limits = Limits {
            max_depth: 3,
            ..Limits::default()
        };
        assert!(parse("[[[1]]]", &limits).is_ok());
        assert!(parse(r#"{"a":{"b":[]}}"#, &limits).is_ok());
        let err = parse(r#"{"a":{"b":[{}]}}"#, &limits).unwrap_err();
        assert_eq!(err.kind, SnapshotErrorKind::TooDeep { max_depth: 3 });
        assert_eq!(err.pointer, "/a/b/0");
        assert_eq!(
            err.to_string(),
            "nesting deeper than 3 levels at /a/b/0 (line 1, column 12)"
        );
    }

    #[test]
    fn size_limit() {
        let limits = Limits {
            max_bytes: 8,
            ..Limits::default()
        };
        assert!(parse("[1,2,3]", &limits).is_ok());
        let err = parse("[1,2,3,4]", &limits).unwrap_err();
        assert_eq!(
            err.kind,
            SnapshotErrorKind::TooLarge {
                max_bytes: 8,
                at_least: 9
            }
        );
        assert!(parse_bytes(b"[1,2,3,4]", &limits).is_err());
    }

    #[test]
    fn check_value_applies_the_same_contract() {
        let limits = Limits::default();
        check_value(&json!({"a": [1, 2.5, "x", null, {"b": true}]}), &limits).unwrap();
        let err = check_value(&json!({"a": [1, 9007199254740992u64]}), &limits).unwrap_err();
        assert_eq!(err.pointer, "/a/1");
        assert!(matches!(
            err.kind,
            SnapshotErrorKind::IntegerOutOfRange { .. }
        ));
        let err = check_value(&json!({"a": {"b": i64::MIN}}), &limits).unwrap_err();
        assert_eq!(err.pointer, "/a/b");

        let shallow = Limits {
            max_depth: 2,
            ..limits
        };
        let err = check_value(&json!({"a": [[1]]}), &shallow).unwrap_err();
        assert_eq!(err.kind, SnapshotErrorKind::TooDeep { max_depth: 2 });
        assert_eq!(err.pointer, "/a/0");
    }

    #[test]
    fn check_value_measures_the_compact_serialization() {
        let v =
            json!({"a\"\n\u{1}": [1, -2, 2.5, 1e300, true, false, null, "é\\"], "": {}, "z": []});
        let len = serde_json::to_string(&v).unwrap().len();
        let fits = Limits {
            max_bytes: len,
            ..Limits::default()
        };
        check_value(&v, &fits).unwrap();
        let tight = Limits {
            max_bytes: len - 1,
            ..Limits::default()
        };
        assert!(matches!(
            check_value(&v, &tight).unwrap_err().kind,
            SnapshotErrorKind::TooLarge { .. }
        ));
    }

    #[test]
    fn errors_convert_to_violations() {
        let err = p(r#"{"id": 12345678901234567890}"#).unwrap_err();
        let v = err.to_violation();
        assert_eq!(v.path, "/id");
        assert_eq!(
            v.expected,
            "integer within ±9007199254740991 (send larger integers as strings)"
        );
        assert_eq!(v.got, "integer 12345678901234567890");
    }
}
