"""Scripted programs the serving tests put behind the API: each answer is computed in the REPL
from the request's own inputs, so an answer that reached the wrong request cannot match it.

``module:attr`` names for ``rlmkit serve`` / ``rlmkit mcp`` run in a subprocess:
``tests.helpers.serve_programs:qa`` (context, question -> answer) and ``tests.helpers.serve_programs:typed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import rlmkit
from rlmkit.serve import app, running
from rlmkit.testing import FunctionLM, is_root_request
from tests.helpers.replies import repl

SUB_MARK = "SUB:"  # a prompt the scripted code sends to llm_query starts with it


def qa_model(messages: list[dict]) -> str:
    """Root: one turn that reads the context, asks a sub-model and answers from the inputs."""
    if not is_root_request({"messages": messages}):
        return "sub-answer"
    return repl(
        "n = len(context)",
        "print('context chars:', n)",
        f"note = llm_query('{SUB_MARK} say something')",
        "SUBMIT(answer=f'{question.upper()} ({n} chars)')",
    )


def typed_model(messages: list[dict]) -> str:
    return repl("SUBMIT(total=sum(numbers) * factor, label=f'x{factor}')")


def counting_model(messages):
    """Each call adds one to a REPL variable that only a live (or restored) session still has."""
    if not is_root_request({"messages": messages}):
        return "sub"
    return repl(
        "try:\n    count += 1\nexcept NameError:\n    count = 1",
        "SUBMIT(answer=f'{question}: call {count}, context {len(context)} chars')",
    )


def counting_rlm() -> rlmkit.RLM:
    return rlmkit.RLM("context, question -> answer", lm=FunctionLM(counting_model))


def qa_rlm(**kwargs) -> rlmkit.RLM:
    return rlmkit.RLM("context, question -> answer", lm=FunctionLM(qa_model), **kwargs)


def typed_rlm(**kwargs) -> rlmkit.RLM:
    return rlmkit.RLM(
        "numbers: list[int], factor: int -> total: int, label: str", lm=FunctionLM(typed_model), **kwargs
    )


async def gated_model(messages: list[dict]) -> str:
    """Root: waits for the file $SERVE_TEST_GATE (after writing ``<gate>.waiting``), then answers
    the question: a call held in flight for as long as a test needs, across processes."""
    if not is_root_request({"messages": messages}):
        return "sub-answer"
    gate = Path(os.environ["SERVE_TEST_GATE"])
    gate.with_name(gate.name + ".waiting").write_text("waiting")
    while not gate.exists():
        await asyncio.sleep(0.02)
    return repl("SUBMIT(answer=question)")


def looping_rlm() -> rlmkit.RLM:
    """Never answers: its one turn runs out, so the run fails after its reasoning began."""
    return rlmkit.RLM(
        "context, question -> answer",
        lm=FunctionLM(lambda m: repl("print('still looking')")),
        max_iterations=1,
    )


qa = qa_rlm()
counting = counting_rlm()
typed = typed_rlm()
gated = rlmkit.RLM("context, question -> answer", lm=FunctionLM(gated_model))


@contextlib.contextmanager
def served(program, **options) -> Iterator[str]:
    """The program's API on 127.0.0.1 (a free port) for the block: its ``/v1`` base URL."""
    with running(app(program, **options)) as url:
        yield f"{url}/v1"


ROOT = Path(__file__).resolve().parents[2]
# A verb in a process of its own, as typer runs it, without loading every other verb the installed
# distribution's entry points name. -P: the import path does not start at the working folder, as
# it does not for the installed ``rlmkit`` script.
SERVE = [sys.executable, "-P", "-c", "import typer; from rlmkit.cli.serve import serve; typer.run(serve)"]
MCP = [sys.executable, "-P", "-c", "import typer; from rlmkit.cli.mcp import mcp; typer.run(mcp)"]


def serving_url(server: subprocess.Popen) -> str:
    """The ``/v1`` URL uvicorn reports once it listens (port 0: it picks one)."""
    for line in server.stdout:
        if "Uvicorn running on" in line:
            return line.split("Uvicorn running on ")[1].split()[0] + "/v1"
    raise AssertionError("the server exited before listening")


MY_MODULE = """
import rlmkit
from rlmkit.testing import FunctionLM

program = rlmkit.RLM(
    "context, question -> answer",
    lm=FunctionLM(lambda messages: "```repl\\nSUBMIT(answer='from mymodule: ' + question)\\n```"),
)
"""


def write_module(folder: Path) -> None:
    """``mymodule.py`` in ``folder``: ``mymodule:program`` answers "from mymodule: <question>"."""
    (folder / "mymodule.py").write_text(MY_MODULE)
