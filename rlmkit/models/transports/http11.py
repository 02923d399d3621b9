"""HTTP/1.1 for one JSON POST at a time, on keep-alive asyncio streams (TLS from ``ssl``).

All the openai transport needs of HTTP: a request goes out in one write, its response comes
back with a Content-Length, chunked, or up to the connection's close; the connection is then
kept for the next request unless either side said ``Connection: close``. Nothing else: no
redirects, cookies, proxies, compression (it never asks for any) or HTTP/2.

Why not httpcore, which this replaced: per request, its h11 state machine, anyio cancel scopes
and trace hooks cost more CPU than the request itself. ``python benchmarks/speed/client_cost.py http``
on the 2-core benchmark VM: ``rlmkit.LM.acomplete`` 1.13 ms of CPU per request on httpcore,
raw asyncio sockets 0.68 ms; every turn pays it once per model call.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 1 << 16  # a response's status line and headers


class ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response."""


class StaleConnection(ConnectionError):
    """A kept-alive connection ended before any byte of the response: the server had closed it
    while it was idle, so the request never reached it and can go out again on a new one."""


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> Origin:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        return cls(parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


@dataclass
class Response:
    status: int
    reason: str
    headers: dict[str, str]  # names in lower case; a repeated header keeps its last value
    body: bytes = b""
    version: str = "HTTP/1.1"


@dataclass
class Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    used: int = 0  # requests answered on it
    idle_since: float = field(default_factory=time.monotonic)

    def usable(self, keepalive_s: float) -> bool:
        """Still worth a request: open on both ends, nothing unread, not idle too long."""
        return (
            not self.writer.is_closing()
            and not self.reader.at_eof()
            and time.monotonic() - self.idle_since < keepalive_s
        )

    def close(self) -> None:
        self.writer.close()


async def connect(origin: Origin, tls: ssl.SSLContext | None) -> Connection:
    reader, writer = await asyncio.open_connection(
        origin.host,
        origin.port,
        ssl=tls,
        server_hostname=origin.host if tls is not None else None,
        limit=MAX_HEAD_BYTES,
    )
    return Connection(reader, writer)


async def post(conn: Connection, origin: Origin, path: str, headers: dict[str, str], body: bytes) -> Response:
    """Send one POST and read its whole response. Raises ``StaleConnection`` when a reused
    connection ends before the response began, ``ProtocolError`` for bytes that are not HTTP,
    and ``OSError`` / ``asyncio.IncompleteReadError`` for a connection lost mid-way."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {origin.host_header}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    conn.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)  # one write
    try:
        head = await _read_head(conn)
        while 100 <= head.status < 200:  # an interim response (e.g. 100 Continue): the real one follows
            head = await _read_head(conn)
    except asyncio.IncompleteReadError as exc:
        if conn.used and not exc.partial:
            raise StaleConnection("the server closed the kept-alive connection") from None
        raise
    if head.status not in (204, 304):  # those never have a body
        head.body = await _read_body(conn.reader, head.headers)
    conn.used += 1
    conn.idle_since = time.monotonic()
    connection = head.headers.get("connection", "").lower()
    if connection == "close" or (head.version == "HTTP/1.0" and connection != "keep-alive"):
        conn.close()
    return head


async def _read_head(conn: Connection) -> Response:
    try:
        raw = await conn.reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise ProtocolError(f"response head over {MAX_HEAD_BYTES} bytes") from None
    status_line, *header_lines = raw[:-4].decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
    headers = {}
    for line in header_lines:
        name, colon, value = line.partition(":")
        if not colon:
            raise ProtocolError(f"malformed header line: {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return Response(int(code), reason, headers, version=version)


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts: list[bytes] = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size line: {size_line[:40]!r}") from None
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any
                    pass
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)  # the chunk's CRLF
    if "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise ProtocolError(f"bad Content-Length: {headers['content-length']!r}") from None
        return await reader.readexactly(length)
    headers["connection"] = "close"  # neither: the body runs to the connection's end
    return await reader.read()
