"""A scripted program for the ``rlmkit mcp`` tests, ``rlmkit mcp`` in a process of its own (stdio,
or ``--http`` on a free port), and the client side of the Tasks extension (its requests in the
SDK's types, and a ``ClientExtension`` that declares it).

``tests.helpers.mcp_programs:turns`` (context, question -> answer) counts its calls in a REPL
variable and answers in one turn, unless the question is ``slow``: then its first turn keeps
``found``, its second waits for the file ``$SERVE_TEST_GATE`` (after writing
``<gate>.waiting``) and keeps ``second``, and only a third turn would answer. A run stopped
between turns never answers; the REPL keeps what its finished turns made, and a later call says
so (``kept one/two``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from mcp import ClientSession, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.types import CallToolResult, Request, Result

import rlmkit
from rlmkit.cli.serve import API_KEY_ENV
from rlmkit.serve.mcp.tasks import TASKS_EXTENSION, CreateTaskResult, GetTaskResult, TaskParams
from rlmkit.testing import FunctionLM, is_root_request
from tests.helpers.replies import repl
from tests.helpers.serve_programs import MCP, ROOT

FIRST_TURN = """
try:
    calls += 1
except NameError:
    calls = 1
if question == 'slow':
    found = 'one'
    print('found', found)
else:
    try:
        kept = found + '/' + second
    except NameError:
        kept = 'nothing'
    SUBMIT(answer=f'{question}: call {calls}, context {len(context)} chars, kept {kept}')
"""


async def turns_model(messages: list[dict[str, Any]]) -> str:
    if not is_root_request({"messages": messages}):
        return "sub"
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if turn == 0:
        return repl(FIRST_TURN.strip())
    if turn == 1:
        gate = Path(os.environ["SERVE_TEST_GATE"])
        gate.with_name(gate.name + ".waiting").write_text("waiting")
        while not gate.exists():
            await asyncio.sleep(0.02)
        return repl("second = 'two'", "print('second', second)")
    return repl("SUBMIT(answer='ran past the stop')")


turns = rlmkit.RLM("context, question -> answer", lm=FunctionLM(turns_model), max_iterations=5)


# -- the client side of the Tasks extension: its requests, in the SDK's types ---------------
class TasksClient(ClientExtension):
    """Declares the Tasks extension in every request's capabilities (the SDK's ``Client``
    stamps them) and claims the ``task`` result shape: ``client.call_tool`` polls a task to its
    result; ``client.session.call_tool(..., allow_claimed=True)`` hands back the task itself."""

    identifier = TASKS_EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=_resolved)]


async def _resolved(created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
    task = await until_done(ctx.session, created.task_id)
    if task.status != "completed" or task.result is None:
        raise RuntimeError(f"task {task.status}: {task.status_message}")
    return CallToolResult.model_validate(task.result)


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"  # the extension routes tasks/* by Mcp-Name: the task id


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> GetTaskResult:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), GetTaskResult)


async def cancel_task(session: ClientSession, task_id: str) -> Result:
    return await session.send_request(CancelTask(params=TaskParams(task_id=task_id)), Result)


async def until_done(session: ClientSession, task_id: str, timeout: float = 60.0) -> GetTaskResult:
    """Poll ``tasks/get`` (at the interval the task asks for) until the task is terminal."""
    async with asyncio.timeout(timeout):
        while True:
            task = await get_task(session, task_id)
            if task.status in ("completed", "failed", "cancelled"):
                return task
            await asyncio.sleep((task.poll_interval_ms or 100) / 1000)


async def until_file(path: Path, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not path.exists():
            await asyncio.sleep(0.02)


# -- `rlmkit mcp` in a process of its own ----------------------------------------------------
def mcp_command(program: str, *flags: str) -> list[str]:
    return [*MCP, program, "--name", "ask_rlm", *flags]


def mcp_env(gate: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(API_KEY_ENV, None)
    if gate is not None:
        env["SERVE_TEST_GATE"] = str(gate)
    return env


def stdio_server(program: str, gate: Path | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=MCP[0], args=mcp_command(program)[1:], env=mcp_env(gate), cwd=str(ROOT)
    )


@contextlib.contextmanager
def http_server(program: str, *flags: str, gate: Path | None = None) -> Iterator[str]:
    """``rlmkit mcp PROGRAM --http`` on a free 127.0.0.1 port for the block: its ``/mcp`` URL, once
    uvicorn listens. The server is ended (and waited for) when the block ends."""
    server = subprocess.Popen(
        mcp_command(program, "--http", "--port", "0", *flags),
        env=mcp_env(gate),
        cwd=str(ROOT),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = None
        assert server.stdout is not None
        for line in server.stdout:  # uvicorn says where it listens once it does
            if "Uvicorn running on" in line:
                url = line.split("Uvicorn running on ")[1].split()[0] + "/mcp"
                break
        if url is None:
            raise AssertionError("the MCP server exited before listening")
        # the rest of its output is drained, so a chatty server never blocks on a full pipe
        threading.Thread(target=server.stdout.read, daemon=True).start()
        yield url
    finally:
        server.terminate()
        server.wait(30)
