"""The peers' quality driver speaks its protocol: each framework answers a scripted one-turn run.

Needs the peers' venv (benchmarks/.peers: dspy 3.4.1, rlms 0.1.3). scripts/test.sh (CI) builds it
and sets RLMKIT_REQUIRE_PEERS=1, under which a missing venv fails the test; elsewhere it skips."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rlmkit.testing import ScriptedServer

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "quality"
sys.path.insert(0, str(BENCH))

import local_quality_peers as peers  # noqa: E402
from peers.peer_env import ready  # noqa: E402


@pytest.fixture(autouse=True)
def peers_venv():
    if not ready():
        if os.environ.get("RLMKIT_REQUIRE_PEERS"):
            pytest.fail("RLMKIT_REQUIRE_PEERS is set but benchmarks/.peers is missing or has other versions")
        pytest.skip("no peers' venv (benchmarks/.peers): scripts/test.sh builds it")


def reply(request: dict) -> str:
    system = request["messages"][0]["content"]
    if "[[ ## " in system:  # dspy's ChatAdapter fields
        return "[[ ## reasoning ## ]]\nfound it\n\n[[ ## code ## ]]\n```python\nSUBMIT(answer='4711')\n```"
    return "```repl\nanswer['content'] = '4711'\nanswer['ready'] = True\n```"  # rlms submits via a dict


@pytest.mark.parametrize("name", peers.FRAMEWORKS)
def test_the_peers_driver_gets_the_scripted_answer_in_one_turn_under_the_caps(tmp_path, name):
    with ScriptedServer(reply) as server:
        driver = peers.Driver(name, tmp_path / "stderr")
        try:
            job = {
                "context": "record 1: code 4711\n" * 50,
                "question": "What is the code?",
                "url": server.url,
                "model": "scripted",
                "max_tokens": 64,
                "max_iterations": 2,
                "log_path": str(tmp_path / "run.json"),
            }
            result = driver.run(job, timeout=60)
        finally:
            driver.kill()
        assert result is not None, (tmp_path / "stderr").read_text()[-2000:]
        assert result["error"] is None, result
        assert str(result["answer"]).strip() == "4711"
        assert result["turns"] == 1
        assert result["longest_reply_tokens"] > 0
        # the caps reached the wire: every request asked for temperature 0 and at most 64 tokens
        assert all(r.get("temperature") == 0 for r in server.requests)
        assert all((r.get("max_tokens") or r.get("max_completion_tokens")) == 64 for r in server.requests)
