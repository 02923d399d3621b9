"""Framing on the host<->worker pipes, shared by both sides (standard library only).

A frame is an 8-byte little-endian length followed by that many bytes: a pickle, or for a
text variable a run of raw UTF-8 chunk frames ended by an empty frame. Text goes as raw
chunks so a 10^8-character context is never pickled as one giant copy on either side.

The host never trusts a pickle from the worker: model code could craft one whose loading
runs code. ``loads_plain`` only admits plain data (containers, numbers, text, dates, ...).
"""

from __future__ import annotations

import io
import os
import pickle
import select
import struct
import time

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
    "builtins": {"set", "frozenset", "complex", "bytearray", "slice", "range", "list", "dict", "tuple",
                 "int", "float", "str", "bytes", "bool"},
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
        self._write_all(HEADER.pack(len(payload)))
        self._write_all(payload)

    def send(self, obj) -> None:
        self.send_bytes(dumps(obj))

    def send_text(self, text: str) -> None:
        """Stream ``text`` as UTF-8 chunk frames (each chunk valid on its own), then an empty frame."""
        for i in range(0, len(text), TEXT_CHUNK_CHARS):
            self.send_bytes(text[i:i + TEXT_CHUNK_CHARS].encode("utf-8", "surrogatepass"))
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
        if remaining <= 0 or not select.select([self.rfd], [], [], remaining)[0]:
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

    def recv_plain(self, deadline: float | None = None):
        return loads_plain(self.recv_frame(deadline))

    def recv_text(self) -> str:
        pieces = []
        while True:
            chunk = self.recv_frame()
            if not chunk:
                return "".join(pieces)
            pieces.append(chunk.decode("utf-8", "surrogatepass"))
            del chunk
