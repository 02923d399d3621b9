"""The transport seam: the one thing that differs between ways of reaching a chat model.

A transport turns one ``ModelRequest`` into one ``ModelReply`` and nothing else: no
retries, no cache, no cost, no concurrency limit (``rlmkit.LM`` does those once, above
every transport). What it must do is translate its library's failures where they enter,
into one ``ProviderError`` that says what the layer above needs to decide: the HTTP
status, whether the server was never reached, and how long the server asked us to wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rlmkit.errors import LMError
from rlmkit.trajectory import ChatMessage

PLACEHOLDER_KEY = "no-key"  # OpenAI-compatible servers without auth still need some key sent


@dataclass(frozen=True)
class ModelRequest:
    """What is sent: the messages, the model's name for this transport, and how to sample."""

    messages: list[ChatMessage]
    model: str
    params: dict[str, Any] = field(default_factory=dict)  # temperature, top_p, seed, ...
    max_tokens: int | None = None
    stop: list[str] | None = None
    timeout: float = 120.0


@dataclass(frozen=True)
class ModelReply:
    """What came back. ``cost`` is None unless the transport priced the call itself."""

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    cached_prompt_tokens: int = 0
    cost: float | None = None


class ProviderError(LMError):
    """A failed model request, translated by the transport that made it.

    ``network``: the server was never reached or never answered (retried like a 5xx);
    ``retry_after``: seconds the server asked us to wait (429/503 headers), if it said.
    """

    def __init__(self, message: str, *, status: int | None = None, network: bool = False,
                 retry_after: float | None = None):  # fmt: skip
        super().__init__(message, status=status)
        self.network = network
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        status = self.status
        return self.network or status == 429 or (isinstance(status, int) and status >= 500)


@runtime_checkable
class Transport(Protocol):
    """``await transport.complete(request) -> ModelReply``; raises ``ProviderError``."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` headers (an HTTP date is ignored)."""
    if not headers:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        if (seconds := headers.get("retry-after")) is not None:
            return max(0.0, float(seconds))
    except (TypeError, ValueError):
        return None
    return None
