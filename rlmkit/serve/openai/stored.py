"""The responses a server keeps (``store``) for ``GET /v1/responses/{id}`` and
``previous_response_id``, and the ids they take: one that ran in a session carries the session's id.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import uuid
from typing import Any

from rlmkit.serve.errors import APIError

SESSION_RESPONSE_ID = re.compile(r"^resp_([0-9a-f]{32})_[0-9a-f]{16}$")
MAX_STORED = 1000  # responses kept for GET and previous_response_id; the oldest go first


@dataclasses.dataclass
class Stored:
    body: dict[str, Any]  # the response as GET returns it
    session_id: str | None  # the session a follow-up continues (None: it kept no REPL)


class StoredResponses:
    """The responses kept (``store``), newest last; past ``limit`` the oldest is forgotten."""

    def __init__(self, limit: int = MAX_STORED):
        self.limit = limit
        self._kept: collections.OrderedDict[str, Stored] = collections.OrderedDict()
        self.deleted: collections.OrderedDict[str, None] = collections.OrderedDict()  # no follow-up

    def __len__(self) -> int:
        return len(self._kept)

    def put(self, response_id: str, stored: Stored) -> None:
        self._kept[response_id] = stored
        while len(self._kept) > self.limit:
            self._kept.popitem(last=False)

    def get(self, response_id: str, param: str | None = None) -> Stored:
        stored = self._kept.get(response_id)
        if stored is None:
            raise APIError(404, f"no response {response_id!r}", code="response_not_found", param=param)
        self._kept.move_to_end(response_id)
        return stored

    def delete(self, response_id: str) -> None:
        if self._kept.pop(response_id, None) is None:
            raise APIError(404, f"no response {response_id!r}", code="response_not_found")
        self.deleted[response_id] = None
        while len(self.deleted) > self.limit:
            self.deleted.popitem(last=False)


def response_id(session_id: str | None) -> str:
    """A new response's id. One that runs in a session carries the session's id, so a follow-up
    naming it finds the session where nothing kept the response: on another replica, after a
    restart with a sessions directory (and a router sends it to the replica holding the REPL)."""
    return f"resp_{session_id}_{uuid.uuid4().hex[:16]}" if session_id else f"resp_{uuid.uuid4().hex}"


def session_of(response_id: str) -> str | None:
    """The session id a response id carries (``response_id``'s), or None."""
    match = SESSION_RESPONSE_ID.match(response_id)
    return match.group(1) if match else None
