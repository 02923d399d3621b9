"""What stands between a call and its first model request (issue 16's start-up and memory targets).

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
from rlmkit import trajectory
from rlmkit.trajectory import HASH_INLINE_CHARS, TrajectoryLog, describe_inputs, text_sha256


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
    real = trajectory.text_sha256

    def held_hash(value):  # holds the hash until the model is asked; times out if it is never asked
        order.append("asked before hash" if asked.wait(20) else "hash first")
        return real(value)

    def model(messages):
        asked.set()
        return "```repl\nSUBMIT(answer=str(len(context)))\n```"

    monkeypatch.setattr(trajectory, "text_sha256", held_hash)
    rlm = rlmkit.RLM("context -> answer", lm=rlmkit.FunctionLM(model), log_dir=tmp_path)
    pred = rlm(context=context)
    assert order == ["asked before hash"]
    assert pred.answer == str(len(context))
    assert pred.trajectory.meta.inputs[0].sha256 == _utf8_sha(context)
    lines = [json.loads(line) for line in next(tmp_path.glob("*.jsonl")).read_text().splitlines()]
    assert [line["event"] for line in lines] == ["start", "turn", "end"]
    assert lines[0]["meta"]["inputs"][0]["sha256"] == _utf8_sha(context)
    assert [run.meta.inputs[0].sha256 for run in TrajectoryLog(tmp_path).runs()] == [_utf8_sha(context)]
