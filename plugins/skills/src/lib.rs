//! `skill`: loads one of the skills the operator installed (`[skills]`
//! in toolgate.toml) — its instructions, and on request one of its
//! resource files.
//!
//! The tool's description lists every skill's name and description (and
//! nothing more: a body is loaded only when the model asks for it). It is
//! written when the plugin loads, from the `skills` seam; the host loads
//! the plugin again whenever the catalog changes, so the list is always
//! the generation's. The component imports the seam, so it loads only
//! where the operator granted `skills = true` (the built-in default).

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError, skills};

/// The description's list of skills stops at this many bytes; the names
/// of the rest follow on one line.
pub const MAX_LISTING: usize = 16 << 10;

/// Load a skill by name.
#[derive(Deserialize, Schema)]
pub struct SkillTool {
    /// The skill's name, as listed in this tool's description.
    name: String,
    /// One of the skill's resource files (as listed when the skill was
    /// loaded), to read instead of the skill itself.
    file: Option<String>,
}

/// What a call returns.
#[derive(Serialize, Deserialize, Schema)]
pub struct Loaded {
    /// The skill's name.
    name: String,
    /// `sha256:` of its `SKILL.md`: which version was given.
    digest: String,
    /// The instructions (`SKILL.md` after its front matter); absent when a
    /// file was read.
    body: Option<String>,
    /// The skill's resource files, relative to its directory.
    resources: Vec<String>,
    /// Where `read` opens the skill's files: its directory relative to the
    /// working directory when it lies inside it, else its absolute path.
    directory: Option<String>,
    /// The resource file read, and its text.
    file: Option<String>,
    text: Option<String>,
}

fn failure(e: skills::SkillsError) -> ToolError {
    let code = match e {
        skills::SkillsError::NotFound(_) => "NOT_FOUND",
        skills::SkillsError::InvalidRequest(_) => "INVALID_INPUT",
        skills::SkillsError::Unreadable(_) => "UNREADABLE",
    };
    ToolError::new(code, skills::message(&e).to_string())
}

/// The description: what the tool is for, then the skills.
fn describe(list: &[skills::SkillSummary]) -> String {
    let mut s = String::from(
        "Load a skill: instructions for a kind of task, installed by the user. When a task \
         matches a skill's description, call this with its `name` before you start, then \
         follow the instructions it returns; with `file`, it returns one of the skill's \
         resource files instead.\n",
    );
    if list.is_empty() {
        s.push_str("\nNo skills are installed.");
        return s;
    }
    s.push_str("\nSkills:\n");
    let mut rest = Vec::new();
    for k in list {
        let line = format!("- {}: {}\n", k.name, k.description.replace('\n', " "));
        if rest.is_empty() && s.len() + line.len() <= MAX_LISTING {
            s.push_str(&line);
        } else {
            rest.push(k.name.as_str());
        }
    }
    if !rest.is_empty() {
        s.push_str(&format!(
            "Also (no room to describe them): {}\n",
            rest.join(", ")
        ));
    }
    s
}

impl Tool for SkillTool {
    const NAME: &'static str = "skill";
    type Output = Loaded;

    fn description() -> String {
        describe(&skills::list())
    }

    fn execute(self, _call: &Call) -> Result<Loaded, ToolError> {
        let skill = skills::load(&self.name).map_err(failure)?;
        let text = match &self.file {
            Some(path) => Some(skills::read(&self.name, path).map_err(failure)?),
            None => None,
        };
        Ok(Loaded {
            name: skill.name,
            digest: skill.digest,
            body: self.file.is_none().then_some(skill.body),
            resources: skill.resources,
            directory: skill
                .workdir_path
                .or_else(|| skills::directory(&self.name).ok()),
            file: self.file,
            text,
        })
    }

    fn render(v: Loaded) -> Vec<ContentBlock> {
        if let (Some(file), Some(text)) = (&v.file, &v.text) {
            return vec![Content::text(format!(
                "<skill-file skill=\"{}\" path=\"{file}\">\n{text}\n</skill-file>",
                v.name
            ))];
        }
        let mut s = format!(
            "<skill name=\"{}\" digest=\"{}\">\n{}\n</skill>\n",
            v.name,
            v.digest,
            v.body.as_deref().unwrap_or("").trim_end()
        );
        if !v.resources.is_empty() {
            match &v.directory {
                Some(dir) => s.push_str(&format!(
                    "\nThe skill's files (in {dir}; open them with `read` as {dir}/FILE, or with this tool's `file`):\n"
                )),
                None => s.push_str("\nThe skill's files (read one with this tool's `file`):\n"),
            }
            for r in &v.resources {
                s.push_str(&format!("- {r}\n"));
            }
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Loaded::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

toolgate_sdk::export! { tools: [SkillTool] }

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(name: &str, description: &str) -> skills::SkillSummary {
        skills::SkillSummary {
            name: name.into(),
            description: description.into(),
        }
    }

    #[test]
    fn the_description_lists_skills_and_stays_bounded() {
        assert!(describe(&[]).contains("No skills are installed."));
        let d = describe(&[summary("pdf", "Fill\nforms.")]);
        assert!(d.contains("- pdf: Fill forms.\n"), "{d}");
        let many: Vec<_> = (0..256)
            .map(|i| summary(&format!("s{i}"), &"x".repeat(1000)))
            .collect();
        let d = describe(&many);
        assert!(d.len() < MAX_LISTING + 256 * 6, "{}", d.len());
        assert!(d.contains("Also (no room to describe them): "), "{d}");
        assert!(d.contains("s255"));
    }
}
