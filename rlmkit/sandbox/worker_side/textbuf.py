"""Both sides: zero-copy access to CPython's str buffers, so a huge context crosses the pipe
uncopied (under ``wire.py``, in the host and in the worker alike).

A compact CPython str stores its characters in one buffer right after its header, one,
two or four bytes per character (its "kind"). The host writes that buffer to the pipe
as is; the worker allocates an empty str of the same length and kind (``PyUnicode_New``)
and reads the pipe straight into it. Peak memory: one copy per side, no UTF-8 encode or
decode. The layout is checked at import on known strings; where it does not hold (another
interpreter, a str subclass) callers fall back to UTF-8 chunks. Standard library only.
"""

from __future__ import annotations

import ctypes
import sys

_MAXCHAR = {1: 255, 2: 65535, 4: 1114111}


def _layout() -> tuple[int, int] | None:
    """Offsets of the character data in an ASCII and in a non-ASCII compact str, if verified."""
    if sys.implementation.name != "cpython":
        return None
    ascii_off = sys.getsizeof("") - 1
    compact_off = sys.getsizeof("\xe9") - 2
    probes = [
        ("abcd" * 3, ascii_off, b"abcd" * 3),
        ("\xe9\xe8x", compact_off, b"\xe9\xe8x"),
        ("\u0101\u0102", compact_off, "\u0101\u0102".encode("utf-16-le")),
        ("\U0001f600a", compact_off, "\U0001f600a".encode("utf-32-le")),
    ]
    for text, off, expected in probes:
        if ctypes.string_at(id(text) + off, len(expected)) != expected:
            return None
    return ascii_off, compact_off


LAYOUT = _layout()


def char_buffer(text: str) -> tuple[int, memoryview] | None:
    """(maxchar, a view of ``text``'s own character bytes), or None. Keep ``text`` alive while using it."""
    if LAYOUT is None or type(text) is not str or not text:
        return None
    n = len(text)
    if text.isascii():
        kind, off, maxchar = 1, LAYOUT[0], 127
    else:
        size = sys.getsizeof(text)
        kind = next((k for k in (1, 2, 4) if size == LAYOUT[1] + (n + 1) * k), None)
        if kind is None:
            return None
        off, maxchar = LAYOUT[1], _MAXCHAR[kind]
    array = (ctypes.c_char * (n * kind)).from_address(id(text) + off)
    return maxchar, memoryview(array).cast("B")


def new_str(n: int, maxchar: int) -> tuple[str, memoryview]:
    """A new, not yet filled str of ``n`` characters and a writable view of its buffer.

    The caller must fill the whole buffer with characters that need ``maxchar`` (CPython
    assumes the narrowest kind) before the str is hashed, compared or shared.
    """
    if LAYOUT is None:
        raise RuntimeError("the str layout of this interpreter is unknown")
    if not 0 < n < sys.maxsize // 4 or maxchar not in (127, 255, 65535, 1114111):
        raise ValueError(f"bad text header: n={n}, maxchar={maxchar}")
    unicode_new = ctypes.pythonapi.PyUnicode_New
    unicode_new.restype = ctypes.py_object
    unicode_new.argtypes = [ctypes.c_ssize_t, ctypes.c_uint32]
    text = unicode_new(n, maxchar)
    kind = 1 if maxchar <= 255 else (2 if maxchar <= 65535 else 4)
    off = LAYOUT[0] if maxchar == 127 else LAYOUT[1]
    array = (ctypes.c_char * (n * kind)).from_address(id(text) + off)
    return text, memoryview(array).cast("B")
