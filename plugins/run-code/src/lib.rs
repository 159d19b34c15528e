//! The `run_code` interpreter: Boa (a JavaScript engine written in Rust) as
//! a component of the `code-interpreter` world.
//!
//! One instance runs one program and is dropped: nothing outlives a run.
//! The program's only way out is the `tool-calls` import; the host serves
//! this component's WASI imports empty (no files, no network, no
//! environment).
//!
//! The event loop is driven from here: run every pending job; if the
//! program has finished, report; otherwise take the tool calls it queued
//! since the last round and hand them to the host as one batch (so a
//! `Promise.all` over calls is one batch, run under the scheduler's rules),
//! settle them, and go round again. A program that waits with nothing
//! queued waits forever: it is stopped as `stalled`.

use std::cell::RefCell;
use std::path::Path;

use boa_engine::{
    Context, JsError, JsResult, JsString, JsValue, NativeFunction, Script, Source, js_string,
};

wit_bindgen::generate!({
    path: "../../wit",
    world: "code-interpreter",
});

use exports::toolgate::plugin::code_runner::{Failed, FailureKind, Finished, Guest, Settings};
use toolgate::plugin::tool_calls;

const PRELUDE: &str = include_str!("prelude.js");

/// How deep JavaScript calls may nest before the program gets a
/// `RangeError` (Boa's default is 512). Every nested call is a frame on
/// Boa's own stack, not on the Wasm stack, so this is about the program's
/// own runaway recursion, not the instance's safety.
const MAX_RECURSION: usize = 2_000;

/// The name positions are reported under (`program.js:line:column`).
const PROGRAM: &str = "program.js";

struct Interpreter;

/// What the program printed, capped.
#[derive(Default)]
struct Output {
    text: String,
    truncated: bool,
    max: usize,
}

impl Output {
    fn push(&mut self, s: &str) {
        if self.truncated {
            return;
        }
        let room = self.max.saturating_sub(self.text.len());
        if s.len() <= room {
            self.text.push_str(s);
        } else {
            let mut cut = room;
            while cut > 0 && !s.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.push_str(&s[..cut]);
            self.truncated = true;
        }
    }
}

thread_local! {
    /// The one program's output (an instance runs one program, on one
    /// thread).
    static OUTPUT: RefCell<Output> = RefCell::default();
}

/// Where the program stands after a round of jobs.
enum State {
    Running,
    Ok(Option<String>),
    Threw(Described),
    BadValue(String),
}

fn fail(kind: FailureKind, d: Described) -> Failed {
    OUTPUT.with_borrow(|o| Failed {
        kind,
        message: d.message,
        line: d.line,
        column: d.column,
        output: o.text.clone(),
        output_truncated: o.truncated,
    })
}

impl Guest for Interpreter {
    fn run(code: String, settings: Settings) -> Result<Finished, Failed> {
        OUTPUT.with_borrow_mut(|o| {
            *o = Output {
                max: settings.max_output_bytes as usize,
                ..Default::default()
            }
        });
        // `settings.memory_bytes` is not enforced here: Boa has no heap
        // limit of its own. The store's cap on linear memory (set by the
        // host) is what stops a program that allocates without end.
        let mut ctx = Context::default();
        ctx.runtime_limits_mut().set_recursion_limit(MAX_RECURSION);

        // The prelude, then the program as a strict script named
        // `program.js` (so positions name it), wrapped in an async function
        // so that `await` and `return` work at its top level. The wrapper
        // adds one line.
        if let Err(e) = start(&mut ctx) {
            return Err(fail(
                FailureKind::Uncaught,
                Described::internal(&format!("prelude: {e}")),
            ));
        }
        let source = format!("\"use strict\"; __tg_finish((async () => {{\n{code}\n}})());\n");
        let script = match Script::parse(
            Source::from_bytes(&source).with_path(Path::new(PROGRAM)),
            None,
            &mut ctx,
        ) {
            Ok(s) => s,
            Err(e) => return Err(fail(FailureKind::SyntaxError, syntax_error(&e))),
        };
        if let Err(e) = script.evaluate(&mut ctx) {
            return Err(fail(FailureKind::Uncaught, describe(&mut ctx, e)));
        }

        loop {
            // Run every job (promise reactions) until none is left. A job
            // that fails past every handler is an engine limit (the
            // recursion limit): the prelude's reactions catch the rest.
            if let Err(e) = ctx.run_jobs() {
                return Err(fail(FailureKind::Uncaught, describe(&mut ctx, e)));
            }
            match state_of(&mut ctx) {
                State::Ok(value) => {
                    return Ok(OUTPUT.with_borrow(|o| Finished {
                        output: o.text.clone(),
                        output_truncated: o.truncated,
                        value,
                    }));
                }
                State::Threw(d) => return Err(fail(FailureKind::Uncaught, d)),
                State::BadValue(message) => {
                    return Err(fail(
                        FailureKind::BadValue,
                        Described::plain(format!("the return value is not JSON: {message}")),
                    ));
                }
                State::Running => {}
            }
            let requests = take(&mut ctx).unwrap_or_default();
            if requests.is_empty() {
                return Err(fail(
                    FailureKind::Stalled,
                    // Or Boa dropped an engine limit hit after an `await`
                    // (it resumes the async function and discards the
                    // error), leaving the program's promise pending.
                    Described::plain(format!(
                        "the program waits for a promise that nothing will settle (only tool calls settle promises here: there is no timer or I/O), or it recursed past the interpreter's limit ({MAX_RECURSION} calls deep) after an `await`"
                    )),
                ));
            }
            let answers = tool_calls::call_batch(&requests);
            let text = answers_json(&answers);
            if let Err(e) = call_global(
                &mut ctx,
                "__tg_settle",
                &[JsString::from(text.as_str()).into()],
            ) {
                return Err(fail(
                    FailureKind::Uncaught,
                    Described::internal(&format!("cannot settle tool calls: {e}")),
                ));
            }
        }
    }
}

/// `__tg_print` (the only native function the program's world has), then
/// the prelude.
fn start(ctx: &mut Context) -> JsResult<()> {
    ctx.register_global_builtin_callable(
        js_string!("__tg_print"),
        1,
        NativeFunction::from_fn_ptr(|_, args, ctx| {
            let s = args
                .first()
                .cloned()
                .unwrap_or_default()
                .to_string(ctx)?
                .to_std_string_escaped();
            OUTPUT.with_borrow_mut(|o| o.push(&s));
            Ok(JsValue::undefined())
        }),
    )?;
    ctx.eval(Source::from_bytes(PRELUDE).with_path(Path::new("prelude.js")))?;
    Ok(())
}

fn call_global(ctx: &mut Context, name: &str, args: &[JsValue]) -> JsResult<JsValue> {
    let f = ctx
        .global_object()
        .get(JsString::from(name), ctx)?
        .as_callable();
    match f {
        Some(f) => f.call(&JsValue::undefined(), args, ctx),
        None => Err(boa_engine::JsNativeError::typ()
            .with_message(format!("{name} is not a function"))
            .into()),
    }
}

/// An error as the model will read it.
struct Described {
    message: String,
    line: Option<u32>,
    column: Option<u32>,
}

impl Described {
    fn plain(message: String) -> Self {
        Described {
            message,
            line: None,
            column: None,
        }
    }

    fn internal(e: &dyn std::fmt::Display) -> Self {
        Described::plain(format!("InternalError: {e}"))
    }
}

/// A parse error: Boa's message ends with its position in the wrapped
/// source (`… at line 3, col 5`), one line below the program's own.
fn syntax_error(e: &JsError) -> Described {
    let message = e.to_string();
    let (line, column) = match message.rfind(" at line ") {
        Some(at) => {
            let rest = &message[at + " at line ".len()..];
            let number = |s: &str| {
                s.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse::<u32>()
                    .ok()
            };
            let line = number(rest);
            let column = rest.find("col ").and_then(|c| number(&rest[c + 4..]));
            (line.map(|l| l.saturating_sub(1).max(1)), column)
        }
        None => (None, None),
    };
    let message = if message.starts_with("SyntaxError") {
        message
    } else {
        format!("SyntaxError: {message}")
    };
    Described {
        message,
        line,
        column,
    }
}

/// `__tg_describe(e)`: the error's name, message and position. An engine
/// error (a runtime limit: recursion, Boa's stack) has no JavaScript value:
/// its first line, and the innermost position of the program in its
/// backtrace, are enough.
fn describe(ctx: &mut Context, e: JsError) -> Described {
    let text = e.to_string();
    let Ok(value) = e.into_opaque(ctx) else {
        let first = text.lines().next().unwrap_or_default();
        let first = first.strip_prefix("RuntimeLimitError: ").unwrap_or(first);
        let (line, column) = program_position(&text);
        return Described {
            message: format!("RangeError: {first} (the program recursed too deep)"),
            line,
            column,
        };
    };
    match call_global(ctx, "__tg_describe", &[value]) {
        Ok(o) => described(ctx, &o),
        Err(_) => Described::plain("uncaught exception (it could not be described)".into()),
    }
}

/// The first `program.js:LINE:COLUMN` in a backtrace, in the program's own
/// lines (the wrapper adds one).
fn program_position(text: &str) -> (Option<u32>, Option<u32>) {
    let Some(at) = text.find("program.js:") else {
        return (None, None);
    };
    let mut parts = text[at + "program.js:".len()..].split(':').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .ok()
    });
    let line = parts.next().flatten().map(|l| l.saturating_sub(1).max(1));
    (line, parts.next().flatten())
}

fn described(ctx: &mut Context, o: &JsValue) -> Described {
    Described {
        message: get_string(ctx, o, "message").unwrap_or_else(|| "an exception".into()),
        line: get_u32(ctx, o, "line"),
        column: get_u32(ctx, o, "column"),
    }
}

fn get(ctx: &mut Context, o: &JsValue, key: &str) -> Option<JsValue> {
    let o = o.as_object()?;
    let v = o.get(JsString::from(key), ctx).ok()?;
    (!v.is_undefined()).then_some(v)
}

fn get_string(ctx: &mut Context, o: &JsValue, key: &str) -> Option<String> {
    get(ctx, o, key)?
        .as_string()
        .map(|s| s.to_std_string_escaped())
}

fn get_u32(ctx: &mut Context, o: &JsValue, key: &str) -> Option<u32> {
    let n = get(ctx, o, key)?.as_number()?;
    (n >= 0.0 && n <= u32::MAX as f64).then_some(n as u32)
}

/// The calls queued since the last round (`__tg_take()` returns them as
/// JSON text).
fn take(ctx: &mut Context) -> Option<Vec<tool_calls::Request>> {
    let text = call_global(ctx, "__tg_take", &[]).ok()?;
    let text = text.as_string()?.to_std_string().ok()?;
    let calls: Vec<serde_json::Value> = serde_json::from_str(&text).ok()?;
    calls
        .into_iter()
        .map(|c| {
            Some(tool_calls::Request {
                name: c.get("name")?.as_str()?.to_string(),
                arguments: c.get("arguments")?.as_str()?.to_string(),
            })
        })
        .collect()
}

fn state_of(ctx: &mut Context) -> State {
    let done = ctx
        .global_object()
        .get(js_string!("__tg_done"), ctx)
        .unwrap_or_default();
    match get_string(ctx, &done, "state").as_deref() {
        Some("ok") => State::Ok(get_string(ctx, &done, "value")),
        Some("threw") => match get(ctx, &done, "described") {
            Some(d) => State::Threw(described(ctx, &d)),
            None => State::Threw(Described::plain("an exception".into())),
        },
        Some("bad-value") => {
            State::BadValue(get_string(ctx, &done, "message").unwrap_or_else(|| "not JSON".into()))
        }
        _ => State::Running,
    }
}

// --- a little JSON, by hand (the interpreter's JSON.stringify writes it) ---

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn answers_json(answers: &[Result<String, tool_calls::Failure>]) -> String {
    let mut out = String::from("[");
    for (i, a) in answers.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match a {
            Ok(value) => {
                out.push_str("{\"ok\":true,\"value\":");
                out.push_str(value);
                out.push('}');
            }
            Err(f) => {
                out.push_str("{\"ok\":false,\"failure\":{\"code\":");
                out.push_str(&json_string(&f.code));
                out.push_str(",\"name\":");
                out.push_str(&json_string(&f.name));
                out.push_str(",\"message\":");
                out.push_str(&json_string(&f.message));
                if let Some(d) = &f.details {
                    out.push_str(",\"details\":");
                    out.push_str(d);
                }
                out.push_str("}}");
            }
        }
    }
    out.push(']');
    out
}

export!(Interpreter);
