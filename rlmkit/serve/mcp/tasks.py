"""A long run as an MCP Task: the Tasks extension (``io.modelcontextprotocol/tasks``) of the
2026-07-28 revision, on the ``mcp`` SDK's extension seam.

The ``mcp`` SDK (2.3) speaks the revision's core (no ``initialize`` handshake, no protocol
sessions, ``server/discover``, the per-request envelope) and gives extensions a seam: request
methods of their own and a ``tools/call`` interceptor (``mcp.server.extension``). The Tasks
extension itself is not in it (its 2025-11-25 task types are there, types only, never
dispatched), so it is built here on that seam, with the SDK's ``Result`` and ``RequestParams``
types, after the extension's specification:

- a client that declares the extension in its request's capabilities gets, for a long-running
  tool (the program's call, a REPL handle's ``_ask``), a ``CreateTaskResult``
  (``resultType: "task"``) at once, once its arguments are checked and its inputs read; a
  client that does not declare it waits for the result, as before;
- ``tasks/get`` polls: ``working`` (the status message says how many turns finished), then
  ``completed`` with the ``CallToolResult`` (an error the agent can act on is a completed
  result with ``isError``), ``failed`` with a JSON-RPC error (a fault of the server), or
  ``cancelled``;
- ``tasks/cancel`` asks the run to stop between turns: the turn in flight finishes, the next
  one never begins (nothing of it reaches the model), and what the finished turns made stays:
  in the REPL a handle names, and their text in the cancelled task's ``_meta``;
- ``tasks/update`` is acknowledged: a run never asks its client for input, so no response is
  outstanding and the extension says to ignore those;
- no ``notifications/tasks`` (optional in the extension): clients poll.
Task ids are 192 random bits (the extension lets them be bearer names of the task); tasks are
kept ``TASK_TTL_S`` after they begin, in this process.
"""

from __future__ import annotations

import asyncio
import contextvars
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    RequestParams,
    Result,
    TextContent,
)
from mcp.types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from rlmkit import events as ev
from rlmkit.errors import RLMKitError
from rlmkit.serve.errors import APIError
from rlmkit.serve.reasoning import add_reasoning

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_TTL_S = 3600.0  # a finished task's result is kept this long after the task began
POLL_INTERVAL_MS = 500
TURNS_META_KEY = "io.rlmkit/turns"  # a cancelled task's finished turns, as a stream shows them

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
Follow = Callable[[ev.Event], Awaitable[None]]
Work = Callable[[Follow | None], Awaitable[str]]


# -- the extension's wire types, on the SDK's (camelCase aliases, ``_meta``, ``resultType``) --
class TaskFields(Result):
    """The extension's ``Task``, flat on a result."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class CreateTaskResult(TaskFields):
    """What ``tools/call`` answers in lieu of a ``CallToolResult``."""

    result_type: Literal["task"] = "task"


class GetTaskResult(TaskFields):
    """``tasks/get``: the task, with its result (completed) or its error (failed)."""

    result_type: Literal["complete"] = "complete"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel``."""

    task_id: str


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict)


def _now() -> str:
    return datetime.now(UTC).isoformat()


# -- one task ------------------------------------------------------------------------------
@dataclass
class RunTask:
    """A run going on after the request that began it, and what it came to."""

    task_id: str
    begun: float  # loop time, for the TTL
    created_at: str = field(default_factory=_now)
    last_updated_at: str = ""
    status: TaskStatus = "working"
    status_message: str | None = "the run began"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    turns: list[str] = field(default_factory=list)  # each finished root turn, as a stream shows it
    finished_turns: int = 0
    stop_asked: bool = False
    runner: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.last_updated_at = self.created_at

    def _fields(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "status": self.status,
            "status_message": self.status_message,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "ttl_ms": int(TASK_TTL_S * 1000),
            "poll_interval_ms": POLL_INTERVAL_MS,
        }

    def created(self) -> CreateTaskResult:
        return CreateTaskResult(**self._fields())

    def detailed(self) -> GetTaskResult:
        meta = {TURNS_META_KEY: self.turns} if self.status == "cancelled" else None
        return GetTaskResult(**self._fields(), result=self.result, error=self.error, _meta=meta)

    def update(self, status: TaskStatus, message: str) -> None:
        self.status, self.status_message, self.last_updated_at = status, message, _now()

    async def follow(self, event: ev.Event) -> None:
        add_reasoning(self.turns, event)
        if type(event) is ev.TurnFinished and not event.depth and event.error is None:  # not one cut short
            self.finished_turns += 1
            self.update(self.status, f"{self.finished_turns} turn(s) finished")

    def stop_between_turns(self, event: ev.Event) -> None:
        """An event listener of the run, called in the run's own task as each event happens.
        Once a stop is asked, the start of the next root turn ends the run there: raised at that
        moment, nothing of the turn has been sent. (``Task.cancel()`` would land at the run's
        next suspension, after the model may already have been asked.)"""
        if self.stop_asked and type(event) is ev.TurnStarted and not event.depth:
            raise asyncio.CancelledError


def _tool_result(text: str, is_error: bool = False) -> dict[str, Any]:
    """The ``CallToolResult`` the tool gives when the client waits (its structured ``result`` too)."""
    structured = None if is_error else {"result": text}
    result = CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured, is_error=is_error
    )
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


class TaskStore:
    """The tasks of one server: begun, polled, stopped; ended with the server."""

    def __init__(self, *, max_running: int = 16):
        self.max_running = max_running
        self.tasks: dict[str, RunTask] = {}

    def running(self) -> int:
        return sum(1 for task in self.tasks.values() if task.status == "working")

    def _forget_expired(self) -> None:
        now = asyncio.get_running_loop().time()
        for task_id in [t.task_id for t in self.tasks.values() if now - t.begun > TASK_TTL_S]:
            if self.tasks[task_id].status != "working":
                del self.tasks[task_id]

    def begin(self, work: Work, describe_error: Callable[[Exception], str]) -> RunTask:
        """The task of ``work``, already running (a ``tasks/get`` for it resolves at once)."""
        self._forget_expired()
        task = RunTask(secrets.token_urlsafe(24), asyncio.get_running_loop().time())
        self.tasks[task.task_id] = task
        # its own context: the request's (its offer, its log target) is not the run's
        task.runner = asyncio.create_task(
            self._drive(task, work, describe_error), context=contextvars.Context()
        )
        return task

    async def _drive(self, task: RunTask, work: Work, describe_error: Callable[[Exception], str]) -> None:
        try:
            with ev.listen(task.stop_between_turns):
                answer = await work(task.follow)
            task.result = _tool_result(answer)
            task.update("completed", f"answered after {task.finished_turns} turn(s)")
        except asyncio.CancelledError:
            stopped = task.stop_asked and not asyncio.current_task().cancelling()  # type: ignore[union-attr]
            why = "a stop was asked" if stopped else "the server stopped"
            task.update(
                "cancelled", f"cancelled between turns ({why}): {task.finished_turns} turn(s) finished"
            )
            if not stopped:
                raise
        except (RLMKitError, APIError) as exc:  # the agent's to act on: a result, as the tool gives it
            task.result = _tool_result(describe_error(exc), is_error=True)
            task.update("completed", f"ended with an error after {task.finished_turns} turn(s)")
        except Exception as exc:  # noqa: BLE001 - a fault of the server: the task fails, the server goes on
            task.error = {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}
            task.update("failed", "the run failed inside the server")

    def get(self, task_id: str) -> RunTask:
        task = self.tasks.get(task_id)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")
        return task

    async def close_all(self) -> None:
        runners = [t.runner for t in self.tasks.values() if t.runner is not None and not t.runner.done()]
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)


# -- handing a tool's run to a task ---------------------------------------------------------
class TaskOffer:
    """Set while a tool of a task-declaring client runs: the tool hands its prepared run here
    (arguments checked, inputs read) instead of waiting for it."""

    def __init__(self) -> None:
        self.work: Work | None = None

    def take(self, work: Work) -> None:
        self.work = work


_offer: contextvars.ContextVar[TaskOffer | None] = contextvars.ContextVar("rlmkit_mcp_task", default=None)


def offered_task() -> TaskOffer | None:
    """The task a tool's run may go to (None: the client waits for the result)."""
    return _offer.get()


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client takes tasks: it declared the extension, on a 2026-07-28
    wire (a handshake-era wire cannot carry the ``task`` result shape)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS_EXTENSION in capabilities.extensions)


class TasksExtension(Extension):
    identifier = TASKS_EXTENSION

    def __init__(
        self, store: TaskStore, task_tools: Sequence[str], describe_error: Callable[[Exception], str]
    ):
        self.store, self.task_tools, self.describe_error = store, frozenset(task_tools), describe_error

    def methods(self) -> Sequence[MethodBinding]:
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            MethodBinding("tasks/get", TaskParams, self._get, protocol_versions=modern),
            MethodBinding("tasks/update", UpdateTaskParams, self._update, protocol_versions=modern),
            MethodBinding("tasks/cancel", TaskParams, self._cancel, protocol_versions=modern),
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if params.name not in self.task_tools or not declares_tasks(ctx):
            return await call_next(ctx)
        if self.store.running() >= self.store.max_running:  # refused before anything is read
            text = f"{self.store.running()} tasks are running, the most this server runs: retry later"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        offer = TaskOffer()
        token = _offer.set(offer)
        try:
            result = await call_next(ctx)
        finally:
            _offer.reset(token)
        if offer.work is None:  # refused before its run began (bad arguments, a missing input)
            return result
        return self.store.begin(offer.work, self.describe_error).created()

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        require_client_extension(ctx, TASKS_EXTENSION)
        return self.store.get(params.task_id).detailed()

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> HandlerResult:
        require_client_extension(ctx, TASKS_EXTENSION)
        self.store.get(params.task_id)  # a run asks for no input: any response is ignored
        return EmptyResult(result_type="complete")

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        require_client_extension(ctx, TASKS_EXTENSION)
        task = self.store.get(params.task_id)
        if task.status == "working":
            task.stop_asked = True
            task.update(
                "working", f"stopping after the turn in flight: {task.finished_turns} turn(s) finished"
            )
        return EmptyResult(result_type="complete")
