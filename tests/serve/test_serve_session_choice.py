"""Which session a request runs in: one rule (``session_choice``), read by the app's routes and
by the replicas' front door alike."""

from __future__ import annotations

import pytest

from rlmkit.serve.errors import APIError
from rlmkit.serve.openai.stored import response_id
from rlmkit.serve.replicas.forwarding import forwarded, routed_session
from rlmkit.serve.session_choice import (
    OPEN_SESSION_HEADER,
    SESSION_HEADER,
    SessionAsk,
    SessionChoice,
    choose_session,
    read_ask,
)

SESSION, OTHER = "0123456789abcdef0123456789abcdef", "f" * 32


def test_a_request_names_its_session_by_field_header_or_previous_response():
    assert read_ask({"session": SESSION}, {}) == SessionAsk(session=SESSION)
    assert read_ask({}, {SESSION_HEADER: SESSION}) == SessionAsk(session=SESSION)
    assert read_ask({"session": SESSION}, {SESSION_HEADER: OTHER}).session == SESSION  # the body first
    assert read_ask({"previous_response_id": "resp_1"}, {}).previous_response_id == "resp_1"
    assert read_ask({}, {OPEN_SESSION_HEADER: SESSION}).open_as == SESSION


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"session": 3}, "session"),
        ({"previous_response_id": ["resp_1"]}, "previous_response_id"),
        ({"session": SESSION, "previous_response_id": "resp_1"}, "session"),
    ],
)
def test_a_malformed_session_field_is_a_400_naming_it(body, param):
    with pytest.raises(APIError) as caught:
        read_ask(body, {})
    assert (caught.value.status, caught.value.param) == (400, param)


def test_the_rule_continues_a_response_before_a_named_session_and_opens_only_when_it_may():
    follow_up = SessionAsk(session=OTHER, previous_response_id="resp_1")  # the header named OTHER
    assert choose_session(follow_up, previous_session=SESSION, may_open=True) == SessionChoice(
        "continued", SESSION
    )
    named = SessionAsk(session=SESSION)
    assert choose_session(named, previous_session=None, may_open=True) == SessionChoice("named", SESSION)
    fresh = SessionAsk(open_as=OTHER)
    assert choose_session(fresh, previous_session=None, may_open=True) == SessionChoice("opened", OTHER)
    assert choose_session(fresh, previous_session=None, may_open=False) == SessionChoice("none")


def test_the_front_door_routes_by_the_same_rule():
    body = b'{"previous_response_id": "%s"}' % response_id(SESSION).encode()
    assert routed_session("/v1/responses", {SESSION_HEADER: OTHER}, body) == SessionChoice(
        "continued", SESSION
    )
    assert routed_session("/v1/responses", {}, b"{}", opening=True).kind == "opened"
    assert routed_session("/v1/chat/completions", {}, b'{"session": 3}') == SessionChoice("none")
    opened = forwarded("POST", "/v1/responses", b"", [], b'{"input": "hi"}', None)
    assert dict(opened.headers)[OPEN_SESSION_HEADER] == opened.session
    continued = forwarded("POST", "/v1/responses", b"", [], body, None)
    assert continued.session == SESSION and OPEN_SESSION_HEADER not in dict(continued.headers)
