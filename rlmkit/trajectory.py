"""Trajectories: everything a run did, as pydantic data.

What a trajectory holds (and what it never holds):
- run metadata: models, protocol, limits, signature. Never API keys.
- every root turn: the messages sent (stored as a delta against the previous turn, so a
  log stays linear in turns; ``Trajectory.turn_messages(i)`` rebuilds them byte for byte),
  the reply, each code block with stdout / stderr / error / duration, and every sub-call
  made from that block (child RLM runs nest their whole trajectory).
- inputs as ``VariableInfo``: type, size, sha256 and a short preview, never the body, so a
  log's size does not grow with the context.

``TrajectoryLog`` streams runs to JSONL as they go: one line per event, each line flushed
whole, so a crash leaves every finished turn readable. ``TrajectoryLog.read`` rebuilds the
runs and skips (and counts) lines it cannot parse.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TypedDict, TypeVar, overload  # Any: outputs, tags: the user's values

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1
M = TypeVar("M")  # a rendered message: a Message, or a caller's own form of one
log = logging.getLogger("rlmkit")
PREVIEW_CHARS = 200


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str

    def chat(self) -> ChatMessage:
        return {"role": self.role, "content": self.content}


class ChatMessage(TypedDict):
    """One message as a model reads it (``Message.chat()``): what ``Model.acomplete`` is sent."""

    role: Literal["system", "user", "assistant"]
    content: str


class Usage(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    cached_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost=self.cost + other.cost,
            cached_calls=self.cached_calls + other.cached_calls,
        )


class VariableInfo(BaseModel):
    """What a trajectory keeps of an input: never the body."""

    name: str
    type: str
    size: int  # characters for text, items for list/dict, bytes for files
    sha256: str
    preview: str


class SubCall(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    kind: Literal["llm_query", "typed", "rlm_query", "tool", "mcp_tool", "client_tool"]
    name: str  # function name in the REPL (llm_query, classify, ...)
    model: str | None = None
    depth: int = 1
    prompt: str = ""  # bounded copy (see Trajectory limits)
    messages: list[Message] | None = (
        None  # the full request, when it is more than one user prompt (typed calls)
    )
    reply: str = ""  # bounded copy
    usage: Usage = Field(default_factory=Usage)
    started_s: float = 0.0  # seconds since the run started
    duration_s: float = 0.0
    error: str | None = None
    batch: int | None = None  # index within a batched call, if any
    child: Trajectory | None = None  # the child RLM's whole run, for rlm_query


class CodeBlock(BaseModel):
    code: str
    stdout: str = ""  # bounded copy (head + tail)
    stderr: str = ""
    error: str | None = None  # traceback text of an exception the cell raised
    timed_out: bool = False
    restarted: bool = False  # the worker was killed and restarted after this cell
    duration_s: float = 0.0
    subcalls: list[SubCall] = Field(default_factory=list)


class Turn(BaseModel):
    index: int
    keep: int  # messages of (previous turn's messages + its reply) reused as this turn's prefix
    new_messages: list[Message]  # appended after the kept prefix
    reply: str
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    started_s: float = 0.0
    duration_s: float = 0.0  # LM time + code time
    lm_duration_s: float = 0.0
    blocks: list[CodeBlock] = Field(default_factory=list)
    feedback: str | None = None  # what the model is told after this turn (the next user message)
    final: bool = False  # this turn ended the run
    held: dict[str, object] | None = (
        None  # an answer given before its turn's output was read (hold_unread_answers)
    )

    def prompt(self, before: list[M], new: list[M] | None = None) -> list[M | Message]:
        kept: list[M | Message] = list(before[: self.keep])
        """The messages this turn sent, from ``before`` (the previous turn's messages and its
        reply): the first ``keep`` of them, then this turn's new ones. The one rule for rebuilding
        a prompt; ``new`` is the new messages as a caller renders them (a compiler's dicts)."""
        return kept + (list(self.new_messages) if new is None else new)


class Compaction(BaseModel):
    """What a session call's task message summarised or left out to stay within its share of the
    root model's window. Only the message shrinks: every REPL variable stays in the REPL."""

    window_tokens: int  # the root model's context window
    limit_chars: int  # the task message's allowance: a share of the window, at ~4 characters a token
    full_chars: int  # the task message as it would have been, uncompacted
    task_chars: int  # the task message as sent (over limit_chars only when nothing more could go)
    summarised_calls: list[int] = Field(default_factory=list)  # session calls shown as one short line
    left_out_calls: list[int] = Field(default_factory=list)  # session calls only counted
    unlisted_variables: list[str] = Field(default_factory=list)  # live, left to SHOW_VARS()


class RunMeta(BaseModel):
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    parent_id: str | None = None
    depth: int = 0
    signature: str
    instructions: str = ""
    protocol: str
    sandbox: str
    model: str | None = None
    sub_model: str | None = None
    limits: dict[str, object] = Field(default_factory=dict)
    inputs: list[VariableInfo] = Field(default_factory=list)
    task: dict[str, Any] = Field(default_factory=dict)  # free-form: suite, example id, seed ...
    created: float = Field(default_factory=time.time)
    rlmkit_version: str = ""
    schema_version: int = SCHEMA_VERSION
    # a call of a session: {"id", "call" (1, 2, ...), "restored" (why its REPL was rebuilt), "lost"}
    session: dict[str, Any] = Field(default_factory=dict)
    compaction: Compaction | None = None  # a session call whose task message was compacted


# A root turn that ran no code, as ``Trajectory.steps()`` shows it (the model was told so too).
NOT_PYTHON = "[Error] the reply's code block is not a ```repl, ```python or ```py block: nothing ran"
NO_CODE = "[Error] the reply had no code block: nothing ran"


class Trajectory(BaseModel):
    meta: RunMeta
    turns: list[Turn] = Field(default_factory=list)
    outputs: dict[str, Any] | None = None
    status: Literal["running", "ok", "error", "budget_exceeded", "max_iterations", "cancelled"] = "running"
    error: str | None = None
    error_type: str | None = None
    score: float | None = None  # filled by evaluation
    usage: Usage = Field(default_factory=Usage)  # root turns + every sub-call, children included
    duration_s: float = 0.0

    # -- rebuilding prompts ------------------------------------------------------
    def turn_messages(self, index: int) -> list[Message]:
        """The exact messages sent to the root model at turn ``index``."""
        messages: list[Message] = []
        for turn in self.turns[: index + 1]:
            messages = turn.prompt(messages)
            if turn.index == index:
                return messages
            messages = messages + [Message(role="assistant", content=turn.reply)]
        raise IndexError(f"no turn {index} in trajectory {self.meta.run_id}")

    def iter_subcalls(self, recursive: bool = True) -> Iterator[SubCall]:
        for turn in self.turns:
            for block in turn.blocks:
                for call in block.subcalls:
                    yield call
                    if recursive and call.child is not None:
                        yield from call.child.iter_subcalls(recursive=True)

    @property
    def n_turns(self) -> int:
        return len(self.turns)

    # -- read as dspy.RLM's list of steps ----------------------------------------------
    # DSPy programs read ``pred.trajectory`` as a list of {"reasoning", "code", "output"}
    # dicts, one per iteration: ``len``, iteration and ``[i]`` give that view of the turns,
    # while every field above stays as it is.
    def steps(self) -> list[dict[str, str]]:
        """One dict per root turn: the reply's text before its code, the code, and its output."""
        found = []
        for turn in self.turns:
            outputs = [
                "\n".join(
                    part for part in (b.stdout.rstrip("\n"), f"[Error] {b.error}" if b.error else "") if part
                )
                for b in turn.blocks
            ]
            if not turn.blocks and not turn.final:  # dspy's view: a step whose code could not run
                outputs = [NOT_PYTHON if "```" in turn.reply else NO_CODE]
            found.append(
                {
                    "reasoning": turn.reply.split("```", 1)[0].strip(),
                    "code": "\n\n".join(b.code for b in turn.blocks),
                    "output": "\n".join(outputs),
                }
            )
        return found

    def __len__(self) -> int:
        return len(self.turns)

    @overload
    def __getitem__(self, index: int) -> dict[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, str]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, str] | list[dict[str, str]]:
        return self.steps()[index]

    # pydantic's BaseModel iterates its fields; a trajectory iterates its steps, as dspy's does
    def __iter__(self) -> Iterator[dict[str, str]]:  # type: ignore[override]
        return iter(self.steps())

    def __bool__(self) -> bool:
        return True  # a trajectory with no turn yet is still a trajectory


SubCall.model_rebuild()


# ------------------------------------------------------------------ helpers
def bounded(text: str, limit: int) -> str:
    """Head + tail of ``text`` within about ``limit`` characters, saying what was cut."""
    if text is None:
        return ""
    if len(text) <= limit:
        return text
    half = max(1, limit // 2)
    cut = len(text) - 2 * half
    return f"{text[:half]}\n... [{cut:,} characters cut] ...\n{text[-half:]}"


def drop_torn_tail(path: str | os.PathLike[str]) -> int:
    """Cut a half-written last line (a killed writer's) off a JSONL file before appending to it,
    so the next record is not glued onto it. Returns the bytes dropped."""
    path = Path(path)
    if not path.exists():
        return 0
    with open(path, "rb+") as fh:
        data = fh.read()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        fh.truncate(keep)
        return len(data) - keep


# ------------------------------------------------------------------ JSONL log
class TrajectoryLog:
    """Streams runs to ``<dir>/<run_id>.jsonl`` and reads them back.

    Event lines: ``{"event": "start", "meta": ...}``, ``{"event": "turn", "turn": ...}``,
    ``{"event": "end", "trajectory": {...without turns...}}``. Each line goes straight to the
    file (no buffer), so a reader never sees half a line except the last line of a run that
    was killed mid-write, which ``read`` skips and counts.

    A line that cannot be written whole (the disk is full, the file too large) is cut back
    off the file, and that run's log stops there: the file keeps the run's start and every
    line before the failure, each whole, and the run itself goes on. ``failed`` maps such a
    run's id to the error, which is also logged once as a warning.
    """

    def __init__(self, directory: str | os.PathLike[str]):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.failed: dict[str, str] = {}

    def path(self, run_id: str) -> Path:
        return self.dir / f"{run_id}.jsonl"

    def _append(self, run_id: str, record: dict[str, object]) -> None:
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            if run_id in self.failed:  # a later line after a lost one would leave a gap
                return
            try:
                fd = os.open(self.path(run_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                self._give_up(run_id, exc)
                return
            try:
                size = os.fstat(fd).st_size
                done = 0
                while done < len(line):  # a full disk takes part of a line, then refuses the rest
                    done += os.write(fd, line[done:])
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)  # the torn line goes: every line left is whole
                self._give_up(run_id, exc)
            finally:
                os.close(fd)

    def _give_up(self, run_id: str, exc: OSError) -> None:
        self.failed[run_id] = f"{type(exc).__name__}: {exc}"
        log.warning("the trajectory log of run %s stops here: %s", run_id, self.failed[run_id])

    def start(self, meta: RunMeta) -> None:
        self._append(meta.run_id, {"event": "start", "meta": meta.model_dump(mode="json")})

    def turn(self, run_id: str, turn: Turn) -> None:
        self._append(run_id, {"event": "turn", "turn": turn.model_dump(mode="json")})

    def end(self, trajectory: Trajectory) -> None:
        summary = trajectory.model_dump(mode="json", exclude={"turns"})
        self._append(trajectory.meta.run_id, {"event": "end", "trajectory": summary})

    def write(self, trajectory: Trajectory) -> Path:
        """Write a finished trajectory in one go (same format as streaming)."""
        self.start(trajectory.meta)
        for turn in trajectory.turns:
            self.turn(trajectory.meta.run_id, turn)
        self.end(trajectory)
        if trajectory.meta.run_id in self.failed:
            raise OSError(f"the trajectory was not written whole: {self.failed[trajectory.meta.run_id]}")
        return self.path(trajectory.meta.run_id)

    # -- reading -------------------------------------------------------------
    def runs(self) -> list[Trajectory]:
        return [traj for path in sorted(self.dir.glob("*.jsonl")) for traj in read_runs(path)[0]]


def read_runs(path: str | os.PathLike[str]) -> tuple[list[Trajectory], int]:
    """Read the runs in one JSONL file. Returns (runs, number of unreadable lines)."""
    runs: dict[str, Trajectory] = {}
    bad = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                event = record["event"]
                if event == "start":
                    meta = RunMeta.model_validate(record["meta"])
                    runs[meta.run_id] = Trajectory(meta=meta)
                elif event == "turn":
                    turn = Turn.model_validate(record["turn"])
                    # a turn belongs to the last started run in this file
                    next(reversed(runs.values())).turns.append(turn)
                elif event == "end":
                    data = record["trajectory"]
                    run_id = data["meta"]["run_id"]
                    turns = runs[run_id].turns if run_id in runs else []
                    runs[run_id] = Trajectory.model_validate({**data, "turns": []})
                    runs[run_id].turns = turns
                else:
                    bad += 1
            except (ValueError, KeyError, StopIteration, TypeError):
                bad += 1
    return list(runs.values()), bad
