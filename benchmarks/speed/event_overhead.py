"""What the event hooks add to one root turn (a benchmark row, not a test).

    python benchmarks/speed/event_overhead.py

A "turn" here is exactly what the hooks in rlmkit/run/loop.py and subcalls.py emit for a turn with one
code cell that makes two sub-calls: TurnStarted, ModelRequest, ModelReply, CellStarted,
4 events per sub-call x 2, CellFinished, TurnFinished (12 events), plus the context copy the
cell's thread starts with. Measured three ways:

- nothing registered: no listener, no callback, DSPy history off (``dspy.context(disable_history=True)``);
- DSPy's default: history on (every model call goes to ``dspy.inspect_history()``), nothing else,
  with DSPy's global history empty at the start of each sample, and full (10,000 entries: DSPy then
  drops the oldest from the front of a list on every call, as it does for ``dspy.LM`` calls);
- one rlmkit listener that does nothing (``rlmkit.events.listen``), history off.
"""

from __future__ import annotations

import contextlib
import contextvars
import time

import _bootstrap  # noqa: F401 - the checkout and the benchmark folders on sys.path

import dspy

import rlmkit.rlm  # noqa: F401 - registers the DSPy listeners, as any RLM use does
from rlmkit import events as ev
from rlmkit.models.lm import Completion
from rlmkit.trajectory import CodeBlock, Message, RunMeta, SubCall, Trajectory, Turn, Usage

TURNS = 5_000
REPEATS = 9


class FakeLM:
    model = "openai/bench"

    def describe(self) -> dict:
        return {"model": self.model, "params": {}}


def one_turn(lm: FakeLM, messages: list[Message], request: list[dict], completion: Completion) -> None:
    turn = Turn(index=0, keep=0, new_messages=messages, reply="")
    ev.emit(ev.TurnStarted(turn, messages))
    ev.emit(ev.ModelRequest(turn, lm, request))
    ev.emit(ev.ModelReply(turn, completion))
    block = CodeBlock(code="x = llm_query('a')")
    ev.emit(ev.CellStarted(block, None))
    contextvars.copy_context()  # in_thread: the cell's thread runs in a copy of the context
    for _ in range(2):
        node = SubCall(kind="llm_query", name="llm_query")
        ev.emit(ev.SubcallStarted(node))
        ev.emit(ev.ModelRequest(node, lm, request))
        ev.emit(ev.ModelReply(node, completion))
        ev.emit(ev.SubcallFinished(node))
    ev.emit(ev.CellFinished(block, None))
    ev.emit(ev.TurnFinished(turn))


def without_hooks(lm: FakeLM, messages: list[Message], request: list[dict], completion: Completion) -> None:
    """The same trajectory objects, no events: what a turn cost before the hooks."""
    Turn(index=0, keep=0, new_messages=messages, reply="")
    CodeBlock(code="x = llm_query('a')")
    for _ in range(2):
        SubCall(kind="llm_query", name="llm_query")


def per_turn_us(body, setup, turns: int = TURNS) -> float:
    lm, messages = FakeLM(), [Message(role="user", content="hi")]
    request = [m.model_dump() for m in messages]
    completion = Completion(
        "```repl\nprint(1)\n```",
        "bench",
        Usage(calls=1, prompt_tokens=5, completion_tokens=5),
        False,
        0.0,
        "stop",
    )
    samples = []
    for _ in range(REPEATS):
        with setup():
            meta = RunMeta(signature="context -> answer", protocol="submit", sandbox="inline")
            ev.emit(ev.RunStarted(meta, None, {}))
            start = time.thread_time()  # this thread's CPU time: other processes on the machine do not count
            for _ in range(turns):
                body(lm, messages, request, completion)
            samples.append((time.thread_time() - start) / turns * 1e6)
            ev.emit(ev.RunFinished(Trajectory(meta=meta)))
    return min(samples)


@contextlib.contextmanager
def one_listener():
    with dspy.context(disable_history=True), ev.listen(lambda event: None):
        yield


@contextlib.contextmanager
def empty_history():
    from dspy.clients.base_lm import GLOBAL_HISTORY

    GLOBAL_HISTORY.clear()
    with dspy.context():
        yield


def main() -> None:
    def quiet():
        return dspy.context(disable_history=True)

    base = per_turn_us(without_hooks, quiet)
    rows = [
        ("nothing registered (history off)", per_turn_us(one_turn, quiet)),
        # 3,000 turns x 3 model calls stay under DSPy's 10,000-entry history
        ("DSPy default (history on, not full)", per_turn_us(one_turn, empty_history, turns=3_000)),
        ("DSPy default (history on, full)", per_turn_us(one_turn, lambda: dspy.context())),
        ("one no-op rlmkit listener (history off)", per_turn_us(one_turn, one_listener)),
    ]
    print(
        f"per turn (1 cell, 2 sub-calls, 12 events), thread CPU time, best of {REPEATS} x {TURNS:,} turns; "
        f"trajectory objects alone: {base:.1f} us"
    )
    print("| registered | per turn (us) | added by events (us) |\n| --- | ---: | ---: |")
    for name, value in rows:
        print(f"| {name} | {value:.1f} | {value - base:.1f} |")


if __name__ == "__main__":
    main()
