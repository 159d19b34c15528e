// The program's world, set up before it runs. Only `__tg_print` is native
// (it appends to the output buffer); everything else is plain JavaScript.
// The host drives the event loop: after every round of jobs it takes the
// calls queued here (`__tg_take`, as JSON text), runs them as one batch,
// and settles them (`__tg_settle`).
(() => {
  "use strict";
  const print = globalThis.__tg_print;
  let queued = [];
  let inflight = [];

  class ToolError extends Error {
    constructor(tool, failure) {
      super(`${failure.code}: ${failure.message}`);
      this.name = "ToolError";
      this.tool = tool;
      this.code = failure.code;
      this.errorName = failure.name;
      this.details = failure.details === undefined ? undefined : failure.details;
    }
  }

  const call = (name, args) => {
    if (typeof name !== "string" || name.length === 0) {
      return Promise.reject(new TypeError("tools.call(name, args): name must be a tool's name (a string)"));
    }
    if (args === undefined) args = {};
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      return Promise.reject(new TypeError(`tools.call("${name}", args): args must be an object`));
    }
    let text;
    try {
      text = JSON.stringify(args);
    } catch (e) {
      return Promise.reject(new TypeError(`tools.call("${name}", args): args are not JSON: ${e.message}`));
    }
    return new Promise((resolve, reject) => {
      queued.push({ name, args: text, resolve, reject });
    });
  };

  const tools = new Proxy(Object.freeze({ call }), {
    get(target, prop) {
      if (prop === "call") return call;
      // `await tools` must not look like a thenable.
      if (typeof prop !== "string" || prop === "then") return undefined;
      return (args) => call(prop, args);
    },
    set() {
      return false;
    },
  });

  const show = (v) => {
    if (typeof v === "string") return v;
    if (v instanceof Error) return `${v.name}: ${v.message}`;
    try {
      const s = JSON.stringify(v);
      return s === undefined ? String(v) : s;
    } catch (_) {
      return String(v);
    }
  };
  const log = (...args) => print(args.map(show).join(" ") + "\n");
  const console = Object.freeze({ log, info: log, warn: log, error: log, debug: log });

  // Where an error happened, in the program's own lines (the wrapper adds
  // one line before it).
  const where = (e) => {
    let line, column;
    const stack = e && typeof e.stack === "string" ? e.stack : "";
    const m = /program\.js:(\d+)(?::(\d+))?/.exec(stack);
    if (m) {
      line = Number(m[1]);
      column = m[2] === undefined ? undefined : Number(m[2]);
    } else if (e && typeof e.lineNumber === "number") {
      line = e.lineNumber;
      column = typeof e.columnNumber === "number" ? e.columnNumber : undefined;
    }
    if (line !== undefined) line = Math.max(1, line - 1);
    return { line, column };
  };
  const describe = (e) => {
    let message;
    if (e instanceof Error) {
      message = `${e.name}: ${e.message}`;
    } else {
      message = `uncaught ${show(e)}`;
    }
    const { line, column } = where(e);
    return { message, line, column };
  };

  Object.defineProperty(globalThis, "tools", { value: tools, enumerable: true });
  Object.defineProperty(globalThis, "console", { value: console, enumerable: true });
  Object.defineProperty(globalThis, "ToolError", { value: ToolError, enumerable: true });
  Object.defineProperty(globalThis, "__tg_done", { value: { state: "running" }, writable: true });
  Object.defineProperty(globalThis, "__tg_describe", { value: describe });
  Object.defineProperty(globalThis, "__tg_finish", {
    value: (p) =>
      p.then(
        (v) => {
          let value;
          try {
            value = JSON.stringify(v);
          } catch (e) {
            globalThis.__tg_done = { state: "bad-value", message: `${e.name}: ${e.message}` };
            return;
          }
          globalThis.__tg_done = { state: "ok", value };
        },
        (e) => {
          globalThis.__tg_done = { state: "threw", described: describe(e) };
        },
      ),
  });
  Object.defineProperty(globalThis, "__tg_take", {
    value: () => {
      inflight = queued;
      queued = [];
      return JSON.stringify(inflight.map((c) => ({ name: c.name, arguments: c.args })));
    },
  });
  Object.defineProperty(globalThis, "__tg_settle", {
    value: (answersText) => {
      const answers = JSON.parse(answersText);
      const calls = inflight;
      inflight = [];
      calls.forEach((c, i) => {
        const a = answers[i];
        if (a.ok) c.resolve(a.value);
        else c.reject(new ToolError(c.name, a.failure));
      });
    },
  });
  delete globalThis.__tg_print;
})();
