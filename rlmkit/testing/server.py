"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests and benchmarks.

It is a real HTTP server (threaded, Nagle disabled so requests do not wait ~40 ms on
delayed ACKs), so everything between rlmkit and the wire is exercised. A ``responder``
decides each reply from the request body; optional latency and fault injection make it
behave like a slow or flaky provider.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict], "str | dict"]

FAULT_KINDS = ("429", "500", "timeout", "truncated_json", "empty", "no_code", "broken_code")


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


def approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def chat_response(content: str, model: str = "scripted", prompt_tokens: int = 1) -> dict:
    """An OpenAI chat.completion body for ``content``."""
    return {
        "id": f"chatcmpl-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": approx_tokens(content),
            "total_tokens": prompt_tokens + approx_tokens(content),
        },
    }


def as_event_stream(response: dict) -> bytes:
    """A chat.completion body as OpenAI's streamed form (``stream: true``): one content chunk,
    a final chunk with the finish reason and usage, then ``[DONE]``."""
    choice = response["choices"][0]
    head = {k: response[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [
        {**head, "choices": [{"index": 0, "delta": choice["message"], "finish_reason": None}]},
        {
            **head,
            "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
            "usage": response.get("usage"),
        },
    ]
    return (
        b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"
    )


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # socketserver's 5 drops SYNs of a fan-out burst: clients stall ~1 s


class ScriptedServer:
    """Serve ``responder`` as ``POST /v1/chat/completions`` on 127.0.0.1 (a free port)."""

    def __init__(
        self,
        responder: Responder,
        *,
        latency: float = 0.0,
        faults: Faults | None = None,
        port: int = 0,
    ):
        self.responder = responder
        self.latency = latency
        self.faults = faults or Faults()
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """Base URL for litellm's ``api_base`` (OpenAI style, ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True, name="scripted-llm")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- handling ----------------------------------------------------------------
    def served(self, body: dict, arrived: float, done: float) -> None:
        """A hook: ``body`` was handled from its request line's arrival to its reply's last write
        (``time.monotonic()``): parsing, the responder, any latency, the write."""

    def _reply(self, body: dict) -> tuple[int, dict[str, str], bytes]:
        fault = self.faults.draw()
        if fault == "429":
            headers = {"Retry-After": str(self.faults.retry_after)}
            return (
                429,
                headers,
                json.dumps({"error": {"message": "rate limited", "type": "rate_limit"}}).encode(),
            )
        if fault == "500":
            return 500, {}, json.dumps({"error": {"message": "injected server error"}}).encode()
        if fault == "timeout":
            time.sleep(self.faults.timeout_s)
        if self.latency:
            time.sleep(self.latency)
        result = self.responder(body)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        if isinstance(result, dict):
            response = result
        else:
            if fault == "empty":
                result = ""
            elif fault == "no_code":
                result = "I think I should look at the data first."
            elif fault == "broken_code":
                result = "```repl\nprint(len(context)\n```"
            response = chat_response(result, body.get("model", "scripted"), max(1, prompt_chars // 4))
        if body.get("stream"):  # agent harnesses (e.g. verifiers') stream their completions
            return 200, {"Content-Type": "text/event-stream"}, as_event_stream(response)
        data = json.dumps(response).encode()
        if fault == "truncated_json":
            data = data[: len(data) // 2]
        return 200, {}, data

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 - /v1/models, for health checks
                data = json.dumps(
                    {"object": "list", "data": [{"id": "scripted", "object": "model"}]}
                ).encode()
                self._send(200, {}, data)

            def parse_request(self) -> bool:
                # the request line has just arrived: from here the time is the server's
                self.arrived = time.monotonic()
                return super().parse_request()

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, {}, b'{"error": {"message": "bad json"}}')
                    return
                with server._lock:
                    server.requests.append(body)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    status, headers, data = server._reply(body)
                except Exception as exc:  # a responder bug must show up as a 500, not a hang
                    status, headers, data = 500, {}, json.dumps({"error": {"message": repr(exc)}}).encode()
                finally:
                    with server._lock:
                        server.in_flight -= 1
                self._send(status, headers, data)
                server.served(body, self.arrived, time.monotonic())

            def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
                try:
                    self.send_response(status)
                    headers = {"Content-Type": "application/json", **headers}
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def last_user_text(body: dict) -> str:
    """The content of the last user message of a request (handy in responders)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content", "")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def is_root_request(body: dict) -> bool:
    """True when a request comes from an RLM root loop (its system prompt names the REPL)."""
    messages = body.get("messages", [])
    return (
        bool(messages) and messages[0].get("role") == "system" and "REPL" in str(messages[0].get("content"))
    )
