//! Compiles the first-party plugins in `plugins/` to components and
//! generates the table that embeds them in the binary.

use std::fmt::Write;
use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().unwrap().to_path_buf();
    let guests = toolgate_guest_build::discover(&workspace.join("plugins"));
    let built = toolgate_guest_build::build(&workspace, &guests);
    let mut table = String::from("pub static BUILTIN: &[(&str, &[u8], &str)] = &[\n");
    for b in &built {
        let manifest = b.guest.dir.join("plugin.toml");
        let manifest = if manifest.exists() {
            format!("include_str!({:?})", manifest.display().to_string())
        } else {
            "\"\"".to_string()
        };
        writeln!(
            table,
            "    ({:?}, include_bytes!({:?}), {manifest}),",
            b.guest.name,
            b.wasm.display().to_string()
        )
        .unwrap();
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("builtin_plugins.rs");
    std::fs::write(out, table).unwrap();
}
