//! The `run_code` interpreter: QuickJS (through `rquickjs`) as a component
//! of the `code-interpreter` world.
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
use std::rc::Rc;

use rquickjs::{Context, Ctx, Function, Module, Object, Runtime, Value};

wit_bindgen::generate!({
    path: "../../wit",
    world: "code-interpreter",
});

use exports::toolgate::plugin::code_runner::{Failed, FailureKind, Finished, Guest, Settings};
use toolgate::plugin::tool_calls;

const PRELUDE: &str = include_str!("prelude.js");

/// QuickJS's own stack limit: deep recursion is a catchable `RangeError`
/// rather than a trap of the whole instance.
const MAX_STACK_BYTES: usize = 512 * 1024;

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

/// Where the program stands after a round of jobs.
enum State {
    Running,
    Ok(Option<String>),
    Threw(Described),
    BadValue(String),
}

impl Guest for Interpreter {
    fn run(code: String, settings: Settings) -> Result<Finished, Failed> {
        let output = Rc::new(RefCell::new(Output {
            max: settings.max_output_bytes as usize,
            ..Default::default()
        }));
        let fail = |kind, message: String, line, column, output: &Rc<RefCell<Output>>| {
            let o = output.borrow();
            Failed {
                kind,
                message,
                line,
                column,
                output: o.text.clone(),
                output_truncated: o.truncated,
            }
        };
        let rt = match Runtime::new() {
            Ok(rt) => rt,
            Err(e) => {
                return Err(fail(
                    FailureKind::Uncaught,
                    format!("InternalError: cannot start the interpreter: {e}"),
                    None,
                    None,
                    &output,
                ));
            }
        };
        if settings.memory_bytes > 0 {
            rt.set_memory_limit(settings.memory_bytes as usize);
        }
        rt.set_max_stack_size(MAX_STACK_BYTES);
        let ctx = Context::full(&rt).expect("a QuickJS context");

        // The prelude, then the program as a module named `program.js` (so
        // positions name it), wrapped in an async function so that `await`
        // and `return` work at its top level. The wrapper adds one line.
        let started = ctx.with(|ctx| -> Result<(), (FailureKind, Described)> {
            let internal =
                |e: &dyn std::fmt::Display| (FailureKind::Uncaught, Described::internal(e));
            let sink = output.clone();
            let print = Function::new(ctx.clone(), move |s: String| {
                sink.borrow_mut().push(&s);
            })
            .map_err(|e| internal(&e))?;
            ctx.globals()
                .set("__tg_print", print)
                .map_err(|e| internal(&e))?;
            ctx.eval::<(), _>(PRELUDE)
                .map_err(|e| internal(&format!("prelude: {e}")))?;
            let source = format!("__tg_finish((async () => {{\n{code}\n}})());\n");
            match Module::evaluate(ctx.clone(), "program.js", source) {
                Ok(_) => Ok(()),
                Err(rquickjs::Error::Exception) => {
                    let e = ctx.catch();
                    Err((FailureKind::SyntaxError, describe(&ctx, e)))
                }
                Err(e) => Err((
                    FailureKind::SyntaxError,
                    Described::plain(format!("SyntaxError: {e}")),
                )),
            }
        });
        if let Err((kind, d)) = started {
            return Err(fail(kind, d.message, d.line, d.column, &output));
        }

        loop {
            // Run every job (promise reactions) until none is left.
            loop {
                match rt.execute_pending_job() {
                    Ok(true) => continue,
                    Ok(false) => break,
                    // A job threw past every handler: the prelude's
                    // reactions catch everything, so this is the
                    // interpreter's own failure (out of memory).
                    Err(e) => {
                        let d = e.0.with(|ctx| describe(&ctx, ctx.catch()));
                        return Err(fail(
                            FailureKind::Uncaught,
                            d.message,
                            d.line,
                            d.column,
                            &output,
                        ));
                    }
                }
            }
            let state = ctx.with(|ctx| state_of(&ctx));
            match state {
                State::Ok(value) => {
                    let o = output.borrow();
                    return Ok(Finished {
                        output: o.text.clone(),
                        output_truncated: o.truncated,
                        value,
                    });
                }
                State::Threw(d) => {
                    return Err(fail(
                        FailureKind::Uncaught,
                        d.message,
                        d.line,
                        d.column,
                        &output,
                    ));
                }
                State::BadValue(message) => {
                    return Err(fail(
                        FailureKind::BadValue,
                        format!("the return value is not JSON: {message}"),
                        None,
                        None,
                        &output,
                    ));
                }
                State::Running => {}
            }
            let requests = ctx.with(|ctx| take(&ctx)).unwrap_or_default();
            if requests.is_empty() {
                return Err(fail(
                    FailureKind::Stalled,
                    "the program waits for a promise that nothing will settle (only tool calls settle promises here: there is no timer or I/O)".into(),
                    None,
                    None,
                    &output,
                ));
            }
            let answers = tool_calls::call_batch(&requests);
            let text = answers_json(&answers);
            let settled = ctx.with(|ctx| -> rquickjs::Result<()> {
                let settle: Function = ctx.globals().get("__tg_settle")?;
                settle.call::<_, ()>((text,))
            });
            if let Err(e) = settled {
                return Err(fail(
                    FailureKind::Uncaught,
                    format!("InternalError: cannot settle tool calls: {e}"),
                    None,
                    None,
                    &output,
                ));
            }
        }
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

    fn from_object(o: &Object<'_>) -> Self {
        Described {
            message: o
                .get::<_, String>("message")
                .unwrap_or_else(|_| "an exception".into()),
            line: o.get::<_, Option<u32>>("line").ok().flatten(),
            column: o.get::<_, Option<u32>>("column").ok().flatten(),
        }
    }
}

/// `__tg_describe(e)`: the error's name, message and position.
fn describe<'js>(ctx: &Ctx<'js>, e: Value<'js>) -> Described {
    let described = ctx
        .globals()
        .get::<_, Function>("__tg_describe")
        .and_then(|f| f.call::<_, Object>((e.clone(),)));
    match described {
        Ok(o) => Described::from_object(&o),
        Err(_) => Described::plain("uncaught exception (it could not be described)".into()),
    }
}

/// The calls queued since the last round.
fn take(ctx: &Ctx<'_>) -> rquickjs::Result<Vec<tool_calls::Request>> {
    let queued: Vec<Object> = ctx.eval("__tg_take()")?;
    queued
        .iter()
        .map(|o| {
            Ok(tool_calls::Request {
                name: o.get("name")?,
                arguments: o.get("arguments")?,
            })
        })
        .collect()
}

fn state_of(ctx: &Ctx<'_>) -> State {
    let read = || -> rquickjs::Result<State> {
        let done: Object = ctx.globals().get("__tg_done")?;
        let state: String = done.get("state")?;
        Ok(match state.as_str() {
            "ok" => State::Ok(done.get::<_, Option<String>>("value")?),
            "threw" => State::Threw(Described::from_object(&done.get("described")?)),
            "bad-value" => State::BadValue(done.get("message")?),
            _ => State::Running,
        })
    };
    read().unwrap_or_else(|e| State::Threw(Described::internal(&e)))
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
