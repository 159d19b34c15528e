//! The JSON Schema validation keywords that bound one value without
//! looking into it: numbers (`minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum`, `multipleOf`), strings (`minLength`, `maxLength`,
//! `pattern`), arrays (`minItems`, `maxItems`) and objects
//! (`minProperties`, `maxProperties`) — what MCP servers put in their
//! tools' schemas. `format` is an annotation (draft 2020-12's default): it
//! is accepted and not asserted.
//!
//! Each keyword applies only to values of its type, as the specification
//! says (`minimum` says nothing about a string). A `pattern` is compiled
//! once, with the `regex` crate: linear-time matching (no backtracking, so
//! no pattern can make a call's validation explode) and a bounded compiled
//! size ([`MAX_PATTERN_BYTES`], [`MAX_PATTERN_PROGRAM_BYTES`]). What that
//! engine does not have — look-around, back-references — is refused at
//! load with the engine's reason, never silently treated as matching.

use serde_json::Value;

use crate::describe;

/// Longest `pattern` accepted (bytes of its source).
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Largest compiled `pattern` (the regex engine's size limit).
pub const MAX_PATTERN_PROGRAM_BYTES: usize = 1 << 20;

/// The bounds of one subschema, each applying to values of its type.
#[derive(Debug, Default, Clone)]
pub(crate) struct Bounds {
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<(Box<str>, regex::Regex)>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
}

/// A regular expression of a schema (`pattern`, `patternProperties`), within
/// [`MAX_PATTERN_BYTES`] and [`MAX_PATTERN_PROGRAM_BYTES`], or why not.
pub(crate) fn compile_pattern(keyword: &str, source: &str) -> Result<regex::Regex, String> {
    if source.len() > MAX_PATTERN_BYTES {
        return Err(format!(
            "`{keyword}` {} is longer than {MAX_PATTERN_BYTES} bytes",
            describe::quote(&source.chars().take(40).collect::<String>())
        ));
    }
    regex::RegexBuilder::new(source)
        .size_limit(MAX_PATTERN_PROGRAM_BYTES)
        .build()
        .map_err(|e| {
            format!(
                "`{keyword}` {} cannot be enforced here (the `regex` engine: no look-around or back-references): {}",
                describe::quote(source),
                e.to_string().lines().last().unwrap_or("invalid")
            )
        })
}

/// Whether `keyword` is one of these (or `format`, accepted as an
/// annotation).
pub(crate) fn is_bound(keyword: &str) -> bool {
    matches!(
        keyword,
        "minimum"
            | "maximum"
            | "exclusiveMinimum"
            | "exclusiveMaximum"
            | "multipleOf"
            | "minLength"
            | "maxLength"
            | "pattern"
            | "minItems"
            | "maxItems"
            | "minProperties"
            | "maxProperties"
            | "format"
    )
}

impl Bounds {
    /// Add `keyword: value` (one [`is_bound`] names); `Err` says what is
    /// wrong with it.
    pub(crate) fn add(&mut self, keyword: &str, value: &Value) -> Result<(), String> {
        let number = || {
            value
                .as_f64()
                .filter(|n| n.is_finite())
                .ok_or_else(|| format!("`{keyword}` must be a number"))
        };
        let count = || {
            value
                .as_u64()
                .or_else(|| {
                    value
                        .as_f64()
                        .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                        .map(|f| f as u64)
                })
                .ok_or_else(|| format!("`{keyword}` must be a non-negative integer"))
        };
        match keyword {
            "minimum" => self.minimum = Some(number()?),
            "maximum" => self.maximum = Some(number()?),
            "exclusiveMinimum" => self.exclusive_minimum = Some(number()?),
            "exclusiveMaximum" => self.exclusive_maximum = Some(number()?),
            "multipleOf" => {
                let m = number()?;
                if m <= 0.0 {
                    return Err("`multipleOf` must be greater than 0".into());
                }
                self.multiple_of = Some(m);
            }
            "minLength" => self.min_length = Some(count()?),
            "maxLength" => self.max_length = Some(count()?),
            "minItems" => self.min_items = Some(count()?),
            "maxItems" => self.max_items = Some(count()?),
            "minProperties" => self.min_properties = Some(count()?),
            "maxProperties" => self.max_properties = Some(count()?),
            "pattern" => {
                let Value::String(source) = value else {
                    return Err("`pattern` must be a string (a regular expression)".into());
                };
                let regex = compile_pattern("pattern", source)?;
                self.pattern = Some((source.as_str().into(), regex));
            }
            "format" => {
                if !value.is_string() {
                    return Err("`format` must be a string".into());
                }
            }
            _ => unreachable!("is_bound lists the keywords add takes"),
        }
        Ok(())
    }

    /// Whether no bound is set (a node without any keeps no `Bounds`).
    pub(crate) fn is_empty(&self) -> bool {
        self.minimum.is_none()
            && self.maximum.is_none()
            && self.exclusive_minimum.is_none()
            && self.exclusive_maximum.is_none()
            && self.multiple_of.is_none()
            && self.min_length.is_none()
            && self.max_length.is_none()
            && self.pattern.is_none()
            && self.min_items.is_none()
            && self.max_items.is_none()
            && self.min_properties.is_none()
            && self.max_properties.is_none()
    }

    /// What `value` fails, as "expected" text for a violation; `None` when
    /// it holds to every bound of its type.
    pub(crate) fn failure(&self, value: &Value) -> Option<String> {
        match value {
            Value::Number(n) => {
                let v = n.as_f64()?;
                if let Some(m) = self.minimum
                    && v < m
                {
                    return Some(format!("a number ≥ {}", shown(m)));
                }
                if let Some(m) = self.maximum
                    && v > m
                {
                    return Some(format!("a number ≤ {}", shown(m)));
                }
                if let Some(m) = self.exclusive_minimum
                    && v <= m
                {
                    return Some(format!("a number > {}", shown(m)));
                }
                if let Some(m) = self.exclusive_maximum
                    && v >= m
                {
                    return Some(format!("a number < {}", shown(m)));
                }
                if let Some(m) = self.multiple_of
                    && !is_multiple(v, m)
                {
                    return Some(format!("a multiple of {}", shown(m)));
                }
                None
            }
            Value::String(s) => {
                if self.min_length.is_some() || self.max_length.is_some() {
                    // Characters (code points), as the specification counts.
                    let len = s.chars().count() as u64;
                    if let Some(m) = self.min_length
                        && len < m
                    {
                        return Some(format!("a string of at least {m} characters"));
                    }
                    if let Some(m) = self.max_length
                        && len > m
                    {
                        return Some(format!("a string of at most {m} characters"));
                    }
                }
                if let Some((source, regex)) = &self.pattern
                    && !regex.is_match(s)
                {
                    return Some(format!("a string matching {}", describe::quote(source)));
                }
                None
            }
            Value::Array(items) => {
                let len = items.len() as u64;
                if let Some(m) = self.min_items
                    && len < m
                {
                    return Some(format!("an array of at least {m} items"));
                }
                if let Some(m) = self.max_items
                    && len > m
                {
                    return Some(format!("an array of at most {m} items"));
                }
                None
            }
            Value::Object(members) => {
                let len = members.len() as u64;
                if let Some(m) = self.min_properties
                    && len < m
                {
                    return Some(format!("an object of at least {m} properties"));
                }
                if let Some(m) = self.max_properties
                    && len > m
                {
                    return Some(format!("an object of at most {m} properties"));
                }
                None
            }
            _ => None,
        }
    }
}

/// Whether `v` is an integer multiple of `m` (within the rounding of
/// binary floating point: `0.0075` is a multiple of `0.0001`).
fn is_multiple(v: f64, m: f64) -> bool {
    let q = v / m;
    if !q.is_finite() {
        return false;
    }
    (q - q.round()).abs() <= 1e-9 * q.abs().max(1.0)
}

/// A bound as the schema would write it (`3`, not `3.0`).
fn shown(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bounds(schema: Value) -> Bounds {
        let mut b = Bounds::default();
        for (k, v) in schema.as_object().unwrap() {
            b.add(k, v).unwrap();
        }
        b
    }

    #[test]
    fn each_bound_applies_to_its_type_only() {
        let b = bounds(json!({"minimum": 1, "maxLength": 3, "maxItems": 1, "pattern": "^a"}));
        assert_eq!(b.failure(&json!(0)).as_deref(), Some("a number ≥ 1"));
        assert_eq!(b.failure(&json!(1)), None);
        assert_eq!(
            b.failure(&json!("abcd")).as_deref(),
            Some("a string of at most 3 characters")
        );
        assert_eq!(
            b.failure(&json!("bc")).as_deref(),
            Some("a string matching \"^a\"")
        );
        assert_eq!(b.failure(&json!("aé")), None, "characters, not bytes");
        assert_eq!(
            b.failure(&json!([1, 2])).as_deref(),
            Some("an array of at most 1 items")
        );
        assert_eq!(b.failure(&json!(null)), None);
        assert!(
            bounds(json!({"multipleOf": 0.0001}))
                .failure(&json!(0.0075))
                .is_none()
        );
        assert!(
            bounds(json!({"multipleOf": 2}))
                .failure(&json!(7))
                .is_some()
        );
        assert!(
            bounds(json!({"exclusiveMaximum": 3}))
                .failure(&json!(3))
                .is_some()
        );
    }

    #[test]
    fn what_cannot_be_enforced_is_refused() {
        let mut b = Bounds::default();
        let e = b.add("pattern", &json!("(?=a)b")).unwrap_err();
        assert!(e.contains("cannot be enforced"), "{e}");
        assert!(
            b.add("pattern", &json!("a".repeat(MAX_PATTERN_BYTES + 1)))
                .is_err()
        );
        assert!(b.add("multipleOf", &json!(0)).is_err());
        assert!(b.add("minLength", &json!(-1)).is_err());
        assert!(b.add("minimum", &json!("1")).is_err());
        // A pattern whose compiled program would be huge.
        assert!(b.add("pattern", &json!("(\\w{1000}){1000}")).is_err());
    }
}
