"""``VariableInfo`` from live values: what a trajectory records of each input (type, size,
sha256, preview), computed without keeping the body.

This sits above both the trajectory model and the sandbox: hashing a huge str reads its
character buffer in place (``sandbox/worker_side/textbuf.py``, the same zero-copy view the pipe uses), while
``trajectory.py`` stays a plain data model that anyone may import.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping

from rlmkit.trajectory import PREVIEW_CHARS, VariableInfo

_HASH_CHUNK = 1 << 20
HASH_INLINE_CHARS = 1 << 20  # bigger text is hashed off the path to the first request


def describe_variable(
    name: str, value: object, preview_chars: int = PREVIEW_CHARS, *, hash_now: bool = True
) -> VariableInfo:
    """Type, size, hash and preview of an input, computed without keeping the body.

    ``hash_now=False`` leaves ``sha256`` empty for text and bytes (see ``describe_inputs``)."""
    if isinstance(value, (str, bytes)):
        text = value if isinstance(value, str) else value[: preview_chars * 2].decode("utf-8", "replace")
        size = len(value)
        sha256 = text_sha256(value) if hash_now else ""
    else:
        try:
            text = json.dumps(value, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
        sha256 = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        size = len(value) if hasattr(value, "__len__") else len(text)
    head = preview_chars // 2
    preview = text if len(text) <= preview_chars else text[:head] + " ... " + text[-head:]
    return VariableInfo(name=name, type=type(value).__name__, size=size, sha256=sha256, preview=preview)


def text_sha256(value: str | bytes) -> str:
    """sha256 of the UTF-8 of ``value`` without a whole copy: an ASCII str is hashed straight
    from its own character buffer (which is its UTF-8), other text in 1 MiB encoded slices."""
    from rlmkit.sandbox.worker_side import textbuf  # ctypes: loaded when a run hashes, not by every reader

    if isinstance(value, bytes):
        return hashlib.sha256(value).hexdigest()  # hashlib releases the GIL over a big buffer
    raw = textbuf.char_buffer(value)
    if raw is not None and raw[0] == 127:
        return hashlib.sha256(raw[1]).hexdigest()
    digest = hashlib.sha256()
    for start in range(0, len(value), _HASH_CHUNK):
        digest.update(value[start : start + _HASH_CHUNK].encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def describe_inputs(variables: Mapping[str, object]) -> tuple[list[VariableInfo], Callable[[], None] | None]:
    """``VariableInfo`` of each input, and what is left to do: the sha256 of text over
    ``HASH_INLINE_CHARS``, filled in by calling it (about 1 ms per MB of CPU, so a run calls it in a
    thread while its first model request is out, and writes its start record after)."""
    infos: list[VariableInfo] = []
    later: list[tuple[VariableInfo, str | bytes]] = []
    for name, value in variables.items():
        big = isinstance(value, (str, bytes)) and len(value) > HASH_INLINE_CHARS
        info = describe_variable(name, value, hash_now=not big)
        infos.append(info)
        if big and isinstance(value, (str, bytes)):
            later.append((info, value))
    if not later:
        return infos, None

    def finish() -> None:
        for info, value in later:
            info.sha256 = text_sha256(value)

    return infos, finish
