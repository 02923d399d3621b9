"""Sessions over HTTP: ``rlm.session(...)`` objects the server keeps between requests.

``POST /v1/sessions`` opens one over the inputs it is given (a context, say), and a chat request
that names it (``extra_body={"session": id}`` or the ``X-RLMKit-Session`` header) runs as a call
of that session, with the REPL's variables kept from the calls before. A session idle for
``idle_timeout`` seconds is ended; at most ``max_live`` are live at once (one more is a 429, or,
with a directory, ends the least recently used idle one); ``DELETE /v1/sessions/{id}`` ends one.

With a ``directory`` each session checkpoints into ``directory/<id>`` after every call (the
``Session.save`` format), so ending the server, or an idle end, loses nothing: a request naming
a session that is not live but saved there loads it back, in this process or the next.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from pathlib import Path
from typing import Any

from rlmkit.serve.errors import APIError
from rlmkit.session import Session, store

SESSION_ID = re.compile(r"^[0-9a-f]{32}$")  # Session ids are uuid4 hex: nothing else names a folder


class Sessions:
    def __init__(
        self,
        rlm: Any,
        *,
        directory: str | Path | None = None,
        idle_timeout: float | None = 900.0,
        max_live: int = 64,
    ):
        self.rlm = rlm
        self.directory = Path(directory) if directory is not None else None
        self.idle_timeout, self.max_live = idle_timeout, max_live
        self.live: dict[str, Session] = {}
        self.last_used: dict[str, float] = {}
        self.in_call: set[str] = set()
        self.evictable: set[str] = set()  # ended to make room even without a directory
        self._lock = asyncio.Lock()

    def busy(self, session_id: str) -> bool:
        """In a call, or holding a started run not over (paused at a client tool, or in the
        background): never ended as idle, nor to make room."""
        session = self.live.get(session_id)
        started = session.run if session is not None else None
        return session_id in self.in_call or (started is not None and not started.done)

    async def _room(self) -> None:
        """Room for one more live session. With a directory, the least recently used idle session
        is ended to make it (saved, it comes back when named again); without one, the least
        recently used idle evictable session (a stored response's); else at the cap it is a 429."""
        if len(self.live) < self.max_live:
            return
        idle = [sid for sid in self.live if not self.busy(sid)]
        if self.directory is None:  # ended, it is gone: only a session opened as evictable may go
            idle = [sid for sid in idle if sid in self.evictable]
        if idle:
            oldest = min(idle, key=lambda sid: self.last_used.get(sid, 0.0))
            session = self.live.pop(oldest)
            self.last_used.pop(oldest, None)
            self.evictable.discard(oldest)
            await asyncio.to_thread(session.close)
            return
        raise APIError(
            429,
            f"{len(self.live)} sessions are live, the most this server keeps: end one (DELETE) or retry",
            type="rate_limit_error",
            code="too_many_sessions",
            headers={"Retry-After": "5"},
        )

    async def open(
        self, inputs: dict[str, Any], evictable: bool = False, session_id: str | None = None
    ) -> Session:
        """A new session over ``inputs``; ``session_id``: the id it takes (the front door of the
        replicas names it, so it knows the session's replica before it exists), else a new one."""
        if session_id is not None and (
            not SESSION_ID.match(session_id) or session_id in self.live or self._saved(session_id)
        ):
            raise APIError(409, "that session id is taken or malformed", code="session_exists")
        async with self._lock:
            await self._room()
            session = await asyncio.to_thread(self.rlm.session, **inputs)
            session.id = session_id or session.id
            if self.directory is not None:  # writes the inputs once; then a checkpoint after every call
                await asyncio.to_thread(session.save, self.directory / session.id)
            self.live[session.id] = session
            self.last_used[session.id] = time.monotonic()
            if evictable:
                self.evictable.add(session.id)
            return session

    async def get(self, session_id: str) -> Session:
        session = self.live.get(session_id)
        if session is not None and not self._behind_store(session):
            self.last_used[session_id] = time.monotonic()
            return session
        if session is not None:  # another replica ran it since: its checkpoint is the session now
            await self._end(session_id)
        saved = self._saved(session_id)
        if saved is None:
            raise APIError(404, f"no session {session_id!r}", code="session_not_found", param="session")
        async with self._lock:
            if session_id not in self.live:
                await self._room()
                self.live[session_id] = await asyncio.to_thread(Session.load, saved, self.rlm)
            self.last_used[session_id] = time.monotonic()
            return self.live[session_id]

    def touch(self, session_id: str) -> None:
        if session_id in self.live:
            self.last_used[session_id] = time.monotonic()

    def _behind_store(self, session: Session) -> bool:
        """True when the directory holds later calls than this live copy: replicas share the
        directory, and a call of this session ran on another one (this one was out of reach)."""
        if self.directory is None or self.busy(session.id):
            return False
        return store.calls_saved(self.directory / session.id) > session.calls

    async def _end(self, session_id: str) -> None:
        session = self.live.pop(session_id, None)
        self.last_used.pop(session_id, None)
        self.evictable.discard(session_id)
        if session is not None:
            await asyncio.to_thread(session.close)

    def saved(self, session_id: str) -> bool:
        return self._saved(session_id) is not None

    def _saved(self, session_id: str) -> Path | None:
        if self.directory is None or not SESSION_ID.match(session_id):
            return None
        path = self.directory / session_id
        return path if path.is_dir() else None

    async def delete(self, session_id: str) -> None:
        session = self.live.pop(session_id, None)
        self.last_used.pop(session_id, None)
        self.evictable.discard(session_id)
        saved = self._saved(session_id)
        if session is None and saved is None:
            raise APIError(404, f"no session {session_id!r}", code="session_not_found", param="session")
        if session is not None:
            await asyncio.to_thread(session.close)
        if saved is not None:
            await asyncio.to_thread(shutil.rmtree, saved, True)

    def describe(self, session: Session) -> dict[str, Any]:
        return {
            "id": session.id,
            "object": "session",
            "calls": session.calls,
            "variables": session.variables,
            "spent": session.spent,
            "saved": self.directory is not None,
        }

    async def end_idle(self) -> list[str]:
        """End every session idle past the timeout (its checkpoint stays in the directory)."""
        if self.idle_timeout is None:
            return []
        now = time.monotonic()
        idle = [
            sid
            for sid, used in self.last_used.items()
            if now - used > self.idle_timeout and not self.busy(sid)
        ]
        for sid in idle:
            session = self.live.pop(sid, None)
            self.last_used.pop(sid, None)
            self.evictable.discard(sid)
            if session is not None:
                await asyncio.to_thread(session.close)
        return idle

    async def reap_forever(self) -> None:
        interval = max(0.05, min(30.0, (self.idle_timeout or 30.0) / 4))
        while True:
            await asyncio.sleep(interval)
            await self.end_idle()

    async def close_all(self) -> None:
        live, self.live = self.live, {}
        self.last_used.clear()
        self.evictable.clear()
        for session in live.values():
            await asyncio.to_thread(session.close)
