"""The LM layer's on-disk response cache (diskcache) and its key.

The key covers everything that changes what a model would answer: the model string, the
messages, the sampling parameters, and an optional ``rollout_id`` (so a caller can ask
for a distinct sample on purpose). Transport settings (api_base, key, timeout, retries)
are not part of it: the same model behind another URL answers the same.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, TypedDict

from rlmkit.errors import ConfigError
from rlmkit.trajectory import ChatMessage

# Request parameters that only say how to reach the model, never what it answers.
TRANSPORT_PARAMS = frozenset({"api_base", "base_url", "api_key", "timeout", "num_retries", "extra_headers"})


class CachedReply(TypedDict):
    """One cached answer: what a hit rebuilds its ``Completion`` from."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None


class ResponseCache(Protocol):
    """The part of ``diskcache.Cache`` the LM layer uses (diskcache ships no types)."""

    def get(self, key: str) -> CachedReply | None: ...

    def set(self, key: str, value: CachedReply) -> object: ...


_open_caches: dict[Path, ResponseCache] = {}
_open_lock = threading.Lock()


# The rollout of the calls made in this context (``with rollout(k):``): K samples of one task get
# K rollout ids, so each is a distinct cache entry (a fresh sample) instead of the first one's answer.
current_rollout_id: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "rlmkit_rollout_id", default=None
)


@contextlib.contextmanager
def rollout(rollout_id: int | None) -> Iterator[None]:
    """Calls in this block (LM calls, RLM runs and their sub-calls) are sample ``rollout_id``."""
    token = current_rollout_id.set(rollout_id)
    try:
        yield
    finally:
        current_rollout_id.reset(token)


def default_cache_dir() -> Path:
    """``$RLMKIT_CACHE_DIR`` if set, else ``~/.cache/rlmkit/lm``."""
    configured = os.environ.get("RLMKIT_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "rlmkit" / "lm"


def cache_key(
    model: str, messages: list[ChatMessage], params: dict[str, object], rollout_id: int | None = None
) -> str:
    """A sha256 over a canonical JSON of what determines the answer."""
    sampling = {k: v for k, v in params.items() if k not in TRANSPORT_PARAMS and v is not None}
    payload = {"model": model, "messages": messages, "params": sampling, "rollout_id": rollout_id}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def open_cache(directory: str | os.PathLike[str]) -> ResponseCache:
    """One diskcache.Cache per directory per process; a clear ConfigError if it cannot be used."""
    path = Path(directory).expanduser().resolve()
    with _open_lock:
        if path in _open_caches:
            return _open_caches[path]
        hint = "Set RLMKIT_CACHE_DIR to a writable directory, or pass cache=False."
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the LM cache directory {path}: {exc.strerror}. {hint}") from exc
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"the LM cache directory {path} is not writable. {hint}")
        import diskcache  # imported here: only processes that cache pay for it

        try:
            cache: ResponseCache = diskcache.Cache(str(path), size_limit=2**32)
        except Exception as exc:  # sqlite errors on a read-only or broken directory
            raise ConfigError(f"cannot open the LM cache in {path}: {exc}. {hint}") from exc
        _open_caches[path] = cache
        return cache
