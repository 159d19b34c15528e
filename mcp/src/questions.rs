//! `ask_user_question` as an MCP form elicitation (2025 sessions): one
//! `elicitation/create` whose schema is the questions — a titled
//! single-select enum per question (`oneOf` of `const` and `title`), a
//! titled multi-select array where several may be chosen, and beside each
//! an optional string for an answer in the user's own words ("Other").
//! The answer is read back by the same keys and checked against the
//! options asked (see `toolgate::approval::questions`).

use std::collections::BTreeMap;

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    PrimitiveSchemaDefinition,
};
use serde_json::{Value, json};
use toolgate::approval::questions::{QuestionAnswer, QuestionRequest, Questions};

/// The form's property keys of one question: its choice, its own words.
pub struct Keys {
    choice: String,
    other: String,
}

/// The elicitation for `request`, and the keys to read its answer by.
pub fn form(request: &QuestionRequest) -> Result<(ElicitRequestParams, Vec<Keys>), String> {
    let mut properties = BTreeMap::new();
    let mut order = Vec::new();
    let mut keys = Vec::new();
    let mut message = format!("`{}` asks you:\n", request.call.tool_name);
    for q in &request.questions.questions {
        message.push_str(&format!("\n{}: {}", q.header, q.question));
        let choices: Vec<Value> = q
            .options
            .iter()
            .map(|o| {
                let title = if o.description.is_empty() {
                    o.label.clone()
                } else {
                    format!("{} — {}", o.label, o.description)
                };
                json!({"const": o.label, "title": title})
            })
            .collect();
        let choice = if q.multi_select {
            json!({"type": "array", "title": q.header, "description": q.question,
                   "items": {"anyOf": choices}})
        } else {
            json!({"type": "string", "title": q.header, "description": q.question,
                   "oneOf": choices})
        };
        let other = json!({"type": "string", "title": format!("{}: other", q.header),
                           "description": "Or answer in your own words"});
        let k = Keys {
            choice: q.header.clone(),
            other: format!("{} (other)", q.header),
        };
        for (key, schema) in [(&k.choice, choice), (&k.other, other)] {
            let schema: PrimitiveSchemaDefinition = serde_json::from_value(schema)
                .map_err(|e| format!("the question `{}` makes no form: {e}", q.header))?;
            properties.insert(key.clone(), schema);
            order.push(key.clone());
        }
        keys.push(k);
    }
    let mut schema = ElicitationSchema::new(properties);
    schema.property_order = Some(order);
    Ok((
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        },
        keys,
    ))
}

/// What the client's answer says, checked against the questions.
pub fn answers(
    questions: &Questions,
    keys: &[Keys],
    result: &ElicitResult,
    by: &str,
) -> QuestionAnswer {
    let declined = |reason: &str| QuestionAnswer::Declined {
        by: by.to_string(),
        reason: reason.to_string(),
    };
    match result.action {
        ElicitationAction::Accept => {}
        ElicitationAction::Decline => return declined("the user declined to answer"),
        ElicitationAction::Cancel => return declined("the user cancelled the question"),
        _ => {
            return QuestionAnswer::Unavailable(
                "the client answered with an unknown action".into(),
            );
        }
    }
    let content = result.content.clone().unwrap_or(Value::Null);
    let mut out = Vec::new();
    for (q, k) in questions.questions.iter().zip(keys) {
        let selected = match &content[&k.choice] {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        let other = content[&k.other].as_str().map(str::to_string);
        match q.answer(selected, other) {
            Ok(a) => out.push(a),
            Err(why) => {
                return QuestionAnswer::Unavailable(format!(
                    "the client's answer does not fit the question: {why}"
                ));
            }
        }
    }
    QuestionAnswer::Answered {
        answers: out,
        by: by.to_string(),
    }
}
