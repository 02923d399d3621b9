"""Sessions over HTTP: REPL variables kept between requests, DELETE, a cap on live sessions, the
idle end, and sessions saved to a directory coming back in a new server."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

import rlmkit
from rlmkit.serve import app, running
from rlmkit.testing import FunctionLM, is_root_request
from tests.helpers.replies import repl
from tests.helpers.serve_programs import counting_rlm, served
from tests.helpers.waiting import wait_for


def ask(url: str, question: str, session: str, **extra) -> str:
    reply = openai.OpenAI(base_url=url, api_key="x", max_retries=0).chat.completions.create(
        model="rlmkit",
        messages=[{"role": "user", "content": question}],
        extra_body={"session": session},
        **extra,
    )
    return reply.choices[0].message.content


def open_session(url: str, context: str = "0123456789") -> dict:
    response = httpx.post(f"{url}/sessions", json={"inputs": {"context": context}}, timeout=60)
    assert response.status_code == 201, response.text
    return response.json()


def test_a_session_keeps_its_variables_between_requests_until_deleted():
    with served(counting_rlm()) as url:
        session = open_session(url)
        assert ask(url, "first", session["id"]) == "first: call 1, context 10 chars"
        assert ask(url, "second", session["id"]) == "second: call 2, context 10 chars"
        described = httpx.get(f"{url}/sessions/{session['id']}").json()
        assert described["calls"] == 2 and "count" in described["variables"]
        other = open_session(url, "abc")  # a second session has a REPL of its own
        assert ask(url, "other", other["id"]) == "other: call 1, context 3 chars"
        assert httpx.delete(f"{url}/sessions/{session['id']}").json()["deleted"] is True
        with pytest.raises(openai.NotFoundError) as info:
            ask(url, "third", session["id"])
        assert info.value.body["code"] == "session_not_found"
        assert httpx.delete(f"{url}/sessions/{session['id']}").status_code == 404


def test_the_session_header_names_a_session_too():
    with served(counting_rlm()) as url:
        session = open_session(url)
        response = httpx.post(
            f"{url}/chat/completions",
            json={"model": "rlmkit", "messages": [{"role": "user", "content": "by header"}]},
            headers={"X-RLMKit-Session": session["id"]},
            timeout=60,
        )
        assert response.json()["choices"][0]["message"]["content"] == "by header: call 1, context 10 chars"


def test_one_session_past_the_cap_is_a_429():
    with served(counting_rlm(), max_sessions=1) as url:
        first = open_session(url)
        refused = httpx.post(f"{url}/sessions", json={"inputs": {"context": "x"}})
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_sessions"
        httpx.delete(f"{url}/sessions/{first['id']}")
        open_session(url)


def test_an_idle_session_ends_and_one_saved_to_a_directory_comes_back(tmp_path):
    api = app(counting_rlm(), session_idle_timeout=0.3, sessions_dir=str(tmp_path))
    with running(api) as base:
        url = f"{base}/v1"
        session = open_session(url)
        assert ask(url, "before", session["id"]) == "before: call 1, context 10 chars"
        wait_for(lambda: session["id"] not in api.state.sessions.live, "the idle session ended")
        # ended, yet saved: a call loads it back with its variables
        assert ask(url, "after idle", session["id"]) == "after idle: call 2, context 10 chars"
    with served(counting_rlm(), sessions_dir=str(tmp_path)) as url:  # a new server, the same directory
        assert ask(url, "after restart", session["id"]) == "after restart: call 3, context 10 chars"


def test_a_stream_names_a_session_too():
    with served(counting_rlm()) as url:
        session = open_session(url)
        stream = openai.OpenAI(base_url=url, api_key="x").chat.completions.create(
            model="rlmkit",
            messages=[{"role": "user", "content": "streamed"}],
            stream=True,
            extra_body={"session": session["id"]},
        )
        content = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert content == "streamed: call 1, context 10 chars"
        assert ask(url, "plain", session["id"]) == "plain: call 2, context 10 chars"


def test_a_second_call_while_the_session_runs_one_is_a_409():
    import threading

    release, waiting = threading.Event(), threading.Event()

    async def held(messages):
        if not is_root_request({"messages": messages}):
            return "sub"
        waiting.set()
        await asyncio.to_thread(release.wait, 60)
        return repl("SUBMIT(answer=question)")

    with served(rlmkit.RLM("context, question -> answer", lm=FunctionLM(held))) as url:
        session = open_session(url)
        first = threading.Thread(target=ask, args=(url, "first", session["id"]))
        first.start()
        try:
            wait_for(waiting.is_set, "the first call running")
            for stream in (False, True):
                with pytest.raises(openai.ConflictError) as info:
                    ask(url, "second", session["id"], stream=stream)
                assert info.value.body["code"] == "session_busy"
        finally:
            release.set()
            first.join(60)
        assert ask(url, "third", session["id"]) == "third"


def test_a_session_opened_with_inputs_that_do_not_fit_is_a_422():
    with served(counting_rlm()) as url:
        wrong_type = httpx.post(f"{url}/sessions", json={"inputs": {"context": ["a", "list"]}})
        unknown = httpx.post(f"{url}/sessions", json={"inputs": {"colour": "blue"}})
        assert wrong_type.status_code == unknown.status_code == 422
        assert wrong_type.json()["error"]["param"] == "inputs.context"


def test_mounted_in_a_parent_app_with_its_lifespan_it_serves_and_ends_idle_sessions():
    from fastapi import FastAPI

    api = app(counting_rlm(), session_idle_timeout=0.2)
    parent = FastAPI(lifespan=api.router.lifespan_context)  # as the serving page says to mount it
    parent.mount("/rlm", api)
    with running(parent) as base:
        url = f"{base}/rlm/v1"
        session = open_session(url)
        assert ask(url, "mounted", session["id"]) == "mounted: call 1, context 10 chars"
        wait_for(lambda: session["id"] not in api.state.sessions.live, "the idle session ended")


def test_with_a_directory_the_cap_ends_the_least_recently_used_idle_session_which_comes_back(tmp_path):
    api = app(counting_rlm(), max_sessions=1, sessions_dir=str(tmp_path))
    with running(api) as base:
        url = f"{base}/v1"
        first = open_session(url)
        assert ask(url, "one", first["id"]) == "one: call 1, context 10 chars"
        second = open_session(url, "abc")  # the cap is full: the first, idle and saved, makes room
        assert list(api.state.sessions.live) == [second["id"]]
        assert ask(url, "two", first["id"]) == "two: call 2, context 10 chars"  # loaded back, in turn
        assert list(api.state.sessions.live) == [first["id"]]
