"""``rlmkit.models.chat_server.ChatServer``: a function served as an OpenAI-compatible chat endpoint
(what rollouts and served checkpoints use), plain and streamed, with its failures as HTTP errors."""

from __future__ import annotations

import json

import httpx
import pytest

import rlmkit
from rlmkit.errors import LMError
from rlmkit.models.chat_server import ChatServer
from rlmkit.testing.server import ScriptedServer


def test_an_lm_talks_to_a_served_function_and_a_listing_names_the_model():
    with ChatServer(lambda body: f"echo {body['messages'][-1]['content']}", name="policy") as server:
        lm = rlmkit.LM("openai/policy", api_base=server.url, api_key="local", cache=False)
        reply = lm.complete([{"role": "user", "content": "hi"}])
        listing = httpx.get(f"{server.url}/models").json()
    assert reply.text == "echo hi" and reply.usage.completion_tokens >= 1
    assert [m["id"] for m in listing["data"]] == ["policy"]


def test_a_streamed_request_gets_chunks_then_done():
    with ChatServer(lambda body: "streamed") as server:
        response = httpx.post(f"{server.url}/chat/completions", json={"messages": [], "stream": True})
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert response.headers["content-type"] == "text/event-stream" and events[-1] == "[DONE]"
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "streamed"


def test_a_responder_that_raises_is_a_500_and_bad_json_a_400():
    def broken(body):
        raise RuntimeError("responder bug")

    with ChatServer(broken) as server:
        bad = httpx.post(f"{server.url}/chat/completions", content=b"{not json")
        lm = rlmkit.LM("openai/x", api_base=server.url, api_key="local", cache=False, num_retries=0)
        with pytest.raises(LMError, match="responder bug"):
            lm.complete([{"role": "user", "content": "hi"}])
    assert bad.status_code == 400


def test_the_scripted_server_is_the_chat_server_plus_a_request_log():
    with ScriptedServer(lambda body: "ok") as server:
        httpx.post(f"{server.url}/chat/completions", json={"messages": [{"role": "user", "content": "q"}]})
    assert isinstance(server, ChatServer) and server.requests[0]["messages"][0]["content"] == "q"
    assert server.max_in_flight == 1 and server.in_flight == 0
