"""The canonical JSONL writer and the manifest that says where a dataset came from.

One row per line, keys sorted, compact separators, UTF-8: the same rows always give the
same bytes, so the manifest's sha256 of each file identifies the data. Message dicts drop
``tool_calls`` when it is None (chat templates read a missing key and None alike), every
other field is written even when null, so all files of a dataset share one set of columns.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from optimizers.compile.schema import ROW_MODELS
from optimizers.compile.split import validation_tasks
from optimizers.compile.validate import validate_file

MANIFEST_VERSION = 1
_MESSAGE_LISTS = ("prompt", "completion", "messages", "chosen", "rejected")
DATA_FILES = ("train.jsonl", "validation.jsonl", "groups_train.jsonl", "groups_validation.jsonl")


def row_to_json(row: BaseModel) -> str:
    data = row.model_dump(mode="json")
    for key in _MESSAGE_LISTS:
        for message in data.get(key) or []:
            if message.get("tool_calls") is None:
                message.pop("tool_calls", None)
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def write_jsonl(rows: Iterable[BaseModel], path: str | Path) -> dict[str, Any]:
    """Write rows; returns ``{"rows": n, "sha256": ...}`` of the file written."""
    digest = hashlib.sha256()
    count = 0
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            line = (row_to_json(row) + "\n").encode("utf-8")
            digest.update(line)
            fh.write(line.decode("utf-8"))
            count += 1
    return {"rows": count, "sha256": digest.hexdigest()}


def write_dataset(
    result: Any, out_dir: str | Path, *, seed: int = 0, val_fraction: float = 0.1
) -> dict[str, Any]:
    """Write ``result`` (a CompileResult) as ``train.jsonl`` + ``validation.jsonl`` + ``manifest.json``.

    With RL results, group rows go to ``groups_train.jsonl`` / ``groups_validation.jsonl``,
    split by the same tasks as the prompts.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in DATA_FILES:  # a file left by an earlier write would be read as part of this dataset
        (out / stale).unlink(missing_ok=True)
    # one choice of held-out tasks for prompts and groups alike, so no task is on both sides
    all_tasks = [row.task_id for row in [*result.rows, *result.extra_rows]]
    held_out = validation_tasks(all_tasks, seed=seed, val_fraction=val_fraction)
    files: dict[str, Any] = {}
    sides: dict[str, set[str]] = {"train": set(), "validation": set()}
    for prefix, rows in (("", result.rows), ("groups_", result.extra_rows)):
        parts = {
            "train": [row for row in rows if row.task_id not in held_out],
            "validation": [row for row in rows if row.task_id in held_out],
        }
        for split, part in parts.items():
            if not part:  # no empty files: readers treat a present file as a split with rows
                continue
            name = f"{prefix}{split}.jsonl"
            tasks = {row.task_id for row in part}
            sides[split] |= tasks
            files[name] = write_jsonl(part, out / name) | {"tasks": len(tasks)}
    overlap = len(sides["train"] & sides["validation"])  # 0 by construction; recorded so a reader can check
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "kind": result.kind,
        "row_model": ROW_MODELS[result.kind].__name__,
        "signature": result.report.signature,
        "split": {"seed": seed, "val_fraction": val_fraction, "by": "task_id", "tasks_in_both": overlap},
        "options": result.options,
        "sources": [vars(source) for source in result.sources],
        "counts": {name: info["rows"] for name, info in files.items()},
        "files": files,
        "report": result.report.to_dict(),
    }
    for name in files:  # what a trainer will read, checked as it will read it
        validate_file(out / name, kind="rl_group" if name.startswith("groups_") else result.kind)
    text = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    (out / "manifest.json").write_text(text + "\n", encoding="utf-8")
    return manifest
