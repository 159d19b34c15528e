//! Sensitive values kept out of the record: replaced at their pointers in
//! the arguments, and wherever a record's text quotes them.
//!
//! Why both: the arguments are not the only place a value travels. A
//! policy's reason may quote the call (the built-in `ask-destructive` asks
//! "Run it with {"command": …}?"), and that reason goes into the record's
//! `decisions`. A value marked sensitive (`[audit] sensitive`) — and, with
//! `arguments = "digest"`, every value of the arguments — is therefore
//! searched for in that text too, and replaced by the same marker the
//! arguments hold: `{"$sha256":"<hex>"}`, the SHA-256 of the value's
//! compact JSON (so someone who knows a value can still check it).
//!
//! What is searched for: a string as it is and as it reads inside a JSON
//! string (escaped: a reason that quotes the arguments' JSON quotes it so);
//! any other value as its compact JSON. Values shorter than
//! [`AUDIT_SENSITIVE_MIN_CHARS`] are not searched for (they would match
//! everywhere); a value quoted only in part (cut short, re-encoded) is not
//! found. Both are stated limits (docs/operators/audit.md).

use serde_json::{Value, json};

use super::chain;
use crate::budgets::{AUDIT_SENSITIVE_MAX_VALUES, AUDIT_SENSITIVE_MIN_CHARS};

/// The marker a sensitive value is replaced by: `{"$sha256": "<hex>"}`,
/// the SHA-256 of the value's compact JSON.
pub(crate) fn marker(value: &Value) -> Value {
    json!({ "$sha256": chain::hex(&chain::sha256(value.to_string().as_bytes())) })
}

/// What a call's record text must not contain, and what replaces it.
#[derive(Debug, Default)]
pub(crate) struct Redaction {
    /// (text, marker), longest text first.
    needles: Vec<(String, String)>,
    /// Values added.
    values: usize,
    /// More values than [`AUDIT_SENSITIVE_MAX_VALUES`]: every text is
    /// withheld whole.
    withhold: bool,
}

impl Redaction {
    /// Add `value` (a sensitive value) to what is searched for.
    pub(crate) fn add(&mut self, value: &Value) {
        if self.withhold {
            return;
        }
        self.values += 1;
        if self.values > AUDIT_SENSITIVE_MAX_VALUES {
            self.needles.clear();
            self.withhold = true;
            return;
        }
        let marker = marker(value).to_string();
        let mut push = |text: String| {
            if text.chars().count() >= AUDIT_SENSITIVE_MIN_CHARS
                && !self.needles.iter().any(|(t, _)| *t == text)
            {
                self.needles.push((text, marker.clone()));
            }
        };
        match value {
            Value::String(s) => {
                push(s.clone());
                // As it reads inside a JSON string: without its quotes.
                let json = value.to_string();
                let escaped = &json[1..json.len() - 1];
                if escaped != s {
                    push(escaped.to_string());
                }
            }
            other => push(other.to_string()),
        }
    }

    /// Add `arguments` whole and every scalar in them (`arguments =
    /// "digest"`: no value of them is to be kept).
    pub(crate) fn add_all(&mut self, arguments: &Value) {
        self.add(arguments);
        let mut stack = vec![arguments];
        while let Some(v) = stack.pop() {
            if self.withhold {
                return;
            }
            match v {
                Value::Array(a) => stack.extend(a.iter()),
                Value::Object(o) => stack.extend(o.values()),
                scalar => self.add(scalar),
            }
        }
    }

    /// `text` with every sensitive value in it replaced by its marker;
    /// `None` when there is none in it.
    pub(crate) fn apply(&self, text: &str) -> Option<String> {
        if self.withhold {
            return (!text.is_empty()).then(|| {
                format!(
                    "(withheld from the record: the call has more than {AUDIT_SENSITIVE_MAX_VALUES} \
                     sensitive values to search this text for)"
                )
            });
        }
        if !self.needles.iter().any(|(t, _)| text.contains(t.as_str())) {
            return None;
        }
        // One pass, longest match first at each place, so that a marker
        // written is never searched again (its hex could hold a shorter
        // value).
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        'scan: while let Some(c) = rest.chars().next() {
            for (needle, marker) in &self.needles {
                if let Some(after) = rest.strip_prefix(needle.as_str()) {
                    out.push_str(marker);
                    rest = after;
                    continue 'scan;
                }
            }
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
        Some(out)
    }

    /// Sorts the needles longest first (call once all are added).
    pub(crate) fn ready(mut self) -> Self {
        self.needles.sort_by_key(|n| std::cmp::Reverse(n.0.len()));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(v: &Value) -> String {
        marker(v).to_string()
    }

    #[test]
    fn a_sensitive_value_is_replaced_wherever_a_reason_quotes_it() {
        let command = json!("rm -rf \"/srv/data\"");
        let mut r = Redaction::default();
        r.add(&command);
        let r = r.ready();
        // As ask-destructive quotes it: inside the arguments' JSON.
        let args = json!({ "command": command }).to_string();
        let reason = format!("`bash` can change or delete data. Run it with {args}?");
        let got = r.apply(&reason).expect("redacted");
        assert!(!got.contains("/srv/data"), "{got}");
        assert_eq!(
            got,
            format!(
                "`bash` can change or delete data. Run it with {{\"command\":\"{}\"}}?",
                marked(&command)
            )
        );
        // Quoted as it is, twice.
        let got = r
            .apply("first rm -rf \"/srv/data\", then rm -rf \"/srv/data\"")
            .unwrap();
        assert_eq!(got.matches("$sha256").count(), 2, "{got}");
        // A reason that does not quote it is kept verbatim (no copy).
        assert_eq!(r.apply("the command deletes data"), None);
    }

    #[test]
    fn short_values_are_not_searched_for_and_non_strings_are_their_json() {
        let mut r = Redaction::default();
        r.add(&json!("ls"));
        r.add(&json!(123456));
        r.add(&json!({"k": [1, 2]}));
        let r = r.ready();
        assert_eq!(r.apply("ls is fine"), None, "under the floor");
        let got = r.apply("port 123456 and {\"k\":[1,2]}").unwrap();
        assert_eq!(
            got,
            format!(
                "port {} and {}",
                marked(&json!(123456)),
                marked(&json!({"k": [1, 2]}))
            )
        );
    }

    #[test]
    fn a_marker_written_is_never_searched_again() {
        let secret = json!("abcdefgh");
        let mut r = Redaction::default();
        r.add(&secret);
        // A value that is a piece of the first one's marker.
        let hex = marker(&secret)["$sha256"].as_str().unwrap()[10..20].to_string();
        r.add(&Value::String(hex));
        let r = r.ready();
        let got = r.apply("x abcdefgh y").unwrap();
        assert_eq!(got, format!("x {} y", marked(&secret)));
    }

    #[test]
    fn digest_mode_redacts_every_value_and_too_many_withholds_the_text() {
        let args = json!({"path": "src/main.rs", "n": 3, "deep": {"name": "quarterly"}});
        let mut r = Redaction::default();
        r.add_all(&args);
        let r = r.ready();
        let got = r.apply("writes src/main.rs for quarterly").unwrap();
        assert!(
            !got.contains("main.rs") && !got.contains("quarterly"),
            "{got}"
        );
        let many: Vec<String> = (0..=AUDIT_SENSITIVE_MAX_VALUES)
            .map(|i| format!("value{i}"))
            .collect();
        let mut r = Redaction::default();
        r.add_all(&json!(many));
        let r = r.ready();
        let got = r.apply("anything").unwrap();
        assert!(got.contains("withheld"), "{got}");
        assert_eq!(r.apply(""), None);
    }
}
