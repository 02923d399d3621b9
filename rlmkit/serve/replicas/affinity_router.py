"""Ray Serve's request router for the replicas of ``rlmkit serve --replicas``: a call of a
session goes to the one replica its id ranks first among the running replicas (rendezvous
hashing), every other request to the less busy of two, as Ray Serve's default router does.

Rendezvous hashing needs no table: the front door, and any number of them, send a session to
the same replica as long as the set of replicas stays the same. When that replica is gone the
session's id ranks another one first, which loads the session from the shared sessions
directory. A replica that joins takes over the sessions whose ids now rank it first; the one that
held them keeps a copy behind the directory, which it notices and reloads should a call of the
session come back to it (``Sessions.get``).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from ray.serve.request_router import PendingRequest, RequestRouter, RunningReplica


def rank(session: str, replica_id: str) -> bytes:
    return hashlib.blake2b(f"{session}/{replica_id}".encode(), digest_size=8).digest()


def holder(session: str, replica_ids: list[str]) -> str:
    """The replica (of ``replica_ids``) that holds ``session``."""
    return max(replica_ids, key=lambda replica: rank(session, replica))


def session_of_request(pending: PendingRequest | None) -> str | None:
    if pending is None or not pending.args:
        return None
    return getattr(pending.args[0], "session", None)


class SessionAffinityRouter(RequestRouter):
    """No ``FIFOMixin``: with it a replica found for one request may be handed to an older one,
    a call of another session; the base router hands each replica to the request it was chosen
    for."""

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica], pending_request: PendingRequest | None = None
    ) -> list[list[RunningReplica]]:
        if not candidate_replicas:
            return []
        session = session_of_request(pending_request)
        if session is not None:  # only the holder: a busy one queues the call rather than move it
            by_id: dict[str, Any] = {r.replica_id.unique_id: r for r in candidate_replicas}
            return [[by_id[holder(session, list(by_id))]]]
        return [random.sample(candidate_replicas, min(2, len(candidate_replicas)))]
