"""Which session a request names (read by the front door of the replicas) and which replica a
session's calls go to: the same one while the replicas stay, another when that one is gone."""

from __future__ import annotations

import json

import pytest

from rlmkit.serve.openai.stored import response_id, session_of
from rlmkit.serve.replicas.forwarding import session_key

pytest.importorskip("ray.serve")  # the `cluster` extra
from rlmkit.serve.replicas.affinity_router import holder  # noqa: E402 - after the skip

SESSION = "0123456789abcdef0123456789abcdef"


def test_a_request_names_its_session_by_path_field_header_or_response_id():
    carried = response_id(SESSION)
    assert session_of(carried) == SESSION and session_of(response_id(None)) is None
    assert session_key(f"/v1/sessions/{SESSION}", {}, b"") == SESSION
    assert session_key(f"/v1/responses/{carried}", {}, b"") == SESSION
    assert session_key("/v1/chat/completions", {}, json.dumps({"session": SESSION}).encode()) == SESSION
    assert session_key("/v1/chat/completions", {"x-rlmkit-session": SESSION}, b"{}") == SESSION
    body = json.dumps({"previous_response_id": carried}).encode()
    assert session_key("/v1/responses", {}, body) == SESSION
    assert session_key("/v1/chat/completions", {}, b"{not json") is None
    assert session_key("/v1/models", {}, b"") is None


def test_a_session_keeps_its_replica_until_that_one_is_gone():
    replicas = [f"replica-{i}" for i in range(4)]
    sessions = [f"{i:032x}" for i in range(200)]
    chosen = {s: holder(s, replicas) for s in sessions}
    assert set(chosen.values()) == set(replicas)  # spread over all of them
    assert all(holder(s, list(reversed(replicas))) == chosen[s] for s in sessions)  # order plays no part
    gone, left = replicas[0], replicas[1:]
    moved = {s for s in sessions if holder(s, left) != chosen[s]}
    assert moved == {s for s in sessions if chosen[s] == gone}  # only the sessions it held move
