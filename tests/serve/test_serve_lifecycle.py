"""What a server owes its host: a client that goes away cancels its run, a full queue is a 429
with Retry-After, access logs carry ids and never the prompt, a server beyond loopback needs a
key, and ``rlmkit serve`` drains a call in flight on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import threading

import httpx
import openai
import pytest

import rlmkit
from rlmkit import events as ev
from rlmkit.errors import ConfigError
from rlmkit.serve.server import check_exposure
from rlmkit.testing import FunctionLM, is_root_request
from tests.helpers.replies import repl
from tests.helpers.serve_programs import ROOT, SERVE, served, serving_url
from tests.helpers.waiting import wait_for


class Held:
    """A model whose root call waits until released, and says whether it was cancelled."""

    def __init__(self):
        self.release, self.cancelled, self.waiting = threading.Event(), threading.Event(), threading.Event()

    async def __call__(self, messages):
        if not is_root_request({"messages": messages}):
            return "sub"
        self.waiting.set()
        try:
            await asyncio.to_thread(self.release.wait, 60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return repl("SUBMIT(answer=question)")


@pytest.fixture
def held():
    model = Held()
    yield model
    model.release.set()  # a thread still waiting ends now


def held_rlm(model: Held) -> rlmkit.RLM:
    return rlmkit.RLM("context, question -> answer", lm=FunctionLM(model))


def body(question: str = "q", **extra) -> dict:
    return {"model": "rlmkit", "messages": [{"role": "user", "content": question}], **extra}


def test_a_client_leaving_a_stream_cancels_its_run_and_the_server_goes_on(held):
    with served(held_rlm(held)) as url:
        with httpx.stream("POST", f"{url}/chat/completions", json=body(stream=True), timeout=30) as response:
            assert response.status_code == 200
            next(response.iter_lines())  # the role chunk: the call is under way
            wait_for(held.waiting.is_set, "the run's first model call")
        wait_for(held.cancelled.is_set, "the run cancelled after the client left")
        held.release.set()
        health = url.removesuffix("/v1") + "/health"
        wait_for(lambda: httpx.get(health).json()["running"] == 0, "the call's slot freed")
        reply = openai.OpenAI(base_url=url, api_key="x").chat.completions.create(**body("next"))
        assert reply.choices[0].message.content == "next"


def test_every_run_a_leaving_client_began_ends_and_closes_its_sandbox():
    from tests.helpers.serve_programs import qa_rlm

    seen: list[str] = []

    def record(event: ev.Event) -> None:
        if event.depth == 0 and type(event).__name__ in (
            "RunStarted",
            "RunFinished",
            "SandboxStarting",
            "SandboxClosed",
        ):
            seen.append(type(event).__name__)

    remove = ev.instrument(lambda _: record)  # every call tree of this process, the server's included
    try:
        with served(qa_rlm()) as url, httpx.Client(timeout=30) as client:
            for _ in range(3):  # gone right after the first chunk: the run is cut at its start
                with client.stream("POST", f"{url}/chat/completions", json=body(stream=True)) as response:
                    next(response.iter_lines())
            wait_for(lambda: seen.count("RunFinished") == seen.count("RunStarted") == 3, "every run ended")
            wait_for(
                lambda: seen.count("SandboxClosed") == seen.count("SandboxStarting"), "every sandbox closed"
            )
    finally:
        remove()


def test_a_client_leaving_a_plain_call_cancels_its_run_and_closes_its_sandbox(held):
    seen: list[str] = []
    remove = ev.instrument(lambda _: lambda event: seen.append(type(event).__name__))
    try:
        with served(held_rlm(held)) as url:
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(f"{url}/chat/completions", json=body(), timeout=httpx.Timeout(30, read=1.0))
            wait_for(held.cancelled.is_set, "the run cancelled after the client left")
            wait_for(lambda: "RunFinished" in seen, "the run ended")
            wait_for(
                lambda: seen.count("SandboxClosed") == seen.count("SandboxStarting"), "its sandbox closed"
            )
            held.release.set()  # the model's waiting thread ends before the server stops
    finally:
        remove()


def test_past_the_queue_a_call_is_refused_with_429_and_retry_after(held):
    with served(held_rlm(held), max_running=1, max_waiting=0) as url:
        first = threading.Thread(
            target=httpx.post, args=(f"{url}/chat/completions",), kwargs={"json": body()}
        )
        first.start()
        wait_for(held.waiting.is_set, "the first call running")
        refused = httpx.post(f"{url}/chat/completions", json=body("second"))
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["type"] == "rate_limit_error"
        streamed = httpx.post(f"{url}/chat/completions", json=body("third", stream=True))
        assert streamed.status_code == 429  # before any byte of the stream
        held.release.set()
        first.join(30)
        assert httpx.post(f"{url}/chat/completions", json=body("fourth")).status_code == 200


def test_access_log_lines_have_ids_and_usage_but_no_prompt_text(caplog):
    from tests.helpers.serve_programs import qa_rlm

    secret = "the-secret-question-text"
    with caplog.at_level(logging.INFO, logger="rlmkit.serve.access"), served(qa_rlm()) as url:
        response = httpx.post(
            f"{url}/chat/completions", json=body(secret), headers={"X-Request-Id": "req-1"}, timeout=60
        )
        httpx.post(f"{url}/chat/completions", json={"model": "nope", "messages": []}, timeout=60)
    assert response.headers["x-request-id"] == "req-1"
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "rlmkit.serve.access"]
    ok, bad = lines
    assert ok["request_id"] == "req-1" and ok["status"] == 200 and ok["calls"] == 2 and len(ok["runs"]) == 1
    assert bad["status"] == 400 and len(bad["request_id"]) == 32
    assert secret not in caplog.text and secret.upper() not in caplog.text


@pytest.mark.parametrize(("host", "refused"), [("127.0.0.1", False), ("::1", False), ("0.0.0.0", True)])
def test_binding_beyond_loopback_needs_an_api_key(host, refused):
    if refused:
        with pytest.raises(ConfigError, match="--api-key"):
            check_exposure(host, None)
        check_exposure(host, "a-key")
    else:
        check_exposure(host, None)


def test_the_command_refuses_a_public_bind_without_a_key():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RLMKIT_SERVE_API_KEY", None)
    result = subprocess.run(
        [*SERVE, "tests.helpers.serve_programs:qa", "--host", "0.0.0.0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "--api-key" in result.stderr


def test_rlmkit_serve_drains_a_call_in_flight_on_sigterm(tmp_path):
    gate = tmp_path / "gate"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SERVE_TEST_GATE": str(gate)}
    server = subprocess.Popen(
        [*SERVE, "tests.helpers.serve_programs:gated", "--port", "0", "--grace", "30"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = serving_url(server)
        result: dict = {}
        call = threading.Thread(
            target=lambda: result.update(
                r=httpx.post(f"{url}/chat/completions", json=body("drained"), timeout=60)
            )
        )
        call.start()
        wait_for(lambda: (tmp_path / "gate.waiting").exists(), "the call waiting in its model", timeout=60)
        server.send_signal(signal.SIGTERM)
        gate.write_text("go")  # only now may the call finish: the server must have waited for it
        call.join(60)
        assert (
            result["r"].status_code == 200
            and result["r"].json()["choices"][0]["message"]["content"] == "drained"
        )
        # uvicorn re-raises the signal it caught once it has shut down: the exit a SIGTERM means
        assert server.wait(60) in (0, -signal.SIGTERM)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
