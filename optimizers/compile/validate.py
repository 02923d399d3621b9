"""Reject what training libraries accept silently and then train wrongly on.

TRL and ``datasets`` take a role "usr", a conversation without an assistant turn, and
invalid JSON in tool-call arguments without a word. ``validate_rows`` checks every row of
a dataset kind (``schema.ROW_MODELS``) and raises ``DatasetValidationError`` listing each
problem with the row's position and id; ``validate_dataset`` checks a written folder
against its manifest too (file hashes, tasks on both sides of the split).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optimizers.compile.errors import DatasetValidationError
from optimizers.compile.schema import ROW_MODELS

ROLES = ("system", "user", "assistant", "tool")
MESSAGE_KEYS = ("prompt", "completion", "messages", "chosen", "rejected")
# which message lists must hold an assistant turn, per kind
NEEDS_ASSISTANT = {
    "sft": ("completion", "messages"),
    "rl_group": ("completion",),
    "dpo": ("chosen", "rejected"),
    "rl": (),
}
MAX_LISTED = 20


def validate_rows(
    rows: Iterable[dict[str, Any] | str], *, kind: str | None = None, source: str = "rows"
) -> int:
    """Check rows (dicts or JSONL lines); returns how many. Raises DatasetValidationError on any problem."""
    problems: list[str] = []
    seen_ids: dict[str, int] = {}
    count = 0
    for number, row in enumerate(rows, 1):
        count += 1
        where = f"{source} row {number}"
        if isinstance(row, str):
            try:
                row = json.loads(row)
            except ValueError as exc:
                problems.append(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})")
                continue
        if not isinstance(row, dict):
            problems.append(f"{where}: a row must be a JSON object, got {type(row).__name__}")
            continue
        row_id = row.get("id")
        where += f" (id {row_id!r})"
        if isinstance(row_id, str):
            if row_id in seen_ids:
                problems.append(f"{where}: duplicate id, first seen at row {seen_ids[row_id]}")
            seen_ids.setdefault(row_id, number)
        problems += [f"{where}: {p}" for p in row_problems(row, kind)]
    if problems:
        listed = problems[:MAX_LISTED]
        more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise DatasetValidationError(
            f"{len(problems)} problem(s) in {source}:\n  " + "\n  ".join(listed) + more, problems
        )
    return count


def row_problems(row: dict[str, Any], kind: str | None = None) -> list[str]:
    """Every problem of one row, in words (empty list: the row is fine)."""
    row_kind = row.get("kind", kind)
    if kind is not None and row_kind != kind:
        return [f"kind is {row_kind!r}, expected {kind!r}"]
    if row_kind not in ROW_MODELS:
        return [f"unknown kind {row_kind!r}; known: {sorted(ROW_MODELS)}"]
    problems: list[str] = []
    for key in MESSAGE_KEYS:
        if key in row:
            problems += _message_problems(key, row[key])
    for key in NEEDS_ASSISTANT[row_kind]:
        messages = row.get(key)
        if isinstance(messages, list) and not any(
            isinstance(m, dict) and m.get("role") == "assistant" for m in messages
        ):
            problems.append(f"'{key}' has no assistant message: nothing to train on")
    if not problems:
        for name, conversation in _conversations(row, row_kind):
            problems += _order_problems(name, conversation)
    prompt = row.get("prompt")
    last_role = (
        prompt[-1].get("role")
        if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict)
        else None
    )
    if row_kind in ("rl", "rl_group", "dpo") and last_role is not None and last_role not in ("user", "tool"):
        problems.append(f"'prompt' must end with a user or tool message, not {last_role!r}")
    if row.get("tools") is not None:
        problems += _json_problem("'tools'", row["tools"], expect=list)
    if problems:
        return problems
    try:
        ROW_MODELS[row_kind].model_validate(row)
    except ValidationError as exc:
        for error in exc.errors():
            location = ".".join(str(part) for part in error["loc"]) or "row"
            problems.append(f"{location}: {error['msg']}")
    return problems


def _message_problems(key: str, messages: Any) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return [f"'{key}' must be a non-empty list of messages"]
    problems = []
    for position, message in enumerate(messages):
        where = f"'{key}' message {position}"
        if not isinstance(message, dict):
            problems.append(f"{where} is not an object")
            continue
        role = message.get("role")
        if role not in ROLES:
            close = difflib.get_close_matches(str(role), ROLES, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(f"{where} has role {role!r}{hint} (allowed: {', '.join(ROLES)})")
        if not isinstance(message.get("content"), str):
            problems.append(f"{where} content must be a string, got {type(message.get('content')).__name__}")
        for call_number, call in enumerate(message.get("tool_calls") or []):
            arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
            problems += _json_problem(f"{where} tool call {call_number} arguments", arguments, expect=dict)
    return problems


def _conversations(row: dict[str, Any], kind: str) -> list[tuple[str, list[dict]]]:
    """The whole conversations a trainer renders from a row, by kind."""
    prompt = row.get("prompt") or []
    if kind == "sft":
        return [("messages", row.get("messages") or [])]
    if kind == "rl_group":
        return [("prompt + completion", prompt + (row.get("completion") or []))]
    if kind == "dpo":
        return [("prompt + chosen", prompt + row["chosen"]), ("prompt + rejected", prompt + row["rejected"])]
    return [("prompt", prompt)]


def _order_problems(name: str, messages: list[dict]) -> list[str]:
    """A system message only first, and no two user or two assistant messages in a row: TRL
    renders such a conversation silently, but many chat templates (and llama.cpp) refuse it."""
    problems = []
    for position, message in enumerate(messages):
        role = message.get("role")
        if role == "system" and position > 0:
            problems.append(f"{name}: system message at position {position} (only the first may be system)")
        if position and role in ("user", "assistant") and messages[position - 1].get("role") == role:
            problems.append(
                f"{name}: two {role} messages in a row at positions {position - 1} and {position}"
            )
    return problems


def _json_problem(what: str, text: Any, *, expect: type) -> list[str]:
    if not isinstance(text, str):
        return [f"{what} must be a JSON string, got {type(text).__name__}"]
    try:
        value = json.loads(text)
    except ValueError as exc:
        return [f"{what} is not valid JSON ({exc.msg} at column {exc.colno}): {text[:60]!r}"]
    if not isinstance(value, expect):
        return [f"{what} must decode to a JSON {'object' if expect is dict else 'array'}"]
    return []


def validate_file(path: str | Path, *, kind: str | None = None) -> int:
    with open(path, encoding="utf-8") as fh:
        return validate_rows((line for line in fh if line.strip()), kind=kind, source=str(path))


def validate_dataset(directory: str | Path) -> dict[str, int]:
    """Validate every file a manifest lists: rows, sha256, and that no task is on both sides."""
    directory = Path(directory)
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        raise DatasetValidationError(f"{directory} has no manifest.json", [f"{directory}: no manifest.json"])
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    problems: list[str] = []
    counts: dict[str, int] = {}
    sides: dict[str, set[str]] = {"train": set(), "validation": set()}
    for name, info in manifest["files"].items():
        path = directory / name
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != info["sha256"]:
            problems.append(f"{name}: sha256 differs from the manifest (file changed after it was written)")
        kind = "rl_group" if name.startswith("groups_") else manifest["kind"]
        counts[name] = validate_file(path, kind=kind)
        side = "validation" if name.endswith("validation.jsonl") else "train"
        sides[side].update(json.loads(line)["task_id"] for line in data.decode("utf-8").splitlines() if line)
    both = sides["train"] & sides["validation"]
    if both:
        problems.append(f"{len(both)} task(s) in both train and validation, e.g. {min(both)!r}")
    if problems:
        raise DatasetValidationError(f"{directory}:\n  " + "\n  ".join(problems), problems)
    return counts
