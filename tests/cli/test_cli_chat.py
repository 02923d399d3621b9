"""``rlmkit chat`` driven through a real terminal (a pty): questions, /vars, Ctrl-C mid-call,
/save, /load, /quit, against a scripted model server."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pexpect
import pytest

from rlmkit.testing import ScriptedServer, is_root_request

ROOT = Path(__file__).resolve().parents[2]


def _question(body: dict) -> str:
    task = body["messages"][1]["content"]
    return task.split("`question` (str")[1].split("): ", 1)[1].split("\n", 1)[0].strip("'")


def _ignore_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def server():
    release = threading.Event()

    def respond(body: dict) -> str:
        if not is_root_request(body):
            return "sub"
        question = _question(body)
        if question == "slow":
            release.wait(30)
            return "```repl\nSUBMIT(answer='late')\n```"
        if question == "count":
            return "```repl\nn = len(context)\nSUBMIT(answer=str(n))\n```"
        return "```repl\nSUBMIT(answer=str(n * 2))\n```"

    with ScriptedServer(respond) as served:
        yield served
        release.set()


def test_a_chat_through_a_terminal(server, tmp_path):
    (tmp_path / "notes.txt").write_text("x" * 1234)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OPENAI_API_KEY": "test-key",
        "RLMKIT_CACHE_DIR": str(tmp_path),
    }
    args = [
        "-m",
        "rlmkit",
        "chat",
        str(tmp_path / "notes.txt"),
        "--lm",
        "openai/scripted",
        "--api-base",
        server.url,
    ]
    # started ignoring SIGINT, as a script's background job or some parents start it: Ctrl-C
    # must still stop a call
    child = pexpect.spawn(sys.executable, args, env=env, cwd=str(tmp_path), encoding="utf-8", timeout=60,
                          dimensions=(50, 200), preexec_fn=_ignore_ctrl_c)  # fmt: skip
    try:
        child.expect("1,234 characters loaded")
        child.sendline("count")
        child.expect("1234")
        child.expect(r"1 turns, [0-9.]+ s, \$0\.0000")
        child.sendline("/vars")
        child.expect("n: int")
        child.sendline("slow")
        deadline = time.monotonic() + 30
        while not any(is_root_request(r) and _question(r) == "slow" for r in list(server.requests)):
            assert time.monotonic() < deadline, "the slow question never reached the model"
            time.sleep(0.02)
        child.sendintr()  # Ctrl-C: stops this call, not the session
        child.expect("stopped")
        child.sendline("again")
        child.expect("2468")
        child.sendline(f"/save {tmp_path / 'saved'}")
        child.expect("saved to")
        child.sendline(f"/load {tmp_path / 'saved'}")
        child.expect("loaded .*: 1 variables")
        child.sendline("again")
        child.expect("2468")
        child.expect(r"REPL rebuilt \(loaded\)")
        child.sendline("/quit")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
