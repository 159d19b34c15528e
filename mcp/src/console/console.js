// The approval console's page (served by toolgate at /console).
//
// Everything shown that came from a tool call (tool names, arguments,
// cards, reasons, messages) is attacker-controlled: it is only ever put in
// the page as text (textContent / createTextNode), never as HTML.
// Every change (POST) carries the session's CSRF token (X-CSRF-Token).
"use strict";

const state = {
  csrf: null,
  pending: new Map(), // id -> { entry, row }
  events: null,
};

const $ = (id) => document.getElementById(id);

function status(text, isError) {
  const s = $("status");
  s.textContent = text || "";
  s.classList.toggle("error", !!isError);
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function when(ms) {
  if (ms === null || ms === undefined) return "";
  return new Date(ms).toLocaleTimeString();
}

async function api(method, path, body) {
  const headers = {};
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (method !== "GET" && state.csrf) headers["X-CSRF-Token"] = state.csrf;
  const r = await fetch(path, init);
  let value = null;
  try { value = await r.json(); } catch (_) { value = null; }
  if (r.status === 401 && path !== "/console/login") {
    showLogin("your session ended: log in again");
  }
  if (!r.ok) {
    const msg = value && value.error ? value.error : "HTTP " + r.status;
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  return value;
}

// ---- the views -------------------------------------------------------

function showLogin(message) {
  if (state.events) { state.events.close(); state.events = null; }
  state.csrf = null;
  $("app-view").hidden = true;
  $("logout").hidden = true;
  $("who").textContent = "";
  $("login-view").hidden = false;
  status(message || "", !!message);
  $("login-token").focus();
}

async function showApp(identity) {
  $("login-view").hidden = true;
  $("app-view").hidden = false;
  $("logout").hidden = false;
  $("who").textContent = identity;
  openEvents();
  await Promise.all([loadPending(), loadGrants(), loadDecided()]);
}

// ---- pending ---------------------------------------------------------

function callCell(entry) {
  const td = el("td");
  if (entry.card && entry.card.title) {
    td.appendChild(el("div", entry.card.title, "card"));
    if (entry.card.detail) td.appendChild(el("pre", entry.card.detail, "detail"));
  }
  td.appendChild(el("pre", JSON.stringify(entry.arguments, null, 1), "arguments"));
  return td;
}

// Questions for the user (`ask_user_question` under --approve queue): a
// form per entry — each question's options (radio, or checkboxes when
// several may be chosen) and an own-words field — answered with the
// `answer` verdict; denying the entry declines them.
function questionsCell(entry) {
  const td = el("td");
  const form = el("form", null, "questions");
  form.dataset.id = entry.id;
  entry.questions.forEach((q, i) => {
    const set = el("fieldset");
    set.appendChild(el("legend", q.header));
    set.appendChild(el("pre", q.question, "question"));
    for (const o of q.options) {
      const label = el("label", null, "option");
      const input = el("input");
      input.type = q.multiSelect ? "checkbox" : "radio";
      input.name = entry.id + "-" + i;
      input.value = o.label;
      label.appendChild(input);
      label.appendChild(document.createTextNode(" " + o.label));
      if (o.description) label.appendChild(el("span", " — " + o.description, "hint"));
      set.appendChild(label);
    }
    const other = el("input");
    other.type = "text";
    other.className = "other";
    other.placeholder = "Other (in your own words)";
    other.setAttribute("aria-label", q.header + ": other");
    set.appendChild(other);
    form.appendChild(set);
  });
  const send = el("button", "Answer");
  send.type = "submit";
  form.appendChild(send);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    answer(entry, form);
  });
  td.appendChild(form);
  return td;
}

async function answer(entry, form) {
  const answers = entry.questions.map((q, i) => {
    const set = form.querySelectorAll("fieldset")[i];
    const selected = Array.from(set.querySelectorAll("input[type=radio]:checked, input[type=checkbox]:checked"), (b) => b.value);
    const other = set.querySelector("input.other").value.trim();
    return other ? { header: q.header, selected, other } : { header: q.header, selected };
  });
  try {
    const r = await api("POST", "/console/api/decide", { ids: [entry.id], verdict: "answer", answers });
    const x = r.results[0];
    if (x && x.ok) {
      removePending(entry.id);
      status("answered: " + entry.id);
      await loadDecided();
    } else {
      status(entry.id + ": " + (x ? x.error : "no result"), true);
    }
  } catch (e) {
    status("answer failed: " + e.message, true);
  }
}

function pendingRow(entry) {
  const tr = el("tr");
  tr.dataset.id = entry.id;
  const box = el("input");
  box.type = "checkbox";
  box.className = "select";
  box.value = entry.id;
  box.setAttribute("aria-label", "select " + entry.id);
  const first = el("td");
  first.appendChild(box);
  tr.appendChild(first);
  const tool = el("td");
  tool.appendChild(el("div", entry.tool, "tool"));
  if (entry.egress) {
    // An egress approval: the connection the call waits to make.
    const e = entry.egress;
    tool.appendChild(el("div", "egress " + e.name + ":" + e.port + " (" + e.address + ") via " + e.via, "hint"));
  }
  tr.appendChild(tool);
  tr.appendChild(entry.questions ? questionsCell(entry) : callCell(entry));
  const why = el("td");
  why.appendChild(el("div", entry.reason, "reason"));
  why.appendChild(el("div", "asked by " + entry.askedBy, "hint"));
  tr.appendChild(why);
  const who = [entry.caller ? "caller " + entry.caller : "", entry.scope ? "scope " + entry.scope : "", entry.client || "", entry.session ? "session " + entry.session : ""]
    .filter(Boolean).join(", ");
  tr.appendChild(el("td", who));
  tr.appendChild(el("td", when(entry.since)));
  tr.appendChild(el("td", when(entry.expires)));
  return tr;
}

function countPending() {
  $("pending-count").textContent = String(state.pending.size);
}

function addPending(entry) {
  if (entry.state !== "pending" || state.pending.has(entry.id)) return;
  const row = pendingRow(entry);
  $("pending").tBodies[0].appendChild(row);
  state.pending.set(entry.id, { entry, row });
  countPending();
}

function removePending(id) {
  const p = state.pending.get(id);
  if (!p) return;
  p.row.remove();
  state.pending.delete(id);
  countPending();
}

async function mergePending() {
  for (const entry of await api("GET", "/console/api/pending")) addPending(entry);
}

async function loadPending() {
  const list = await api("GET", "/console/api/pending");
  const body = $("pending").tBodies[0];
  const fragment = document.createDocumentFragment();
  const next = new Map();
  for (const entry of list) {
    const row = pendingRow(entry);
    fragment.appendChild(row);
    next.set(entry.id, { entry, row });
  }
  body.replaceChildren(fragment);
  state.pending = next;
  countPending();
  document.body.dataset.pendingLoaded = String(list.length);
}

function selected() {
  return Array.from(document.querySelectorAll("#pending tbody input.select:checked"), (b) => b.value);
}

async function decide(verdict, extra) {
  const ids = selected();
  if (ids.length === 0) { status("select one or more pending calls first", true); return; }
  try {
    const r = await api("POST", "/console/api/decide", Object.assign({ ids, verdict }, extra || {}));
    const failed = r.results.filter((x) => !x.ok);
    for (const x of r.results) if (x.ok) removePending(x.id);
    if (failed.length) {
      status(failed.map((x) => x.id + ": " + x.error).join("; "), true);
    } else {
      status(verdict + ": " + ids.length + " call(s)" + (r.grant ? " under grant " + r.grant : ""));
    }
    $("select-all").checked = false;
    await Promise.all([loadDecided(), loadGrants()]);
  } catch (e) {
    status(verdict + " failed: " + e.message, true);
  }
}

// ---- grants ------------------------------------------------------------

function value(id) {
  const v = $(id).value.trim();
  return v === "" ? null : v;
}

async function grant(ev) {
  ev.preventDefault();
  const spec = {};
  const tool = value("grant-tool");
  if (tool) spec.tool = tool;
  const argument = value("grant-argument");
  const pattern = value("grant-pattern");
  if (argument || pattern) { spec.argument = argument; spec.pattern = pattern; }
  const scope = value("grant-scope");
  if (scope) spec.scope = scope;
  const minutes = value("grant-minutes");
  if (minutes) spec.durationMs = Math.round(Number(minutes) * 60000);
  const count = value("grant-count");
  if (count) spec.count = Number(count);
  const destination = value("grant-destination");
  if (destination) spec.destination = destination;
  const port = value("grant-port");
  if (port) spec.port = Number(port);
  if (selected().length === 0) {
    // A grant for later calls only.
    try {
      const g = await api("POST", "/console/api/grants", spec);
      status("grant " + g.id + " made");
      await loadGrants();
    } catch (e) {
      status("grant failed: " + e.message, true);
    }
    return;
  }
  await decide("grant", { grant: spec });
}

async function loadGrants() {
  const list = await api("GET", "/console/api/grants");
  const body = $("grants").tBodies[0];
  const fragment = document.createDocumentFragment();
  for (const g of list) {
    const tr = el("tr");
    tr.dataset.id = g.id;
    const destination = g.destination ? g.destination + (g.port ? ":" + g.port : "") : "";
    for (const v of [g.id, g.tool, destination, g.argument, g.pattern, g.scope || "any",
      g.expiresMs ? when(g.expiresMs) : "", g.remaining ?? "", g.used, g.createdBy]) {
      tr.appendChild(el("td", v));
    }
    const td = el("td");
    const b = el("button", "Revoke", "revoke");
    b.type = "button";
    b.addEventListener("click", () => revoke(g.id));
    td.appendChild(b);
    tr.appendChild(td);
    fragment.appendChild(tr);
  }
  body.replaceChildren(fragment);
}

async function revoke(id) {
  try {
    const r = await api("POST", "/console/api/grants/revoke", { ids: [id] });
    const bad = r.results.filter((x) => !x.ok);
    status(bad.length ? bad.map((x) => x.error).join("; ") : "grant " + id + " revoked", bad.length > 0);
  } catch (e) {
    status("revoke failed: " + e.message, true);
  }
  await loadGrants();
}

// ---- the goal ------------------------------------------------------------

async function goal(action) {
  const scope = $("goal-scope").value.trim();
  try {
    const r = await api("POST", "/console/api/goal", { scope, action });
    const g = r.goal;
    const where = scope === "" ? "global scope" : "scope " + scope;
    $("goal-text").textContent = g
      ? where + ": " + g.objective + " (" + g.status + ")" + (g.note ? "; note: " + g.note : "")
      : where + ": no goal" + (action === "clear" ? " (cleared)" : "");
    $("goal-text").dataset.status = g ? g.status : "";
    status(action === "show" ? "" : action + ": done");
  } catch (e) {
    $("goal-text").textContent = e.message;
    $("goal-text").dataset.status = "";
    status("goal " + action + " failed: " + e.message, true);
  }
}

// ---- decided -----------------------------------------------------------

async function loadDecided() {
  const list = await api("GET", "/console/api/decided?limit=50");
  const body = $("decided").tBodies[0];
  const fragment = document.createDocumentFragment();
  for (const e of list) {
    const tr = el("tr");
    tr.dataset.id = e.id;
    tr.appendChild(el("td", e.tool));
    tr.appendChild(callCell(e));
    const d = e.decided || {};
    const outcome = d.grant ? "granted (" + d.grant + ")" : d.answers ? "answered" : e.state;
    tr.appendChild(el("td", outcome, e.state));
    tr.appendChild(el("td", d.by));
    tr.appendChild(el("td", when(d.atMs)));
    // A question's answers, as "header: labels / own words".
    const said = d.answers
      ? d.answers.map((a) => a.header + ": " + a.selected.concat(a.other ? [a.other] : []).join(", ")).join("; ")
      : d.message;
    tr.appendChild(el("td", said));
    fragment.appendChild(tr);
  }
  body.replaceChildren(fragment);
}

// ---- live events -------------------------------------------------------

function openEvents() {
  if (state.events) state.events.close();
  const es = new EventSource("/console/api/events");
  state.events = es;
  es.addEventListener("pending", (m) => addPending(JSON.parse(m.data)));
  es.addEventListener("ended", (m) => {
    removePending(JSON.parse(m.data).id);
    loadDecided().catch(() => {});
    loadGrants().catch(() => {});
  });
  es.addEventListener("lagged", () => { loadPending().catch(() => {}); });
  // Entries that arrived between the first list and the subscription
  // (the stream is subscribed once it opens): added, nothing replaced, so
  // a selection made meanwhile stays.
  es.addEventListener("open", () => {
    document.body.dataset.live = "1";
    mergePending().catch(() => {});
  });
  es.onerror = () => {
    document.body.dataset.live = "0";
    // The browser reconnects by itself; a reload catches what was missed.
    // A logged-out session gets 401, seen by the next call.
    api("GET", "/console/api/whoami").then(() => loadPending()).catch(() => {});
  };
}

// ---- start -------------------------------------------------------------

async function login(ev) {
  ev.preventDefault();
  try {
    const r = await api("POST", "/console/login", {
      token: $("login-token").value,
      name: $("login-name").value,
    });
    $("login-token").value = "";
    state.csrf = r.csrf;
    status("");
    await showApp(r.identity);
  } catch (e) {
    showLogin(e.status === 401 ? "wrong token" : "login failed: " + e.message);
  }
}

async function logout() {
  try { await api("POST", "/console/logout"); } catch (_) { /* gone anyway */ }
  showLogin("logged out");
}

async function start() {
  $("login").addEventListener("submit", login);
  $("logout").addEventListener("click", logout);
  $("approve").addEventListener("click", () => decide("approve"));
  $("deny").addEventListener("click", () => {
    const message = value("deny-message");
    decide("deny", message ? { message } : {});
  });
  $("grant").addEventListener("submit", grant);
  $("goal").addEventListener("submit", (ev) => { ev.preventDefault(); goal("show"); });
  $("goal-pause").addEventListener("click", () => goal("pause"));
  $("goal-resume").addEventListener("click", () => goal("resume"));
  $("goal-clear").addEventListener("click", () => goal("clear"));
  $("select-all").addEventListener("change", (ev) => {
    for (const b of document.querySelectorAll("#pending tbody input.select")) b.checked = ev.target.checked;
  });
  // Already logged in (a reload): the cookie is sent, whoami gives the
  // session's CSRF token back (a cross-site page cannot read it).
  try {
    const r = await fetch("/console/api/whoami", { credentials: "same-origin", cache: "no-store" });
    if (r.ok) {
      const who = await r.json();
      if (who.csrf) {
        state.csrf = who.csrf;
        await showApp(who.identity);
        return;
      }
    }
  } catch (_) { /* not logged in */ }
  showLogin();
}

document.addEventListener("DOMContentLoaded", start);
