"""Both sides: framing on the host<->worker pipes (standard library only). The worker imports it
as ``wire``, the host as ``rlmkit.sandbox.worker_side.wire``: one file, both ends of the pipe.

A frame is an 8-byte little-endian length followed by that many bytes: a pickle, or raw
data. Large inputs never become one giant pickle on either side (see ``textbuf.py``):
a str crosses as its own character buffer (read straight out of the host's str, written
straight into a new str in the worker: no copy on either side), or as UTF-8 chunk frames
where that is unavailable; any other value as a pickle stream cut into frames.

The host never trusts a pickle from the worker: model code could craft one whose loading
runs code. ``loads_plain`` only admits plain data (containers, numbers, text, dates, ...).
"""

from __future__ import annotations

import io
import math
import os
import pickle
import select
import struct
import time

if __package__:  # the host: rlmkit.sandbox.worker_side.wire
    from . import textbuf
else:  # the worker imports its siblings as top-level modules (it runs under -I -S)
    import textbuf

HEADER = struct.Struct("<Q")
TEXT_CHUNK_CHARS = 1 << 22  # 4 Mi characters per chunk: bounded extra memory while streaming
F_SETPIPE_SZ = 1031


class ChannelTimeout(Exception):
    """No complete frame arrived before the deadline."""


class FrameTooLarge(Exception):
    """The peer announced a frame over the receiver's limit."""


def dumps(obj) -> bytes:
    return pickle.dumps(obj, protocol=5)


def loads_trusted(data) -> object:
    return pickle.loads(data)


_PLAIN_GLOBALS = {
    "builtins": {
        "set",
        "frozenset",
        "complex",
        "bytearray",
        "slice",
        "range",
        "list",
        "dict",
        "tuple",
        "int",
        "float",
        "str",
        "bytes",
        "bool",
    },
    "collections": {"OrderedDict", "Counter", "deque", "defaultdict"},
    "datetime": {"date", "datetime", "time", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "fractions": {"Fraction"},
    "types": {"SimpleNamespace"},
}


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if name in _PLAIN_GLOBALS.get(module, ()):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"{module}.{name} is not plain data; only str, numbers, bytes, list, dict, tuple, set, "
            "collections, datetime, Decimal, Fraction and SimpleNamespace leave the sandbox"
        )


def loads_plain(data) -> object:
    return _PlainUnpickler(io.BytesIO(data)).load()


def _readable(fd: int, seconds: float) -> bool:
    """Whether ``fd`` has data (or its peer closed) within ``seconds``. poll, not select: select
    refuses a descriptor numbered 1024 or more, which a busy host (a server's many connections
    and workers) comes to hold."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(1, math.ceil(seconds * 1000))))


class Channel:
    """One read fd and one write fd; blocking writes, reads with an optional deadline."""

    def __init__(self, rfd: int, wfd: int, max_frame: int | None = None):
        self.rfd, self.wfd = rfd, wfd
        self.max_frame = max_frame
        self.buf = bytearray()
        for fd in (rfd, wfd):
            try:
                import fcntl

                fcntl.fcntl(fd, F_SETPIPE_SZ, 1 << 20)  # fewer syscalls for big transfers
            except OSError:
                pass

    # ------------------------------------------------------------ writing
    def _write_all(self, data) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.wfd, view)
            view = view[n:]

    def send_bytes(self, payload: bytes) -> None:
        """A frame in one write (``writev``): every write to a pipe wakes its reader, and each
        wake-up costs the benchmark VM about 0.1 ms, more than a small frame's whole trip."""
        header = HEADER.pack(len(payload))
        sent = os.writev(self.wfd, (header, payload))
        if sent < len(header):  # cut short by a signal: finish by hand
            self._write_all(header[sent:])
            sent = len(header)
        if sent - len(header) < len(payload):
            self._write_all(memoryview(payload)[sent - len(header) :])

    def send(self, obj) -> None:
        self.send_bytes(dumps(obj))

    def send_text(self, text: str) -> None:
        """Send a str: its raw character buffer when possible, else UTF-8 chunks (each valid alone)."""
        raw = textbuf.char_buffer(text)
        if raw is not None:
            maxchar, view = raw
            self.send(("raw", maxchar, len(text)))
            self.send_bytes(view)
            return
        self.send(("utf8",))
        for i in range(0, len(text), TEXT_CHUNK_CHARS):
            self.send_bytes(text[i : i + TEXT_CHUNK_CHARS].encode("utf-8", "surrogatepass"))
        self.send_bytes(b"")

    def send_pickled(self, obj) -> None:
        """Pickle ``obj`` straight into frames (no whole-pickle copy), then an empty frame."""
        writer = _FrameWriter(self)
        pickle.Pickler(writer, protocol=5).dump(obj)
        writer.flush()
        self.send_bytes(b"")

    # ------------------------------------------------------------ reading
    def _read_exact(self, n: int, deadline: float | None):
        if n <= len(self.buf):
            data = bytes(self.buf[:n])
            del self.buf[:n]
            return data
        out = bytearray(n)
        have = len(self.buf)
        out[:have] = self.buf
        self.buf = bytearray()
        view = memoryview(out)
        try:
            while have < n:
                self._wait(deadline)
                got = os.readv(self.rfd, [view[have:]])
                if got == 0:
                    raise EOFError("the peer closed the pipe")
                have += got
        except ChannelTimeout:
            self.buf = bytearray(view[:have])  # keep the partial frame for the next call
            raise
        return out

    def _wait(self, deadline: float | None) -> None:
        if deadline is None:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not _readable(self.rfd, remaining):
            raise ChannelTimeout()

    def recv_frame(self, deadline: float | None = None):
        header = self._read_exact(HEADER.size, deadline)
        (n,) = HEADER.unpack(header)
        if self.max_frame is not None and n > self.max_frame:
            raise FrameTooLarge(f"frame of {n} bytes over the limit of {self.max_frame}")
        try:
            return self._read_exact(n, deadline)
        except ChannelTimeout:
            self.buf[:0] = header  # put the header back: the frame is read whole next time
            raise

    def recv(self, deadline: float | None = None):
        return loads_trusted(self.recv_frame(deadline))

    # ---------------------------------------- reading from an event loop (the host; never blocks)
    def take_frame(self) -> bytes | None:
        """The next frame if ``buf`` holds all of it, else None. Reads nothing: ``fill`` does."""
        if len(self.buf) < HEADER.size:
            return None
        (n,) = HEADER.unpack_from(self.buf)
        if self.max_frame is not None and n > self.max_frame:
            raise FrameTooLarge(f"frame of {n} bytes over the limit of {self.max_frame}")
        end = HEADER.size + n
        if len(self.buf) < end:
            return None
        frame = bytes(self.buf[HEADER.size : end])
        del self.buf[:end]
        return frame

    def fill(self) -> None:
        """Append what the pipe holds to ``buf``; call it once the pipe is readable (then it never
        blocks). Partial frames stay in ``buf``, where ``recv_frame`` finds them too."""
        data = os.read(self.rfd, 1 << 20)
        if not data:
            raise EOFError("the peer closed the pipe")
        self.buf += data

    def recv_plain(self, deadline: float | None = None):
        return loads_plain(self.recv_frame(deadline))

    def recv_text(self) -> str:
        head = self.recv()
        if head[0] == "raw":
            _, maxchar, n = head
            (size,) = HEADER.unpack(self._read_exact(HEADER.size, None))
            text, view = textbuf.new_str(n, maxchar)
            if size != len(view):
                raise FrameTooLarge(f"text frame of {size} bytes for {n} characters")
            self._read_into(view)
            return text
        pieces = []
        while True:
            chunk = self.recv_frame()
            if not chunk:
                return "".join(pieces)
            pieces.append(chunk.decode("utf-8", "surrogatepass"))
            del chunk

    def _read_into(self, view: memoryview) -> None:
        have = min(len(self.buf), len(view))
        view[:have] = self.buf[:have]
        del self.buf[:have]
        while have < len(view):
            got = os.readv(self.rfd, [view[have:]])
            if got == 0:
                raise EOFError("the peer closed the pipe")
            have += got

    def recv_unpickled(self):
        """Load a value sent by ``send_pickled``; the stream is consumed even if loading fails."""
        reader = _FrameReader(self)
        try:
            return pickle.Unpickler(reader).load()
        finally:
            reader.drain()


class _FrameWriter:
    """A file-like sink for ``pickle.Pickler`` that sends ~1 MiB frames."""

    def __init__(self, chan: Channel, size: int = 1 << 20):
        self.chan, self.size, self.parts, self.pending = chan, size, [], 0

    def write(self, data) -> int:
        n = len(data)
        if n >= self.size:  # a big bytes/str body: send it as its own frame, uncopied
            self.flush()
            self.chan.send_bytes(data)
            return n
        self.parts.append(bytes(data))
        self.pending += n
        if self.pending >= self.size:
            self.flush()
        return n

    def flush(self) -> None:
        if self.parts:
            self.chan.send_bytes(b"".join(self.parts))
            self.parts, self.pending = [], 0


class _FrameReader:
    """A file-like source for ``pickle.Unpickler`` over the frames of ``_FrameWriter``."""

    def __init__(self, chan: Channel):
        self.chan, self.chunk, self.pos, self.done = chan, b"", 0, False

    def _more(self) -> bool:
        if self.done:
            return False
        frame = self.chan.recv_frame()
        self.chunk, self.pos = (bytes(frame) if isinstance(frame, bytearray) else frame), 0
        self.done = not self.chunk
        return not self.done

    def read(self, n: int = -1) -> bytes:
        parts = []
        while n != 0:
            if self.pos >= len(self.chunk) and not self._more():
                break
            take = len(self.chunk) - self.pos if n < 0 else min(n, len(self.chunk) - self.pos)
            parts.append(self.chunk[self.pos : self.pos + take])
            self.pos += take
            n -= take if n > 0 else 0
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readinto(self, buf) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def readline(self) -> bytes:
        parts = []
        while True:
            if self.pos >= len(self.chunk) and not self._more():
                break
            end = self.chunk.find(b"\n", self.pos)
            stop = len(self.chunk) if end < 0 else end + 1
            parts.append(self.chunk[self.pos : stop])
            self.pos = stop
            if end >= 0:
                break
        return b"".join(parts)

    def drain(self) -> None:
        while self._more():
            pass
