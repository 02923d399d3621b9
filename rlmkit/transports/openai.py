"""OpenAI-compatible servers (OpenAI, vLLM, SGLang, llama.cpp, the embedded model) over httpx.

One set of ``Lanes`` (one-connection ``httpx.AsyncClient``s) per (event loop, base URL, pool
size), shared by every LM that talks to that server: connections stay open between calls
(keep-alive), and there are as many as the LM's concurrency so a burst of sub-calls never
waits for a socket. A client belongs to one event loop (its connections do), so a new loop
gets its own; the entry goes away with the loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import sys
import threading
import weakref
from typing import Any

from rlmkit.transports.base import ModelReply, ModelRequest, ProviderError, retry_after_s


def _import_httpx_without_its_cli() -> Any:
    """``import httpx`` also imports click, rich and pygments for ``httpx.main``, its command-line
    client (about 60 ms on a quiet machine, more than the rest of httpx). That import is skipped
    here and ``httpx.main`` made to do it when called, so the CLI still works."""
    if "httpx" in sys.modules:
        return sys.modules["httpx"]
    blocked = "httpx._main" not in sys.modules
    if blocked:
        sys.modules["httpx._main"] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        import httpx
    finally:
        if blocked and sys.modules.get("httpx._main", 0) is None:
            del sys.modules["httpx._main"]
    if blocked:
        httpx.main = _httpx_cli
    return httpx


def _httpx_cli(*args: Any, **kwargs: Any) -> Any:
    from httpx._main import main

    return main(*args, **kwargs)


httpx = _import_httpx_without_its_cli()

_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> {(url, pool): Lanes}
_clients_lock = threading.Lock()


class Lanes:
    """Up to ``size`` one-connection httpx clients to one server, each lent to one request at a time.

    One httpx pool of ``size`` connections costs more per request as requests queue in it:
    httpcore 1.0 walks every connection for every waiting request each time one frees up (16
    requests at once to a server answering in 200 ms took 240-260 ms; as lanes, 227-233 ms, on
    2 loaded cores). A lane is made when none is free, up to ``size``; then a request waits for one.
    """

    def __init__(self, base_url: str, size: int):
        self.base_url, self.size = base_url, size
        self._free: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
        self.made = 0

    async def take(self) -> httpx.AsyncClient:
        while self._free.empty() and self.made < self.size:
            self._free.put_nowait(self._new())
        client = await self._free.get()
        if client.is_closed:  # closed by its owner: a fresh one in its place
            client = self._new(counted=False)
        return client

    def give(self, client: httpx.AsyncClient) -> None:
        self._free.put_nowait(client)

    def _new(self, counted: bool = True) -> httpx.AsyncClient:
        self.made += counted
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=60)
        # plain http never does TLS: no CA bundle to load (50-200 ms) before a local server's first call
        verify = _ssl_context() if self.base_url.lower().startswith("https:") else False
        return httpx.AsyncClient(base_url=self.base_url, limits=limits, verify=verify)


def shared_client(base_url: str, pool: int) -> Lanes:
    """The running loop's lanes to ``base_url`` (made on first use)."""
    loop = asyncio.get_running_loop()
    with _clients_lock:
        per_loop = _clients.setdefault(loop, {})
        lanes = per_loop.get((base_url, pool))
        if lanes is None:
            lanes = per_loop[(base_url, pool)] = Lanes(base_url, pool)
        return lanes


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """Built once: httpx would load the CA bundle again for every new client (tens of ms)."""
    return httpx.create_ssl_context()


class OpenAITransport:
    """POST ``{base_url}/chat/completions`` with a bearer key; errors become ``ProviderError``."""

    name = "openai"

    def __init__(self, base_url: str, api_key: str | None, *, pool: int = 16, headers: dict | None = None):
        self.base_url = base_url.rstrip("/")
        self.pool = pool
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"OpenAITransport({self.base_url!r})"

    async def complete(self, request: ModelRequest) -> ModelReply:
        body: dict[str, Any] = {"model": request.model, "messages": request.messages, **request.params}
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.stop:
            body["stop"] = request.stop
        lanes = shared_client(self.base_url, self.pool)
        client = await lanes.take()
        try:
            response = await client.post(
                "/chat/completions", content=json.dumps(body), headers=self._headers, timeout=request.timeout
            )
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc or 'no answer'}", network=True) from exc
        finally:
            lanes.give(client)
        if response.status_code >= 400:
            raise ProviderError(
                f"HTTP {response.status_code}: {_error_detail(response)}",
                status=response.status_code,
                retry_after=retry_after_s(response.headers),
            )
        try:
            data = response.json()
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            # a cut or garbled body from a live server is a server fault: retried like a 5xx
            raise ProviderError(
                f"unreadable response body ({len(response.content)} bytes)", status=502
            ) from None
        return parse_chat_response(data, choice, request.model)


def parse_chat_response(data: dict, choice: dict, model: str) -> ModelReply:
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return ModelReply(
        text=(choice.get("message") or {}).get("content") or "",
        model=data.get("model") or model,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_prompt_tokens=int(details.get("cached_tokens") or 0),
        finish_reason=choice.get("finish_reason"),
    )


def _error_detail(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if error:
            return str(error)
    except (ValueError, AttributeError):
        pass
    return response.text[:200] or response.reason_phrase
