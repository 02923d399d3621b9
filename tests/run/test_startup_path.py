"""What stands between a call and its first model request (the start-up and memory targets).

A big input's sha256 is computed in a thread while the first request is out, from the str's own
buffer when it is ASCII (no encoded copy); the start record is still written first, and whole.
"""

from __future__ import annotations

import hashlib
import json
import threading
import tracemalloc

import pytest

import rlmkit
from rlmkit.run import describe
from rlmkit.run.describe import HASH_INLINE_CHARS, describe_inputs, text_sha256
from rlmkit.trajectory import TrajectoryLog


def _utf8_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@pytest.mark.parametrize(
    "text",
    ["", "plain ascii " * 1000, "caf\xe9 " * 300_000, "\u0101\u4e00 " * 400_000, "\U0001f600\ud800x" * 5],
)
def test_text_sha256_is_the_sha256_of_the_utf8(text):
    assert text_sha256(text) == _utf8_sha(text)
    assert text_sha256(text.encode("utf-8", "surrogatepass")) == _utf8_sha(text)


def test_hashing_ascii_text_makes_no_copy_of_it():
    text = "record 0001: lorem ipsum\n" * 2_000_000  # 50 MB
    tracemalloc.start()
    try:
        digest = text_sha256(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digest == _utf8_sha(text)
    assert peak < 1 << 20, f"hashing a 50 MB str allocated {peak:,} bytes"


def test_describe_inputs_leaves_only_big_text_for_later():
    small, big = "x" * 10, "y" * (HASH_INLINE_CHARS + 1)
    infos, finish = describe_inputs({"q": small, "context": big, "items": [1, 2]})
    assert [i.sha256 == "" for i in infos] == [False, True, False]
    assert infos[0].sha256 == _utf8_sha(small)
    finish()
    assert infos[1].sha256 == _utf8_sha(big)
    assert describe_inputs({"q": small})[1] is None


def test_the_first_request_goes_out_before_a_big_input_is_hashed(tmp_path, monkeypatch):
    context = "the context line\n" * (HASH_INLINE_CHARS // 8)
    asked = threading.Event()
    order: list[str] = []
    real = describe.text_sha256

    def held_hash(value):  # holds the hash until the model is asked; times out if it is never asked
        order.append("asked before hash" if asked.wait(20) else "hash first")
        return real(value)

    def model(messages):
        asked.set()
        return "```repl\nSUBMIT(answer=str(len(context)))\n```"

    monkeypatch.setattr(describe, "text_sha256", held_hash)
    rlm = rlmkit.RLM("context -> answer", lm=rlmkit.FunctionLM(model), log_dir=tmp_path)
    pred = rlm(context=context)
    assert order == ["asked before hash"]
    assert pred.answer == str(len(context))
    assert pred.trajectory.meta.inputs[0].sha256 == _utf8_sha(context)
    lines = [json.loads(line) for line in next(tmp_path.glob("*.jsonl")).read_text().splitlines()]
    assert [line["event"] for line in lines] == ["start", "turn", "end"]
    assert lines[0]["meta"]["inputs"][0]["sha256"] == _utf8_sha(context)
    assert [run.meta.inputs[0].sha256 for run in TrajectoryLog(tmp_path).runs()] == [_utf8_sha(context)]


# -- cold start: what the first run of a fresh process imports and loads ------------------------
def test_a_first_run_on_the_direct_path_imports_only_what_it_uses(tmp_path):
    """A fresh process runs an RLM over the openai transport: litellm, the optimizers and the
    observers' libraries stay out, and so do httpx, httpcore and httpx's command-line client (click,
    rich, pygments): requests go over asyncio streams (``transports/http11.py``).

    Judged against what `import dspy` alone loads in the same interpreter: dspy imports IPython's
    display when IPython is installed (and IPython brings pygments), which rlmkit cannot help."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "def top(): return sorted({m.split('.')[0] for m in sys.modules})\n"
        "import dspy\n"
        "print(top())\n"
        "import rlmkit\n"
        "from rlmkit.testing import ScriptedServer\n"
        "with ScriptedServer(lambda body: '```repl\\nSUBMIT(answer=str(len(context)))\\n```') as server:\n"
        "    lm = rlmkit.LM('openai/scripted', api_base=server.url, api_key='t', cache=False)\n"
        "    assert rlmkit.RLM('context -> answer', lm=lm)(context='abc').answer == '3'\n"
        "print(top())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    by_dspy, loaded = (set(eval(line)) for line in out.stdout.strip().splitlines()[-2:])  # noqa: S307
    assert "rlmkit" in loaded
    assert "litellm" not in loaded  # dspy itself loads litellm only on its first LM call
    unwanted = {"litellm", "optuna", "mlflow", "opentelemetry", "openai", "trl"}
    unwanted |= {"httpx", "httpcore", "anyio", "h11", "click", "rich", "pygments"}
    assert not (loaded - by_dspy) & unwanted


def test_a_self_hosted_model_is_priced_without_parsing_the_price_map():
    from rlmkit.models import prices

    prices._load.cache_clear()
    prices.listed.cache_clear()
    rlmkit.LM("openai/my-local-model", api_base="http://127.0.0.1:9/v1", cache=False)
    assert prices.call_cost("openai/my-local-model", 1000, 100) == 0.0
    assert prices._load.cache_info().currsize == 0  # 3.5 MB of JSON never parsed for it
    assert prices.call_cost("openai/gpt-4o-mini", 1000, 0) > 0


def test_every_model_of_the_price_map_is_found_by_the_text_search():
    from rlmkit.models import prices

    names = prices.price_map()
    assert len(names) > 100 and all(prices.listed(name) for name in names)
    assert not prices.listed("no-such-model-anywhere")


# -- per turn: a cell and the restore of rebound inputs are one round trip to the worker ----------
@pytest.mark.parametrize("backend", ["process", "inline"])
def test_a_cell_and_the_input_restore_after_it_are_one_round_trip(backend, monkeypatch):
    from rlmkit.run.guards import RESTORE_CALL, input_guard
    from rlmkit.sandbox import make_sandbox

    with make_sandbox(backend) as sandbox:
        sandbox.start({"context": "the input"}, {"SUBMIT": lambda **kw: None}, input_guard(["context"]))
        sent = []
        if backend == "process":
            send = sandbox._chan.send
            monkeypatch.setattr(sandbox._chan, "send", lambda msg: (sent.append(msg[0]), send(msg))[1])
        result = sandbox.run_then("context = 'copied from the preview'\nprint('cell')", RESTORE_CALL)
        assert result.stdout.startswith("cell\n") and "context is an input and was restored" in result.stdout
        assert sandbox.get("context") == "the input"
        assert sandbox.run_then("print(1 / 0)", RESTORE_CALL).error  # the cell's error stands
        if backend == "process":
            assert sent == ["run", "get", "run"]  # one message per cell: the restore went with it


# -- memory: what a sandbox worker holds besides the inputs ----------------------------------------
def test_the_worker_loads_neither_json_nor_ast():
    """Its configuration arrives marshalled and cells are parsed with ``_ast``: the json and ast
    modules (about 0.7 MB per worker, which the memory target at 1e7 characters feels) stay out."""
    from rlmkit.sandbox import make_sandbox

    with make_sandbox("process") as sandbox:
        sandbox.start({"context": "x"}, {})
        result = sandbox.run(
            "import sys\nprint(sorted({'json', 'ast', 'contextlib'} & set(sys.modules)))\n1 + 1"
        )
        assert result.error is None and result.stdout.strip() == "[]\n2"  # the echo works without ast


# -- the run's end: the worker is killed, its clean-up does not hold the caller ----------------------
def test_a_run_returns_before_its_worker_is_reaped_and_the_clean_up_still_happens(monkeypatch):
    import os

    from rlmkit import events as ev
    from rlmkit.sandbox import process

    release, reaped = threading.Event(), threading.Event()
    real = process._kill_and_clean

    def held_clean_up(*args):
        release.wait(timeout=60)  # a clean-up that cannot finish before the run has returned
        real(*args)
        reaped.set()

    monkeypatch.setattr(process, "_kill_and_clean", held_clean_up)
    seen = {}

    def on(event):
        if type(event) is ev.SandboxStarted:
            seen["pid"], seen["workdir"] = event.sandbox.pid, event.sandbox.workdir

    rlm = rlmkit.RLM(
        "context -> answer", lm=rlmkit.FunctionLM(lambda messages: "```repl\nSUBMIT(answer=1)\n```")
    )
    with ev.listen(on):
        assert rlm(context="x").answer == "1"
    assert not reaped.is_set()  # a run that waited for its clean-up would have waited out the 60 s
    release.set()
    assert reaped.wait(timeout=60)  # ... and then it is cleaned up all the same
    assert not os.path.exists(seen["workdir"])
    with pytest.raises(ProcessLookupError):
        os.kill(seen["pid"], 0)
