//! `prompts/*` of `toolgate serve` for the host's skills (`[skills]`; see
//! `toolgate::skills`): each skill is a prompt of its name, whose one user
//! message is the skill's instructions — what the `skill` tool returns —
//! so clients that show prompts (as slash commands) offer them too.
//!
//! A scope sees the skills while the `skill` tool is one of its tools: an
//! operator who turns the tool off, or leaves it out of a scope, turns the
//! prompts off with it. Skills come before bridged servers' prompts of
//! the same name.

use rmcp::model::{GetPromptResult, Prompt, PromptMessage, Role};
use toolgate::host::Toolgate;
use toolgate::skills::{Catalog, Skill};

/// The tool whose presence in a scope offers the skills as prompts.
const TOOL: &str = "skill";

/// The catalog this scope sees, if it sees the `skill` tool.
pub fn offered(host: &Toolgate, scope: &str) -> Option<std::sync::Arc<Catalog>> {
    host.generation_for(scope)
        .tools
        .contains_key(TOOL)
        .then(|| host.skills())
}

/// Every skill as a prompt.
pub fn prompts(catalog: &Catalog) -> Vec<Prompt> {
    catalog
        .skills()
        .map(|s| Prompt::new(&s.name, Some(&s.description), None))
        .collect()
}

/// The prompt of skill `name`, if there is one.
pub fn get(catalog: &Catalog, name: &str) -> Option<GetPromptResult> {
    let skill = catalog.get(name)?;
    Some(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text(skill))])
            .with_description(&skill.description),
    )
}

/// The skill as the model reads it: its body, then its files.
fn text(skill: &Skill) -> String {
    let mut s = format!(
        "<skill name=\"{}\" digest=\"{}\">\n{}\n</skill>\n",
        skill.name,
        skill.digest,
        skill.body.trim_end()
    );
    if !skill.resources.is_empty() {
        s.push_str(&format!(
            "\nThe skill's files (read one with the `{TOOL}` tool's `file`):\n"
        ));
        for r in &skill.resources {
            s.push_str(&format!("- {r}\n"));
        }
    }
    s
}
