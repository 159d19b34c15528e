//! What a component is, read from its type: which roles it exports, which
//! seams it imports, and which version of the contract it was built for.
//!
//! A component's roles are exactly the `toolgate:plugin` interfaces it
//! exports. A component built against an incompatible version of the
//! package is refused with both versions named.

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::policy::Role;

/// The WIT package this host speaks.
pub const PACKAGE: &str = "toolgate:plugin";
/// Its version.
pub const VERSION: &str = "0.1.0";

/// The seams a component may import, by interface name.
pub const SEAMS: &[&str] = &["shell", "subprocess"];

/// What the type of a component says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    pub roles: Vec<Role>,
    /// The package version the component was built against.
    pub version: String,
    /// Every imported interface.
    pub imports: Vec<String>,
    /// The `toolgate:plugin` seams imported (`shell`, `subprocess`).
    pub seams: Vec<String>,
}

/// `toolgate:plugin/guard@0.1.0` → (`toolgate:plugin`, `guard`, `0.1.0`).
pub fn split_name(name: &str) -> Option<(&str, &str, Option<&str>)> {
    let (pkg, rest) = name.split_once('/')?;
    match rest.split_once('@') {
        Some((iface, version)) => Some((pkg, iface, Some(version))),
        None => Some((pkg, rest, None)),
    }
}

/// Whether a guest built against `theirs` can be served by a host at
/// `ours`: same major version, and for 0.x the same minor too.
pub fn compatible(ours: &str, theirs: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64)> {
        let mut it = v.split(['.', '-', '+']);
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    match (parse(ours), parse(theirs)) {
        (Some((0, a)), Some((0, b))) => a == b,
        (Some((a, _)), Some((b, _))) => a == b,
        _ => false,
    }
}

/// Read the shape of a component; `Err` explains what is wrong.
pub fn inspect(engine: &Engine, component: &Component) -> Result<Shape, String> {
    let ty = component.component_type();
    let mut roles = Vec::new();
    let mut versions = Vec::new();
    let mut problems = Vec::new();
    let mut exports = Vec::new();
    for (name, _) in ty.exports(engine) {
        exports.push(name.to_string());
        let Some((pkg, iface, version)) = split_name(name) else {
            continue;
        };
        if pkg != PACKAGE {
            continue;
        }
        let version = version.unwrap_or("(none)");
        if !compatible(VERSION, version) {
            problems.push(format!(
                "exports `{name}`, built against {PACKAGE}@{version}, but this host speaks {PACKAGE}@{VERSION}; rebuild the plugin against {PACKAGE}@{VERSION}"
            ));
            continue;
        }
        match Role::ALL.iter().find(|r| r.interface() == iface) {
            Some(role) => {
                roles.push(*role);
                versions.push(version.to_string());
            }
            None => problems.push(format!(
                "exports `{name}`, which is not a role of {PACKAGE}@{VERSION}"
            )),
        }
    }
    let mut imports = Vec::new();
    let mut seams = Vec::new();
    for (name, _) in ty.imports(engine) {
        imports.push(name.to_string());
        if let Some((pkg, iface, version)) = split_name(name)
            && pkg == PACKAGE
        {
            let version = version.unwrap_or("(none)");
            if !compatible(VERSION, version) {
                problems.push(format!(
                    "imports `{name}`, built against {PACKAGE}@{version}, but this host speaks {PACKAGE}@{VERSION}"
                ));
            }
            if SEAMS.contains(&iface) {
                seams.push(iface.to_string());
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    if roles.is_empty() {
        return Err(format!(
            "exports no {PACKAGE} role (its exports: {}); a plugin must export at least one of: {}",
            if exports.is_empty() {
                "none".to_string()
            } else {
                exports.join(", ")
            },
            Role::ALL
                .iter()
                .map(|r| format!("{PACKAGE}/{}", r.interface()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    roles.sort();
    Ok(Shape {
        roles,
        version: versions
            .into_iter()
            .next()
            .unwrap_or_else(|| VERSION.to_string()),
        imports,
        seams,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(compatible("0.1.0", "0.1.3"));
        assert!(!compatible("0.1.0", "0.2.0"));
        assert!(!compatible("0.1.0", "1.0.0"));
        assert!(compatible("1.2.0", "1.0.0"));
        assert!(!compatible("0.1.0", "garbage"));
    }

    #[test]
    fn names() {
        assert_eq!(
            split_name("toolgate:plugin/guard@0.1.0"),
            Some(("toolgate:plugin", "guard", Some("0.1.0")))
        );
        assert_eq!(
            split_name("wasi:cli/stdout"),
            Some(("wasi:cli", "stdout", None))
        );
        assert_eq!(split_name("nonsense"), None);
    }
}
