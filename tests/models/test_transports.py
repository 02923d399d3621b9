"""The transport seam: the function model, the switch that refuses real requests, prices read
without litellm (equal to litellm's own), the shared httpx client, and max_tokens / stop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading

import pytest

import rlmkit
from rlmkit.errors import LMUnavailableError, SandboxError, UserError
from rlmkit.model_choice import resolve_lm
from rlmkit.models.lm import LM
from rlmkit.models.prices import call_cost, price_file
from rlmkit.models.transports.openai import shared_client
from rlmkit.testing import (
    FunctionLM,
    ModelReply,
    ModelRequestsBlocked,
    ProviderError,
    ScriptedServer,
    block_model_requests,
    chat_response,
    last_user_text,
)

HI = [{"role": "user", "content": "hi"}]


# -- the function model --------------------------------------------------------------------
def test_function_lm_sync_async_and_full_replies():
    assert FunctionLM(lambda messages: "sync: " + messages[-1]["content"]).complete(HI).text == "sync: hi"

    async def answer(messages, request):
        return ModelReply(
            text="async", model="mine", prompt_tokens=7, completion_tokens=3, finish_reason="length"
        )

    reply = asyncio.run(FunctionLM(answer).acomplete(HI, max_tokens=3))
    assert (reply.text, reply.model, reply.finish_reason) == ("async", "mine", "length")
    assert reply.usage.prompt_tokens == 7 and reply.usage.completion_tokens == 3 and reply.usage.cost == 0.0


def test_function_lm_sees_max_tokens_and_stop_and_goes_through_the_retry_layer():
    seen, failures = [], iter([ProviderError("busy", status=429, retry_after=0.0), None])

    def flaky(messages, request):
        seen.append((request.max_tokens, request.stop))
        if (failure := next(failures)) is not None:
            raise failure
        return "ok"

    assert FunctionLM(flaky, max_tokens=50).complete(HI, stop="END").text == "ok"
    assert seen == [(50, ["END"]), (50, ["END"])]  # the 429 was retried by rlmkit.LM
    with pytest.raises(LMUnavailableError, match="1 tries"):
        FunctionLM(
            lambda m: (_ for _ in ()).throw(ProviderError("down", status=503)), num_retries=0
        ).complete(HI)


def test_an_rlm_runs_on_a_function_model():
    def model(messages):
        if messages[0]["content"].startswith("You"):  # the root's system prompt
            return "```repl\nSUBMIT(answer=str(len(context)))\n```"
        return "sub"

    pred = rlmkit.RLM("context -> answer", lm=FunctionLM(model), sandbox="inline")(context="abcd")
    assert pred.answer == "4" and pred.trajectory.usage.calls == 1


def test_blocking_refuses_real_requests_but_not_function_models(monkeypatch):
    with ScriptedServer(lambda body: "real") as server:
        real = LM("openai/scripted", api_base=server.url, api_key="t", cache=False)
        with block_model_requests():
            with pytest.raises(ModelRequestsBlocked):
                real.complete(HI)
            assert FunctionLM(lambda m: "fake").complete(HI).text == "fake"
        assert server.requests == []
        assert real.complete(HI).text == "real"  # allowed again outside the block
        monkeypatch.setenv("RLMKIT_ALLOW_MODEL_REQUESTS", "0")
        with pytest.raises(ModelRequestsBlocked):
            real.complete(HI)


def test_bad_arguments_are_user_errors_before_any_call():
    with pytest.raises(UserError):
        FunctionLM("not callable")
    with pytest.raises(UserError):
        FunctionLM(lambda m: "x", max_tokens=0)
    with pytest.raises(UserError):
        FunctionLM(lambda m: "x").complete(HI, stop=[""])
    with pytest.raises(UserError):
        LM("openai/x", api_base="http://127.0.0.1:9/v1", transport="carrier-pigeon")


# -- max_tokens and stop reach the server on both transports ------------------------------------
@pytest.mark.parametrize("transport", ["openai", "litellm"])
def test_max_tokens_and_stop_are_sent(transport):
    with ScriptedServer(lambda body: "ok") as server:
        lm = LM(
            "openai/scripted",
            api_base=server.url,
            api_key="t",
            cache=False,
            transport=transport,
            max_tokens=9,
        )
        lm.complete(HI, stop=["\n\n"])
        lm.complete(HI, max_tokens=4)
    first, second = server.requests
    assert first["max_tokens"] == 9 and first["stop"] == ["\n\n"] and first["model"] == "scripted"
    assert second["max_tokens"] == 4 and "stop" not in second


# -- prices without litellm ---------------------------------------------------------------------
@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5",
                                   "gemini/gemini-2.5-flash", "openai/gpt-4.1"])  # fmt: skip
def test_prices_equal_litellms_own(model):
    from rlmkit.models.transports.litellm import import_litellm

    litellm = import_litellm()
    for prompt, completion in ((1000, 500), (250_000, 10)):  # the second crosses long-context tiers
        ours = call_cost(model, prompt, completion)
        theirs = sum(litellm.cost_per_token(model=model, prompt_tokens=prompt, completion_tokens=completion))
        assert ours == pytest.approx(theirs, rel=1e-9) and ours > 0
    assert price_file().name == "model_prices_and_context_window_backup.json"


def test_usage_cost_is_identical_between_transports():
    def priced(body: dict) -> dict:
        response = chat_response(f"ok {last_user_text(body)}", "gpt-4o-mini")
        response["usage"] = {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}
        return response

    with ScriptedServer(priced) as server:
        costs = {t: LM("openai/gpt-4o-mini", api_base=server.url, api_key="t", cache=False, transport=t)
                 .complete(HI).usage.cost for t in ("openai", "litellm")}  # fmt: skip
    assert costs["openai"] == costs["litellm"] > 0


def test_the_direct_path_never_imports_litellm():
    script = textwrap.dedent(
        """
        import sys
        import rlmkit
        from rlmkit.testing import ScriptedServer
        with ScriptedServer(lambda body: "```repl\\nSUBMIT(answer='1')\\n```") as server:
            lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="t", cache=False)
            reply = lm.complete([{"role": "user", "content": "hi"}])
            pred = rlmkit.RLM("context -> answer", lm=lm, sandbox="inline")(context="x")
        assert pred.answer == "1", pred
        assert "litellm" not in sys.modules, "litellm was imported"
        print("ok", reply.usage.calls)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ok 1" in done.stdout


# -- one client, one LM ----------------------------------------------------------------------------
def test_one_keep_alive_client_per_loop_and_base_url():
    async def clients():
        return (
            shared_client("http://a/v1", 4),
            shared_client("http://a/v1", 4),
            shared_client("http://b/v1", 4),
        )

    first, again, other = asyncio.run(clients())
    assert first is again and first is not other
    assert asyncio.run(clients())[0] is not first  # another loop: its own connections


def test_a_model_resolves_to_one_lm_per_process(monkeypatch):
    import dspy

    monkeypatch.setenv("OPENAI_API_KEY", "test-not-real")
    assert resolve_lm("openai/gpt-4o-mini") is resolve_lm("openai/gpt-4o-mini")
    with dspy.context(lm=dspy.LM("openai/from-dspy", api_base="http://127.0.0.1:9/v1", api_key="t")):
        assert resolve_lm(None) is resolve_lm(None)


# -- the first request does not wait for the sandbox ------------------------------------------------
def test_the_first_root_request_is_sent_while_the_sandbox_starts(monkeypatch):
    from rlmkit.sandbox.inline import InlineSandbox

    asked = threading.Event()
    start = InlineSandbox.start

    def slow_start(self, *args, **kwargs):
        # Starts only once the model was asked: a run that waited for the worker first would hang here.
        assert asked.wait(30), "the first model request waited for the sandbox"
        return start(self, *args, **kwargs)

    def model(messages):
        asked.set()
        return "```repl\nSUBMIT(answer='done')\n```"

    monkeypatch.setattr(InlineSandbox, "start", slow_start)
    assert (
        rlmkit.RLM("context -> answer", lm=FunctionLM(model), sandbox="inline")(context="x").answer == "done"
    )


def test_a_sandbox_that_fails_to_start_still_ends_the_run_typed(monkeypatch):
    from rlmkit.sandbox.inline import InlineSandbox

    def broken(self, *args, **kwargs):
        raise OSError("no worker today")

    monkeypatch.setattr(InlineSandbox, "start", broken)
    with pytest.raises(SandboxError, match="failed to start") as info:
        rlmkit.RLM("context -> answer", lm=FunctionLM(lambda m: "```repl\nprint(1)\n```"), sandbox="inline")(
            context="x"
        )
    assert info.value.trajectory.status == "error"


def test_a_child_forked_while_prices_load_can_still_price():
    import os
    import signal

    from rlmkit.models import prices

    with prices._lock:  # as if the background load held the lock at the moment of the fork
        pid = os.fork()
        if pid == 0:  # the child: must not wait on the parent's held lock (the alarm ends it if it does)
            signal.alarm(20)
            os._exit(0 if call_cost("openai/gpt-4o-mini", 1000, 0) > 0 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _https_server(ca, reply: str):
    """A ScriptedServer behind TLS, its certificate issued for 127.0.0.1 by ``ca``."""
    import ssl

    server = ScriptedServer(lambda body: reply)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server._httpd.socket = context.wrap_socket(server._httpd.socket, server_side=True)
    return server


def test_the_openai_transport_speaks_tls_and_checks_the_certificate(monkeypatch):
    """OpenAI itself is https: the direct path does TLS (asyncio streams with an ``ssl`` context)
    and refuses a certificate it cannot verify, as a network error, before anything is sent."""
    import ssl

    import trustme

    from rlmkit.errors import LMError
    from rlmkit.models.transports import openai as openai_transport

    ca = trustme.CA()
    with _https_server(ca, "over tls") as server:
        url = f"https://127.0.0.1:{server.port}/v1"
        untrusted = rlmkit.LM("openai/x", api_base=url, api_key="k", cache=False, num_retries=0)
        with pytest.raises(LMError, match="CERTIFICATE_VERIFY_FAILED"):
            untrusted.complete([{"role": "user", "content": "q"}])
        assert server.requests == []
        trusting = ssl.create_default_context()
        ca.configure_trust(trusting)
        monkeypatch.setattr(openai_transport, "_ssl_context", lambda: trusting)
        lm = rlmkit.LM("openai/y", api_base=url, api_key="k", cache=False, num_retries=0)
        assert lm.complete([{"role": "user", "content": "q"}]).text == "over tls"
        assert lm.complete([{"role": "user", "content": "again"}]).text == "over tls"  # kept alive
        assert [r["messages"][0]["content"] for r in server.requests] == ["q", "again"]
