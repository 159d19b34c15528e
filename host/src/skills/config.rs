//! `[skills]` in the configuration: where the host finds skills.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::config::path::{GrantDir, SkillDir};

/// `[skills]`: the directories of skills (`NAME/SKILL.md`) the `skills`
/// seam serves and `toolgate serve` offers as prompts.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, Schema)]
#[serde(default, deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct SkillsConfig {
    /// `false`: no skills at all (default `true`).
    pub enabled: bool,
    /// Directories of skills, each a directory per skill holding
    /// `SKILL.md`. Authority: read-only to everything the host runs.
    /// Default: `.agents/skills` in the working directory and
    /// `$XDG_CONFIG_HOME/toolgate/skills` (`~/.config/toolgate/skills`).
    /// Relative to the host's working directory; an absent one is skipped.
    pub dirs: Vec<SkillDir>,
    /// Directories of skills that what the host runs may write (an agent
    /// that keeps skills of its own): not protected, so whatever a granted
    /// plugin or a sandboxed command writes there is loaded as instructions
    /// to the model. Default: none.
    pub writable_dirs: Vec<GrantDir>,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        SkillsConfig {
            enabled: true,
            dirs: default_dirs(),
            writable_dirs: Vec::new(),
        }
    }
}

/// `.agents/skills` (the layout agents share) and the user's own,
/// `$XDG_CONFIG_HOME/toolgate/skills` or `~/.config/toolgate/skills`.
pub fn default_dirs() -> Vec<SkillDir> {
    let mut dirs = vec![SkillDir::from(".agents/skills")];
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        });
    if let Some(home) = config_home.filter(|h| h.is_absolute()) {
        dirs.push(SkillDir::from(home.join("toolgate").join("skills")));
    }
    dirs
}
