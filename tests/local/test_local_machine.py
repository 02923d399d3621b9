"""One embedded-model server per machine (rlmkit/local/machine.py), with a scripted stand-in
(rlmkit/testing/local_server.py) in place of llama.cpp: two processes share one server, which
ends when both have gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rlmkit.local import machine
from rlmkit.testing.local_server import SCRIPTED_BACKEND

CLIENT = """
import sys
from pathlib import Path
from rlmkit.local.machine import machine_server
from rlmkit.testing.local_server import SCRIPTED_BACKEND
server = machine_server(Path("unused.gguf"), backend=SCRIPTED_BACKEND)
print(server.url, server.pid, flush=True)
sys.stdin.read()  # stay a client until the test closes stdin
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("RLMKIT_HOME", str(tmp_path))
    yield tmp_path
    machine.stop()


def client(env: dict) -> tuple[subprocess.Popen, str, int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CLIENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    url, pid = proc.stdout.readline().split()
    return proc, url, int(pid)


def wait_until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "state not reached in time"
        time.sleep(0.05)


def test_two_processes_share_one_server_that_ends_after_the_last(home):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    first, url_a, pid_a = client(env)
    second, url_b, pid_b = client(env)
    assert (url_a, pid_a) == (url_b, pid_b)  # the second found the first's server
    assert httpx.get(f"{url_a}/models").status_code == 200
    assert sorted(machine.status()["clients"]) == sorted([str(first.pid), str(second.pid)])
    first.stdin.close()
    first.wait(30)
    assert machine.status()["pid"] == pid_a  # still serving the second
    second.stdin.close()
    second.wait(30)
    wait_until(lambda: machine.status() is None)
    wait_until(lambda: not machine._alive(pid_a))


def test_serve_pins_it_and_stop_ends_it(home):
    server = machine.machine_server(Path("unused.gguf"), backend=SCRIPTED_BACKEND, pin=True)
    assert machine.status()["clients"] == [machine.PIN]
    assert httpx.get(f"{server.url}/models").status_code == 200
    assert machine.stop() == server.pid
    assert machine.status() is None and not machine._alive(server.pid)
    assert machine.stop() is None


def test_the_speculative_setting_reaches_the_server_and_its_clients(home):
    config = machine.LocalServerConfig(speculative="ngram-simple")
    server = machine.machine_server(Path("unused.gguf"), config, backend=SCRIPTED_BACKEND, pin=True)
    assert machine.status()["speculative"] == "ngram-simple"  # as the server process parsed it
    assert server.config.speculative == "ngram-simple"
    assert machine.machine_server(Path("unused.gguf"), backend=SCRIPTED_BACKEND).config.speculative == (
        "ngram-simple"
    )  # a client that found it running reads the setting back


def test_cli_serve_refuses_an_unknown_speculative_kind_before_the_model(home, monkeypatch):
    from typer.testing import CliRunner

    import rlmkit.local
    from rlmkit.cli import app

    monkeypatch.setattr(rlmkit.local, "ensure_model", lambda **_: pytest.fail("the model was assembled"))
    result = CliRunner().invoke(app, ["local", "serve", "--speculative", "eagle"])
    assert result.exit_code == 1 and "unknown speculative decoding 'eagle'" in result.output
    assert machine.status() is None


def test_cli_status_and_stop(home):
    from typer.testing import CliRunner

    from rlmkit.cli import app

    runner = CliRunner()
    assert "no embedded model server is running" in runner.invoke(app, ["local", "status"]).output
    server = machine.machine_server(Path("unused.gguf"), backend=SCRIPTED_BACKEND, pin=True)
    shown = runner.invoke(app, ["local", "status"])
    assert shown.exit_code == 0 and server.url in shown.output and "pinned" in shown.output
    assert "speculative none" in shown.output  # the default: no speculative decoding
    assert f"pid {server.pid}" in runner.invoke(app, ["local", "stop"]).output
    assert machine.status() is None
