"""The adapter a recipe samples through (``Recipe.sample_adapter``): STaR's next round.

A round samples the model the last round made, because it is right more often than the base and
so more of its runs pass the filters; the new adapter is still trained from the base. The recipe
names either the GGUF file or the archive folder an earlier ``rlmkit self-train --archive`` wrote,
whose ``adapter`` stage a fresh checkout unpacks here, so the round reproduces from the repository
alone."""

from __future__ import annotations

import hashlib
from pathlib import Path

from optimizers.selftrain.stages import StageStore
from rlmkit.errors import UserError

FOLDER = "sample-adapter"  # under the work folder: the earlier recipe's adapter stage, unpacked


def check(spec: str) -> None:
    """A clear error before any sampling when ``spec`` names neither form."""
    path = Path(spec)
    if path.is_file() and path.suffix == ".gguf":
        return
    if path.is_dir() and (path / "adapter.json").is_file():
        return
    raise UserError(
        f"sample_adapter {spec!r}: give a GGUF LoRA file (.gguf) or the --archive folder of an "
        "earlier self-train recipe whose adapter stage finished (it holds adapter.json)"
    )


def resolve(spec: str, work: Path) -> Path:
    """The GGUF file ``spec`` names, unpacked under ``work`` when it is an archive folder."""
    check(spec)
    path = Path(spec)
    if path.is_file():
        return path
    return StageStore(work / FOLDER, archive=path).output("adapter") / "adapter.gguf"


def identity(spec: str, gguf: Path) -> dict[str, str]:
    """What a sampling stage's record says about the adapter it sampled through."""
    return {"sample_adapter": spec, "sample_adapter_sha256": hashlib.sha256(gguf.read_bytes()).hexdigest()}
