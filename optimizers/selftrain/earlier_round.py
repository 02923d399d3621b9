"""What a recipe takes from an earlier round (STaR's next round), named by the earlier recipe's
``--archive`` folder, which a fresh checkout unpacks, so a round reproduces from the repository:

- ``sample_adapter``: the adapter its runs are sampled through. The last round's model is right
  more often than the base, so more of its runs pass the filters; the new adapter is still trained
  from the base. A GGUF file may be named instead of an archive.
- ``runs_from``: runs the earlier round sampled, compiled into this round's dataset beside its
  own, so a round adds to what the last one found rather than starting over. Their families
  count as trained on, as its own do. ``ARCHIVE:prose,needle`` takes only those families' runs:
  the gate asks every family trained on to gain, so a round leaves out one it should not train
  on (one whose rows taught a habit that cost a suite)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from optimizers.selftrain.stages import StageStore
from rlmkit.errors import UserError

FOLDER = "earlier"  # under the work folder: each earlier archive's stages, unpacked


def check_adapter(spec: str) -> None:
    """A clear error before any sampling when ``spec`` names neither a GGUF file nor an archive
    holding a finished adapter stage."""
    path = Path(spec)
    if path.is_file() and path.suffix == ".gguf":
        return
    if path.is_dir() and (path / "adapter.json").is_file():
        return
    raise UserError(
        f"sample_adapter {spec!r}: give a GGUF LoRA file (.gguf) or the --archive folder of an "
        "earlier self-train recipe whose adapter stage finished (it holds adapter.json)"
    )


def adapter_gguf(spec: str, work: Path) -> Path:
    """The GGUF file ``spec`` names, unpacked under ``work`` when it is an archive folder."""
    check_adapter(spec)
    path = Path(spec)
    return path if path.is_file() else _store(path, work).output("adapter") / "adapter.gguf"


def adapter_identity(spec: str, gguf: Path) -> dict[str, str]:
    """What a sampling stage's record says about the adapter it sampled through."""
    return {"sample_adapter": spec, "sample_adapter_sha256": hashlib.sha256(gguf.read_bytes()).hexdigest()}


def split_spec(spec: str) -> tuple[Path, tuple[str, ...] | None]:
    """``ARCHIVE`` or ``ARCHIVE:family,family``: the archive folder and the families taken (None: all)."""
    archive, colon, chosen = spec.rpartition(":")
    if not colon or "/" in chosen:  # no family list (a colon inside the path is part of it)
        return Path(spec), None
    return Path(archive), tuple(family.strip() for family in chosen.split(",") if family.strip())


def check_runs(spec: str) -> list[dict]:
    """The earlier recipe's sampling plans; a clear error before any stage when ``spec`` is not
    an archive with a recipe record, or names a family the earlier recipe never sampled."""
    archive, chosen = split_spec(spec)
    if not (archive / "recipe.json").is_file():
        raise UserError(
            f"runs_from {spec!r}: give the --archive folder of an earlier self-train recipe "
            "(it holds recipe.json), optionally followed by ':family,family'"
        )
    plans = json.loads((archive / "recipe.json").read_text())["train"]
    sampled = {plan["suite"] for plan in plans}
    if unknown := sorted(set(chosen or ()) - sampled):
        raise UserError(
            f"runs_from {spec!r}: {', '.join(unknown)} never sampled there "
            f"(it sampled {', '.join(sorted(sampled))})"
        )
    return plans


def sampled_stages(spec: str) -> list[tuple[str, str]]:
    """(stage name, suite) of every sampling stage the earlier recipe finished, in its order, of
    the families ``spec`` takes: its sampled runs, then the failed ones it continued."""
    plans = check_runs(spec)
    archive, chosen = split_spec(spec)
    stages = [
        (f"{kind}-{plan['suite']}-{plan['length'] // 1000}k", plan["suite"])
        for kind in ("sample", "branch")
        for plan in plans
        if chosen is None or plan["suite"] in chosen
    ]
    return [(name, suite) for name, suite in stages if (archive / f"{name}.json").is_file()]


def runs(spec: str, work: Path) -> list[Path]:
    """The trajectory folders of the earlier recipe's finished sampling stages (one closed before
    any run has none), unpacked under ``work``."""
    store = _store(split_spec(spec)[0], work)
    folders = [store.output(name) / "trajectories" for name, _ in sampled_stages(spec)]
    return [folder for folder in folders if folder.is_dir()]


def families(spec: str) -> list[str]:
    """The families the earlier recipe sampled: trained on by a round that compiles its runs."""
    return list(dict.fromkeys(suite for _, suite in sampled_stages(spec)))


def _store(archive: Path, work: Path) -> StageStore:
    # one folder per archive: two earlier rounds' stages share names (sample-prose-50k)
    return StageStore(work / FOLDER / archive.name, archive=archive)


def trained_families(recipe) -> list[str]:
    """Every family a recipe's adapter is trained on: its own sampled suites, then those of the
    earlier rounds whose runs it compiles (the gate asks each of them to gain)."""
    own = [plan.suite for plan in recipe.train]
    return list(dict.fromkeys(own + [family for spec in recipe.runs_from for family in families(spec)]))
