"""Where a measurement came from: date, commit, machine, load and the command, recorded by the
script that measures and printed above every table rendered from it (render_docs.py)."""

from __future__ import annotations

import datetime
import os
import platform
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from _bootstrap import ROOT


def commit(ignoring: tuple[str, ...] = ()) -> str:
    """The checkout's short commit, with ``+changes`` when tracked files differ from it (changes
    under the folders in ``ignoring`` left out)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                *(f":!{p}" for p in ignoring),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return head + ("+changes" if dirty else "")


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.machine()}, {os.cpu_count()} cores, {memory:.0f} GiB{vector_units()}"


def vector_units() -> str:
    """The widest vector instructions the CPU has: llama.cpp's and torch's kernels follow them,
    so greedy outputs measured on an AVX2-only CPU and on an AVX-512 one can differ."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return ""
    for flag, name in (("avx512_bf16", "AVX-512 BF16"), ("avx512f", "AVX-512"), ("avx2", "AVX2")):
        if flag in flags:
            return f", {name}"
    return ""


def record(script: str | Path, argv: list[str], load_at_start: float) -> dict[str, Any]:
    """The provenance of a run that started with load average ``load_at_start`` and ends now;
    ``script`` is the measuring script's ``__file__``, recorded relative to the checkout."""
    if Path(script).is_absolute():
        script = Path(script).resolve().relative_to(ROOT).as_posix()
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "machine": machine(),
        "load": f"{load_at_start:.1f} -> {os.getloadavg()[0]:.1f}",
        "command": shlex.join(["python", script, *argv]),
    }


def current(meta: dict[str, Any]) -> bool:
    """The measurement names the commit it ran on and the tree had no uncommitted changes."""
    commit = str(meta.get("commit") or "")
    return bool(re.fullmatch(r"[0-9a-f]{7,40}", commit))


def not_current(meta: dict[str, Any]) -> str:
    """The label a stamp opens with when ``current(meta)`` is false; "" when it is true."""
    if current(meta):
        return ""
    commit = str(meta.get("commit") or "")
    if commit.endswith("+changes"):
        why = f"measured with uncommitted changes on top of {commit.removesuffix('+changes')}"
    else:
        why = "no commit recorded"
    return f"**Not current: {why}, so not necessarily the code here.** "


def stamp(meta: dict[str, Any]) -> str:
    """One line: when, at which commit, on what, under which load, by which command; opened by
    a "Not current" label when the commit is not recorded or the tree had uncommitted changes."""
    parts = [
        f"measured {meta.get('date', 'on a date not recorded')}",
        f"commit {meta.get('commit') or 'not recorded'}",
        meta.get("machine") or "machine not recorded",
        f"load average {meta['load']}" if meta.get("load") else "load not recorded",
    ]
    line = "; ".join(parts)
    if meta.get("command"):
        line += f"; `{meta['command']}`"
    if meta.get("note"):
        line += f". {meta['note']}"
    return f"{not_current(meta)}*{line[0].upper()}{line[1:]}.*"


def lines_in(path: Path | None) -> int:
    """How many rows a JSON-lines results file holds (0 when it does not exist yet)."""
    return sum(1 for _ in path.open()) if path and path.exists() else 0


def record_rows(results: Path, first_line: int, last_line: int, meta: dict[str, Any]) -> None:
    """Append one run's provenance to ``<results>.meta.json``: which lines of ``results`` it wrote
    (1-based, inclusive), so every row of an append-only results file keeps its own stamp."""
    import json

    path = results.with_suffix(".meta.json")
    doc = json.loads(path.read_text()) if path.exists() else {"runs": []}
    doc["runs"].append({"lines": [first_line, last_line], **meta})
    path.write_text(json.dumps(doc, indent=1) + "\n")
