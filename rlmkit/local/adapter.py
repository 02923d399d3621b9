"""Which LoRA adapter the embedded model is served with: none, one the caller names, or one
shipped beside the model (a GGUF adapter, checked against the sha256 recorded with it).

llama.cpp applies a GGUF LoRA adapter to the quantised base at load time, so an adapter is part
of a server's identity: a server started with one adapter never answers for another.

    local_lm()                         # the shipped adapter if this build has one, else none
    local_lm(adapter=None)             # the base model alone
    local_lm(adapter="out/adapter.gguf")
    RLMKIT_LOCAL_ADAPTER=none          # the same switch for every process (or a path)
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path

from rlmkit.errors import LocalModelError
from rlmkit.local.server import MODEL_ALIAS

ENV = "RLMKIT_LOCAL_ADAPTER"
SHIPPED_ADAPTER = Path(__file__).with_name("shipped_adapter.json")  # absent: no adapter ships
DEFAULT = "default"  # local_lm's adapter argument when the caller says nothing


def resolve_adapter(adapter: str | Path | None = DEFAULT) -> Path | None:
    """The adapter file to serve, or None for the base model alone.

    ``DEFAULT`` reads ``$RLMKIT_LOCAL_ADAPTER`` (a path, or ``none``), then the shipped adapter."""
    if adapter == DEFAULT:
        adapter = os.environ.get(ENV) or DEFAULT
    if adapter == DEFAULT:
        return shipped_adapter()
    if adapter is None or str(adapter).lower() == "none":
        return None
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


@cache
def shipped_adapter() -> Path | None:
    """The adapter this build ships for the embedded model, verified, or None."""
    if not SHIPPED_ADAPTER.exists():
        return None
    record = json.loads(SHIPPED_ADAPTER.read_text())
    path = SHIPPED_ADAPTER.with_name(record["file"])
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
    if digest != record["sha256"]:
        raise LocalModelError(
            f"the shipped adapter {path} is missing or damaged (sha256 {digest}, expected "
            f"{record['sha256']}); set {ENV}=none to serve the base model"
        )
    return path
