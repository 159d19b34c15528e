//! The operators' guide runs as written (issue 44): every recipe in
//! `docs/operators/*.md` is extracted and executed here, and every link
//! between the docs resolves, so the guide cannot drift from the binary.
//!
//! A recipe is the fenced blocks of one page whose info string names it
//! (`recipe=NAME`), in page order:
//!
//! * ```` ```sh recipe=NAME ```` — commands, run by `bash` with `set -euo
//!   pipefail` (all of a recipe's blocks in one shell, so variables and
//!   background jobs carry over);
//! * ```` ```toml file=PATH recipe=NAME ```` (any language) — a file the
//!   reader writes, written at that point (relative to the recipe's working
//!   directory);
//! * ```` ```text output recipe=NAME ```` — what the `sh` block before it
//!   prints (stdout and stderr): each non-empty line must appear, in order,
//!   as part of a line of the output (so a reader's output may hold more,
//!   such as a digest or a port, where the doc shows `…`: the line is cut
//!   there);
//! * `recipe=A,B`: a block of two recipes (a file both use);
//! * `<!-- recipe=NAME file=PATH from=PAGE -->` (a comment, unseen by
//!   readers; the text beside it points there): the `file=PATH` block of
//!   another page, written at that point;
//! * `with=goal-guard.wasm` on any block: the working directory holds that
//!   component (`examples/goal-guard-rs`, built), as a reader has theirs;
//! * `with=npm-cache` on any block: the working directory's `.npm-cache`
//!   starts with the npm servers of `tests/mcp/servers.txt` in it, as a
//!   first start through the recipe's egress rule leaves it (CI's registry
//!   is a local mirror that egress rightly refuses);
//! * `needs=A,B` on any block: programs the recipe uses beyond the binary,
//!   `bash`, `curl` and Python (checked on `PATH`; missing: the test fails
//!   naming it, as every test of its build need does).
//!
//! Each recipe runs in a fresh working directory, with a fresh `$HOME`
//! beside it, `toolgate` (this build's) and the MCP Python SDK's venv
//! (`python3` with `mcp`) first on `PATH`, in a process group of its own
//! that is killed when it ends; each has [`RECIPE_DEADLINE`].

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolgate_tests::{TempDir, needs, toolgate_bin};

/// How long one recipe may run, servers started and stopped included.
const RECIPE_DEADLINE: Duration = Duration::from_secs(180);

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

/// One fenced block of a page.
#[derive(Debug)]
struct Block {
    /// The info string's first word (`sh`, `toml`, `text`, …).
    lang: String,
    /// The info string's other words: `key=value`, or a bare flag as
    /// `flag=""`.
    attrs: BTreeMap<String, String>,
    text: String,
    /// Its first line in the page (1-based), for messages.
    line: usize,
}

/// The fenced blocks of a Markdown text (``` fences, at any indentation).
fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, Vec<&str>, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(comment) = trimmed
                    .strip_prefix("<!-- ")
                    .and_then(|c| c.strip_suffix(" -->"))
                    .filter(|c| c.starts_with("recipe="))
                {
                    out.push(Block {
                        lang: String::new(),
                        attrs: attrs(comment.split_whitespace()),
                        text: String::new(),
                        line: i + 1,
                    });
                } else if let Some(info) = trimmed.strip_prefix("```") {
                    let indent = line.len() - trimmed.len();
                    open = Some((info.to_string(), i + 1, Vec::new(), " ".repeat(indent)));
                }
            }
            Some((info, start, body, indent)) => {
                if trimmed.starts_with("```") {
                    let mut words = info.split_whitespace();
                    let lang = words.next().unwrap_or("").to_string();
                    let attrs = attrs(words);
                    let text = body
                        .iter()
                        .map(|l| l.strip_prefix(indent.as_str()).unwrap_or(l))
                        .collect::<Vec<_>>()
                        .join("\n");
                    out.push(Block {
                        lang,
                        attrs,
                        text: text + "\n",
                        line: *start,
                    });
                    open = None;
                } else {
                    body.push(line);
                }
            }
        }
    }
    out
}

impl Block {
    /// A block of commands (not a file the reader writes, not output).
    fn is_command(&self) -> bool {
        !self.attrs.contains_key("file") && matches!(self.lang.as_str(), "sh" | "bash" | "console")
    }
}

/// `key=value` words (a bare word as `word=""`).
fn attrs<'a>(words: impl Iterator<Item = &'a str>) -> BTreeMap<String, String> {
    words
        .map(|w| match w.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (w.to_string(), String::new()),
        })
        .collect()
}

/// The text of the `file=NAME` block of another page (`<!-- recipe=R
/// file=NAME from=PAGE -->`: a file the reader already wrote, following
/// that page).
fn file_from(page: &str, name: &str) -> String {
    let path = docs().join("operators").join(page);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    blocks(&text)
        .into_iter()
        .find(|b| b.attrs.get("file").is_some_and(|f| f == name) && !b.attrs.contains_key("from"))
        .unwrap_or_else(|| panic!("docs/operators/{page} has no `file={name}` block"))
        .text
}

/// A recipe: its blocks, in page order.
#[derive(Debug)]
struct Recipe {
    page: String,
    name: String,
    /// Shared: a block may belong to several recipes (`recipe=a,b`).
    blocks: Vec<std::sync::Arc<Block>>,
}

impl Recipe {
    fn needs(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .blocks
            .iter()
            .filter_map(|b| b.attrs.get("needs"))
            .flat_map(|n| n.split(',').map(str::to_string))
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Every recipe of `page` (a file name under docs/operators/).
fn recipes(page: &str) -> Vec<Recipe> {
    let path = docs().join("operators").join(page);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut by_name: Vec<Recipe> = Vec::new();
    for block in blocks(&text) {
        let Some(names) = block.attrs.get("recipe").cloned() else {
            continue;
        };
        let mut block = block;
        if let (Some(from), Some(file)) = (block.attrs.get("from"), block.attrs.get("file")) {
            block.text = file_from(from, file);
        }
        let block = std::sync::Arc::new(block);
        for name in names.split(',') {
            match by_name.iter_mut().find(|r| r.name == name) {
                Some(r) => r.blocks.push(block.clone()),
                None => by_name.push(Recipe {
                    page: page.to_string(),
                    name: name.to_string(),
                    blocks: vec![block.clone()],
                }),
            }
        }
    }
    by_name
}

/// A delimiter for a here-document that `text` does not contain.
fn heredoc_end(text: &str) -> String {
    let mut end = "RECIPE_FILE_END".to_string();
    while text.lines().any(|l| l == end) {
        end.push('_');
    }
    end
}

/// The shell script a recipe is: its files written and its commands run
/// in order, each `sh` block's output kept in `$RECIPE_OUT/N`.
fn script(recipe: &Recipe) -> String {
    let mut s = String::from("set -euo pipefail\n");
    let mut n = 0;
    for b in &recipe.blocks {
        if let Some(path) = b.attrs.get("file") {
            assert!(
                !path.starts_with('/') && !path.split('/').any(|c| c == ".."),
                "{}:{}: a recipe's file is relative to its working directory: {path}",
                recipe.page,
                b.line
            );
            let end = heredoc_end(&b.text);
            s += &format!(
                "mkdir -p \"$(dirname '{path}')\"\ncat > '{path}' <<'{end}'\n{}{end}\n",
                b.text
            );
        } else if b.is_command() {
            n += 1;
            s += &format!(
                "echo '--- block {n} (line {}) ---' >&2\n{{\n{}}} > \"$RECIPE_OUT/{n}\" 2>&1\n",
                b.line, b.text
            );
        }
    }
    s
}

/// Runs `recipe`; panics with its output on a failure.
fn run(recipe: &Recipe) {
    let bin = toolgate_bin();
    let venv = crate::serve::python();
    let mut dirs = vec![
        bin.parent().unwrap().to_path_buf(),
        venv.parent().unwrap().to_path_buf(),
    ];
    if recipe.needs().iter().any(|n| n == "mcp-inspector") {
        // Installed beside the MCP servers (tests/mcp/servers.txt).
        dirs.push(crate::bridge::servers().join("clients/node_modules/.bin"));
    }
    let path = dirs
        .iter()
        .map(|p| p.display().to_string())
        .chain(std::env::var("PATH").ok())
        .collect::<Vec<_>>()
        .join(":");
    let missing: Vec<String> = recipe
        .needs()
        .into_iter()
        .filter(|p| !on_path(p, &path))
        .collect();
    needs::expect(
        &format!("recipe {} ({})", recipe.name, recipe.page),
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "not on PATH: {} (`.ci/run` installs them)",
                missing.join(", ")
            ))
        },
    );
    let dir = TempDir::new(&format!("recipe-{}", recipe.name));
    let work = dir.path().join("work");
    let outs = dir.path().join("out");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&outs).unwrap();
    let script_path = dir.path().join("recipe.sh");
    std::fs::write(&script_path, script(recipe)).unwrap();

    let with: Vec<&str> = recipe
        .blocks
        .iter()
        .filter_map(|b| b.attrs.get("with"))
        .flat_map(|w| w.split(','))
        .collect();
    for w in &with {
        assert!(
            ["npm-cache", "goal-guard.wasm"].contains(w),
            "{}: unknown `with={w}`",
            recipe.page
        );
    }
    if with.contains(&"goal-guard.wasm") {
        // A component of the reader's: the goal-guard example, built.
        std::fs::copy(
            toolgate_tests::fixtures::EXAMPLE_GOAL_GUARD_RS,
            work.join("goal-guard.wasm"),
        )
        .unwrap();
    }
    if with.contains(&"npm-cache") {
        // What a first start fetches through the recipe's egress rule,
        // already in the npm cache the recipe names (this machine's
        // registry mirror is no destination egress lets through).
        let seeded = crate::bridge::servers().join("npx-cache");
        let copied = Command::new("cp")
            .arg("-a")
            .arg(&seeded)
            .arg(work.join(".npm-cache"))
            .status()
            .expect("run cp");
        assert!(copied.success(), "copy {}", seeded.display());
    }

    let mut child = Command::new("bash")
        .arg(&script_path)
        .current_dir(&work)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("LANG", "C.UTF-8")
        .env("RECIPE_OUT", &outs)
        .env("TMPDIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("run bash");
    let group = child.id() as i32;
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > RECIPE_DEADLINE {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // What the recipe left running (a server it started in the
    // background) ends with it.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    let progress = reader.join().unwrap_or_default();
    let output = |n: usize| std::fs::read_to_string(outs.join(n.to_string())).unwrap_or_default();
    let report = |why: &str| -> String {
        let mut r = format!(
            "recipe `{}` of docs/operators/{} {why}\n",
            recipe.name, recipe.page
        );
        let mut n = 0;
        for b in &recipe.blocks {
            if !b.is_command() {
                continue;
            }
            n += 1;
            r += &format!("--- block {n} (line {}) printed:\n{}", b.line, output(n));
        }
        r + "--- the script's stderr:\n" + &progress + "--- the script:\n" + &script(recipe)
    };
    match status {
        None => panic!("{}", report(&format!("ran past {RECIPE_DEADLINE:?}"))),
        Some(s) if !s.success() => panic!("{}", report(&format!("failed ({s})"))),
        Some(_) => {}
    }
    // Each `output` block against the output of the `sh` block before it.
    let mut n = 0;
    for b in &recipe.blocks {
        if b.is_command() {
            n += 1;
        } else if b.attrs.contains_key("output") && !b.attrs.contains_key("file") {
            assert!(
                n > 0,
                "{}:{}: an output block before any command",
                recipe.page,
                b.line
            );
            let got = output(n);
            let mut lines = got.lines();
            for want in b.text.lines().filter(|l| !l.trim().is_empty()) {
                if !lines.any(|l| line_matches(l, want)) {
                    panic!(
                        "{}",
                        report(&format!(
                            "printed something else than line {} shows: no `{want}` (in order)",
                            b.line
                        ))
                    );
                }
            }
        }
    }
}

/// Whether `line` shows `want`: its parts between `…` appear in `line`, in
/// order.
fn line_matches(line: &str, want: &str) -> bool {
    let mut rest = line;
    for part in want.split('…').map(str::trim).filter(|p| !p.is_empty()) {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `program` is found on `path` (a `PATH` value).
fn on_path(program: &str, path: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v '{program}'"))
        .env("PATH", path)
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs every recipe of `page`; fails when it has none (a page whose
/// recipes were renamed away is a test that tests nothing).
fn run_page(page: &str) {
    let all = recipes(page);
    assert!(!all.is_empty(), "docs/operators/{page} has no recipe");
    for recipe in &all {
        let start = Instant::now();
        run(recipe);
        println!(
            "recipe {} of {page}: ok in {:?}",
            recipe.name,
            start.elapsed()
        );
    }
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_`
/// dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings (not in code blocks).
fn anchors(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// The Markdown files people read: the docs, the README, each plugin's and
/// example's README.
fn markdown_files() -> Vec<PathBuf> {
    let root = docs().join("..");
    let mut out = vec![root.join("README.md"), root.join("BENCHMARKS.md")];
    let mut dirs = vec![docs()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    for parent in ["plugins", "examples"] {
        for e in std::fs::read_dir(root.join(parent)).unwrap().flatten() {
            let readme = e.path().join("README.md");
            if readme.is_file() {
                out.push(readme);
            }
        }
    }
    out
}

/// Every relative link in the Markdown people read names a file that
/// exists and, when it has one, an anchor that the file's headings make
/// (a page split or a renamed heading otherwise leaves readers at a dead
/// end).
#[test]
fn every_link_between_the_docs_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut fenced = false;
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                continue;
            }
            for part in line.split("](").skip(1) {
                let Some(target) = part.split(')').next() else {
                    continue;
                };
                if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                    continue;
                }
                checked += 1;
                let (path, frag) = match target.split_once('#') {
                    Some((p, f)) => (p, Some(f)),
                    None => (target, None),
                };
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                let here = format!("{}:{}", file.display(), i + 1);
                if !dest.exists() {
                    broken.push(format!("{here}: `{target}`: no such file"));
                    continue;
                }
                if let Some(frag) = frag
                    && dest.extension().is_some_and(|x| x == "md")
                {
                    let heads = anchors(&std::fs::read_to_string(&dest).unwrap());
                    if !heads.iter().any(|h| h == frag) {
                        broken.push(format!("{here}: `{target}`: no heading makes `#{frag}`"));
                    }
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: the scan is broken"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The contents page names every page of the guide, and every page is
/// reachable from it.
#[test]
fn the_operators_contents_names_every_page() {
    let contents = std::fs::read_to_string(docs().join("operators/README.md")).unwrap();
    for e in std::fs::read_dir(docs().join("operators"))
        .unwrap()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().to_string();
        if name != "README.md" {
            assert!(
                contents.contains(&format!("]({name}")),
                "docs/operators/README.md does not link {name}"
            );
        }
    }
}

/// The pages whose recipes the tests below run.
const PAGES: &[&str] = &[
    "README.md",
    "approvals.md",
    "audit.md",
    "bridging.md",
    "commands.md",
    "configuration.md",
    "egress.md",
    "oci.md",
    "plugins.md",
    "sandbox.md",
    "serving.md",
    "tools.md",
];

/// Every page of the guide has recipes, and a test runs them: a page
/// without one, or whose recipes no test runs, fails here.
#[test]
fn every_page_has_recipes_and_they_are_run() {
    for e in std::fs::read_dir(docs().join("operators"))
        .unwrap()
        .flatten()
    {
        let page = e.file_name().to_string_lossy().to_string();
        assert!(
            !recipes(&page).is_empty(),
            "docs/operators/{page} has no recipe: give its task one, tested"
        );
        assert!(
            PAGES.contains(&page.as_str()),
            "docs/operators/{page} has recipes no test runs: add it to PAGES and a test"
        );
    }
}

#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn the_first_ten_minutes_run_as_written() {
    run_page("README.md");
}

#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn the_approval_queue_recipe_runs_as_written() {
    run_page("approvals.md");
}

#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn the_audit_recipe_runs_as_written() {
    run_page("audit.md");
}

#[test]
#[cfg_attr(
    not(all(has_mcp_client, has_mcp_servers)),
    ignore = "needs the MCP Python SDK and the MCP servers of tests/mcp/servers.txt: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv` and `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers`"
)]
fn the_npx_bridge_recipe_runs_as_written() {
    run_page("bridging.md");
}

#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn the_egress_recipe_runs_as_written() {
    run_page("egress.md");
}

#[test]
#[cfg_attr(
    not(all(has_mcp_client, has_oci_registry)),
    ignore = "needs the MCP Python SDK and Debian's docker-registry: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv` and `apt-get install -y docker-registry`"
)]
fn the_local_registry_recipe_runs_as_written() {
    run_page("oci.md");
}

#[test]
#[cfg_attr(
    not(all(has_mcp_client, has_replica_parts)),
    ignore = "needs the MCP Python SDK and Debian's redis-server and haproxy: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv` and `apt-get install -y redis-server haproxy`"
)]
fn the_serving_and_replica_recipes_run_as_written() {
    run_page("serving.md");
}

#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn the_recipes_of_commands_configuration_plugins_sandbox_and_tools_run_as_written() {
    for page in [
        "commands.md",
        "configuration.md",
        "plugins.md",
        "sandbox.md",
        "tools.md",
    ] {
        run_page(page);
    }
}
