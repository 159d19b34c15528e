//! The `skills` seam: the skills of `[skills]` ([`crate::skills`]), for a
//! component granted `skills = true`.
//!
//! The catalog a component sees is the one in its grant: the catalog of
//! the reload that loaded it (a changed catalog is a changed grant, so the
//! plugin is loaded again and its `list-tools` sees the new one). Nothing
//! here writes; every size the guest gives is capped (a name at
//! [`crate::skills::MAX_NAME`] bytes, a path at
//! [`crate::skills::MAX_PATH`]), and a resource is read below its skill's
//! directory only ([`crate::skills::Skill::read`]).
//!
//! The seam as a unit (see [`crate::seams`]): granted by `skills = true`
//! ([`seam`]); no state of its own; its functions never wait (the catalog
//! is in memory, a resource a bounded local read), so a component
//! importing it may take the synchronous path.

use wasmtime::component::HasData;

use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin::skills as wit;
use crate::call::{Misuse, Notes};
use crate::grants::{Capability, Grants};
use crate::skills::{Catalog, SkillError};

/// The `skills` seam: granted by `skills = true`.
pub fn seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "skills",
        capability: Capability::Skills,
        sync: true,
        granted: |g| {
            if g.skills.is_some() {
                Ok(())
            } else {
                Err("skills = true")
            }
        },
        link: |linker| {
            wit::add_to_linker::<T, SkillsView<'static>>(linker, |t| SkillsView::new(t.seams()))
        },
    }
}

/// What the `skills` interface sees of a store: the plugin's grant (its
/// catalog).
pub struct SkillsView<'a> {
    plugin: &'a str,
    grants: &'a Grants,
    notes: Option<&'a Notes>,
}

impl<'a> SkillsView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        SkillsView {
            plugin: ctx.plugin,
            grants: ctx.grants,
            notes: ctx.call.map(|c| &c.notes),
        }
    }

    fn catalog(&self) -> wasmtime::Result<&'a Catalog> {
        self.grants.skills.as_deref().ok_or_else(|| {
            Misuse(format!(
                "plugin `{}` is not granted the skills seam (`skills = true` in its grants)",
                self.plugin
            ))
            .into()
        })
    }
}

impl HasData for SkillsView<'static> {
    type Data<'a> = SkillsView<'a>;
}

fn to_wit(e: SkillError) -> wit::SkillsError {
    match e {
        SkillError::NotFound(m) => wit::SkillsError::NotFound(m),
        SkillError::InvalidRequest(m) => wit::SkillsError::InvalidRequest(m),
        SkillError::Unreadable(m) => wit::SkillsError::Unreadable(m),
    }
}

impl wit::Host for SkillsView<'_> {
    fn list(&mut self) -> wasmtime::Result<Vec<wit::SkillSummary>> {
        Ok(self
            .catalog()?
            .skills()
            .map(|s| wit::SkillSummary {
                name: s.name.clone(),
                description: s.description.clone(),
            })
            .collect())
    }

    fn load(&mut self, name: String) -> wasmtime::Result<Result<wit::Skill, wit::SkillsError>> {
        let skill = match self.catalog()?.find(&name) {
            Ok(s) => s,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        // The audit record says which version the model was given.
        if let Some(n) = self.notes {
            n.push(
                serde_json::json!({"kind": "skill", "name": skill.name, "digest": skill.digest}),
            );
        }
        Ok(Ok(wit::Skill {
            name: skill.name.clone(),
            description: skill.description.clone(),
            body: skill.body.clone(),
            digest: skill.digest.clone(),
            resources: skill.resources.clone(),
            workdir_path: skill.workdir_path.clone(),
        }))
    }

    fn directory(&mut self, name: String) -> wasmtime::Result<Result<String, wit::SkillsError>> {
        Ok(self
            .catalog()?
            .find(&name)
            .map(|s| s.dir.display().to_string())
            .map_err(to_wit))
    }

    fn read(
        &mut self,
        name: String,
        path: String,
    ) -> wasmtime::Result<Result<String, wit::SkillsError>> {
        let catalog = self.catalog()?;
        Ok(catalog
            .find(&name)
            .and_then(|s| s.read(&path))
            .map_err(to_wit))
    }
}
