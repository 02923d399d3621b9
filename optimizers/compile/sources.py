"""Where runs come from: JSONL files or folders of them (``TrajectoryLog``), or Trajectory objects.

An ``rlmkit eval`` run folder is read as it is: its ``trajectories/``, not its ``results.jsonl``
(one score row per run, not a trajectory), and not its ``--baseline`` runs (a plain LM call on
a cut context, kept for comparison: never an RLM run to train on).

Loading keeps what the manifest needs (each file's sha256, its runs, its unreadable lines),
drops a run seen twice (same run_id), and checks that one compile gets one signature.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from optimizers.compile.errors import MixedSignaturesError
from rlmkit.errors import UserError
from rlmkit.trajectory import Trajectory, read_runs

IN_MEMORY = "<in-memory trajectories>"


@dataclass
class SourceFile:
    path: str
    sha256: str
    runs: int
    bad_lines: int


@dataclass
class RunSet:
    runs: list[Trajectory]
    files: list[SourceFile] = field(default_factory=list)
    duplicate_runs: int = 0

    @property
    def bad_lines(self) -> int:
        return sum(f.bad_lines for f in self.files)


RunsLike = RunSet | str | os.PathLike | Trajectory | Iterable[str | os.PathLike | Trajectory]


def load_runs(items: RunsLike) -> RunSet:
    """Read every run from paths (files or folders, searched for ``*.jsonl``) and Trajectory objects."""
    if isinstance(items, RunSet):
        return items
    if isinstance(items, (str, os.PathLike, Trajectory)):
        items = [items]
    runs: list[Trajectory] = []
    files: list[SourceFile] = []
    in_memory = hashlib.sha256()  # runs given as objects: the manifest records a hash of their JSON
    count_in_memory = 0
    for item in items:
        if isinstance(item, Trajectory):
            runs.append(item)
            in_memory.update(item.model_dump_json().encode())
            count_in_memory += 1
            continue
        path = Path(item)
        if path.is_dir():
            paths = [file for file in sorted(path.rglob("*.jsonl")) if not _eval_results(file)]
        elif path.is_file():
            paths = [path]
        else:
            raise UserError(f"no such run file or folder: {path}")
        for file in paths:
            found, bad = read_runs(file)
            runs.extend(found)
            files.append(SourceFile(str(file), _sha256(file), len(found), bad))
    if count_in_memory:
        files.append(SourceFile(IN_MEMORY, in_memory.hexdigest(), count_in_memory, 0))
    unique: dict[str, Trajectory] = {}
    for run in runs:
        if (run.meta.task or {}).get("program") == "baseline":
            continue
        unique.setdefault(run.meta.run_id, run)
    return RunSet(list(unique.values()), files, duplicate_runs=len(runs) - len(unique))


def by_signature(runs: list[Trajectory]) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for run in runs:
        groups[run.meta.signature].append(run)
    return dict(groups)


def signature_of(runs: list[Trajectory], mixed: bool = False) -> str | None:
    """The one signature of ``runs``; a MixedSignaturesError naming each one otherwise, unless
    ``mixed`` allows several (then their counts, most runs first, joined by " | ")."""
    counts = Counter(run.meta.signature for run in runs)
    if len(counts) <= 1:
        return next(iter(counts), None)
    if mixed:
        return " | ".join(f"{signature} ({count})" for signature, count in counts.most_common())
    lines = [f"  {count} run(s) of {signature!r}" for signature, count in counts.most_common()]
    raise MixedSignaturesError(
        "runs of different signatures cannot share one dataset:\n"
        + "\n".join(lines)
        + "\ncompile them separately, group them (`--group-signatures`, or sources.by_signature()), or "
        "make one dataset of them all (`--mixed-signatures`)"
    )


def _eval_results(file: Path) -> bool:
    """The score rows of an eval run folder (beside its config.json), which are not trajectories."""
    return file.name == "results.jsonl" and (file.parent / "config.json").is_file()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
