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
const WASI_ENV: &str = "// The one interface of `wasi:cli` these bindings call. The host serves
// every 0.2.x; 0.2.12 is the version componentize-js 0.23 itself imports.
package wasi:cli@0.2.12;

interface environment {
    get-environment: func() -> list<tuple<string, string>>;
    get-arguments: func() -> list<string>;
    initial-cwd: func() -> option<string>;
}
";

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
    let cargo = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n# The SDK needs Rust {rv} or later.\nrust-version = \"{rv}\"\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\n\n\
         [dependencies]\ntoolgate-sdk = {sdk}\nserde = {{ version = \"1\", features = [\"derive\"] }}\nserde_json = \"1\"\n\n\
         [profile.release]\nopt-level = 3\nstrip = \"debuginfo\"\npanic = \"abort\"\n\n\
         # A project of its own, even inside another workspace.\n[workspace]\n",
        name = args.name,
        rv = env!("CARGO_PKG_RUST_VERSION"),
    );
    let toolchain = "# Stable Rust and the WebAssembly target toolgate components are built for;\n# rustup installs both on first use.\n[toolchain]\nchannel = \"stable\"\ntargets = [\"wasm32-wasip2\"]\n";
    let build = format!(
        "#!/usr/bin/env bash\n# Build {name}.wasm (a component: wasm32-wasip2 produces one directly).\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\ncargo build --release --target wasm32-wasip2\ncp \"${{CARGO_TARGET_DIR:-target}}/wasm32-wasip2/release/{snake}.wasm\" {name}.wasm\n",
        name = args.name,
        snake = args.name.replace('-', "_"),
    );
    let mut files = common(
        args,
        "cargo build --release --target wasm32-wasip2",
        &format!(
            "Needs Rust {} or later (`rust-toolchain.toml` asks rustup for stable and the `wasm32-wasip2` target).",
            env!("CARGO_PKG_RUST_VERSION")
        ),
    );
    files.push(("Cargo.toml".into(), cargo));
    files.push(("rust-toolchain.toml".into(), toolchain.into()));
    files.push(("build.sh".into(), build));
    files.push(("src/lib.rs".into(), fill(rust_source(args.kind), args)));
    Ok(files)
}

fn rust_source(kind: Kind) -> &'static str {
    match kind {
        Kind::Tool => {
            r##"//! {{NAME}}: a toolgate tool.

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Schema, Tool, ToolError};

/// Greet someone.
#[derive(Deserialize, Schema)]
pub struct Hello {
    /// Who to greet.
    name: String,
}

#[derive(Serialize, Deserialize)]
pub struct Greeting {
    text: String,
}

impl Tool for Hello {
    const NAME: &'static str = "hello";
    type Output = Greeting;

    fn execute(self, _call: &Call) -> Result<Greeting, ToolError> {
        if self.name.trim().is_empty() {
            return Err(ToolError::invalid_input("`name` is empty"));
        }
        Ok(Greeting { text: greet(&self.name) })
    }

    fn render(v: Greeting) -> Vec<toolgate_sdk::ContentBlock> {
        vec![toolgate_sdk::Content::text(v.text)]
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

pub fn greet(name: &str) -> String {
    format!("Hello, {name}!")
}

toolgate_sdk::export! { tools: [Hello] }

#[cfg(test)]
mod tests {
    #[test]
    fn greets() {
        assert_eq!(super::greet("toolgate"), "Hello, toolgate!");
    }
}
"##
        }
        Kind::Guard => {
            r##"//! {{NAME}}: a toolgate guard. It denies calls whose arguments mention
//! the setting `WORD` (default `forbidden`). A guard can only deny; it
//! imports nothing that can wait, so the host calls it without a fiber.

use toolgate_sdk::{Call, Guard, setting};

struct {{GUARD}};

pub fn verdict(arguments: &str, word: &str) -> Option<String> {
    arguments
        .contains(word)
        .then(|| format!("{{NAME}}: the arguments mention `{word}`"))
}

impl Guard for {{GUARD}} {
    fn check(call: &Call) -> Option<String> {
        verdict(call.arguments_json(), &setting("WORD", "forbidden"))
    }
}

toolgate_sdk::export! { guard: {{GUARD}} }

#[cfg(test)]
mod tests {
    #[test]
    fn denies_the_word_only() {
        assert!(super::verdict(r#"{"command":"echo forbidden"}"#, "forbidden").is_some());
        assert!(super::verdict(r#"{"command":"ls"}"#, "forbidden").is_none());
    }
}
"##
        }
        Kind::PreHook => {
            r##"//! {{NAME}}: a toolgate pre-execute hook. It hears what the listeners
//! after it decide, keeps their deny or ask, and asks a person before a
//! tool annotated destructive runs.

use toolgate_sdk::{Annotations, Call, PreChain, PreDecision, PreExecuteHook};

struct {{GUARD}};

impl PreExecuteHook for {{GUARD}} {
    fn pre_execute(call: &Call, chain: PreChain) -> PreDecision {
        let inner = chain.next();
        if inner == PreDecision::Allow && call.annotations().contains(Annotations::DESTRUCTIVE) {
            return PreDecision::Ask(format!("`{}` may destroy data. Run it?", call.tool()));
        }
        inner
    }
}

toolgate_sdk::export! { pre_execute: {{GUARD}} }
"##
        }
        Kind::PostHook => {
            r##"//! {{NAME}}: a toolgate post-execute hook. It blocks results whose text
//! mentions the setting `WORD` (default `forbidden`); the model then sees
//! the feedback instead of the result.

use toolgate_sdk::{Call, Outcome, PostChain, PostDecision, PostExecuteHook, setting};

struct {{GUARD}};

impl PostExecuteHook for {{GUARD}} {
    fn post_execute(_call: &Call, result: &Outcome, chain: PostChain) -> PostDecision {
        let inner = chain.next();
        if inner != PostDecision::Accept {
            return inner;
        }
        let word = setting("WORD", "forbidden");
        if result.text().contains(&word) {
            return PostDecision::Block(format!("{{NAME}}: the result mentions `{word}` and was withheld"));
        }
        PostDecision::Accept
    }
}

toolgate_sdk::export! { post_execute: {{GUARD}} }
"##
        }
        Kind::Finalizer => {
            r##"//! {{NAME}}: a toolgate finalizer. It masks the setting `WORD` (default
//! `forbidden`) in the text the model sees; other content passes untouched.

use toolgate_sdk::{Call, ContentBlock, Finalizer, Outcome, setting};

struct {{GUARD}};

impl Finalizer for {{GUARD}} {
    fn finalize_content(_call: &Call, result: &Outcome) -> Option<Vec<ContentBlock>> {
        let word = setting("WORD", "forbidden");
        if word.is_empty() || !result.text().contains(&word) {
            return None; // nothing to change: nothing is copied back
        }
        Some(
            result
                .content()
                .iter()
                .cloned()
                .map(|b| match b {
                    ContentBlock::Text(t) => ContentBlock::Text(t.replace(&word, "[masked]")),
                    other => other,
                })
                .collect(),
        )
    }
}

toolgate_sdk::export! { finalizer: {{GUARD}} }
"##
        }
        Kind::Observer => {
            r##"//! {{NAME}}: a toolgate result observer. It logs one line per finished
//! call; it cannot change the result.

use toolgate_sdk::{Call, Outcome, ResultObserver, log};

struct {{GUARD}};

impl ResultObserver for {{GUARD}} {
    fn on_result(call: &Call, result: &Outcome) {
        let outcome = match result.error() {
            Some(e) => e.code.clone(),
            None => "ok".into(),
        };
        log::info(format!("{{NAME}}: {} -> {outcome}", call.tool()));
    }
}

toolgate_sdk::export! { observer: {{GUARD}} }
"##
        }
    }
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
        fill(
            "#!/usr/bin/env bash\n# Build {{NAME}}.wasm with componentize-py.\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\ncomponentize-py --quiet -d wit -w component componentize app -o {{NAME}}.wasm\n",
            args,
        ),
    ));
    files.extend(wit_files(
        args,
        "package local:{{NAME}};\n\n/// The contract's {{KIND}} world. Settings come as environment variables\n/// (`os.environ`), which componentize-py provides.\nworld component {\n    include toolgate:plugin/{{WORLD}}@0.2.2;\n}\n",
    ));
    files.push(("app.py".into(), fill(python_source(args.kind), args)));
    files
}

fn python_source(kind: Kind) -> &'static str {
    let settings = r##"import os

_word = None


def word():
    """The setting `WORD`, read on the first call (componentize-py runs the
    module's top level at build time, before the operator's settings exist)."""
    global _word
    if _word is None:
        _word = os.environ.get("WORD", "forbidden")
    return _word
"##;
    let body = match kind {
        Kind::Tool => {
            r##"
import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

PARAMETERS = json.dumps({
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Who to greet."}},
    "required": ["name"],
    "additionalProperties": False,
})


class Tool(exports.Tool):
    def list_tools(self):
        return [types.ToolSpec(
            name="hello", description="Greet someone.", parameters=PARAMETERS,
            output_schema=None, timeout_ms=None,
            annotations=types.ToolAnnotations.READ_ONLY | types.ToolAnnotations.IDEMPOTENT,
            features=types.ToolFeatures.CLASSIFIER)]

    def is_concurrency_safe(self, call):
        return True

    def execute(self, call):
        name = json.loads(call.arguments()).get("name", "")
        if not name.strip():
            raise Err(types.ToolFailure(name="InvalidInput", code="INVALID_INPUT",
                                        message="`name` is empty", details=None))
        return json.dumps(f"Hello, {name}!")

    def render(self, tool, value):
        return [types.ContentBlock_Text(json.loads(value))]

    def finalize_content(self, call, result):
        return None

    def present_call(self, call):
        return None

    def present_result(self, call, result):
        return None
"##
        }
        Kind::Guard => {
            r##"
from wit_world import exports


class Guard(exports.Guard):
    def check(self, call):
        w = word()
        if w in call.arguments():
            return f"{{NAME}}: the arguments mention `{w}`"
        return None
"##
        }
        Kind::PreHook => {
            r##"
from wit_world import exports
from wit_world.imports import pre_execute_chain, types


class PreExecuteHook(exports.PreExecuteHook):
    def pre_execute(self, call):
        inner = pre_execute_chain.next()
        if isinstance(inner, types.PreDecision_Allow) and \
                types.ToolAnnotations.DESTRUCTIVE in call.annotations():
            return types.PreDecision_Ask(f"`{call.tool_name()}` may destroy data. Run it?")
        return inner
"##
        }
        Kind::PostHook => {
            r##"
from wit_world import exports
from wit_world.imports import post_execute_chain, types


class PostExecuteHook(exports.PostExecuteHook):
    def post_execute(self, call, result):
        inner = post_execute_chain.next()
        if not isinstance(inner, types.PostDecision_Accept):
            return inner
        w = word()
        if w in result.text():
            return types.PostDecision_Block(f"{{NAME}}: the result mentions `{w}` and was withheld")
        return inner
"##
        }
        Kind::Finalizer => {
            r##"
from wit_world import exports
from wit_world.imports import types


class Finalizer(exports.Finalizer):
    def finalize_content(self, call, result):
        w = word()
        if not w or w not in result.text():
            return None
        return [types.ContentBlock_Text(b.value.replace(w, "[masked]"))
                if isinstance(b, types.ContentBlock_Text) else b
                for b in result.content()]
"##
        }
        Kind::Observer => {
            r##"
from wit_world import exports
from wit_world.imports import log


class ResultObserver(exports.ResultObserver):
    def on_result(self, call, result):
        error = result.error()
        outcome = error.code if error is not None else "ok"
        log.log(log.Level.INFO, f"{{NAME}}: {call.tool_name()} -> {outcome}")
"##
        }
    };
    // Leaked once per process: the scaffold runs once.
    let settings = if uses_word(kind) { settings } else { "" };
    Box::leak(format!("\"\"\"{{{{NAME}}}}: a toolgate {{{{KIND}}}} (made by `toolgate new`).\"\"\"\n\n{settings}{body}").into_boxed_str())
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
        fill(
            "#!/usr/bin/env bash\n# Build {{NAME}}.wasm with componentize-js (`-d http -d fetch-event`: no wasi:http).\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\ncomponentize-js app.js --wit wit --world-name component -d http -d fetch-event -o {{NAME}}.wasm >/dev/null\n",
            args,
        ),
    ));
    files.extend(wit_files(
        args,
        "package local:{{NAME}};\n\n/// The contract's {{KIND}} world, plus the environment (the operator's settings).\nworld component {\n    include toolgate:plugin/{{WORLD}}@0.2.2;\n    import wasi:cli/environment@0.2.12;\n}\n",
    ));
    files.push(("wit/deps/wasi-cli/environment.wit".into(), WASI_ENV.into()));
    let settings = "import { getEnvironment } from 'wasi:cli/environment@0.2.12';\n\nlet word = null;\n// The setting WORD, read on the first call (not at the top level: that\n// runs at build time).\nfunction setting() {\n  if (word === null) {\n    word = Object.fromEntries(getEnvironment()).WORD || 'forbidden';\n  }\n  return word;\n}\n";
    let body = match args.kind {
        Kind::Tool => {
            "\nexport const tool = {\n  listTools() {\n    return [{\n      name: 'hello',\n      description: 'Greet someone.',\n      parameters: JSON.stringify({\n        type: 'object',\n        properties: { name: { type: 'string', description: 'Who to greet.' } },\n        required: ['name'],\n        additionalProperties: false,\n      }),\n      outputSchema: undefined,\n      timeoutMs: undefined,\n      annotations: { readOnly: true, destructive: false, idempotent: true, openWorld: false },\n      features: { classifier: true, finalizer: false, presentCall: false, presentResult: false },\n    }];\n  },\n  isConcurrencySafe(call) { return true; },\n  execute(call) {\n    const { name } = JSON.parse(call.arguments());\n    return JSON.stringify(`Hello, ${name}!`);\n  },\n  render(tool, value) { return [{ tag: 'text', val: JSON.parse(value) }]; },\n  finalizeContent(call, result) { return undefined; },\n  presentCall(call) { return undefined; },\n  presentResult(call, result) { return undefined; },\n};\n"
        }
        Kind::Guard => {
            "\nexport const guard = {\n  check(call) {\n    const w = setting();\n    return call.arguments().includes(w) ? `{{NAME}}: the arguments mention \\`${w}\\`` : undefined;\n  },\n};\n"
        }
        Kind::PreHook => {
            "import { next } from 'toolgate:plugin/pre-execute-chain@0.2.2';\n\nexport const preExecuteHook = {\n  preExecute(call) {\n    const inner = next();\n    if (inner.tag === 'allow' && call.annotations().destructive) {\n      return { tag: 'ask', val: `\\`${call.toolName()}\\` may destroy data. Run it?` };\n    }\n    return inner;\n  },\n};\n"
        }
        Kind::PostHook => {
            "import { next } from 'toolgate:plugin/post-execute-chain@0.2.2';\n\nexport const postExecuteHook = {\n  postExecute(call, result) {\n    const inner = next();\n    if (inner.tag !== 'accept') return inner;\n    const w = setting();\n    if (result.text().includes(w)) {\n      return { tag: 'block', val: `{{NAME}}: the result mentions \\`${w}\\` and was withheld` };\n    }\n    return inner;\n  },\n};\n"
        }
        Kind::Finalizer => {
            "\nexport const finalizer = {\n  finalizeContent(call, result) {\n    const w = setting();\n    if (!w || !result.text().includes(w)) return undefined;\n    return result.content().map((b) =>\n      b.tag === 'text' ? { tag: 'text', val: b.val.split(w).join('[masked]') } : b);\n  },\n};\n"
        }
        Kind::Observer => {
            "import { log } from 'toolgate:plugin/log@0.2.2';\n\nexport const resultObserver = {\n  onResult(call, result) {\n    const error = result.error();\n    log('info', `{{NAME}}: ${call.toolName()} -> ${error ? error.code : 'ok'}`);\n  },\n};\n"
        }
    };
    let uses_setting = uses_word(args.kind);
    let source = format!(
        "// {{{{NAME}}}}: a toolgate {{{{KIND}}}} (made by `toolgate new`).\n{}{}",
        if uses_setting { settings } else { "" },
        body
    );
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
        fill(
            "#!/usr/bin/env bash\n# Build {{NAME}}.wasm: bindings, a core module for wasm32-wasi, a component.\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\ngen=\"$(mktemp -d)\"\ntrap 'rm -rf \"$gen\"' EXIT\nwit-bindgen c wit --world component --out-dir \"$gen\" > \"$gen/log\" 2>&1 || { cat \"$gen/log\" >&2; exit 1; }\nclang-19 --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Werror \\\n  -I \"$gen\" -o \"$gen/core.wasm\" app.c \"$gen/component.c\" \"$gen/component_component_type.o\"\nwasm-tools component new \"$gen/core.wasm\" -o {{NAME}}.wasm\nwasm-tools validate {{NAME}}.wasm\n",
            args,
        ),
    ));
    files.extend(wit_files(
        args,
        "package local:{{NAME}};\n\n/// The contract's {{KIND}} world, plus the environment (the operator's settings).\nworld component {\n    include toolgate:plugin/{{WORLD}}@0.2.2;\n    import wasi:cli/environment@0.2.12;\n}\n",
    ));
    files.push(("wit/deps/wasi-cli/environment.wit".into(), WASI_ENV.into()));
    files.push(("app.c".into(), fill(&c_source(args.kind), args)));
    files.push(("json.h".into(), JSON_H.into()));
    files
}

/// The C scaffold's JSON helpers, from `new/json.h`.
const JSON_H: &str = include_str!("new/json.h");

fn c_source(kind: Kind) -> String {
    let head = r##"// {{NAME}}: a toolgate {{KIND}} (made by `toolgate new`).
#include <stdlib.h>
#include <string.h>

#include "component.h"
#include "json.h"

typedef component_string_t string_t;

// The setting WORD (default "forbidden"), read on the first call.
static char *word = NULL;

__attribute__((unused)) static const char *setting(void) {
  if (word) return word;
  const char *value = "forbidden";
  size_t len = strlen(value);
  component_list_tuple2_string_string_t env;
  wasi_cli_environment_get_environment(&env);
  for (size_t i = 0; i < env.len; i++) {
    if (env.ptr[i].f0.len == 4 && memcmp(env.ptr[i].f0.ptr, "WORD", 4) == 0) {
      value = (const char *)env.ptr[i].f1.ptr;
      len = env.ptr[i].f1.len;
    }
  }
  word = malloc(len + 1);
  memcpy(word, value, len);
  word[len] = 0;
  component_list_tuple2_string_string_free(&env);
  return word;
}

// Does s[0..len) contain w?
__attribute__((unused)) static bool contains(const uint8_t *s, size_t len, const char *w) {
  size_t n = strlen(w);
  if (n == 0) return false;
  for (size_t i = 0; i + n <= len; i++)
    if (memcmp(s + i, w, n) == 0) return true;
  return false;
}

// A string the host will own (and free).
__attribute__((unused)) static void set(string_t *out, const char *a, const char *b, const char *c) {
  size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
  char *m = malloc(la + lb + lc);
  memcpy(m, a, la);
  memcpy(m + la, b, lb);
  memcpy(m + la + lb, c, lc);
  out->ptr = (uint8_t *)m;
  out->len = la + lb + lc;
}
"##;
    let body = match kind {
        Kind::Tool => {
            r##"
static void dup(string_t *out, const char *s) { component_string_dup(out, s); }

void exports_toolgate_plugin_tool_list_tools(exports_toolgate_plugin_tool_list_tool_spec_t *ret) {
  ret->len = 1;
  ret->ptr = calloc(1, sizeof(*ret->ptr));
  toolgate_plugin_types_tool_spec_t *t = ret->ptr;
  dup(&t->name, "hello");
  dup(&t->description, "Greet someone.");
  dup(&t->parameters,
      "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"description\":\"Who to greet.\"}},"
      "\"required\":[\"name\"],\"additionalProperties\":false}");
  t->output_schema.is_some = false;
  t->timeout_ms.is_some = false;
  t->annotations = TOOLGATE_PLUGIN_TYPES_TOOL_ANNOTATIONS_READ_ONLY | TOOLGATE_PLUGIN_TYPES_TOOL_ANNOTATIONS_IDEMPOTENT;
  t->features = TOOLGATE_PLUGIN_TYPES_TOOL_FEATURES_CLASSIFIER;
}

bool exports_toolgate_plugin_tool_is_concurrency_safe(exports_toolgate_plugin_tool_borrow_call_t call) {
  toolgate_plugin_types_call_drop_borrow(call);
  return true;
}

// "Hello, NAME!" as a JSON string, NAME the `name` argument (json.h decodes
// its escapes and quotes the answer).
bool exports_toolgate_plugin_tool_execute(exports_toolgate_plugin_tool_borrow_call_t call,
                                          exports_toolgate_plugin_tool_json_t *ret,
                                          exports_toolgate_plugin_tool_tool_failure_t *err) {
  (void)err;
  string_t args;
  toolgate_plugin_types_method_call_arguments(call, &args);
  toolgate_plugin_types_call_drop_borrow(call);
  char *name = json_get_string(args.ptr, args.len, "name");
  component_string_free(&args);
  string_t text;
  set(&text, "Hello, ", name ? name : "world", "!");
  free(name);
  char *plain = malloc(text.len + 1);
  memcpy(plain, text.ptr, text.len);
  plain[text.len] = 0;
  component_string_free(&text);
  char *quoted = json_quote(plain);
  free(plain);
  ret->ptr = (uint8_t *)quoted;
  ret->len = strlen(quoted);
  return true;
}

bool exports_toolgate_plugin_tool_render(string_t *tool, exports_toolgate_plugin_tool_json_t *value,
                                         exports_toolgate_plugin_tool_list_content_block_t *ret,
                                         exports_toolgate_plugin_tool_tool_failure_t *err) {
  (void)err;
  component_string_free(tool);
  ret->len = 1;
  ret->ptr = calloc(1, sizeof(*ret->ptr));
  ret->ptr[0].tag = TOOLGATE_PLUGIN_TYPES_CONTENT_BLOCK_TEXT;
  // The value is a JSON string: show it decoded.
  char *text = json_decode_string(value->ptr, value->len);
  component_string_free(value);
  ret->ptr[0].val.text.ptr = (uint8_t *)(text ? text : strdup(""));
  ret->ptr[0].val.text.len = strlen((const char *)ret->ptr[0].val.text.ptr);
  return true;
}

bool exports_toolgate_plugin_tool_finalize_content(exports_toolgate_plugin_tool_borrow_call_t call,
                                                   exports_toolgate_plugin_tool_borrow_call_result_t result,
                                                   exports_toolgate_plugin_tool_list_content_block_t *ret) {
  (void)ret;
  toolgate_plugin_types_call_drop_borrow(call);
  toolgate_plugin_types_call_result_drop_borrow(result);
  return false;
}

bool exports_toolgate_plugin_tool_present_call(exports_toolgate_plugin_tool_borrow_call_t call,
                                               exports_toolgate_plugin_tool_call_view_t *ret) {
  (void)ret;
  toolgate_plugin_types_call_drop_borrow(call);
  return false;
}

bool exports_toolgate_plugin_tool_present_result(exports_toolgate_plugin_tool_borrow_call_t call,
                                                 exports_toolgate_plugin_tool_borrow_call_result_t result,
                                                 exports_toolgate_plugin_tool_result_view_t *ret) {
  (void)ret;
  toolgate_plugin_types_call_drop_borrow(call);
  toolgate_plugin_types_call_result_drop_borrow(result);
  return false;
}
"##
        }
        Kind::Guard => {
            r##"
bool exports_toolgate_plugin_guard_check(exports_toolgate_plugin_guard_borrow_call_t call, string_t *ret) {
  string_t args;
  toolgate_plugin_types_method_call_arguments(call, &args);
  toolgate_plugin_types_call_drop_borrow(call);
  const char *w = setting();
  bool deny = contains(args.ptr, args.len, w);
  component_string_free(&args);
  if (deny) set(ret, "{{NAME}}: the arguments mention `", w, "`");
  return deny;
}
"##
        }
        Kind::PreHook => {
            r##"
void exports_toolgate_plugin_pre_execute_hook_pre_execute(exports_toolgate_plugin_pre_execute_hook_borrow_call_t call,
                                                          exports_toolgate_plugin_pre_execute_hook_pre_decision_t *ret) {
  toolgate_plugin_pre_execute_chain_next(ret);
  if (ret->tag == TOOLGATE_PLUGIN_TYPES_PRE_DECISION_ALLOW &&
      (toolgate_plugin_types_method_call_annotations(call) & TOOLGATE_PLUGIN_TYPES_TOOL_ANNOTATIONS_DESTRUCTIVE)) {
    string_t tool;
    toolgate_plugin_types_method_call_tool_name(call, &tool);
    char *t = malloc(tool.len + 1);
    memcpy(t, tool.ptr, tool.len);
    t[tool.len] = 0;
    component_string_free(&tool);
    ret->tag = TOOLGATE_PLUGIN_TYPES_PRE_DECISION_ASK;
    set(&ret->val.ask, "`", t, "` may destroy data. Run it?");
    free(t);
  }
  toolgate_plugin_types_call_drop_borrow(call);
}
"##
        }
        Kind::PostHook => {
            r##"
void exports_toolgate_plugin_post_execute_hook_post_execute(exports_toolgate_plugin_post_execute_hook_borrow_call_t call,
                                                            exports_toolgate_plugin_post_execute_hook_borrow_call_result_t result,
                                                            exports_toolgate_plugin_post_execute_hook_post_decision_t *ret) {
  toolgate_plugin_types_call_drop_borrow(call);
  toolgate_plugin_post_execute_chain_next(ret);
  if (ret->tag == TOOLGATE_PLUGIN_TYPES_POST_DECISION_ACCEPT) {
    string_t text;
    toolgate_plugin_types_method_call_result_text(result, &text);
    const char *w = setting();
    if (contains(text.ptr, text.len, w)) {
      ret->tag = TOOLGATE_PLUGIN_TYPES_POST_DECISION_BLOCK;
      set(&ret->val.block, "{{NAME}}: the result mentions `", w, "` and was withheld");
    }
    component_string_free(&text);
  }
  toolgate_plugin_types_call_result_drop_borrow(result);
}
"##
        }
        Kind::Finalizer => {
            r##"
// `s` with every `w` replaced by "[masked]".
static void mask(string_t *s, const char *w) {
  size_t n = strlen(w), out = 0;
  char *m = malloc(s->len * 8 + 1);
  for (size_t i = 0; i < s->len;) {
    if (i + n <= s->len && memcmp(s->ptr + i, w, n) == 0) {
      memcpy(m + out, "[masked]", 8);
      out += 8;
      i += n;
    } else {
      m[out++] = (char)s->ptr[i++];
    }
  }
  component_string_free(s);
  s->ptr = (uint8_t *)m;
  s->len = out;
}

bool exports_toolgate_plugin_finalizer_finalize_content(exports_toolgate_plugin_finalizer_borrow_call_t call,
                                                        exports_toolgate_plugin_finalizer_borrow_call_result_t result,
                                                        exports_toolgate_plugin_finalizer_list_content_block_t *ret) {
  toolgate_plugin_types_call_drop_borrow(call);
  const char *w = setting();
  string_t text;
  toolgate_plugin_types_method_call_result_text(result, &text);
  bool found = contains(text.ptr, text.len, w);
  component_string_free(&text);
  if (found) {
    toolgate_plugin_types_method_call_result_content(result, (toolgate_plugin_types_list_content_block_t *)ret);
    for (size_t i = 0; i < ret->len; i++)
      if (ret->ptr[i].tag == TOOLGATE_PLUGIN_TYPES_CONTENT_BLOCK_TEXT) mask(&ret->ptr[i].val.text, w);
  }
  toolgate_plugin_types_call_result_drop_borrow(result);
  return found;
}
"##
        }
        Kind::Observer => {
            r##"
void exports_toolgate_plugin_result_observer_on_result(exports_toolgate_plugin_result_observer_borrow_call_t call,
                                                       exports_toolgate_plugin_result_observer_borrow_call_result_t result) {
  string_t tool;
  toolgate_plugin_types_method_call_tool_name(call, &tool);
  char *t = malloc(tool.len + 1);
  memcpy(t, tool.ptr, tool.len);
  t[tool.len] = 0;
  component_string_free(&tool);
  bool failed = toolgate_plugin_types_method_call_result_is_error(result);
  string_t line;
  set(&line, "{{NAME}}: ", t, failed ? " -> error" : " -> ok");
  toolgate_plugin_log_log(TOOLGATE_PLUGIN_LOG_LEVEL_INFO, &line);
  component_string_free(&line);
  free(t);
  toolgate_plugin_types_call_drop_borrow(call);
  toolgate_plugin_types_call_result_drop_borrow(result);
}
"##
        }
    };
    format!("{head}{body}")
}

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
