"""A Python function served as an OpenAI-compatible chat endpoint on this machine.

What a policy being trained needs to play the root of a real ``rlmkit.RLM`` (the rollout
backends), what a checkpoint needs to be evaluated through the same LM layer as any provider
(``optimizers.trainloop.hf_serve``), and what the tests' scripted server builds on
(``rlmkit.testing.server.ScriptedServer`` adds latency, faults and a request log).

    def responder(request: dict) -> str:          # or -> dict (a full OpenAI response)
        return generate(request["messages"])

    with ChatServer(responder) as server:
        lm = rlmkit.LM("openai/policy", api_base=server.url, api_key="local")

A real HTTP/1.1 server (threaded, keep-alive, Nagle off so a reply does not wait ~40 ms on a
delayed ACK): ``POST /v1/chat/completions`` (plain or ``stream: true``) and ``GET /v1/models``.
A responder that raises answers 500 with the error, so a client sees it instead of hanging.
It is stdlib only, so it starts in milliseconds and needs none of the serving extras.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from rlmkit.models.transports.function import approx_tokens

# A request or response body: JSON from the wire, whose fields are whatever the client sent.
JSONBody = dict[str, Any]
Responder = Callable[[JSONBody], "str | JSONBody"]
Reply = tuple[int, dict[str, str], bytes]  # status, headers, body


def chat_response(content: str, model: str = "served", prompt_tokens: int = 1) -> JSONBody:
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


def as_event_stream(response: JSONBody) -> bytes:
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


def error_body(message: str, kind: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, **({"type": kind} if kind else {})}}).encode()


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 1024  # socketserver's 5 drops SYNs of a fan-out burst: clients stall ~1 s
    daemon_threads = True


class ChatServer:
    """Serve ``responder`` as ``POST /v1/chat/completions`` on ``host`` (127.0.0.1) and ``port``
    (0: a free one). ``name`` is the model ``GET /v1/models`` lists and a reply carries when the
    request names none."""

    def __init__(self, responder: Responder, *, port: int = 0, host: str = "127.0.0.1", name: str = "served"):
        self.responder = responder
        self.name = name
        self._httpd = _HTTPServer((host, port), self._handler_class())
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """Base URL for an LM's ``api_base`` (OpenAI style, ends in /v1)."""
        host = self._httpd.server_address[0]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{self.port}/v1"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True, name="chat-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one request (subclasses wrap these) ---------------------------------------
    def handle(self, body: JSONBody) -> Reply:
        """The reply to one request body; never raises (a responder bug is a 500)."""
        try:
            return self.reply(body)
        except Exception as exc:
            return 500, {}, error_body(repr(exc))

    def reply(self, body: JSONBody) -> Reply:
        return self.encode(body, self.response_for(body, self.responder(body)))

    def response_for(self, body: JSONBody, result: str | JSONBody) -> JSONBody:
        """A responder's result as a chat.completion body (a dict is one already)."""
        if isinstance(result, dict):
            return result
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        return chat_response(result, body.get("model", self.name), max(1, prompt_chars // 4))

    def encode(self, body: JSONBody, response: JSONBody) -> Reply:
        if body.get("stream"):  # agent harnesses (e.g. verifiers') stream their completions
            return 200, {"Content-Type": "text/event-stream"}, as_event_stream(response)
        return 200, {}, json.dumps(response).encode()

    def served(self, body: JSONBody, arrived: float, done: float) -> None:
        """A hook: ``body`` was handled from its request line's arrival to its reply's last write
        (``time.monotonic()``): parsing, the responder, the write."""

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def log_message(
                self, format: str, *args: object
            ) -> None:  # a line per request is the caller's to log
                pass

            def do_GET(self) -> None:  # noqa: N802 - /v1/models, for health checks
                listing = {"object": "list", "data": [{"id": server.name, "object": "model"}]}
                self._send(200, {}, json.dumps(listing).encode())

            def parse_request(self) -> bool:
                # the request line has just arrived: from here the time is the server's
                self.arrived = time.monotonic()
                return super().parse_request()

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, {}, error_body("bad json"))
                    return
                self._send(*server.handle(body))
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
                    pass  # the client went away: nobody is left to tell

        return Handler


__all__ = ["ChatServer", "JSONBody", "Responder", "as_event_stream", "chat_response"]
