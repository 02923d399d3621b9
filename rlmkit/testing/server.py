"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests and benchmarks.

It is the production ``rlmkit.models.chat_server.ChatServer`` (a real HTTP server, so everything
between rlmkit and the wire is exercised) with what a test needs on top: every request body
kept in ``requests``, the most requests in flight at once, and optional latency and fault
injection that make it behave like a slow or flaky provider.

    def responder(request: dict) -> str:          # or -> dict (a full OpenAI response)
        return "```repl\\nSUBMIT(answer=42)\\n```"

    with ScriptedServer(responder, latency=0.05) as server:
        lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="test")
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field

from rlmkit.models.chat_server import (
    ChatServer,
    JSONBody,
    Reply,
    Responder,
    as_event_stream,
    chat_response,
    error_body,
)

FAULT_KINDS = ("429", "500", "timeout", "truncated_json", "empty", "no_code", "broken_code")
# what the text faults put in place of the responder's reply
FAULT_TEXTS = {"empty": "", "no_code": "I think I should look at the data first.",
               "broken_code": "```repl\nprint(len(context)\n```"}  # fmt: skip


@dataclass
class Faults:
    """Inject faults into a fraction ``rate`` of requests, drawn from ``kinds``.

    ``429`` answers with Retry-After; ``timeout`` sleeps ``timeout_s`` before answering;
    ``truncated_json`` cuts the body in half; ``empty`` returns an empty message;
    ``no_code`` a reply without a code block; ``broken_code`` a code block with a syntax error.
    """

    rate: float = 0.0
    kinds: tuple[str, ...] = ("429", "500")
    seed: int = 0
    timeout_s: float = 5.0
    retry_after: float = 0.05
    injected: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def draw(self) -> str | None:
        with self._lock:
            if self.rate <= 0 or self._rng.random() >= self.rate:
                return None
            kind = self._rng.choice(self.kinds)
            self.injected[kind] = self.injected.get(kind, 0) + 1
            return kind


class ScriptedServer(ChatServer):
    """Serve ``responder`` as ``POST /v1/chat/completions`` on 127.0.0.1 (a free port), keeping
    every request, with ``latency`` seconds before each reply and ``faults`` injected."""

    def __init__(
        self,
        responder: Responder,
        *,
        latency: float = 0.0,
        faults: Faults | None = None,
        port: int = 0,
    ):
        super().__init__(responder, port=port, name="scripted")
        self.latency = latency
        self.faults = faults or Faults()
        self.requests: list[JSONBody] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def handle(self, body: JSONBody) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return super().handle(body)
        finally:
            with self._lock:
                self.in_flight -= 1

    def reply(self, body: JSONBody) -> Reply:
        fault = self.faults.draw()
        if fault == "429":
            return (
                429,
                {"Retry-After": str(self.faults.retry_after)},
                error_body("rate limited", "rate_limit"),
            )
        if fault == "500":
            return 500, {}, error_body("injected server error")
        if fault == "timeout":
            time.sleep(self.faults.timeout_s)
        if self.latency:
            time.sleep(self.latency)
        result = self.responder(body)
        if not isinstance(result, dict) and fault is not None:
            result = FAULT_TEXTS.get(fault, result)
        status, headers, data = self.encode(body, self.response_for(body, result))
        if fault == "truncated_json" and not body.get("stream"):
            data = data[: len(data) // 2]
        return status, headers, data


def last_user_text(body: JSONBody) -> str:
    """The content of the last user message of a request (handy in responders)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content", "")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def is_root_request(body: JSONBody) -> bool:
    """True when a request comes from an RLM root loop (its system prompt names the REPL)."""
    messages = body.get("messages", [])
    return (
        bool(messages) and messages[0].get("role") == "system" and "REPL" in str(messages[0].get("content"))
    )


__all__ = [
    "FAULT_KINDS",
    "Faults",
    "ScriptedServer",
    "as_event_stream",
    "chat_response",
    "is_root_request",
    "last_user_text",
]
