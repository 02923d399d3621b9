"""Two servers sharing one sessions directory, as the replicas of ``rlmkit serve --replicas`` do:
a session, or a response's REPL, continues on either, and a live copy that another server has
moved past is reloaded from the directory rather than answering from its older state."""

from __future__ import annotations

import httpx
import openai

from rlmkit.serve.session_choice import OPEN_SESSION_HEADER
from tests.helpers.serve_programs import counting_rlm, served


def ask(url: str, session: str, question: str) -> str:
    reply = httpx.post(
        f"{url}/chat/completions",
        json={"model": "rlmkit", "messages": [{"role": "user", "content": question}], "session": session},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]["message"]["content"]


def test_a_session_moves_between_servers_and_a_copy_left_behind_is_reloaded(tmp_path):
    with (
        served(counting_rlm(), sessions_dir=str(tmp_path)) as one,
        served(counting_rlm(), sessions_dir=str(tmp_path)) as two,
    ):
        chosen = "ab" * 16
        opened = httpx.post(
            f"{one}/sessions", json={"inputs": {"context": "0123"}}, headers={OPEN_SESSION_HEADER: chosen}
        )
        assert opened.status_code == 201 and opened.json()["id"] == chosen
        again = httpx.post(f"{two}/sessions", json={"inputs": {}}, headers={OPEN_SESSION_HEADER: chosen})
        assert again.status_code == 409  # an id in use is never opened twice
        assert ask(one, chosen, "a") == "a: call 1, context 4 chars"
        assert ask(two, chosen, "b") == "b: call 2, context 4 chars"  # loaded from the directory
        assert ask(one, chosen, "c") == "c: call 3, context 4 chars"  # its live copy was behind


def test_a_response_made_by_one_server_is_continued_by_the_other(tmp_path):
    with (
        served(counting_rlm(), sessions_dir=str(tmp_path)) as one,
        served(counting_rlm(), sessions_dir=str(tmp_path)) as two,
    ):
        first = openai.OpenAI(base_url=one, api_key="x").responses.create(
            model="rlmkit", input="first", extra_body={"inputs": {"context": "abc"}}
        )
        second = openai.OpenAI(base_url=two, api_key="x").responses.create(
            model="rlmkit", input="second", previous_response_id=first.id
        )
        assert second.output_text == "second: call 2, context 3 chars"
