"""``rlmkit serve --replicas``: two replicas on a local Ray instance behind one address; the calls
of a session reach the replica holding it, and when that replica is killed between two calls the
session answers the next one from another replica, its REPL variables restored from the shared
sessions directory."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.serve_programs import counting_rlm
from tests.helpers.waiting import wait_for

ray = pytest.importorskip("ray")  # the `cluster` extra, with Ray Serve
pytest.importorskip("ray.serve")
from rlmkit.serve.replicas.deployment import REPLICA_HEADER, running_replicas, runtime_env  # noqa: E402


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    """Two replicas of the counting program, on a Ray instance started for this module."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env=runtime_env(),  # the replicas import this checkout, tests too
    )
    sessions = tmp_path_factory.mktemp("sessions")
    try:
        with running_replicas(counting_rlm, sessions_dir=sessions, replicas=2) as url:
            wait_for(lambda: ready(url), "both replicas answering", timeout=90)
            yield f"{url}/v1"
    finally:
        ray.shutdown()


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health/ready", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def open_session(url: str) -> tuple[str, str]:
    opened = httpx.post(f"{url}/sessions", json={"inputs": {"context": "0123456789"}}, timeout=60)
    assert opened.status_code == 201, opened.text
    return opened.json()["id"], opened.headers[REPLICA_HEADER]


def ask(url: str, session: str, question: str) -> tuple[str, str]:
    reply = httpx.post(
        f"{url}/chat/completions",
        json={"model": "rlmkit", "messages": [{"role": "user", "content": question}], "session": session},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]["message"]["content"], reply.headers[REPLICA_HEADER]


def replica_actor(replica_id: str):
    names = [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].endswith(replica_id)]
    assert len(names) == 1, names
    return ray.get_actor(names[0]["name"], namespace=names[0]["namespace"])


def dead(actor) -> bool:
    try:
        ray.get(actor.__ray_ready__.remote(), timeout=10)
    except ray.exceptions.RayActorError:
        return True
    return False


def test_the_calls_of_a_session_reach_the_replica_holding_it(replicas):
    sessions = [open_session(replicas) for _ in range(4)]
    for session, opened_on in sessions:
        assert ask(replicas, session, "one") == ("one: call 1, context 10 chars", opened_on)
        assert ask(replicas, session, "two") == ("two: call 2, context 10 chars", opened_on)
    stored = httpx.post(
        f"{replicas}/responses",
        json={"model": "rlmkit", "input": "first", "inputs": {"context": "abc"}},
        timeout=60,
    )
    assert stored.status_code == 200, stored.text
    follow = httpx.post(
        f"{replicas}/responses",
        json={"model": "rlmkit", "input": "next", "previous_response_id": stored.json()["id"]},
        timeout=60,
    )
    assert follow.status_code == 200, follow.text
    assert follow.headers[REPLICA_HEADER] == stored.headers[REPLICA_HEADER]
    message = [item for item in follow.json()["output"] if item["type"] == "message"][0]
    assert message["content"][0]["text"] == "next: call 2, context 3 chars"


def test_a_session_whose_replica_is_killed_answers_from_another_with_its_variables(replicas):
    session, holder = open_session(replicas)
    assert ask(replicas, session, "before") == ("before: call 1, context 10 chars", holder)
    assert ask(replicas, session, "again") == ("again: call 2, context 10 chars", holder)
    actor = replica_actor(holder)
    ray.kill(actor, no_restart=True)
    wait_for(lambda: dead(actor), "the replica holding the session is dead", timeout=30)
    answer, answered_by = ask(replicas, session, "after")
    assert answer == "after: call 3, context 10 chars"  # `count` came back from the directory
    assert answered_by != holder
