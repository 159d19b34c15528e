//! The `skills` seam (since contract 0.2.5): the skills the operator
//! installed (`[skills]`), read-only. Granted by `skills = true`. The
//! catalog is the one of the generation the component was loaded in; a
//! changed catalog loads the component again, so a tool's
//! [`description`](crate::Tool::description) may list the skills.

use crate::bindings::toolgate::plugin::skills as raw;
pub use crate::bindings::toolgate::plugin::skills::{Skill, SkillSummary, SkillsError};

/// Every skill, sorted by name.
pub fn list() -> Vec<SkillSummary> {
    raw::list()
}

/// The skill `name`: its body, digest and resource files.
pub fn load(name: &str) -> Result<Skill, SkillsError> {
    raw::load(name)
}

/// The resource file `path` of skill `name` (as listed in its
/// `resources`), as text.
pub fn read(name: &str, path: &str) -> Result<String, SkillsError> {
    raw::read(name, path)
}

/// The skill's directory as an absolute path (since contract 0.2.7):
/// where the built-in `read` opens its resources when it lies outside the
/// working directory.
pub fn directory(name: &str) -> Result<String, SkillsError> {
    raw::directory(name)
}

/// What an error says (each case carries a sentence for the model).
pub fn message(e: &SkillsError) -> &str {
    match e {
        SkillsError::NotFound(m) | SkillsError::InvalidRequest(m) | SkillsError::Unreadable(m) => m,
    }
}
