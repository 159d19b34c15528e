"""The approval console in a real browser (Playwright driving Debian's
chromium), against a real `toolgate serve --http --approve queue` and real
MCP clients (the official Python SDK). Run by tests/tests/all/console.rs;
prints one JSON object of what it measured. Any failed check raises.

  console_browser.py --base http://127.0.0.1:PORT --mcp-token T \
      --console-token T --chromium /usr/bin/chromium [--bench N | --questions]

With --questions it answers questions for the user (`ask_user_question`)
in the console's form, declines a second ask by denying it, and shows,
pauses, resumes and clears the goal the model set. With --bench N it only measures: N pending entries are in the store already
(the Rust test put them there); it logs in and loads the page a few times,
timing each until the N rows are rendered.
"""

import argparse
import asyncio
import json
import statistics
import sys
import time

import httpx2 as httpx  # the SDK's HTTP client
import mcp_types as types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import async_playwright, expect

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Mcp:
    """One MCP session per call: a session's calls pass the approval one at
    a time, so two calls wait together only from two sessions."""

    def __init__(self, base, token):
        self.url = base + "/mcp"
        self.token = token

    async def call(self, command, ready=None):
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {self.token}"})
        async with Client(
            streamable_http_client(self.url, http_client=http),
            mode="legacy",
            read_timeout_seconds=120,
        ) as client:
            if ready is not None:
                ready.set_result(time.monotonic())
            r = await client.call_tool("bash", {"command": command})
            return r.model_dump(mode="json", by_alias=True, exclude_none=True)

    def start(self, command):
        """The call in the background; (task, when the session was up)."""
        ready = asyncio.get_running_loop().create_future()
        return asyncio.ensure_future(self.call(command, ready)), ready


def text(result):
    return "".join(c.get("text", "") for c in result.get("content", []))


async def login(page, base, token, name="alice"):
    await page.goto(base + "/console")
    await page.fill("#login-token", token)
    await page.fill("#login-name", name)
    await page.click("#login button[type=submit]")
    await expect(page.locator("#app-view")).to_be_visible()
    await expect(page.locator("body")).to_have_attribute("data-live", "1")


def row(page, needle):
    return page.locator("#pending tbody tr", has_text=needle)


async def functional(args, browser):
    base, out = args.base, {}
    context = await browser.new_context()
    page = await context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    # The page's own headers.
    r = await context.request.get(base + "/console")
    h = r.headers
    check(r.status == 200, f"GET /console: {r.status}")
    csp = h.get("content-security-policy", "")
    check("script-src 'self'" in csp and "unsafe-inline" not in csp, f"CSP: {csp}")
    check("frame-ancestors 'none'" in csp, f"CSP: {csp}")
    check(h.get("x-frame-options") == "DENY", f"headers: {h}")
    check(h.get("referrer-policy") == "no-referrer", f"headers: {h}")
    check(h.get("cache-control") == "no-store", f"headers: {h}")

    # A wrong token: refused, the page stays at the login.
    await page.goto(base + "/console")
    await page.fill("#login-token", "not-the-token")
    await page.click("#login button[type=submit]")
    await expect(page.locator("#status")).to_have_text("wrong token")
    check(await page.locator("#app-view").is_hidden(), "the app shows after a wrong token")
    r = await context.request.post(base + "/console/login", data={"token": "nope"})
    check(r.status == 401, f"a wrong token's login: {r.status}")

    # The right one.
    await login(page, base, args.console_token)
    await expect(page.locator("#who")).to_have_text("console:alice")

    # Logged in (the cookie is the browser's), yet a change without the
    # CSRF token is refused — from the page itself.
    status = await page.evaluate(
        """async () => (await fetch('/console/api/decide', {method: 'POST',
            headers: {'Content-Type': 'application/json'},
            body: JSON.stringify({ids: ['x'], verdict: 'approve'})})).status"""
    )
    check(status == 403, f"a decision without X-CSRF-Token: {status}")
    # A foreign Origin, with the cookie and even the right CSRF token.
    csrf = await page.evaluate(
        "async () => (await (await fetch('/console/api/whoami')).json()).csrf"
    )
    check(isinstance(csrf, str) and len(csrf) == 64, f"whoami's csrf: {csrf!r}")
    r = await context.request.post(
        base + "/console/api/decide",
        data={"ids": ["x"], "verdict": "approve"},
        headers={"Origin": "http://evil.example", "X-CSRF-Token": csrf},
    )
    check(r.status == 403, f"a foreign Origin: {r.status}")
    r = await context.request.get(
        base + "/console/api/pending", headers={"Origin": "http://evil.example"}
    )
    check(r.status == 403, f"a foreign Origin reading: {r.status}")
    out["refused"] = ["wrong token", "missing CSRF", "foreign Origin"]

    mcp = Mcp(base, args.mcp_token)

    # A call appears live, within a second of being made.
    task, ready = mcp.start("echo live-one")
    await ready
    t0 = time.monotonic()
    await expect(row(page, "echo live-one")).to_be_visible(timeout=5000)
    appeared = time.monotonic() - t0
    check(appeared < 1.0, f"the call appeared after {appeared:.3f} s")
    out["appears_ms"] = round(appeared * 1000)
    # Two more; approve two in one action.
    t2, r2 = mcp.start("echo live-two")
    await r2
    await expect(row(page, "echo live-two")).to_be_visible()
    await expect(page.locator("#pending-count")).to_have_text("2")
    await page.check("#select-all")
    await page.click("#approve")
    one, two = await asyncio.wait_for(asyncio.gather(task, t2), 30)
    check(not one.get("isError") and "live-one" in text(one), f"first call: {one}")
    check(not two.get("isError") and "live-two" in text(two), f"second call: {two}")
    await expect(page.locator("#pending tbody tr")).to_have_count(0)
    await expect(page.locator("#decided tbody tr", has_text="live-two")).to_contain_text(
        "console:alice"
    )

    # A grant: `cargo test*` for 10 minutes, made from a pending call.
    t3, r3 = mcp.start("cargo test --no-such-flag; echo first-granted")
    await r3
    await expect(row(page, "first-granted")).to_be_visible()
    await row(page, "first-granted").locator("input.select").check()
    await page.fill("#grant-argument", "command")
    await page.fill("#grant-pattern", "cargo test*")
    await page.fill("#grant-minutes", "10")
    await page.click("#grant-button")
    first = await asyncio.wait_for(t3, 30)
    check("first-granted" in text(first), f"the granted call: {first}")
    grants = page.locator("#grants tbody tr")
    await expect(grants).to_have_count(1)
    await expect(grants).to_contain_text("cargo test*")
    # The next matching call runs with no new entry…
    decided_before = await page.locator("#decided tbody tr").count()
    second = await asyncio.wait_for(mcp.call("cargo test --other; echo second-granted"), 30)
    check("second-granted" in text(second), f"the call under the grant: {second}")
    await page.wait_for_timeout(300)
    check(await page.locator("#pending tbody tr").count() == 0, "the grant made an entry")
    check(
        await page.locator("#decided tbody tr").count() == decided_before,
        "the grant's call was decided by hand",
    )
    await expect(grants).to_contain_text("console:alice")
    # …while one that does not match queues.
    t4, r4 = mcp.start("echo not-granted")
    await r4
    # A new entry reaches the page by the event stream; under a loaded
    # CI (every test at once) that took more than the default 5 s.
    await expect(row(page, "not-granted")).to_be_visible(timeout=20000)

    # A hostile argument is shown as text, never run as HTML. A reload
    # first: the session (and its CSRF token) survive it.
    t5, r5 = mcp.start(XSS)
    await r5
    await page.reload()
    await expect(page.locator("#app-view")).to_be_visible()
    xss_row = row(page, "onerror")
    await expect(xss_row).to_be_visible(timeout=20000)
    shown = await xss_row.locator("pre.arguments").inner_text()
    # As JSON (the quotes escaped), every character of the markup visible.
    check(json.dumps(XSS) in shown, f"the argument is not shown as it was: {shown}")
    check(await page.locator("#pending img, #pending script").count() == 0, "markup was made")
    check(await page.evaluate("window.__xss") is None, "the argument ran")

    # Deny both (after the reload: the CSRF token came from whoami), with a
    # message for the model.
    await page.check("#select-all")
    await page.fill("#deny-message", "not now")
    await page.click("#deny")
    for t in (t4, t5):
        r = await asyncio.wait_for(t, 30)
        check(r.get("isError") and "not now" in text(r), f"a denied call: {r}")
    await expect(page.locator("#pending tbody tr")).to_have_count(0)

    # Revoke the grant: a matching call queues again.
    await grants.locator("button.revoke").click()
    await expect(grants).to_have_count(0)
    t6, r6 = mcp.start("cargo test --again; echo after-revoke")
    await r6
    await expect(row(page, "after-revoke")).to_be_visible()
    await row(page, "after-revoke").locator("input.select").check()
    await page.click("#approve")
    r = await asyncio.wait_for(t6, 30)
    check("after-revoke" in text(r), f"the call after the revoke: {r}")

    # Logged out: the cookie no longer opens the API.
    await page.click("#logout")
    await expect(page.locator("#login-view")).to_be_visible()
    r = await context.request.get(base + "/console/api/pending")
    check(r.status == 401, f"after logout: {r.status}")
    check(not errors, f"page errors: {errors}")
    check(await page.evaluate("window.__xss") is None, "the argument ran")
    await context.close()
    return out


QUESTIONS = {
    "questions": [
        {
            "header": "Stack",
            "question": "Which language?",
            "options": [
                {"label": "Rust", "description": "compiled, safe"},
                {"label": "Python", "description": XSS},
            ],
        },
        {
            "header": "Extras",
            "question": "Which extras?\n\n- a plan's Markdown, as text",
            "multiSelect": True,
            "options": [
                {"label": "CI", "description": "a workflow"},
                {"label": "Docs", "description": "a README"},
            ],
        },
    ]
}


async def ask(base, token):
    """`ask_user_question` from a 2025 session (never asked by elicitation:
    the queue answers)."""
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with Client(
        streamable_http_client(base + "/mcp", http_client=http),
        mode="legacy",
        elicitation_callback=elicit,
        read_timeout_seconds=120,
    ) as client:
        r = await client.call_tool("ask_user_question", QUESTIONS)
        check(asked == [], f"the client was asked: {asked}")
        return r.model_dump(mode="json", by_alias=True, exclude_none=True)


async def call_tool(base, token, tool, arguments):
    """One call from a 2025 session of its own."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with Client(streamable_http_client(base + "/mcp", http_client=http), mode="legacy",
                      read_timeout_seconds=60) as client:
        r = await client.call_tool(tool, arguments)
        return r.model_dump(mode="json", by_alias=True, exclude_none=True)


async def goal_steps(page, base, token):
    """The goal the model set, seen and changed from the console: shown,
    paused (the model's update_goal is then refused), resumed, cleared."""
    seen = []
    r = await call_tool(base, token, "create_goal", {"objective": "Ship the console"})
    check(not r.get("isError"), f"create_goal: {r}")
    await page.click("#goal-show")
    await expect(page.locator("#goal-text")).to_have_text("global scope: Ship the console (active)")
    seen.append(await page.locator("#goal-text").get_attribute("data-status"))
    await page.click("#goal-pause")
    await expect(page.locator("#goal-text")).to_contain_text("(paused)")
    seen.append(await page.locator("#goal-text").get_attribute("data-status"))
    r = await call_tool(base, token, "update_goal", {"status": "complete", "note": "x"})
    check(r.get("isError"), f"update_goal while paused: {r}")
    await page.click("#goal-pause")
    await expect(page.locator("#status")).to_contain_text("already paused")
    await page.click("#goal-resume")
    await expect(page.locator("#goal-text")).to_contain_text("(active)")
    seen.append(await page.locator("#goal-text").get_attribute("data-status"))
    await page.click("#goal-clear")
    await expect(page.locator("#goal-text")).to_have_text("global scope: no goal (cleared)")
    seen.append("cleared")
    return seen


async def questions(args, browser):
    """Questions for the user in the console: the form shows each question
    and its options (a hostile description as text), an answer picked
    there reaches the call; a second ask denied is declined."""
    base, out = args.base, {}
    context = await browser.new_context()
    page = await context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    await login(page, base, args.console_token)
    task = asyncio.ensure_future(ask(base, args.mcp_token))
    r = row(page, "Which language?")
    await expect(r).to_be_visible(timeout=20000)
    form = r.locator("form.questions")
    await expect(form.locator("fieldset")).to_have_count(2)
    await expect(form.locator("fieldset").nth(1).locator("input[type=checkbox]")).to_have_count(2)
    await expect(form.locator("fieldset").nth(0).locator("input[type=radio]")).to_have_count(2)
    await expect(form).to_contain_text(XSS)
    await form.locator("label.option", has_text="Rust").locator("input").check()
    await form.locator("label.option", has_text="CI").locator("input").check()
    await form.locator("label.option", has_text="Docs").locator("input").check()
    await form.locator("fieldset").nth(1).locator("input.other").fill("and a license")
    await form.locator("button[type=submit]").click()
    result = await asyncio.wait_for(task, 30)
    check(not result.get("isError"), f"the answered call: {result}")
    check(
        text(result) == "The user answered:\n- Stack: Rust\n- Extras: CI, Docs; in their words: and a license\n",
        f"the answered call: {result}",
    )
    check(result["structuredContent"]["answeredBy"] == "console:alice", f"who: {result}")
    await expect(page.locator("#pending tbody tr")).to_have_count(0)
    await expect(page.locator("#decided tbody tr", has_text="Stack: Rust")).to_contain_text("answered")
    out["answered"] = text(result)

    # Denied: declined, the message reaches the model.
    task = asyncio.ensure_future(ask(base, args.mcp_token))
    r = row(page, "Which language?")
    await expect(r).to_be_visible(timeout=20000)
    await r.locator("input.select").check()
    await page.fill("#deny-message", "ask me later")
    await page.click("#deny")
    result = await asyncio.wait_for(task, 30)
    check(not result.get("isError"), f"the declined call: {result}")
    check("declined" in text(result) and "ask me later" in text(result), f"declined: {result}")
    out["declined"] = text(result)
    out["goal"] = await goal_steps(page, base, args.mcp_token)
    check(not errors, f"page errors: {errors}")
    check(await page.evaluate("() => window.__xss === undefined"), "a description ran as HTML")
    await context.close()
    return out


async def bench(args, browser):
    context = await browser.new_context()
    page = await context.new_page()
    await login(page, args.base, args.console_token)
    times = []
    for _ in range(args.loads):
        await page.reload()
        # Polled in the page, frame by frame (the page's CSP forbids the
        # string evaluation wait_for_function uses), then one frame more:
        # the rows laid out and painted.
        ms = await page.evaluate(
            """(n) => new Promise(done => {
                 const tick = () => {
                   if (document.body.dataset.pendingLoaded === String(n)) {
                     requestAnimationFrame(() => done(
                       document.querySelectorAll('#pending tbody tr').length + ':' + performance.now()));
                   } else {
                     requestAnimationFrame(tick);
                   }
                 };
                 tick();
               })""",
            args.bench,
        )
        rows, t = ms.split(":")
        check(int(rows) == args.bench, f"{rows} rows, not {args.bench}")
        times.append(float(t))
    await context.close()
    return {"entries": args.bench, "render_ms": times, "median_ms": statistics.median(times)}


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--mcp-token", required=True)
    parser.add_argument("--console-token", required=True)
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--bench", type=int)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--questions", action="store_true")
    args = parser.parse_args()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=args.chromium, headless=True)
        try:
            if args.questions:
                out = await questions(args, browser)
            elif args.bench:
                out = await bench(args, browser)
            else:
                out = await functional(args, browser)
        finally:
            await browser.close()
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
