"""The one loop of a run, written once (async); ``RLM.__call__`` is a thin sync wrapper.

    start sandbox (inputs cross once) -> loop: ask the root LM -> parse -> run each code block
    (sub-calls dispatch back here) -> protocol says whether it is over -> feed output back

The loop reads a frozen ``RunSpec`` (``spec.py``) and fills a ``RunState`` (``state.py``), inside
the ``Tree`` its whole call tree shares (``tree.py``); it never sees the ``RLM`` that built them.
``start.run_tree`` prepares a run and calls it; an ``rlm_query`` child run goes back there through
``start_child``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from typing import Any, Literal

from rlmkit import events as ev
from rlmkit.concurrency.threads import in_thread
from rlmkit.errors import BudgetExceeded, LMError, MaxIterationsError, RunCancelled, RunError
from rlmkit.models.contract import Completion
from rlmkit.prompting import (
    ANSWER_ACCEPTED,
    ANSWER_HELD,
    ANSWER_REJECTED,
    NO_CODE_BLOCK,
    REPLY_CUT,
    cell_output,
    feedback_message,
    system_prompt,
    task_message,
)
from rlmkit.protocols import Answer
from rlmkit.protocols.base import BLOCK_END
from rlmkit.run.call_tree import Tree
from rlmkit.run.guards import RESTORE_CALL, AnswerHold, Progress, input_guard
from rlmkit.run.hooks import CallHooks
from rlmkit.run.model_call import call_model
from rlmkit.run.state import RunState
from rlmkit.run.subcalls import StartChild, SubcallHost
from rlmkit.sandbox.base import AsyncHostFunction, CellResult, Sandbox
from rlmkit.trajectory import CodeBlock, Message, Trajectory, Turn, bounded


async def run_loop(
    state: RunState, variables: dict[str, Any], aliases: dict[str, str], start_child: StartChild
) -> dict[str, Any]:
    """Drive one run to validated outputs, or raise a RunError carrying the trajectory.
    ``start_child(inputs)`` runs one ``rlm_query``'s child run inside this run's tree."""
    spec, settings = state.spec, state.spec.settings
    traj = state.trajectory
    tree = state.tree
    protocol = settings.protocol
    host = SubcallHost(state, start_child)
    functions, prelude = host.functions()
    fields = spec.validator.fields
    # SUBMIT and FINAL only check the outputs and raise Finish: the loop calls them in place
    finishers = protocol.host_functions(state.submit, fields)
    functions.update({name: AsyncHostFunction.quick(fn) for name, fn in finishers.items()})
    lease = state.hooks  # a fresh worker of its own, or a session's live one
    sandbox = lease.sandbox(settings, tree.spending)
    run_start = time.monotonic()
    # Hashing a 100 MB input takes ~0.1 s of CPU: it runs in a thread (hashlib lets go of the GIL)
    # while the first request is out; the start record waits for it, and every later record
    # waits for the start record. Listeners of RunStarted see an empty sha256 until then.
    state.start_logged = asyncio.ensure_future(_log_start(state))
    ev.emit(ev.RunStarted(traj.meta, spec, variables))
    # The first request needs no REPL: it goes out while the inputs cross into the worker,
    # and a turn waits for the worker only before it runs code (``state.sandbox_ready``).
    guard = input_guard([*variables, *aliases])
    state.sandbox_ready = asyncio.ensure_future(
        lease.start(
            settings.sandbox,
            sandbox,
            {**variables, **{a: variables[n] for a, n in aliases.items()}},
            functions,
            "\n".join(p for p in (_IMPORTS, protocol.prelude, _SHOW_VARS, guard, prelude) if p),
        )
    )
    # The prompt promises sub-calls no more text than the sub-model can read (a small local
    # model reads far less than an API model; its traits say how much, as ``input_chars``).
    reading = spec.sub_lm.traits.input_chars
    shown = settings.display
    if reading and reading < shown.sub_model_chars:
        shown = dataclasses.replace(shown, sub_model_chars=reading)
    try:
        messages = [
            Message(
                role="system",
                content=system_prompt(
                    protocol=protocol,
                    signature=spec.signature,
                    instructions=spec.instructions,
                    function_docs=host.docs(shown.sub_model_chars),
                    demos=list(spec.demos),
                    display=shown,
                ),
            ),
            Message(
                role="user",
                content=task_message(
                    inputs=variables,
                    aliases=aliases,
                    signature=spec.signature,
                    display=settings.display,
                    max_iterations=settings.max_iterations,
                    earlier=state.hooks.notes,
                    current=state.hooks.asked,
                ),
            ),
        ]
        new_messages, keep, progress, hold = list(messages), 0, Progress(), AnswerHold()
        for index in range(settings.max_iterations + 1):
            if tree.control is not None:  # the caller asked to stop: between turns, never inside one
                tree.control.check_stop()
            # the one extra "answer now" turn, or earlier when the model keeps repeating itself
            last = index == settings.max_iterations or progress.force_answer
            turn = await _turn(state, sandbox, messages, new_messages, keep, index, last, progress, hold)
            if state.submitted is not None:
                traj.outputs = state.submitted
                traj.status = "ok"
                return state.submitted
            if last:
                turns = settings.max_iterations
                why = "repeating itself" if index < turns else f"{turns} turns"
                raise MaxIterationsError(f"no valid answer after {why} and a final request", trajectory=traj)
            keep = len(messages) + 1
            messages = messages + [
                Message(role="assistant", content=turn.reply),
                Message(role="user", content=turn.feedback or ""),
            ]
            new_messages = messages[keep:]
    except RunError as exc:
        exc.trajectory = traj
        traj.status = _status_of(exc)
        traj.error, traj.error_type = str(exc), type(exc).__name__
        raise
    except LMError as exc:
        exc.trajectory = traj
        traj.status, traj.error, traj.error_type = "error", str(exc), type(exc).__name__
        raise
    finally:
        traj.duration_s = time.monotonic() - run_start
        # The worker is released by a task of its own, waited for until it is done: a run
        # cancelled again while it ends (a client gone, then a server stopping) still closes it.
        settle, interrupted = asyncio.ensure_future(_settle(state, lease, sandbox)), False
        while not settle.done():
            try:
                await asyncio.shield(settle)
            except asyncio.CancelledError:
                interrupted = True  # raised again below, once the worker is closed
        settle.result()
        if tree.log is not None:
            tree.log.end(traj)
        ev.emit(ev.RunFinished(traj, sys.exc_info()[1]))
        if interrupted and sys.exc_info()[1] is None:
            raise asyncio.CancelledError  # cancelled while it ended: the caller's cancel stands


def _status_of(exc: RunError) -> Literal["budget_exceeded", "max_iterations", "cancelled", "error"]:
    if isinstance(exc, BudgetExceeded):
        return "budget_exceeded"
    if isinstance(exc, MaxIterationsError):
        return "max_iterations"
    return "cancelled" if isinstance(exc, RunCancelled) else "error"


async def _log_start(state: RunState) -> None:
    if state.hash_inputs is not None:
        await in_thread(state.hash_inputs)
    if state.tree.log is not None:
        state.tree.log.start(state.trajectory.meta)


async def _settle(state: RunState, lease: CallHooks, sandbox: Sandbox) -> None:
    """The end of a run's sandbox: never close a worker that is still starting, nor end a log
    whose start is not written; then give the worker back (closed, or to its session)."""
    await asyncio.wait([state.sandbox_ready, state.start_logged])
    for started in (state.sandbox_ready, state.start_logged):
        if not started.cancelled():
            started.exception()  # a start failure after an LM failure: already reported
    await lease.release(sandbox)


async def _turn(
    state: RunState,
    sandbox: Sandbox,
    messages: list[Message],
    new_messages: list[Message],
    keep: int,
    index: int,
    last: bool,
    progress: Progress,
    hold: AnswerHold,
) -> Turn:
    traj, tree = state.trajectory, state.tree
    settings, fields = state.spec.settings, state.spec.validator.fields
    protocol = settings.protocol
    if last:  # ask once for the answer, in the same user message (no two user messages in a row)
        answer_now = protocol.answer_now
        messages[-1] = Message(role="user", content=f"{messages[-1].content}\n\n{answer_now}")
        new_messages = messages[keep:]
    turn = Turn(index=index, keep=keep, new_messages=new_messages, reply="", started_s=tree.elapsed())
    ev.emit(ev.TurnStarted(turn, messages))
    start = time.monotonic()

    def record(completion: Completion) -> None:
        turn.lm_duration_s = time.monotonic() - start
        turn.reply, turn.model, turn.usage = completion.text, completion.model, completion.usage
        traj.usage = traj.usage.add(completion.usage)
        ev.emit(ev.ModelReply(turn, completion))

    try:
        request = [m.model_dump() for m in messages]
        ev.emit(ev.ModelRequest(turn, state.spec.lm, request))
        completion = await call_model(
            tree.spending,
            state.spec.lm,
            request,
            max_tokens=settings.max_tokens,
            stop=[*protocol.stop, *([BLOCK_END] if settings.blocks_per_turn == 1 else [])],
            record=record,
            rollout_id=tree.rollout_id,
        )
    except BudgetExceeded:
        await state.start_logged
        if turn.usage.calls:  # it answered, then passed a limit: keep the turn
            _finish_turn(traj, turn, start, tree)
        raise
    await state.start_logged  # a turn record never comes before the start record
    # shielded: a run cancelled while it waits here must not cancel the worker's start, which
    # would leave a worker starting in a thread that the run's end can no longer see to close
    await asyncio.shield(state.sandbox_ready)
    parsed = protocol.parse(completion.text)
    if settings.blocks_per_turn and len(parsed.code_blocks) > settings.blocks_per_turn:
        del parsed.code_blocks[settings.blocks_per_turn :]  # the rest was written before any output
    outputs: list[str] = []
    if completion.finish_reason == "length":
        outputs.append(REPLY_CUT)
    for code in parsed.code_blocks:
        block = CodeBlock(code=code)
        turn.blocks.append(block)
        state.current_block = block
        sandbox.limits = settings.sandbox_limits(tree.spending)  # a cell may not outlive the run's deadline
        ev.emit(ev.CellStarted(block, sandbox))
        try:
            # unless the cell ends the run, the worker puts back any input the cell rebound (one round trip)
            cell: CellResult = await sandbox.arun_then(code, RESTORE_CALL)
        except RunError as exc:  # a sub-call ended the run (e.g. the budget): the cell stopped there
            state.current_block = None
            block.error = f"{type(exc).__name__}: {exc}"
            ev.emit(ev.CellFinished(block, sandbox))
            _finish_turn(traj, turn, start, tree)
            raise
        state.current_block = None
        _fill_block(block, cell, settings.display.trajectory_chars)
        ev.emit(ev.CellFinished(block, sandbox))
        outputs.append(cell_output(cell, number=len(turn.blocks) if len(parsed.code_blocks) > 1 else None))
        if state.submitted is None and not cell.finished:
            outputs += _take_answer(state, protocol.answer(parsed, sandbox.get, fields, turn_over=False))
        if state.submitted is not None:
            break
    if state.submitted is None:
        outputs += _take_answer(state, protocol.answer(parsed, sandbox.get, fields, turn_over=True))
    if state.submitted is not None and settings.hold_unread_answers and not last:
        printed = any(block.stdout or block.stderr for block in turn.blocks)
        if hold.holds(state.submitted, printed):  # the model answers again once it has read the output
            turn.held, state.submitted = state.submitted, None
            shown = ", ".join(f"{name}={bounded(repr(value), 200)}" for name, value in turn.held.items())
            outputs = [out for out in outputs if out != ANSWER_ACCEPTED] + [ANSWER_HELD.format(shown=shown)]
    if not protocol.made_a_move(parsed):
        outputs.append(NO_CODE_BLOCK)
    if state.submitted is None and (nudge := progress.after(completion.text, parsed.code_blocks)):
        outputs.append(nudge)
    turn.final = state.submitted is not None
    turn.feedback = feedback_message(
        outputs, turn=index, max_iterations=settings.max_iterations, limit=settings.display.max_output_chars
    )
    _finish_turn(traj, turn, start, tree)
    return turn


def _finish_turn(traj: Trajectory, turn: Turn, start: float, tree: Tree) -> None:
    turn.duration_s = time.monotonic() - start
    traj.turns.append(turn)
    if tree.log is not None:
        tree.log.turn(traj.meta.run_id, turn)
    ev.emit(ev.TurnFinished(turn))


def _take_answer(state: RunState, found: Answer | None) -> list[str]:
    """Feedback on an answer the protocol found: accepted, rejected (why), or its problem."""
    if found is None:
        return []
    if found.problem is not None:
        return [found.problem]
    try:
        state.submit(found.outputs)
        return [ANSWER_ACCEPTED]
    except ValueError as exc:
        return [ANSWER_REJECTED.format(error=exc)]


def _fill_block(block: CodeBlock, cell: CellResult, limit: int) -> None:
    block.stdout = bounded(cell.stdout, limit)
    block.stderr = bounded(cell.stderr, limit)
    block.error = bounded(cell.error, limit) if cell.error else None
    block.timed_out, block.restarted, block.duration_s = cell.timed_out, cell.restarted, cell.duration_s


# Modules every RLM reaches for, already imported: a small model that copies a worked move
# without its import line otherwise loses a turn to a NameError.
_IMPORTS = "import re, math\nfrom collections import Counter, defaultdict\n"  # json: +0.3 MB per worker

_SHOW_VARS = """
def SHOW_VARS():
    for _k, _v in list(globals().items()):
        if not _k.startswith("_") and not callable(_v) and type(_v).__name__ != "module":
            _n = len(_v) if hasattr(_v, "__len__") else ""
            print(f"{_k}: {type(_v).__name__} {_n}")
"""
