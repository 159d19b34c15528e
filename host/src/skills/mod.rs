//! Skills: instructions for the model that the operator installed, loaded
//! on demand (the Agent Skills layout the agents people use share: a
//! directory per skill holding `SKILL.md` — YAML front matter with `name`
//! and `description`, then a Markdown body — and resource files beside it).
//!
//! Why skills are authority: the host hands a skill's body to the model as
//! instructions, in every later session. A skill directory that anything
//! the host runs could write would let one injected command plant a prompt
//! that outlives it. So `[skills] dirs` are typed
//! [`SkillDir`](crate::config::path::SkillDir) — authority, read-only to
//! every plugin and sandboxed process like the plugin directories — and
//! `SKILL.md` is read the way the host reads its configuration
//! ([`crate::state::read_authority`]: never while a sandboxed run could
//! have planted it). Only `[skills] writable_dirs`, which the operator
//! names knowing this, are left writable.
//!
//! The catalog is scanned at every reload ([`scan`]). A plugin granted
//! `skills = true` sees the catalog of the generation it was loaded in
//! (the catalog is part of its grant, so a changed catalog loads it again
//! and its `list-tools` can describe the skills); `toolgate serve` offers
//! the skills as MCP prompts too. Every size is capped (see the constants),
//! nothing is followed through a symlink, and each skill's digest (of its
//! whole `SKILL.md`) is shown in `toolgate plugins` and returned with it,
//! so the audit record holds which version the model was given.

pub mod config;
pub mod front_matter;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

pub use config::SkillsConfig;

/// Skills in one catalog, at most.
pub const MAX_SKILLS: usize = 256;
/// A `SKILL.md`, at most, in bytes.
pub const MAX_SKILL_FILE: u64 = 256 << 10;
/// A skill's name: 1 to 64 of `a-z`, `0-9` and `-` (not first or last,
/// never two in a row), the name of its directory.
pub const MAX_NAME: usize = 64;
/// A skill's description, at most, in characters.
pub const MAX_DESCRIPTION: usize = 1024;
/// Resource files listed per skill, at most.
pub const MAX_RESOURCES: usize = 256;
/// How deep resource files are listed below the skill's directory.
pub const MAX_RESOURCE_DEPTH: usize = 8;
/// A resource file read through the seam, at most, in bytes.
pub const MAX_RESOURCE_BYTES: u64 = 1 << 20;
/// A resource path asked for, at most, in bytes.
pub const MAX_PATH: usize = 4096;

/// One skill, as scanned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// `SKILL.md` after its front matter.
    pub body: String,
    /// `sha256:` and the hex digest of the whole `SKILL.md`.
    pub digest: String,
    /// The skill's directory.
    pub dir: PathBuf,
    /// Whether it came from `[skills] writable_dirs` (not protected).
    pub writable: bool,
    /// `dir` relative to the host's working directory, when inside it.
    pub workdir_path: Option<String>,
    /// Its resource files, relative to `dir`, sorted.
    pub resources: Vec<String>,
    /// More files were there than [`MAX_RESOURCES`] (or deeper than
    /// [`MAX_RESOURCE_DEPTH`]) and were not listed.
    pub resources_truncated: bool,
}

/// The skills of one reload, by name, and what could not be loaded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    skills: BTreeMap<String, Arc<Skill>>,
    problems: Vec<String>,
}

/// Why a skill or one of its files was not given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SkillError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    Unreadable(String),
}

impl Catalog {
    /// The skills, sorted by name.
    pub fn skills(&self) -> impl Iterator<Item = &Arc<Skill>> {
        self.skills.values()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Skill>> {
        self.skills.get(name)
    }

    pub fn len(&self) -> usize {
        self.skills.len()
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// What was found and not loaded, each with its path and why.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The skill `name`, or an error listing the names there are.
    pub fn find(&self, name: &str) -> Result<&Arc<Skill>, SkillError> {
        if name.len() > MAX_NAME {
            return Err(SkillError::InvalidRequest(format!(
                "a skill's name is at most {MAX_NAME} bytes, got {}",
                name.len()
            )));
        }
        self.skills.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.skills.keys().map(String::as_str).collect();
            SkillError::NotFound(if names.is_empty() {
                format!("no skill `{name}`: no skills are installed")
            } else {
                format!("no skill `{name}`; the skills are: {}", names.join(", "))
            })
        })
    }
}

impl Skill {
    /// The resource file `path` (one of [`Skill::resources`]) as text.
    /// Opened below the skill's directory with `cap-std` (no `..`, no
    /// absolute path, no symlink leaves it), at most
    /// [`MAX_RESOURCE_BYTES`].
    pub fn read(&self, path: &str) -> Result<String, SkillError> {
        let invalid = |why: String| Err(SkillError::InvalidRequest(why));
        if path.len() > MAX_PATH {
            return invalid(format!(
                "a resource path is at most {MAX_PATH} bytes, got {}",
                path.len()
            ));
        }
        let rel = Path::new(path);
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return invalid(format!(
                "`{path}` is not a path inside the skill's directory (write it as listed: relative, without `..`)"
            ));
        }
        if !self.resources.iter().any(|r| r == path) {
            return Err(SkillError::NotFound(format!(
                "skill `{}` has no resource `{path}`; its resources are: {}",
                self.name,
                if self.resources.is_empty() {
                    "(none)".to_string()
                } else {
                    self.resources.join(", ")
                }
            )));
        }
        let unreadable = |e: std::io::Error| {
            SkillError::Unreadable(format!("`{path}` of skill `{}`: {e}", self.name))
        };
        let dir = cap_std::fs::Dir::open_ambient_dir(&self.dir, cap_std::ambient_authority())
            .map_err(unreadable)?;
        let file = dir.open(rel).map_err(unreadable)?;
        let meta = file.metadata().map_err(unreadable)?;
        if !meta.is_file() {
            return invalid(format!("`{path}` is not a file"));
        }
        if meta.len() > MAX_RESOURCE_BYTES {
            return invalid(format!(
                "`{path}` is {} bytes; a resource is read whole up to {MAX_RESOURCE_BYTES} bytes",
                meta.len()
            ));
        }
        let mut bytes = Vec::new();
        file.into_std()
            .take(MAX_RESOURCE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(unreadable)?;
        String::from_utf8(bytes).map_err(|_| {
            SkillError::Unreadable(format!(
                "`{path}` of skill `{}` is not UTF-8 text",
                self.name
            ))
        })
    }
}

/// One directory of skills to scan.
pub struct Root {
    pub dir: PathBuf,
    /// From `writable_dirs`: read as plain data, not as authority.
    pub writable: bool,
}

/// The directories `config` names, resolved against `workdir`, in order
/// (`dirs` first: a name found twice keeps the first).
pub fn roots(config: &SkillsConfig, workdir: &Path) -> Vec<Root> {
    if !config.enabled {
        return Vec::new();
    }
    let protected = config
        .dirs
        .iter()
        .map(|d| (workdir.join(d.as_written()), false));
    let writable = config
        .writable_dirs
        .iter()
        .map(|d| (workdir.join(d.as_written()), true));
    protected
        .chain(writable)
        .map(|(dir, writable)| Root { dir, writable })
        .collect()
}

/// Scans the skill directories `config` names. `journal` is the state
/// directory's journal of protected paths (see
/// [`crate::state::read_authority`]): a `SKILL.md` a sandboxed run may
/// have planted is not read.
pub fn scan(config: &SkillsConfig, workdir: &Path, journal: Option<&Path>) -> Catalog {
    let mut catalog = Catalog::default();
    let exposed = match journal.map(crate::state::exposed_now).transpose() {
        Ok(e) => e.unwrap_or_default(),
        Err(e) => {
            catalog.problems.push(format!("no skill is read: {e}"));
            return catalog;
        }
    };
    for root in roots(config, workdir) {
        if !root.writable && exposed_root(&root.dir, workdir, &exposed) {
            catalog.problems.push(format!(
                "{}: not read now: a sandboxed run may be writing there (it is protected; what it leaves is moved aside when it ends); read at the next reload",
                root.dir.display()
            ));
            continue;
        }
        let entries = match std::fs::read_dir(&root.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                catalog
                    .problems
                    .push(format!("{}: cannot be read: {e}", root.dir.display()));
                continue;
            }
        };
        let mut dirs: Vec<(String, PathBuf, std::fs::FileType)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                Some((name, e.path(), e.file_type().ok()?))
            })
            .filter(|(name, ..)| !name.starts_with('.'))
            .collect();
        dirs.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, path, kind) in dirs {
            if kind.is_symlink() {
                catalog.problems.push(format!(
                    "{}: a symlink; a skill is read from a directory of its own (copy it, or list its directory in [skills] dirs)",
                    path.display()
                ));
                continue;
            }
            if !kind.is_dir() {
                continue;
            }
            if catalog.skills.len() >= MAX_SKILLS {
                catalog.problems.push(format!(
                    "{}: not loaded: a catalog holds at most {MAX_SKILLS} skills",
                    path.display()
                ));
                continue;
            }
            match load(&name, &path, root.writable, journal, workdir) {
                Ok(skill) => {
                    if let Some(first) = catalog.skills.get(&skill.name) {
                        catalog.problems.push(format!(
                            "{}: not loaded: skill `{}` is already loaded from {}",
                            path.display(),
                            skill.name,
                            first.dir.display()
                        ));
                    } else {
                        catalog.skills.insert(skill.name.clone(), Arc::new(skill));
                    }
                }
                Err(why) => catalog.problems.push(format!(
                    "{}: not loaded: {why}",
                    path.join("SKILL.md").display()
                )),
            }
        }
    }
    catalog
}

/// Whether a live sandboxed run may be creating `dir` or something below
/// it (an absent protected directory it can reach, see
/// [`crate::state::exposed_now`]). `dir` is compared as written, under the
/// canonical working directory, and as it resolves now (a run may have
/// made one of its directories a symlink).
fn exposed_root(dir: &Path, workdir: &Path, exposed: &[PathBuf]) -> bool {
    if exposed.is_empty() {
        return false;
    }
    let mut forms = vec![dir.to_path_buf()];
    if let Ok(rel) = dir.strip_prefix(workdir)
        && let Ok(w) = workdir.canonicalize()
    {
        forms.push(w.join(rel));
    }
    // The nearest existing ancestor, resolved, and the rest as written.
    let mut existing = dir;
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(existing).is_err() {
        match (existing.parent(), existing.file_name()) {
            (Some(up), Some(name)) => {
                rest.push(name);
                existing = up;
            }
            _ => break,
        }
    }
    if let Ok(c) = existing.canonicalize() {
        forms.push(rest.iter().rev().fold(c, |at, n| at.join(n)));
    }
    forms
        .iter()
        .any(|f| exposed.iter().any(|e| e.starts_with(f) || f.starts_with(e)))
}

/// One skill from its directory.
fn load(
    dir_name: &str,
    dir: &Path,
    writable: bool,
    journal: Option<&Path>,
    workdir: &Path,
) -> Result<Skill, String> {
    let file = dir.join("SKILL.md");
    let meta = match std::fs::symlink_metadata(&file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("the directory has no SKILL.md".into());
        }
        Err(e) => return Err(e.to_string()),
    };
    if !meta.is_file() {
        return Err("SKILL.md is not a regular file (a symlink is not followed)".into());
    }
    if meta.len() > MAX_SKILL_FILE {
        return Err(format!(
            "SKILL.md is {} bytes, more than the {MAX_SKILL_FILE} accepted",
            meta.len()
        ));
    }
    let text = if writable {
        std::fs::read_to_string(&file).map_err(|e| e.to_string())?
    } else {
        match crate::state::read_authority(&file, journal) {
            Ok(Some(t)) => t,
            Ok(None) => return Err("SKILL.md vanished while it was read".into()),
            Err(e) => return Err(e.to_string()),
        }
    };
    if text.len() as u64 > MAX_SKILL_FILE {
        return Err(format!(
            "SKILL.md grew past {MAX_SKILL_FILE} bytes while it was read"
        ));
    }
    let (yaml, body) = front_matter::split(&text)?;
    let fm = front_matter::parse(yaml)?;
    check_name(&fm.name)?;
    if fm.name != dir_name {
        return Err(format!(
            "its name `{}` is not its directory's, `{dir_name}` (they must match)",
            fm.name
        ));
    }
    let description = fm.description.trim().to_string();
    if description.is_empty() {
        return Err(
            "its description is empty: say what the skill is for and when to use it".into(),
        );
    }
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(format!(
            "its description is {} characters, more than the {MAX_DESCRIPTION} accepted",
            description.chars().count()
        ));
    }
    let (resources, resources_truncated) = list_resources(dir);
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let workdir_path = workdir
        .canonicalize()
        .ok()
        .and_then(|w| dir.strip_prefix(w).ok().map(|r| r.display().to_string()));
    Ok(Skill {
        name: fm.name,
        description,
        body: body.to_string(),
        digest: format!("sha256:{:x}", Sha256::digest(text.as_bytes())),
        dir,
        writable,
        workdir_path,
        resources,
        resources_truncated,
    })
}

/// A name as the Agent Skills layout writes it.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "its name `{}` is not 1 to {MAX_NAME} of a-z, 0-9 and single hyphens inside",
            name.chars().take(80).collect::<String>()
        ))
    }
}

/// The files below `dir` but its `SKILL.md`, relative, sorted; hidden
/// names and symlinks are left out. `true` when some were not listed.
fn list_resources(dir: &Path) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let mut truncated = false;
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((at, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') || (depth == 0 && name == "SKILL.md") {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                if depth + 1 < MAX_RESOURCE_DEPTH {
                    pending.push((path, depth + 1));
                } else {
                    truncated = true;
                }
            } else if kind.is_file() {
                if out.len() >= MAX_RESOURCES {
                    truncated = true;
                    continue;
                }
                if let Ok(rel) = path.strip_prefix(dir)
                    && let Some(rel) = rel.to_str()
                {
                    out.push(rel.to_string());
                }
            }
        }
    }
    out.sort();
    (out, truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory of this test's own.
    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("toolgate-skills-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn skill(root: &Path, name: &str, text: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), text).unwrap();
        dir
    }

    fn config(dirs: &[&Path]) -> SkillsConfig {
        SkillsConfig {
            enabled: true,
            dirs: dirs.iter().map(|d| d.to_path_buf().into()).collect(),
            writable_dirs: Vec::new(),
        }
    }

    #[test]
    fn a_catalog_holds_good_skills_and_says_why_of_the_rest() {
        let tmp = scratch("catalog");
        let (a, b) = (tmp.join("a"), tmp.join("b"));
        let good = skill(
            &a,
            "pdf",
            "---\nname: pdf\ndescription: Fill PDF forms.\n---\nUse forms.py.\n",
        );
        std::fs::create_dir_all(good.join("scripts/deep")).unwrap();
        std::fs::write(good.join("scripts/forms.py"), "print(1)").unwrap();
        std::fs::write(good.join("scripts/deep/x.md"), "x").unwrap();
        std::fs::write(good.join(".hidden"), "x").unwrap();
        skill(&a, "wrong", "---\nname: other\ndescription: x\n---\n");
        skill(&a, "Bad_Name", "---\nname: Bad_Name\ndescription: x\n---\n");
        skill(&a, "bare", "no front matter\n");
        std::fs::create_dir_all(a.join("empty")).unwrap();
        std::os::unix::fs::symlink(&good, a.join("linked")).unwrap();
        skill(&b, "pdf", "---\nname: pdf\ndescription: Another.\n---\n");
        skill(
            &b,
            "big",
            &format!(
                "---\nname: big\ndescription: x\n---\n{}",
                "x".repeat(MAX_SKILL_FILE as usize)
            ),
        );
        let c = scan(&config(&[&a, &b, &tmp.join("absent")]), &tmp, None);
        let names: Vec<&str> = c.skills().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["pdf"]);
        let pdf = c.get("pdf").unwrap();
        assert_eq!(pdf.description, "Fill PDF forms.");
        assert_eq!(pdf.body, "Use forms.py.\n");
        assert_eq!(pdf.resources, ["scripts/deep/x.md", "scripts/forms.py"]);
        assert!(pdf.digest.starts_with("sha256:") && pdf.digest.len() == 71);
        let problems = c.problems().join("\n");
        for why in [
            "is not its directory's",
            "a-z, 0-9",
            "does not start",
            "has no SKILL.md",
            "a symlink",
            "already loaded from",
            "bytes, more than",
        ] {
            assert!(problems.contains(why), "{why}: {problems}");
        }
        assert_eq!(pdf.read("scripts/forms.py").unwrap(), "print(1)");
        for bad in [
            "../wrong/SKILL.md",
            "/etc/passwd",
            "./scripts/forms.py",
            "SKILL.md",
            ".hidden",
        ] {
            assert!(pdf.read(bad).is_err(), "{bad}");
        }
        assert!(matches!(c.find("nope"), Err(SkillError::NotFound(m)) if m.contains("pdf")));
        assert!(matches!(
            c.find(&"x".repeat(65)),
            Err(SkillError::InvalidRequest(_))
        ));
        // A resource replaced by a symlink after the scan is not followed out.
        std::fs::remove_file(good.join("scripts/forms.py")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", good.join("scripts/forms.py")).unwrap();
        assert!(pdf.read("scripts/forms.py").is_err());
    }

    #[test]
    fn disabled_means_none() {
        let tmp = scratch("disabled");
        skill(&tmp, "a", "---\nname: a\ndescription: x\n---\n");
        let mut c = config(&[&tmp]);
        assert_eq!(scan(&c, &tmp, None).len(), 1);
        c.enabled = false;
        assert!(scan(&c, &tmp, None).is_empty());
    }
}
