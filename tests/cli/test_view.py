"""The trajectory viewer: rendering, bad input, the CLI, serving, and the page in real chromium."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import typer
from playwright.sync_api import expect
from typer.testing import CliRunner

from rlmkit.cli.view import register
from rlmkit.errors import UserError
from rlmkit.run.describe import describe_variable
from rlmkit.trajectory import (
    CodeBlock,
    Message,
    RunMeta,
    SubCall,
    Trajectory,
    TrajectoryLog,
    Turn,
    Usage,
)
from rlmkit.view import PageServer, load_runs, render_page, render_runs, write_page
from rlmkit.view.render import find_logs

HOSTILE = "</script><script>window.__pwned = 1</script><!-- & \u2028"


# ------------------------------------------------------------------ sample runs
def usage(prompt: int, completion: int, cost: float) -> Usage:
    return Usage(calls=1, prompt_tokens=prompt, completion_tokens=completion, cost=cost)


def call(name: str, start: float, seconds: float, **fields) -> SubCall:
    fields.setdefault("kind", "llm_query")
    fields.setdefault("model", "scripted-mini")
    return SubCall(name=name, started_s=start, duration_s=seconds, **fields)


def turn(index: int, code: str, tokens: tuple[int, int], start: float, seconds: float, **block) -> Turn:
    """One root turn whose reply is ``code`` in a repl fence, run as one code block."""
    prose = block.pop("prose", "")
    return Turn(
        index=index,
        keep=0 if index == 0 else 2 * index + 1,
        new_messages=[Message(role="user", content="REPL output: ..." if index else "Answer the question.")],
        reply=f"{prose}\n```repl\n{code}\n```".strip(),
        model="scripted",
        usage=usage(*tokens, cost=tokens[0] * 1e-5),
        started_s=start,
        duration_s=seconds,
        lm_duration_s=seconds / 4,
        final=code.startswith("SUBMIT"),
        blocks=[CodeBlock(code=code, duration_s=seconds / 2, **block)],
    )


def leaf_run(depth: int, question: str, nested: int) -> Trajectory:
    """A run at ``depth`` that asks a child RLM ``nested`` more levels down, then answers."""
    calls = [
        call(
            "llm_query",
            0.05,
            0.04,
            prompt=f"summarise: {question}",
            reply="a summary",
            usage=usage(40, 8, 1e-4),
        )
    ]
    code = 'part = llm_query("summarise")'
    if nested:
        child = leaf_run(depth + 1, f"deeper {question}", nested - 1)
        calls.append(
            call("rlm_query", 0.1, child.duration_s, kind="rlm_query", model="scripted",
                 prompt=f"deeper {question}", reply=child.outputs["answer"], usage=child.usage,
                 depth=depth + 1, child=child)
        )  # fmt: skip
        code += f'\nsub = rlm_query("deeper {question}")'
    turns = [
        turn(0, code, (120, 30), 0.0, 0.5 if nested else 0.2, stdout="ok\n", subcalls=calls),
        turn(1, f'SUBMIT(answer="level {depth}")', (160, 12), 0.6, 0.1),
    ]
    meta = RunMeta(depth=depth, signature="question -> answer", protocol="submit", sandbox="process",
                   model="scripted", inputs=[describe_variable("question", question)])  # fmt: skip
    run = Trajectory(
        meta=meta, turns=turns, outputs={"answer": f"level {depth}"}, status="ok", duration_s=0.75
    )
    for part in [t.usage for t in turns] + [c.usage for c in calls]:
        run.usage = run.usage.add(part)
    return run


ROOT_CODE = """\
chunks = [context[i:i + 50_000] for i in range(0, len(context), 50_000)]
counts = llm_query_batched([f"How many users mention billing?\\n{c}" for c in chunks[:3]])
label = classify(text=chunks[0][:500])  # typed sub-call
detail = rlm_query("Which users mention billing twice?")
print(counts, label, len(chunks))"""


def deep_run() -> Trajectory:
    """Root run (protocol submit) whose rlm_query children nest three levels deep."""
    run = leaf_run(0, "How many users mention billing?", nested=3)
    run.meta.task = {"suite": "oolong", "example": 17}
    run.meta.inputs.insert(0, describe_variable("context", "user 1: billing is broken\n" * 40_000))
    run.meta.limits = {"max_iterations": 20, "max_depth": 3}
    run.score = 1.0
    batch = [
        call("llm_query_batched", 0.25, 0.05 + 0.01 * i, batch=i,
             prompt=f"chunk {i}: " + "lorem ipsum " * 300, reply=f"{i} mentions", usage=usage(900, 5, 4e-4))
        for i in range(3)
    ]  # fmt: skip
    batch.append(
        call(
            "classify", 0.32, 0.02, kind="typed", prompt="label this", reply=HOSTILE, usage=usage(30, 3, 5e-5)
        )
    )
    block = run.turns[0].blocks[0]
    block.code, block.stdout = ROOT_CODE, "['0 mentions', '1 mentions', '2 mentions'] billing 22\n"
    block.subcalls[1:1] = batch  # keep the order calls were made: llm_query first, rlm_query last
    prose = "The context is long, so I count per chunk and ask a child RLM."
    run.turns[0].reply = f"{prose}\n```repl\n{ROOT_CODE}\n```"
    return run


def failed_run(protocol: str, status: str, error_type: str, error: str) -> Trajectory:
    meta = RunMeta(signature="context, question -> answer: int", protocol=protocol, sandbox="inline",
                   model="scripted", task={"suite": "needles", "example": 3})  # fmt: skip
    bad_call = call("llm_query", 0.1, 0.3, prompt="count", error="LMUnavailableError: retries exhausted")
    traceback = "Traceback (most recent call last):\nValueError: invalid literal for int()"
    turns = [
        turn(0, "n = int(llm_query('count'))", (200, 20), 0.0, 0.5, error=traceback, subcalls=[bad_call])
    ]
    return Trajectory(meta=meta, turns=turns, status=status, error=error, error_type=error_type,
                      usage=turns[0].usage, duration_s=0.5)  # fmt: skip


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """A log directory with runs of every status and protocol, plus a truncated and a foreign file."""
    root = tmp_path_factory.mktemp("runs")
    log = TrajectoryLog(root / "good")
    log.write(deep_run())
    log.write(failed_run("final", "error", "SandboxError", "the sandbox worker died twice"))
    log.write(
        failed_run("answer", "budget_exceeded", "BudgetExceeded", "max_tokens 5000 reached (used 5123)")
    )
    log.write(failed_run("submit", "max_iterations", "MaxIterationsError", "20 turns without SUBMIT"))
    # a run killed mid-write: start + one turn, then half a line
    killed = failed_run("final", "running", "", "")
    log.start(killed.meta)
    log.turn(killed.meta.run_id, killed.turns[0])
    with open(log.path(killed.meta.run_id), "a", encoding="utf-8") as fh:
        fh.write('{"event": "turn", "turn": {"index": 1, "kee')
    (root / "foreign.jsonl").write_text('{"role": "user", "content": "hi"}\n{"a": 1}\nnot json\n')
    return root


@pytest.fixture(scope="module")
def page_file(logs, tmp_path_factory) -> Path:
    page, _ = write_page(
        [logs / "good", logs / "foreign.jsonl"], tmp_path_factory.mktemp("page") / "view.html"
    )
    return page


# ------------------------------------------------------------------ rendering
def embedded(html: str) -> dict:
    match = re.search(r'<script id="rlmkit-data" type="application/json">(.*?)</script>', html, re.DOTALL)
    return json.loads(match.group(1))


def test_embedded_data_cannot_close_its_script_element():
    payload = {"runs": [], "problems": [{"file": HOSTILE, "message": HOSTILE}]}
    html = render_page(payload, title="<b>&")
    assert html.count("</script>") == 2  # the data element's and the code's own, nothing from the data
    assert "<!--" not in html.split('id="rlmkit-data"')[1]
    assert embedded(html) == payload
    assert "<title>&lt;b>&amp;</title>" in html


def test_summaries_cover_depth_status_and_incomplete_runs(logs):
    _, payload = render_runs([logs / "good"])
    by_status = {run["summary"]["status"]: run["summary"] for run in payload["runs"]}
    assert set(by_status) == {"ok", "error", "budget_exceeded", "max_iterations", "running"}
    deep = by_status["ok"]
    assert deep["depth"] == 3 and deep["task"] == "oolong / 17" and deep["turns"] == 2
    assert deep["subcalls"] == 2 * 3 + 1 + 4  # (llm + rlm) per level, the leaf's llm, the batch + classify
    assert not deep["failed"] and by_status["error"]["failed"] and by_status["budget_exceeded"]["failed"]
    killed = by_status["running"]
    assert killed["incomplete"] and killed["tokens"] == 220  # rebuilt from the logged turn: no end record
    assert payload["problems"][0]["bad_lines"] == 1 and payload["problems"][0]["runs"] == 1


def test_foreign_and_missing_inputs(logs, tmp_path):
    runs, problems = load_runs([logs / "foreign.jsonl"])
    assert runs == [] and problems[0]["bad_lines"] == 3 and "not an rlmkit" in problems[0]["message"]
    with pytest.raises(UserError, match="no such"):
        find_logs([tmp_path / "missing.jsonl"])
    with pytest.raises(UserError, match="no \\*.jsonl"):
        find_logs([tmp_path])


# ------------------------------------------------------------------ CLI and serving
def view_app() -> typer.Typer:
    """A typer app holding just the view verb, registered the way rlmkit.cli registers it.
    (A callback keeps it a command group, as the real app is once it has several verbs.)"""
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    return app


def test_cli_no_serve_writes_the_page(logs, tmp_path):
    app = view_app()
    out = tmp_path / "sub" / "v.html"
    result = CliRunner().invoke(
        app, ["view", str(logs / "good"), str(logs / "foreign.jsonl"), "--no-serve", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "5 run(s)" in result.output and "foreign.jsonl" in result.output
    assert len(embedded(out.read_text())["runs"]) == 5
    missing = CliRunner().invoke(app, ["view", str(tmp_path / "nope.jsonl"), "--no-serve"])
    assert missing.exit_code == 2 and "no such" in missing.output


def test_page_server_answers_on_loopback_only(page_file):
    server = PageServer(page_file)
    server.start_in_thread()
    try:
        assert server.server_address[0] == "127.0.0.1"
        page = httpx.get(server.url, timeout=5)
        assert page.status_code == 200 and page.text == page_file.read_text()
        assert httpx.get(server.url + "secrets", timeout=5).status_code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_cli_serves_until_ctrl_c(logs, tmp_path):
    env = {**os.environ, "BROWSER": "true"}  # never open a real browser from a test
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlmkit",
            "view",
            str(logs / "good"),
            "--out",
            str(tmp_path / "v.html"),
            "--no-open",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        url = None
        # a generous bound: a loaded machine takes long to import, a healthy one answers at once
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stderr.readline()
            found = re.search(r"serving on (http://127\.0\.0\.1:\d+/)", line)
            url = found.group(1) if found else None
        assert url, "the CLI never said where it serves"
        assert "rlmkit-data" in httpx.get(url, timeout=5).text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ the page in real chromium
# (the `browser` fixture, Debian's chromium driven by playwright, is in conftest.py)


@pytest.fixture(scope="module")
def site(page_file):
    """The page served by the viewer's own server, as the CLI serves it."""
    server = PageServer(page_file)
    server.start_in_thread()
    yield server.url
    server.shutdown()
    server.server_close()


@pytest.fixture
def open_page(browser):
    """``open_page(url)`` -> a fresh tab; fails the test if any tab logged a console error or
    tried the network (the page is self-contained)."""
    contexts, errors = [], []

    def open_(url: str):
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        contexts.append(context)
        tab = context.new_page()
        tab.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.on("request", lambda req: req.url.startswith(url) or errors.append(f"network request: {req.url}"))
        tab.goto(url)
        return tab

    yield open_
    assert errors == [], errors
    for context in contexts:
        assert context.pages[0].evaluate("window.__pwned") is None  # hostile replies stayed text
        context.close()


@pytest.fixture
def page(open_page, site):
    return open_page(site)


def wait_for_token_order(page, descending: bool) -> None:
    """Wait (never sample) until the tokens column reads in order, largest first or last."""
    page.wait_for_function(
        """(descending) => {
            const v = [...document.querySelectorAll('tr.run-row td:nth-child(7)')]
                .map(td => Number(td.innerText.replace(/,/g, '')));
            const ordered = v.every((x, i) => i === 0 || (descending ? v[i - 1] >= x : v[i - 1] <= x));
            return v.length > 1 && v[0] !== v[v.length - 1] && ordered;
        }""",
        arg=descending,
        timeout=10_000,
    )


def test_browser_runs_list_filters_and_sorts(page):
    rows = page.locator("tr.run-row")
    expect(rows).to_have_count(5)
    expect(page.locator("tr.run-row.failed")).to_have_count(3)  # error, budget exceeded, max iterations
    expect(page.locator("tr.run-row.incomplete")).to_have_count(1)
    page.fill("#run-filter", "oolong")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("oolong / 17")
    page.fill("#run-filter", "")
    page.select_option("#status-filter", "failed")
    expect(rows).to_have_count(3)
    page.select_option("#status-filter", "all")
    page.click("th[data-key=tokens]")  # numbers sort largest first
    wait_for_token_order(page, descending=True)
    page.click("th[data-key=tokens]")
    wait_for_token_order(page, descending=False)
    expect(page.locator(".problems")).to_contain_text("3 line(s) could not be read")


def test_browser_run_opens_subcalls_and_child_rlms(page, tmp_path):
    page.click("tr.run-row:has-text('oolong')")
    expect(page.locator(".run-head h2")).to_have_text("question -> answer")
    expect(page.locator("section.turn")).to_have_count(2)
    expect(page.locator("pre.code .tok-rlm").nth(1)).to_be_attached()  # llm_query / rlm_query highlighted
    classify = page.locator("details.subcall:has-text('classify')").first
    classify.locator("summary").click()
    expect(classify).to_contain_text(HOSTILE.split("<!--")[0])  # shown as text, never run
    classify.locator("summary").click()
    expect(page.locator("table.vars")).to_contain_text("context")
    expect(page.locator("table.vars")).to_contain_text("1.0M")
    expect(page.locator(".timeline .bar.child")).to_have_count(1)
    # a sub-call expands into its prompt and reply; long prompts are cut with "show more"
    batched = page.locator("details.subcall:has-text('llm_query_batched[1]')")
    batched.locator("summary").click()
    expect(batched).to_contain_text("1 mentions")
    more = batched.locator("button.more").first
    more.click()
    expect(more).to_have_text("show less")
    batched.locator("summary").click()
    # the child RLM opens inline with its own turns, three levels deep
    level = page.locator("section.turn").first
    for depth in (1, 2, 3):
        child_call = level.locator("details.subcall.has-child").first
        child_call.locator("summary").first.click()
        child = child_call.locator(".child-run").first
        expect(child.locator(".child-head h4").first).to_contain_text(f"child RLM (depth {depth})")
        expect(child.locator("section.turn").nth(1)).to_be_attached()
        level = child.locator("section.turn").first
    # the README's picture: RLMKIT_VIEWER_SCREENSHOT=docs/viewer.png pytest tests/cli/test_view.py
    page.click(".problems .dismiss")
    page.set_viewport_size({"width": 1360, "height": 1640})
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(os.environ.get("RLMKIT_VIEWER_SCREENSHOT", tmp_path / "viewer.png")))
    # and as a page of its own, with breadcrumbs back to the root run
    page.locator("a.open-child").first.click()
    expect(page.locator("#crumbs a")).to_have_count(3)
    expect(page.locator(".run-head h2")).to_have_text("question -> answer")
    expect(page.locator(".outputs")).to_contain_text("level 1")


def test_browser_failed_runs_show_their_failure(page):
    expected = {"error": "SandboxError", "budget exceeded": "max_tokens 5000", "max iterations": "20 turns"}
    for label, text in expected.items():
        page.goto(page.url.split("#")[0] + "#")
        page.click(f"tr.run-row:has(.badge:text-is('{label}'))")
        banner = page.locator(".failure")
        expect(banner).to_be_visible()
        expect(banner).to_contain_text(text)
        expect(page.locator("section.turn.failed")).to_have_count(1)
        expect(page.locator(".block.has-error")).to_contain_text("invalid literal")
    page.goto(page.url.split("#")[0] + "#")
    page.click("tr.run-row.incomplete")
    expect(page.locator(".failure.incomplete")).to_contain_text("no end record")


# ------------------------------------------------------------------ real runs of the RLM core
def test_real_rlm_runs_render_and_open(serve, tmp_path, open_page):
    """Logs written by rlmkit.RLM itself (depth 3, and a spent budget) open in the viewer.
    (The inline sandbox keeps this fast; the viewer reads the same log either way.)"""
    import rlmkit
    from rlmkit.errors import BudgetExceeded
    from tests.helpers.script import Script

    def root(body):
        if "child task" in body["messages"][1]["content"]:
            return "```repl\nr = rlm_query('child task', context[:20])\nSUBMIT(answer='c(' + r + ')')\n```"
        return "```repl\nr = rlm_query('child task', context)\nSUBMIT(answer=r)\n```"

    _, lm = serve(Script(root, sub=lambda prompt: "leaf"))
    deep = rlmkit.RLM("context -> answer", lm=lm, max_depth=3, sandbox="inline", log_dir=tmp_path / "logs")
    deep(context="x" * 5000)
    _, lm = serve(Script(["```repl\nx = llm_query('a')\nprint(x)\n```"]))
    with pytest.raises(BudgetExceeded):
        budget = rlmkit.Budget(max_calls=3)
        rlmkit.RLM("context -> answer", lm=lm, budget=budget, sandbox="inline", log_dir=tmp_path / "logs")(
            context="a"
        )

    page_path, payload = write_page([tmp_path / "logs"], tmp_path / "real.html")
    summaries = [run["summary"] for run in payload["runs"]]
    tops = [s for s in summaries if not s["child_of"]]
    assert payload["problems"] == [] and len(summaries) == 4  # root, its two child RLMs, the spent run
    assert sorted(s["status"] for s in tops) == ["budget_exceeded", "ok"]
    assert max(s["depth"] for s in tops) == 2

    tab = open_page(page_path.as_uri())
    expect(tab.locator("tr.run-row")).to_have_count(2)  # child runs open from their parent
    tab.check("#show-children")
    expect(tab.locator("tr.run-row")).to_have_count(4)
    tab.click("tr.run-row:has(.badge:text-is('budget exceeded'))")
    expect(tab.locator(".failure")).to_contain_text("BudgetExceeded")
    tab.go_back()
    tab.click("tr.run-row:has(.badge:text-is('ok')) >> nth=0")
    tab.locator("details.subcall.has-child > summary").first.click()
    child = tab.locator(".child-run").first
    expect(child.locator("h4").first).to_contain_text("child RLM (depth 1)")
    expect(child.locator(".outputs").first).to_contain_text("c(leaf)")


# ------------------------------------------------------------------ sessions
def session_call(session_id: str, number: int, question: str, **session) -> Trajectory:
    run = leaf_run(0, question, nested=0)
    run.meta.session = {"id": session_id, "call": number, "restored": None, "lost": {}, **session}
    return run


def test_a_session_is_one_list_entry_holding_its_calls_in_call_order(tmp_path):
    log = TrajectoryLog(tmp_path / "logs")
    calls = {n: session_call("5e55" * 8, n, f"question {n}") for n in (1, 2, 3)}
    calls[3].status, calls[3].error = "budget_exceeded", "max_calls 3 reached"
    for n in (3, 1, 2):  # logged out of order: the page still shows call 1 first
        log.write(calls[n])
    log.write(leaf_run(0, "a plain call", nested=0))
    _, payload = render_runs([tmp_path / "logs"])
    [session] = payload["sessions"]
    order = [payload["runs"][i]["trajectory"]["meta"]["session"]["call"] for i in session["calls"]]
    assert session["id"] == "5e55" * 8 and order == [1, 2, 3]
    summary = session["summary"]
    assert summary["session_calls"] == 3 and summary["task"].startswith("session 5e555e55 (3 calls): ")
    assert summary["status"] == "budget_exceeded" and summary["failed"] and "max_calls" in summary["error"]
    assert summary["tokens"] == 3 * calls[1].usage.total_tokens and summary["turns"] == 6


def test_browser_opens_a_session_to_its_calls_in_order(tmp_path, open_page):
    """A real session's logs (three calls, its worker killed before the third) and a plain run."""
    import rlmkit

    script = {
        "count": "```repl\nfails = context.count('500')\nSUBMIT(answer=str(fails))\n```",
        "double": "```repl\nSUBMIT(answer=str(2 * fails))\n```",
        "again": "```repl\nSUBMIT(answer=str(fails + 1))\n```",
    }

    def model(messages):  # replies by the question, which the task message shows whole
        return next(reply for q, reply in script.items() if f"'{q}'" in messages[1]["content"])

    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model), log_dir=tmp_path / "logs")
    with rlm.session(context="GET /a 500\n" * 50) as s:
        assert s(question="count").answer == "50" and s(question="double").answer == "100"
        os.kill(s.sandbox.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while s.worker_running:  # a state, polled to a deadline
            assert time.monotonic() < deadline, "the killed worker still looked alive"
            time.sleep(0.01)
        assert s(question="again").answer == "51"
    rlm(context="GET /b 200", question="count")

    page_path, payload = write_page([tmp_path / "logs"], tmp_path / "session.html")
    assert len(payload["runs"]) == 4 and len(payload["sessions"]) == 1
    tab = open_page(page_path.as_uri())
    expect(tab.locator("tr.run-row")).to_have_count(2)  # the session and the plain call
    row = tab.locator("tr.session-row")
    expect(row).to_have_attribute("data-session-id", s.id)
    expect(row).to_contain_text("(3 calls)")
    tab.fill("#run-filter", s.id[:12])
    expect(tab.locator("tr.run-row")).to_have_count(1)
    row.click()
    calls = tab.locator("section.session-call")
    expect(calls).to_have_count(3)
    assert [calls.nth(i).get_attribute("data-call") for i in range(3)] == ["1", "2", "3"]
    for i, question in enumerate(("count", "double", "again")):
        expect(calls.nth(i).locator(".call-head")).to_contain_text(f"call {i + 1}")
        expect(calls.nth(i).locator(".call-head")).to_contain_text(question)
        expect(calls.nth(i).locator("section.turn")).to_have_count(
            1
        )  # each call's turns, as a run shows them
    expect(calls.nth(2).locator(".call-head .chip.rebuilt")).to_contain_text("worker_died")
    expect(tab.locator("table.session-calls tr.call-row")).to_have_count(3)
    expect(tab.locator("table.session-calls tr.call-row").nth(1)).to_contain_text("100")
    # a call opens as a page of its own, with a breadcrumb back to its session
    link = calls.nth(1).locator("a.open-call")
    href = link.get_attribute("href")
    assert re.fullmatch(r"#run=\d+", href)
    link.click()
    expect(tab).to_have_url(re.compile(re.escape(href) + "$"))
    expect(tab.locator("section.session-call")).to_have_count(0)  # the session page is gone
    expect(tab.locator(".outputs")).to_have_count(1)
    expect(tab.locator(".outputs")).to_contain_text("100")
    tab.locator(f"#crumbs a[href='#session={s.id}']").click()
    expect(tab.locator("section.session-call")).to_have_count(3)
