"""The LM layer against a real OpenAI-compatible server on 127.0.0.1 (rlmkit.testing.server)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmkit.errors import ConfigError, LMConfigError, LMUnavailableError, UserError
from rlmkit.model_choice import configure, resolve_lm
from rlmkit.models.lm import LM, Completion
from rlmkit.models.lm_cache import cache_key
from rlmkit.testing.server import Faults, ScriptedServer, chat_response, last_user_text

HI = [{"role": "user", "content": "hi"}]


def echo(body: dict) -> str:
    return f"echo: {last_user_text(body)}"


@pytest.fixture
def server():
    with ScriptedServer(echo) as s:
        yield s


@pytest.fixture(params=["openai", "litellm"])
def transport(request) -> str:
    """Every model test runs on the direct path and on litellm: behaviour must not differ."""
    return request.param


def scripted_lm(server: ScriptedServer, transport: str, **kwargs) -> LM:
    kwargs.setdefault("cache", False)
    return LM("openai/scripted", api_base=server.url, api_key="test", transport=transport, **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- calls, usage, cost ---------------------------------------------------------------
def test_complete_returns_text_usage_and_zero_cost_for_unpriced_model(server, transport):
    reply = scripted_lm(server, transport).complete([{"role": "user", "content": "hello there"}])
    assert isinstance(reply, Completion)
    assert reply.text == "echo: hello there"
    assert reply.cached is False and reply.finish_reason == "stop"
    assert reply.usage.calls == 1 and reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.cost == 0.0  # "scripted" is in no cost map: 0.0, not an error
    assert reply.duration_s > 0


def test_cost_comes_from_litellms_local_cost_map(transport):
    import litellm

    def priced(body: dict) -> dict:
        response = chat_response("ok", "gpt-4o-mini")
        response["usage"] = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
        return response

    with ScriptedServer(priced) as s:
        reply = LM(
            "openai/gpt-4o-mini", api_base=s.url, api_key="test", cache=False, transport=transport
        ).complete(HI)
    price = litellm.model_cost["gpt-4o-mini"]
    expected = 1000 * price["input_cost_per_token"] + 500 * price["output_cost_per_token"]
    assert reply.usage.cost == pytest.approx(expected) and expected > 0


def test_sampling_params_and_overrides_reach_the_server(server, transport):
    lm = scripted_lm(server, transport, temperature=0.3, max_tokens=77)
    lm.complete(HI)
    lm.complete(HI, temperature=0.9)
    assert server.requests[0]["temperature"] == 0.3 and server.requests[0]["max_tokens"] == 77
    assert server.requests[1]["temperature"] == 0.9


def test_async_complete(server, transport):
    reply = asyncio.run(scripted_lm(server, transport).acomplete([{"role": "user", "content": "async"}]))
    assert reply.text == "echo: async" and reply.usage.calls == 1


# -- retries -----------------------------------------------------------------------------
def test_retries_injected_429_and_500_until_success(transport):
    faults = Faults(rate=0.5, kinds=("429", "500"), seed=3, retry_after=0.01)
    with ScriptedServer(echo, faults=faults) as s:
        lm = scripted_lm(s, transport, num_retries=10)
        replies = [lm.complete([{"role": "user", "content": f"q{i}"}]) for i in range(8)]
    assert [r.text for r in replies] == [f"echo: q{i}" for i in range(8)]
    assert faults.injected.get("429", 0) > 0 and faults.injected.get("500", 0) > 0
    assert len(s.requests) == 8 + sum(faults.injected.values())  # every fault was retried once


def test_async_retries_too(transport):
    faults = Faults(rate=0.5, kinds=("429", "500"), seed=5, retry_after=0.01)
    with ScriptedServer(echo, faults=faults) as s:
        reply = asyncio.run(scripted_lm(s, transport, num_retries=10).acomplete(HI))
    assert reply.text == "echo: hi"


def test_retry_after_is_honoured_then_a_typed_error_after_the_last_try(transport):
    faults = Faults(rate=1.0, kinds=("429",), retry_after=0.3)
    with ScriptedServer(echo, faults=faults) as s:
        started = time.perf_counter()
        with pytest.raises(LMUnavailableError) as info:
            scripted_lm(s, transport, num_retries=2).complete(HI)
        elapsed = time.perf_counter() - started
    assert len(s.requests) == 3  # one try + two retries
    assert elapsed >= 0.55  # two waits of Retry-After (0.3 s), not our shorter backoff
    assert info.value.status == 429 and "3 tries" in str(info.value)


class StatusServer:
    """A server that answers every request with one HTTP status (ScriptedServer only fails with 429/500)."""

    def __init__(self, status: int):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self
        self.hits = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.hits += 1
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = b'{"error": {"message": "nope", "type": "invalid_request_error"}}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.mark.parametrize("status", [401, 404])
def test_auth_and_not_found_are_config_errors_without_retries(status, transport):
    secret = "sk-test-secret-0123456789abcdef"
    server = StatusServer(status)
    try:
        with pytest.raises(LMConfigError) as info:
            LM(
                "openai/scripted", transport=transport, api_base=server.url, api_key=secret, cache=False
            ).complete(HI)
    finally:
        server.httpd.shutdown()
    assert server.hits == 1 and info.value.status == status
    assert secret not in str(info.value)


# -- cache ---------------------------------------------------------------------------------
def test_cache_hit_returns_same_text_without_touching_the_server(server, tmp_path, transport):
    lm = scripted_lm(server, transport, cache=tmp_path / "cache")
    first = lm.complete(HI)
    second = lm.complete(HI)
    assert len(server.requests) == 1
    assert second.cached and not first.cached and second.text == first.text
    assert second.usage.cached_calls == 1 and second.usage.cost == 0.0
    # a new LM on the same directory (another process, later) also hits
    assert scripted_lm(server, transport, cache=tmp_path / "cache").complete(HI).cached


def test_rollout_id_gives_a_distinct_cache_entry(server, tmp_path, transport):
    lm = scripted_lm(server, transport, cache=tmp_path)
    lm.complete(HI)
    assert not lm.complete(HI, rollout_id=1).cached
    assert lm.complete(HI, rollout_id=1).cached
    assert not asyncio.run(lm.acomplete(HI, rollout_id=2)).cached
    assert len(server.requests) == 3


def test_cache_dir_from_env(server, tmp_path, monkeypatch, transport):
    monkeypatch.setenv("RLMKIT_CACHE_DIR", str(tmp_path / "from-env"))
    lm = LM(
        "openai/scripted", transport=transport, api_base=server.url, api_key="test"
    )  # cache on by default
    lm.complete(HI)
    assert lm.complete(HI).cached and (tmp_path / "from-env").is_dir()


def test_unusable_cache_dir_is_a_clear_error(tmp_path, transport):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match="RLMKIT_CACHE_DIR"):
        LM(
            "openai/scripted",
            transport=transport,
            api_base="http://127.0.0.1:9/v1",
            api_key="t",
            cache=blocker / "cache",
        )


message_lists = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]), "content": st.text()}),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(a=message_lists, b=message_lists, temperature=st.floats(0, 2), rollout=st.none() | st.integers(0, 9))
def test_cache_key_separates_what_changes_the_answer(a, b, temperature, rollout):
    params = {"temperature": temperature, "max_tokens": 10}
    key = cache_key("m", a, params, rollout)
    assert (key == cache_key("m", b, params, rollout)) == (a == b)
    assert key != cache_key("other", a, params, rollout)
    assert key != cache_key("m", a, {**params, "temperature": temperature + 0.5}, rollout)
    assert key != cache_key("m", a, params, (rollout or 0) + 100)
    # transport settings and dict order do not matter
    assert key == cache_key("m", a, {"max_tokens": 10, "temperature": temperature, "api_base": "x"}, rollout)


# -- concurrency ---------------------------------------------------------------------------
def test_concurrency_limit_holds_across_threads_and_event_loops(transport):
    with ScriptedServer(echo, latency=0.05) as s:
        lm = scripted_lm(s, transport, max_concurrency=3)

        def sync_calls() -> None:
            for i in range(3):
                lm.complete([{"role": "user", "content": f"t{threading.get_ident()}-{i}"}])

        async def async_calls() -> None:
            await asyncio.gather(*(lm.acomplete([{"role": "user", "content": f"a{i}"}]) for i in range(10)))

        threads = [threading.Thread(target=sync_calls) for _ in range(4)]
        threads.append(threading.Thread(target=lambda: asyncio.run(async_calls())))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(s.requests) == 22
    assert s.max_in_flight == 3  # reached, never exceeded


def test_cancelled_waiter_does_not_leak_a_slot(transport):
    with ScriptedServer(echo, latency=0.2) as s:
        lm = scripted_lm(s, transport, max_concurrency=1)

        async def scenario() -> Completion:
            busy = asyncio.create_task(lm.acomplete(HI))
            await asyncio.sleep(0.05)
            waiting = asyncio.create_task(lm.acomplete([{"role": "user", "content": "x"}]))
            await asyncio.sleep(0.01)
            waiting.cancel()
            await busy
            return await asyncio.wait_for(lm.acomplete([{"role": "user", "content": "after"}]), 5)

        assert asyncio.run(scenario()).text == "echo: after"


# -- typed errors before or after the call --------------------------------------------------
def test_unknown_model_string_says_what_litellm_expects():
    with pytest.raises(LMConfigError, match="provider/model"):
        LM("no-such-model-xyz")
    with pytest.raises(LMConfigError, match="provider/model"):  # a key does not make it routable
        LM("no-such-model-xyz", api_key="k", api_base="http://127.0.0.1:9/v1")


def test_missing_provider_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LMConfigError, match="OPENAI_API_KEY"):
        LM("openai/gpt-4o-mini")


def test_unreachable_api_base_is_unavailable_after_retries_and_never_shows_the_key(transport):
    secret = "sk-test-do-not-print-0123456789"
    lm = LM("openai/scripted", transport=transport, api_base=f"http://127.0.0.1:{free_port()}/v1",
            api_key=secret, cache=False, num_retries=1)  # fmt: skip
    with pytest.raises(LMUnavailableError, match="could not reach") as info:
        lm.complete(HI)
    assert secret not in str(info.value) and "2 tries" in str(info.value)
    assert secret not in repr(lm.describe()) and secret not in repr(lm)


def test_a_placeholder_key_does_not_blank_out_the_error_message(transport):
    lm = LM("openai/scripted", transport=transport, api_base=f"http://127.0.0.1:{free_port()}/v1",
            api_key="t", cache=False, num_retries=0)  # fmt: skip
    with pytest.raises(LMUnavailableError) as info:
        lm.complete(HI)
    assert "could not reach" in str(info.value) and "***" not in str(info.value)


def test_bad_messages_fail_before_any_call(server, transport):
    lm = scripted_lm(server, transport)
    for bad in ([], "hi", [{"content": "no role"}]):
        with pytest.raises(UserError):
            lm.complete(bad)
    assert server.requests == []


def test_copies_share_the_handle_and_pickles_work_again(server, tmp_path, transport):
    import copy
    import pickle

    lm = scripted_lm(server, transport, cache=tmp_path)
    assert copy.deepcopy(lm) is lm  # one cache and one concurrency limit per LM, across program copies
    lm.complete(HI)
    clone = pickle.loads(pickle.dumps(lm))
    assert clone.complete(HI).cached and clone.max_concurrency == lm.max_concurrency


def test_describe_has_model_and_params_but_no_secrets(server, transport):
    lm = scripted_lm(
        server, transport, temperature=0.1, max_tokens=5, extra_headers={"Authorization": "Bearer x"}
    )
    described = lm.describe()
    assert described["model"] == "openai/scripted" and described["api_base"] == server.url
    assert described["params"] == {"temperature": 0.1, "max_tokens": 5}
    assert "test" not in repr(described)


# -- dspy and defaults -----------------------------------------------------------------------
def test_from_dspy_keeps_model_kwargs_and_endpoint(server):
    import dspy

    dlm = dspy.LM(
        "openai/scripted", api_base=server.url, api_key="test", temperature=0.4, max_tokens=33, cache=False
    )
    lm = resolve_lm(dlm)
    assert lm.dspy_origin is dlm and isinstance(lm.direct, LM)  # the direct transport, dlm for DSPy's eyes
    assert lm.model == "openai/scripted" and lm.api_base == server.url
    assert lm.complete(HI).text == "echo: hi"
    assert server.requests[0]["temperature"] == 0.4 and server.requests[0]["max_tokens"] == 33


def test_resolve_lm_prefers_dspy_settings_then_configure(server, monkeypatch, transport):
    import dspy

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    mine = scripted_lm(server, transport)
    assert resolve_lm(mine) is mine
    assert resolve_lm("openai/gpt-4o-mini").model == "openai/gpt-4o-mini"
    configure(mine)
    try:
        assert resolve_lm(None) is mine
        with dspy.context(lm=dspy.LM("openai/from-dspy", api_base=server.url, api_key="test")):
            assert resolve_lm(None).model == "openai/from-dspy"
    finally:
        configure(None)
    with pytest.raises(UserError):
        resolve_lm(42)


def test_importing_and_building_an_lm_never_touches_the_network():
    guard = textwrap.dedent(
        """
        import socket, sys
        attempts = []
        def refuse(*args, **kwargs):  # litellm swallows errors here, so record them too
            attempts.append(args)
            raise OSError("network access is not allowed in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        import rlmkit.models.lm
        lm = rlmkit.models.lm.LM("openai/gpt-4o-mini", api_key="x", cache=False)
        assert "litellm" not in sys.modules  # the direct path never imports it
        other = rlmkit.models.lm.LM("anthropic/claude-haiku-4-5", api_key="x", cache=False)
        import litellm
        assert litellm.model_cost["gpt-4o-mini"]["input_cost_per_token"] > 0
        assert not attempts, attempts
        print("ok", lm.model, lm.transport.name, other.transport.name)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    done = subprocess.run(
        [sys.executable, "-c", guard], check=False, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ok openai/gpt-4o-mini openai litellm" in done.stdout
