//! Arguments an agent harness adds to every tool call.
//!
//! Some harnesses add an argument of their own to every call, whatever the
//! tool's `inputSchema` says: Gemini CLI adds `wait_for_previous` (its
//! scheduling hint). A tool whose schema says `additionalProperties:
//! false` — every toolgate tool — then refuses every call
//! (`INVALID_ARGS` naming the argument). The operator may accept the
//! arguments of a harness by name (`serve --accept-harness-arguments
//! gemini-cli`; off by default): they are removed before the call is
//! validated, unless the tool declares a property of that name, and the
//! call's audit record keeps them under `client.stripped` (and the log says
//! so at debug).

use serde_json::{Map, Value};

/// A harness and the arguments it adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Harness {
    /// Its name, as the operator gives it.
    pub name: &'static str,
    /// The arguments it adds to every call.
    pub arguments: &'static [&'static str],
}

/// Every harness known to add arguments.
pub const HARNESSES: &[Harness] = &[Harness {
    name: "gemini-cli",
    arguments: &["wait_for_previous"],
}];

/// The names of [`HARNESSES`] (what `--accept-harness-arguments` takes).
pub fn names() -> impl Iterator<Item = &'static str> {
    HARNESSES.iter().map(|h| h.name)
}

/// The harness called `name`.
pub fn find(name: &str) -> Option<&'static Harness> {
    HARNESSES.iter().find(|h| h.name == name)
}

/// Remove from `arguments` each argument `accepted` names that the tool
/// does not declare (`declared`: its `inputSchema`'s `properties`); what
/// was removed, by name.
pub fn strip(
    accepted: &[&'static str],
    declared: Option<&Map<String, Value>>,
    arguments: &mut Map<String, Value>,
) -> Map<String, Value> {
    let mut stripped = Map::new();
    for name in accepted {
        if declared.is_some_and(|d| d.contains_key(*name)) {
            continue;
        }
        if let Some(value) = arguments.remove(*name) {
            stripped.insert((*name).to_string(), value);
        }
    }
    stripped
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strips_only_what_the_tool_does_not_declare() {
        let gemini = find("gemini-cli").unwrap().arguments;
        let mut args = json!({"text": "hi", "wait_for_previous": true})
            .as_object()
            .unwrap()
            .clone();
        let stripped = strip(gemini, None, &mut args);
        assert_eq!(Value::Object(args), json!({"text": "hi"}));
        assert_eq!(Value::Object(stripped), json!({"wait_for_previous": true}));

        let declared = json!({"wait_for_previous": {"type": "boolean"}});
        let mut args = json!({"wait_for_previous": false})
            .as_object()
            .unwrap()
            .clone();
        let stripped = strip(gemini, declared.as_object(), &mut args);
        assert!(stripped.is_empty());
        assert_eq!(Value::Object(args), json!({"wait_for_previous": false}));
    }
}
