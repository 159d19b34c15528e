//! `toolgate new KIND NAME --lang LANG`: a project for a tool or a policy,
//! outside the toolgate tree, that builds to a working component on the
//! first try.
//!
//! Every project has the same shape whatever the language: the source, a
//! `build.sh` that produces `NAME.wasm` (the plugin's name is the file
//! stem), a `test.sh` that builds it and runs `toolgate check --call` and
//! `toolgate check --conformance` on it, a `call.json` to try, and a
//! README with the commands. Python, JavaScript and C projects carry the
//! contract's WIT (`wit/deps/toolgate-plugin`) and a world of their own
//! (`wit/world.wit`) that imports only what they use — a seam there needs
//! the operator's grant. A Rust project depends on the SDK: the checkout
//! this binary was built from when it still exists, else the repository it
//! names, else `new` refuses and asks for `--sdk-path` or `--sdk-git`; it
//! pins a toolchain with the `wasm32-wasip2` target.
//!
//! What `new` makes builds and passes its own `test.sh` as generated, or
//! `new` says what is missing (which tool, the command that installs it)
//! before creating anything; tools installed by `scripts/toolchains.sh` but
//! not on `PATH` are named with the `export PATH=…` line to add.
//!
//! Each kind does the same small, real thing in every language (a setting
//! `WORD`, default `forbidden`): the tool greets; the guard denies calls
//! whose arguments mention WORD; the pre-execute hook asks before tools
//! annotated destructive; the post-execute hook blocks results mentioning
//! WORD; the finalizer masks WORD; the observer logs one line per result.

mod toolchain;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};

#[derive(Args, Debug)]
pub struct NewArgs {
    /// What to make.
    #[arg(value_enum)]
    kind: Kind,
    /// The plugin's name (its file stem): letters, digits, `-`, `_`.
    name: String,
    /// The language.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
    /// Where to create the project directory NAME (default: here).
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
    /// Rust: depend on the SDK in this local checkout (`.../sdk`) instead
    /// of the git repository.
    #[arg(long, value_name = "PATH")]
    sdk_path: Option<PathBuf>,
    /// Rust: the git repository of the SDK (default: the repository this
    /// toolgate was built from).
    #[arg(long, value_name = "URL")]
    sdk_git: Option<String>,
    /// Create the project even though its toolchain is not installed here
    /// (to build it elsewhere).
    #[arg(long)]
    without_toolchain: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    Tool,
    Guard,
    PreHook,
    PostHook,
    Finalizer,
    Observer,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
    C,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Guard => "guard",
            Kind::PreHook => "pre-execute hook",
            Kind::PostHook => "post-execute hook",
            Kind::Finalizer => "finalizer",
            Kind::Observer => "result observer",
        }
    }
    /// The contract's world for this role.
    fn world(self) -> &'static str {
        match self {
            Kind::Tool => "tool-plugin",
            Kind::Guard => "guard-plugin",
            Kind::PreHook => "pre-execute-plugin",
            Kind::PostHook => "post-execute-plugin",
            Kind::Finalizer => "finalizer-plugin",
            Kind::Observer => "observer-plugin",
        }
    }
}

/// The contract, as this binary speaks it.
const WIT: &[(&str, &str)] = &[
    ("types.wit", include_str!("../../wit/types.wit")),
    ("roles.wit", include_str!("../../wit/roles.wit")),
    ("seams.wit", include_str!("../../wit/seams.wit")),
    ("worlds.wit", include_str!("../../wit/worlds.wit")),
];

/// `wasi:cli/environment`, where the host puts a plugin's settings (for
/// the JavaScript and C projects; Python reads `os.environ`).
const WASI_ENV: &str = include_str!("new/wasi-cli-environment.wit");

/// The world of the JavaScript and C projects: the role's world plus the
/// environment (the operator's settings).
const WORLD_WITH_ENVIRONMENT: &str = include_str!("new/world-env.wit.in");

/// The source template of `kind` in `lang`: `new/<lang>/<kind><ext>`, one
/// file per kind, read at build time.
macro_rules! by_kind {
    ($lang:literal, $ext:literal, $kind:expr) => {
        match $kind {
            Kind::Tool => include_str!(concat!("new/", $lang, "/tool", $ext)),
            Kind::Guard => include_str!(concat!("new/", $lang, "/guard", $ext)),
            Kind::PreHook => include_str!(concat!("new/", $lang, "/pre-hook", $ext)),
            Kind::PostHook => include_str!(concat!("new/", $lang, "/post-hook", $ext)),
            Kind::Finalizer => include_str!(concat!("new/", $lang, "/finalizer", $ext)),
            Kind::Observer => include_str!(concat!("new/", $lang, "/observer", $ext)),
        }
    };
}

pub fn run(args: NewArgs) -> anyhow::Result<ExitCode> {
    let name = &args.name;
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        bail!(
            "`{name}` is not a valid plugin name: use 1–64 letters, digits, `-` and `_` (the name is the .wasm file's stem)"
        );
    }
    let dir = args.dir.join(name);
    if dir.exists() {
        bail!(
            "{} already exists; choose another name or --dir",
            dir.display()
        );
    }
    // Everything that can refuse runs before anything is created.
    let path_advice = toolchain::check(args.lang, args.without_toolchain)?;
    let files = match args.lang {
        Lang::Rust => rust(&args)?,
        Lang::Python => python(&args),
        Lang::Js => js(&args),
        Lang::C => c(&args),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (path, text) in &files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        if path.extension().is_some_and(|e| e == "sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    println!(
        "created {} ({} {}, in {})",
        dir.display(),
        args.kind.label(),
        name,
        lang_label(args.lang)
    );
    if let Some(advice) = path_advice {
        println!("{advice}");
    }
    println!(
        "next:\n  cd {}\n  ./build.sh      # -> {name}.wasm\n  ./test.sh       # toolgate check --call and --conformance",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `my-guard` -> `MyGuard`.
fn camel(name: &str) -> String {
    let s: String = name
        .split(['-', '_'])
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("P{s}")
    } else {
        s
    }
}

fn lang_label(l: Lang) -> &'static str {
    match l {
        Lang::Rust => "Rust",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
        Lang::C => "C",
    }
}

fn fill(template: &str, args: &NewArgs) -> String {
    template
        .replace("{{NAME}}", &args.name)
        .replace("{{SNAKE}}", &args.name.replace('-', "_"))
        .replace("{{KIND}}", args.kind.label())
        .replace("{{WORLD}}", args.kind.world())
        .replace("{{GUARD}}", &camel(&args.name))
}

/// The call `test.sh` tries.
fn call_json(kind: Kind) -> &'static str {
    match kind {
        Kind::Tool => "{\"name\": \"hello\", \"arguments\": {\"name\": \"toolgate\"}}\n",
        Kind::PreHook => "{\"name\": \"write\", \"arguments\": {\"path\": \"notes.txt\"}}\n",
        _ => {
            "{\"name\": \"bash\", \"arguments\": {\"command\": \"echo forbidden\", \"reply\": \"a forbidden word\"}}\n"
        }
    }
}

/// The README, from `new/README.md.in`.
const README: &str = include_str!("new/README.md.in");
/// `test.sh`, from `new/test.sh.in`.
const TEST_SH: &str = include_str!("new/test.sh.in");

/// Whether the scaffold of `kind` reads the setting `WORD`.
fn uses_word(kind: Kind) -> bool {
    matches!(kind, Kind::Guard | Kind::PostHook | Kind::Finalizer)
}

fn common(args: &NewArgs, build: &str, prerequisites: &str) -> Vec<(String, String)> {
    let settings = if uses_word(args.kind) {
        format!(
            "Its settings are the `vars` of `[plugins.{}]` in `toolgate.toml`; it reads\n`WORD` (default `forbidden`).\n",
            args.name
        )
    } else {
        String::new()
    };
    let readme = fill(README, args)
        .replace("{{LANG}}", lang_label(args.lang))
        .replace("{{PREREQUISITES}}", prerequisites)
        .replace("{{SETTINGS}}", &settings)
        .replace("{{BUILD}}", build);
    // The binary that made the project, for a machine where `toolgate` is
    // not on PATH (quoted for the shell).
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "toolgate".into());
    let test = fill(TEST_SH, args).replace("{{TOOLGATE}}", &shell_quote(&exe));
    vec![
        ("README.md".into(), readme),
        ("test.sh".into(), test),
        ("call.json".into(), call_json(args.kind).into()),
        (
            ".gitignore".into(),
            "*.wasm\ntarget/\n__pycache__/\n".into(),
        ),
    ]
}

/// The contract's WIT under `wit/deps/toolgate-plugin`, and a world.
fn wit_files(args: &NewArgs, world: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = WIT
        .iter()
        .map(|(f, text)| (format!("wit/deps/toolgate-plugin/{f}"), text.to_string()))
        .collect();
    files.push(("wit/world.wit".into(), fill(world, args)));
    files
}

/// `s` quoted for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The SDK of the checkout this binary was built from (known at build time;
/// it may since have moved or been removed).
const BUILT_FROM_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk");

/// The default SDK dependency: the checkout this binary was built from,
/// if it is still there; else the repository `repository` (the crate's
/// `repository` key), unless it is empty or under `.invalid` (a name that
/// never resolves); else a refusal naming the flags.
fn default_sdk(checkout: &std::path::Path, repository: &str) -> anyhow::Result<String> {
    let is_sdk = std::fs::read_to_string(checkout.join("Cargo.toml"))
        .is_ok_and(|t| t.contains("name = \"toolgate-sdk\""));
    if is_sdk && let Ok(p) = checkout.canonicalize() {
        return Ok(format!("{{ path = {:?} }}", p.display().to_string()));
    }
    let host = repository
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split(['/', ':']).next())
        .unwrap_or("");
    if !host.is_empty() && !host.ends_with(".invalid") {
        return Ok(format!("{{ git = {repository:?} }}"));
    }
    bail!(
        "cannot tell where the toolgate SDK is: this toolgate was built from a checkout that is no longer at {} and names no repository to fetch it from{}. Give --sdk-path PATH (the `sdk` directory of a toolgate checkout) or --sdk-git URL (the toolgate repository); nothing was created",
        checkout.display(),
        if repository.is_empty() {
            String::new()
        } else {
            format!(" (`{repository}` is not one)")
        }
    )
}

fn rust(args: &NewArgs) -> anyhow::Result<Vec<(String, String)>> {
    let sdk = match (&args.sdk_path, &args.sdk_git) {
        (Some(p), _) => {
            let p = p
                .canonicalize()
                .with_context(|| format!("--sdk-path {} does not exist", p.display()))?;
            if !p.join("Cargo.toml").exists() {
                bail!(
                    "--sdk-path {} is not the SDK's directory (it has no Cargo.toml); give the `sdk` directory of a toolgate checkout",
                    p.display()
                );
            }
            format!("{{ path = {:?} }}", p.display().to_string())
        }
        (None, Some(url)) => format!("{{ git = {url:?} }}"),
        (None, None) => default_sdk(
            std::path::Path::new(BUILT_FROM_SDK),
            env!("CARGO_PKG_REPOSITORY"),
        )?,
    };
    let cargo = fill(include_str!("new/rust/Cargo.toml.in"), args)
        .replace("{{RUST_VERSION}}", env!("CARGO_PKG_RUST_VERSION"))
        .replace("{{SDK}}", &sdk);
    let mut files = common(
        args,
        "cargo build --release --target wasm32-wasip2",
        &format!(
            "Needs Rust {} or later (`rust-toolchain.toml` asks rustup for stable and the `wasm32-wasip2` target).",
            env!("CARGO_PKG_RUST_VERSION")
        ),
    );
    files.push(("Cargo.toml".into(), cargo));
    files.push((
        "rust-toolchain.toml".into(),
        include_str!("new/rust/rust-toolchain.toml").into(),
    ));
    files.push((
        "build.sh".into(),
        fill(include_str!("new/rust/build.sh.in"), args),
    ));
    files.push((
        "src/lib.rs".into(),
        fill(by_kind!("rust", ".rs.in", args.kind), args),
    ));
    Ok(files)
}

fn python(args: &NewArgs) -> Vec<(String, String)> {
    let build = "componentize-py -d wit -w component componentize app -o {{NAME}}.wasm";
    let mut files = common(
        args,
        &fill(build, args),
        &format!(
            "Needs componentize-py on `PATH`, the version toolgate is tested with:\n\n\
             ```sh\n{}\n```\n\n\
             (or `scripts/toolchains.sh python` in a toolgate checkout, then\n\
             `export PATH=\"$PWD/target/toolchains/python/bin:$PATH\"` there).\n\n\
             componentize-py keeps every import of the world, so `wit/world.wit` imports\n\
             no seam; add one there (and ask the operator for its grant) only if the code\n\
             uses it.",
            toolchain::pip_install()
        ),
    );
    files.push((
        "build.sh".into(),
        fill(include_str!("new/python/build.sh.in"), args),
    ));
    files.extend(wit_files(args, include_str!("new/python/world.wit.in")));
    let settings = if uses_word(args.kind) {
        include_str!("new/python/settings.py")
    } else {
        ""
    };
    let source = [
        include_str!("new/python/head.py.in"),
        settings,
        by_kind!("python", ".py.in", args.kind),
    ]
    .concat();
    files.push(("app.py".into(), fill(&source, args)));
    files
}

fn js(args: &NewArgs) -> Vec<(String, String)> {
    let mut files = common(
        args,
        &fill(
            "componentize-js app.js --wit wit --world-name component -d http -d fetch-event -o {{NAME}}.wasm",
            args,
        ),
        &format!(
            "Needs Node.js, and componentize-js on `PATH`, the version toolgate is\n\
             tested with:\n\n\
             ```sh\n{}\nexport PATH=\"$PWD/node_modules/.bin:$PATH\"\n```\n\n\
             (or `scripts/toolchains.sh js` in a toolgate checkout, then\n\
             `export PATH=\"$PWD/target/toolchains/js/node_modules/.bin:$PATH\"` there).\n\n\
             The flags `-d http -d fetch-event` leave out `wasi:http`: without them the\n\
             component still loads and runs, but it imports `wasi:http` (so it takes the\n\
             asynchronous call path, on a fiber) and carries an HTTP handler it never uses.\n\
             componentize-js runs the module's top level at build time, when no import\n\
             works: read settings in the first call, as `app.js` does.",
            toolchain::npm_install()
        ),
    );
    files.push((
        "build.sh".into(),
        fill(include_str!("new/js/build.sh.in"), args),
    ));
    files.extend(wit_files(args, WORLD_WITH_ENVIRONMENT));
    files.push(("wit/deps/wasi-cli/environment.wit".into(), WASI_ENV.into()));
    let settings = if uses_word(args.kind) {
        include_str!("new/js/settings.js")
    } else {
        ""
    };
    let source = [
        include_str!("new/js/head.js.in"),
        settings,
        by_kind!("js", ".js.in", args.kind),
    ]
    .concat();
    files.push(("app.js".into(), fill(&source, args)));
    files
}

fn c(args: &NewArgs) -> Vec<(String, String)> {
    let build = "wit-bindgen c + clang-19 --target=wasm32-wasi + wasm-tools component new";
    let mut files = common(
        args,
        build,
        &format!(
            "Needs, on `PATH`, clang-19 and wasm-ld-19 with wasi-libc, `wit-bindgen` and\n\
             `wasm-tools`, the versions toolgate is tested with:\n\n\
             ```sh\napt-get install {apt}\n{wbg}\n{pip}\n```\n\n\
             (or `scripts/toolchains.sh apt c` in a toolgate checkout, then\n\
             `export PATH=\"$PWD/target/toolchains/cargo/bin:$PWD/target/toolchains/python/bin:$PATH\"`\n\
             there).\n\n\
             The core module imports no WASI preview 1 function (no stdio, no getenv:\n\
             settings come through `wasi:cli/environment`), so no adapter is needed. Every\n\
             export must drop the borrowed `call`/`call-result` handles it was given\n\
             (`…_drop_borrow`) before it returns, or the host traps it.\n\n\
             The C names come from the world `component` in `wit/world.wit`: strings are\n\
             `component_string_t`; the contract's types are `toolgate_plugin_types_*`; the\n\
             export to write is `exports_toolgate_plugin_<interface>_<function>` (this one's\n\
             are in `app.c`; every name is in the generated `component.h`: `wit-bindgen c wit\n\
             --world component --out-dir gen`). `json.h` reads a string member of the\n\
             arguments (`json_get_string`, escapes decoded) and quotes a value\n\
             (`json_quote`).",
            apt = toolchain::APT,
            wbg = toolchain::cargo_install_wit_bindgen(),
            pip = toolchain::pip_install(),
        ),
    );
    files.push((
        "build.sh".into(),
        fill(include_str!("new/c/build.sh.in"), args),
    ));
    files.extend(wit_files(args, WORLD_WITH_ENVIRONMENT));
    files.push(("wit/deps/wasi-cli/environment.wit".into(), WASI_ENV.into()));
    let source = [
        include_str!("new/c/head.c.in"),
        by_kind!("c", ".c.in", args.kind),
    ]
    .concat();
    files.push(("app.c".into(), fill(&source, args)));
    files.push(("json.h".into(), JSON_H.into()));
    files
}

/// The C scaffold's JSON helpers, from `new/json.h`.
const JSON_H: &str = include_str!("new/json.h");

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Issue 25: with no checkout and no usable repository, `new` refuses
    /// and names both flags (it once wrote `git = ""`).
    #[test]
    fn the_default_sdk_is_the_checkout_else_the_repository_else_a_refusal() {
        let here = Path::new(super::BUILT_FROM_SDK);
        let sdk = super::default_sdk(here, "").unwrap();
        assert!(sdk.starts_with("{ path = "), "{sdk}");
        let gone = Path::new("/nonexistent/toolgate/sdk");
        let git = super::default_sdk(gone, "https://git.example.org/toolgate").unwrap();
        assert_eq!(git, "{ git = \"https://git.example.org/toolgate\" }");
        for repository in ["", "https://example.invalid/toolgate"] {
            let e = super::default_sdk(gone, repository)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("--sdk-path")
                    && e.contains("--sdk-git")
                    && e.contains("nothing was created"),
                "{e}"
            );
        }
    }
}
