"""An evaluation folder's runs as the self-training stages and the held-out matrix read them:
``rlmkit eval``'s ``results.jsonl`` (the file is the contract: optimizers never import programs),
what a stage record keeps of each run, and the counts a sampling or dataset stage reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlmkit.errors import LMUnavailableError


def sample_counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A sampling stage's runs: how many, on how many examples, how many scored, how they ended."""
    right = [row for row in rows if row["score"] > 0]
    ended: dict[str, int] = {}
    for row in rows:
        key = row.get("failure") or row["status"]
        ended[key] = ended.get(key, 0) + 1
    return {
        "examples": len({row["id"] for row in rows}),
        "runs": len(rows),
        "run_seconds": round(sum(row["wall_s"] for row in rows), 1),
        "scored_above_0": len(right),
        "success_rate": len(right) / len(rows) if rows else 0.0,
        "examples_with_a_success": len({row["id"] for row in right}),
        "ended": dict(sorted(ended.items())),
    }


def what_was_kept(report: dict[str, Any]) -> dict[str, Any]:
    """A compile report as the recipe's record gives it: rows and examples per family (a run of
    ``rlmkit eval`` is the task ``SUITE/EXAMPLE``) and what each filter removed, runs and turns apart."""
    per_family: dict[str, dict[str, int]] = {}
    for task, rows in sorted(report["per_task"].items()):
        family = per_family.setdefault(task.partition("/")[0], {"rows": 0, "examples": 0})
        family["rows"] += rows
        family["examples"] += 1
    return {
        "rows": report["rows"],
        "examples": len(report["per_task"]),
        "per_family": per_family,
        "runs_read": report["runs_read"],
        "runs_dropped": report["runs_dropped"],
        "turns_dropped": report["samples_dropped"],
    }


def report_row(row: dict[str, Any]) -> dict[str, Any]:
    """What the report keeps of an evaluation row."""
    kept = {k: row[k] for k in ("id", "score", "status", "failure", "iterations", "wall_s")}
    return kept | {"tokens": row["prompt_tokens"] + row["completion_tokens"]}


def per_example(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Mean turns, tokens and seconds per example."""
    n = max(1, len(rows))
    return {key: sum(row[key] for row in rows) / n for key in ("iterations", "tokens", "wall_s")}


def replayed_runs(folder: Path, rows: list[dict[str, Any]]) -> list[str]:
    """Of an evaluation folder's ``rows``, the runs (by example id) that some model call answered
    from the LM cache: replies cached before, by another run or by this one before a resume,
    replayed rather than measured (the two cannot be told apart afterwards). Read from the runs'
    trajectories, which older rows without ``cached_calls`` have too."""
    from rlmkit.trajectory import read_runs

    cached = {
        run.meta.run_id
        for path in sorted((folder / "trajectories").glob("*.jsonl"))
        for run in read_runs(path)[0]
        if run.usage.cached_calls
    }
    return sorted({row["id"] for row in rows if row.get("run_id") in cached})


def never_answered(row: dict[str, Any]) -> bool:
    """A run its model could not be reached for (``rlmkit eval`` runs it again on resume)."""
    return LMUnavailableError.recorded_in(row.get("failure"), row.get("error"))


def read_rows(folder: Path) -> list[dict[str, Any]]:
    """An evaluation folder's rows, the latest of each run: ``rlmkit eval`` appends a new row for
    a run it does again (one its model could not be reached for) and reads the last one, by
    (id, sample, program), the same way. (The file is the contract: optimizers never import
    programs.)"""
    path = folder / "results.jsonl"
    if not path.exists():
        return []
    rows: dict[tuple, dict[str, Any]] = {}
    for line in filter(str.strip, path.read_text().splitlines()):
        row = json.loads(line)
        key = (row["id"], row.get("sample", 0), row.get("program", "program"))
        rows.pop(key, None)
        rows[key] = row
    return list(rows.values())


def count_lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0
