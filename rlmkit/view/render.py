"""Build the viewer page: trajectories in, one self-contained HTML file out.

The page is the template with the CSS, the JS and the data inlined, so it opens from disk
or any static server with no network and no build step. The data is the trajectories'
own pydantic dump (the viewer reads the schema it is shipped with, so it cannot drift),
plus a small per-run summary computed here and a list of what could not be read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from rlmkit.errors import UserError
from rlmkit.trajectory import Trajectory, Usage, read_runs

FAILED_STATUSES = ("error", "budget_exceeded", "max_iterations")
# inlined in this order into one <script>: helpers first, entry point last
JS_FILES = ("highlight.js", "util.js", "runlist.js", "runview.js", "sessionview.js", "app.js")


# ------------------------------------------------------------------ reading
def find_logs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every JSONL file named, or found under a named directory. Missing paths are a UserError."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.rglob("*.jsonl"))
            if not found:
                raise UserError(f"no *.jsonl trajectory files under {path}")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise UserError(f"no such trajectory file or directory: {path}")
    if not files:
        raise UserError("give at least one trajectory file or directory")
    return files


def load_runs(files: Iterable[Path]) -> tuple[list[tuple[Path, Trajectory]], list[dict[str, Any]]]:
    """Runs from each file, plus one problem note per file that was not wholly readable."""
    runs: list[tuple[Path, Trajectory]] = []
    problems: list[dict[str, Any]] = []
    for path in files:
        try:
            found, bad = read_runs(path)
        except OSError as exc:  # unreadable file: say so, show the rest
            problems.append({"file": str(path), "bad_lines": None, "runs": 0, "message": str(exc)})
            continue
        runs.extend((path, run) for run in found)
        if bad:
            message = f"{bad} line(s) could not be read" + (
                " - not an rlmkit trajectory log?" if not found else " (truncated or foreign lines)"
            )
            problems.append({"file": str(path), "bad_lines": bad, "runs": len(found), "message": message})
    return runs, problems


# ------------------------------------------------------------------ summaries
def total_usage(run: Trajectory) -> Usage:
    """The run's usage; rebuilt from its parts when the run never logged its end record."""
    if run.usage.calls or run.status != "running":
        return run.usage
    usage = Usage()
    for turn in run.turns:
        usage = usage.add(turn.usage)
        for block in turn.blocks:
            for call in block.subcalls:
                usage = usage.add(total_usage(call.child) if call.child is not None else call.usage)
    return usage


def max_depth(run: Trajectory) -> int:
    """The deepest level of child RLMs under this run (0 when it made no rlm_query)."""
    deepest = run.meta.depth
    for call in run.iter_subcalls(recursive=False):
        if call.child is not None:
            deepest = max(deepest, max_depth(call.child))
    return deepest


def plain_label(run: Trajectory) -> str:
    """The run's task by itself: its suite/example when known, else its signature."""
    task = run.meta.task
    parts = [
        str(task[key]) for key in ("suite", "program", "name", "example", "id") if task.get(key) is not None
    ]
    return " / ".join(parts) if parts else run.meta.signature


def task_label(run: Trajectory) -> str:
    """A short name for the run's task; a session's call says which session and call it is."""
    label, session = plain_label(run), run.meta.session
    if session.get("id"):
        label = f"session {session['id'][:8]} call {session.get('call')}: {label}"
    return label


def summarize(path: Path, run: Trajectory) -> dict[str, Any]:
    usage = total_usage(run)
    return {
        "run_id": run.meta.run_id,
        "file": path.name,
        "task": task_label(run),
        "plain_task": plain_label(run),
        "signature": run.meta.signature,
        "protocol": run.meta.protocol,
        "model": run.meta.model,
        "status": run.status,
        "failed": run.status in FAILED_STATUSES,
        "incomplete": run.status == "running",
        "error": run.error,
        "score": run.score,
        "cost": usage.cost,
        "tokens": usage.total_tokens,
        "calls": usage.calls,
        "turns": run.n_turns,
        "subcalls": sum(1 for _ in run.iter_subcalls(recursive=True)),
        "depth": max_depth(run),
        "duration_s": run.duration_s or sum(turn.duration_s for turn in run.turns),
        "created": run.meta.created,
        "session": run.meta.session.get("id"),
        "session_call": run.meta.session.get("call"),
    }


def build_payload(runs: list[tuple[Path, Trajectory]], problems: list[dict[str, Any]]) -> dict[str, Any]:
    # A child RLM logs its own file and also nests whole in its parent's SubCall.child;
    # the list hides such a run when its parent is loaded (it opens from there).
    loaded = {run.meta.run_id for _, run in runs}
    entries = []
    for path, run in runs:
        summary = summarize(path, run)
        summary["child_of"] = run.meta.parent_id if run.meta.parent_id in loaded else None
        entries.append({"summary": summary, "trajectory": run.model_dump(mode="json")})
    return {"runs": entries, "sessions": session_entries(entries), "problems": problems}


def session_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One list entry per session: its calls (indexes into the runs) in call order, and a summary
    of them in a run summary's shape, so the list filters and sorts sessions and runs alike."""
    calls: dict[str, list[int]] = {}
    for index, entry in enumerate(entries):
        if entry["summary"]["session"]:  # top-level calls only: a child run's meta has no session
            calls.setdefault(entry["summary"]["session"], []).append(index)
    sessions = []
    for session_id, indexes in calls.items():
        # call numbers, not file or clock order: a loaded session's calls may come from two logs
        indexes.sort(
            key=lambda i: (entries[i]["summary"]["session_call"] or 0, entries[i]["summary"]["created"])
        )
        rows = [entries[i]["summary"] for i in indexes]
        sessions.append({"id": session_id, "calls": indexes, "summary": session_summary(session_id, rows)})
    return sessions


def session_summary(session_id: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    first = rows[0]
    failed = next((row for row in rows if row["failed"]), None)
    incomplete = any(row["incomplete"] for row in rows)
    scores = [row["score"] for row in rows if row["score"] is not None]
    files = {row["file"] for row in rows}

    def distinct(key: str) -> str | None:
        return ", ".join(sorted({str(row[key]) for row in rows if row[key] is not None})) or None

    return {
        "run_id": session_id,
        "session": session_id,
        "session_call": None,
        "session_calls": len(rows),
        "file": first["file"] if len(files) == 1 else f"{len(files)} files",
        "task": f"session {session_id[:8]} ({len(rows)} calls): {first['plain_task']}",
        "plain_task": first["plain_task"],
        "signature": distinct("signature"),
        "protocol": distinct("protocol"),
        "model": distinct("model"),
        # a failed call marks the session failed (the list's filter finds it); else the calls' state
        "status": failed["status"] if failed else "running" if incomplete else "ok",
        "failed": failed is not None,
        "incomplete": incomplete,
        "error": failed["error"] if failed else None,
        "score": sum(scores) / len(scores) if scores else None,  # each call is scored on its own
        **{
            key: sum(row[key] or 0 for row in rows)
            for key in ("cost", "tokens", "calls", "turns", "subcalls")
        },
        "depth": max(row["depth"] for row in rows),
        "duration_s": sum(row["duration_s"] or 0 for row in rows),
        "created": min(row["created"] for row in rows),
        "child_of": None,
    }


# ------------------------------------------------------------------ the page
def embed_json(data: Any) -> str:
    """JSON that is safe inside <script>: no '<', '>', '&' or JS line separators survive raw,
    so a model reply holding '</script>' or '<!--' cannot end or confuse the script element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def _asset(name: str) -> str:
    return resources.files("rlmkit.view").joinpath(name).read_text(encoding="utf-8")


def render_page(payload: dict[str, Any], title: str = "rlmkit runs") -> str:
    """The whole page as one string (template + CSS + JS + data)."""
    page = _asset("template.html")
    # str.replace, not str.format: CSS and JS are full of braces
    for marker, value in (
        ("/*@CSS@*/", _asset("viewer.css")),
        ("/*@JS@*/", "\n".join(_asset(name) for name in JS_FILES)),
        ("@TITLE@", title.replace("&", "&amp;").replace("<", "&lt;")),
        ("@DATA@", embed_json(payload)),  # last: run data may contain the other markers' text
    ):
        page = page.replace(marker, value, 1)
    return page


def render_runs(paths: Iterable[str | os.PathLike[str]]) -> tuple[str, dict[str, Any]]:
    """Read the named logs and render them. Returns (html, payload)."""
    runs, problems = load_runs(find_logs(paths))
    payload = build_payload(runs, problems)
    return render_page(payload), payload


def write_page(
    paths: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str]
) -> tuple[Path, dict[str, Any]]:
    html, payload = render_runs(paths)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out, payload
