"""Which LoRA adapter the embedded model is served with: none, one the caller names, or one
shipped beside the model (a GGUF adapter, checked against the sha256 recorded with it).

llama.cpp applies a GGUF LoRA adapter to the quantised base at load time, so an adapter is part
of a server's identity: a server started with one adapter never answers for another.

    local_lm()                         # the shipped adapter if it passed its gate, else none
    local_lm(adapter=None)             # the base model alone
    local_lm(adapter="shipped")        # the shipped adapter, even one its gate holds back
    local_lm(adapter="out/adapter.gguf")
    RLMKIT_LOCAL_ADAPTER=none          # the same switch for every process (or a path, or shipped)

An adapter is served by default only through a gate written before it was measured
(``optimizers/selftrain/gate.py`` over the held-out matrix): a record whose ``held_back`` names
the rules it failed stays in the package, named by ``shipped``, while the default is the base.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from rlmkit.errors import LocalModelError
from rlmkit.local.server import MODEL_ALIAS

ENV = "RLMKIT_LOCAL_ADAPTER"
SHIPPED_ADAPTER = Path(__file__).with_name("shipped_adapter.json")  # absent: no adapter ships
DEFAULT = "default"  # local_lm's adapter argument when the caller says nothing
SHIPPED = "shipped"  # the adapter shipped beside the model, whatever its gate said


def resolve_adapter(adapter: str | Path | None = DEFAULT) -> Path | None:
    """The adapter file to serve, or None for the base model alone.

    ``DEFAULT`` reads ``$RLMKIT_LOCAL_ADAPTER`` (a path, ``none`` or ``shipped``), then serves
    the shipped adapter if its gate let it through."""
    if adapter == DEFAULT:
        adapter = os.environ.get(ENV) or DEFAULT
    if adapter == DEFAULT:
        return shipped_adapter() if held_back() is None else None
    if adapter is None or str(adapter).lower() == "none":
        return None
    if str(adapter) == SHIPPED:
        if (path := shipped_adapter()) is None:
            raise LocalModelError("this build ships no adapter for the embedded model")
        return path
    path = Path(adapter).expanduser()
    if not path.is_file():
        raise LocalModelError(f"LoRA adapter {path} does not exist (a GGUF adapter file is expected)")
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise LocalModelError(
                f"{path} is not a GGUF file: convert a peft adapter with optimizers.gguf_lora.convert_adapter"
            )
    return path.resolve()


@cache
def served_alias(lora: Path | None) -> str:
    """What a server calls its model: the base's name, plus the adapter's name and hash when one is
    applied. The name is part of every cache key, so two adapters never share cached replies."""
    if lora is None:
        return MODEL_ALIAS
    digest = hashlib.sha256(Path(lora).read_bytes()).hexdigest()[:10]
    return f"{MODEL_ALIAS}+{Path(lora).stem}-{digest}"


# Any: the shipped record is JSON from the package's data file.
def shipped_record() -> dict[str, Any] | None:
    """The shipped adapter's record (file, hash, what it was trained on, its gate), or None."""
    return json.loads(SHIPPED_ADAPTER.read_text()) if SHIPPED_ADAPTER.exists() else None


def held_back() -> dict[str, Any] | None:
    """Why the shipped adapter is not the default (its gate's failures and where they were
    measured), or None when it is the default or none ships."""
    record = shipped_record()
    return (record or {}).get("held_back")


@cache
def shipped_adapter() -> Path | None:
    """The adapter this build ships for the embedded model, verified, or None."""
    record = shipped_record()
    if record is None:
        return None
    path = SHIPPED_ADAPTER.with_name(record["file"])
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
    if digest != record["sha256"]:
        raise LocalModelError(
            f"the shipped adapter {path} is missing or damaged (sha256 {digest}, expected "
            f"{record['sha256']}); set {ENV}=none to serve the base model"
        )
    return path
