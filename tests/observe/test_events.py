"""The event stream and its DSPy adapters (callbacks, usage, history), against a scripted model."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import dspy
import pytest
from dspy.utils.callback import BaseCallback

import rlmkit
from rlmkit import events as ev
from rlmkit.errors import MaxIterationsError
from tests.helpers.replies import repl
from tests.helpers.script import Script


class Sentiment(dspy.Signature):
    """Classify the sentiment."""

    text: str = dspy.InputField()
    label: str = dspy.OutputField()


def word_count(text: str) -> int:
    """Count words."""
    return len(text.split())


def sub_reply(prompt: str) -> str:
    return json.dumps({"label": "positive"}) if "good" in prompt else "leaf"


def tree_root(body: dict) -> str:
    """Root: one of each sub-call kind, then a child RLM; the child answers at once."""
    user = body["messages"][1]["content"]
    if "child task" in user:
        return repl("SUBMIT(answer='c' + llm_query('inner'))")
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if turn == 0:
        return repl(
            "a = llm_query_batched(['x', 'y'])",
            "r = classify(text='good')",
            "n = word_count('a b c')",
            "print(a, r, n)",
        )
    return repl("c = rlm_query('child task', 'ctx')", "SUBMIT(answer=c)")


def make_tree_rlm(lm, **kwargs):
    return rlmkit.RLM(
        "context -> answer",
        lm=lm,
        max_depth=2,
        subcalls={"classify": Sentiment, "word_count": word_count},
        **kwargs,
    )


class Recorder(BaseCallback):
    """Records every hook DSPy defines, with its call id."""

    def __init__(self):
        self.calls: list[tuple[str, str, dict]] = []

    def __getattribute__(self, name):
        if name.startswith("on_"):
            return lambda call_id, **kw: self.calls.append((name, call_id, kw))
        return super().__getattribute__(name)

    def count(self) -> Counter:
        return Counter(name for name, _, _ in self.calls)


def test_listen_sees_every_step_nested_run_turn_cell_subcall_child(serve):
    server, lm = serve(Script(tree_root, sub=sub_reply))
    seen: list[ev.Event] = []
    with ev.listen(seen.append):
        pred = make_tree_rlm(lm)(context="abc")
    assert pred.answer == "cleaf"
    by_span = {e.span_id: e for e in seen if e.starts}
    kinds = Counter(type(e).__name__ for e in seen)
    assert kinds["RunStarted"] == kinds["RunFinished"] == 2  # root + child
    assert kinds["ModelRequest"] == kinds["ModelReply"] == len(server.requests) == 7
    assert (
        kinds["SubcallStarted"] == kinds["SubcallFinished"] == 6
    )  # 2 batch items, typed, tool, rlm_query, child's llm_query
    for event in seen:  # every span closes, and each kind nests where it belongs
        parent = by_span.get(event.parent_id)
        if isinstance(event, ev.TurnStarted):
            assert isinstance(parent, ev.RunStarted) and parent.meta.run_id == event.run_id
        if isinstance(event, ev.CellStarted):
            assert isinstance(parent, ev.TurnStarted)
        if isinstance(event, ev.SubcallStarted):
            assert isinstance(parent, ev.CellStarted)
        if isinstance(event, ev.ModelRequest):
            assert isinstance(parent, ev.TurnStarted if event.root else ev.SubcallStarted)
        if isinstance(event, ev.RunStarted) and event.depth == 1:
            assert isinstance(parent, ev.SubcallStarted) and parent.node.kind == "rlm_query"
    starts = [e.span_id for e in seen if e.starts]
    ends = [e.span_id for e in seen if not e.starts]
    assert sorted(starts) == sorted(ends) and len(set(starts)) == len(starts)
    assert (
        isinstance(seen[0], ev.RunStarted) and isinstance(seen[-1], ev.RunFinished) and seen[-1].error is None
    )
    assert seen[-1].trajectory is pred.trajectory
    assert max(len(repr(e)) for e in seen) < 120  # printing an event never prints the inputs or a prompt


def test_nothing_registered_builds_nothing(serve):
    server, lm = serve(Script([repl("SUBMIT(answer='x')")]))
    with dspy.context(disable_history=True):
        built = []
        original = ev.Dispatcher.__init__
        ev.Dispatcher.__init__ = lambda self, listeners: built.append(listeners) or original(self, listeners)
        try:
            rlmkit.RLM("context -> answer", lm=lm)(context="abc")
        finally:
            ev.Dispatcher.__init__ = original
    assert built == []


def test_a_failing_run_closes_every_span_and_reports_the_error(serve):
    server, lm = serve(Script([repl("print('still looking')")]))
    seen: list[ev.Event] = []
    with ev.listen(seen.append), pytest.raises(MaxIterationsError):
        rlmkit.RLM("context -> answer", lm=lm, max_iterations=1)(context="abc")
    assert isinstance(seen[-1], ev.RunFinished) and isinstance(seen[-1].error, MaxIterationsError)
    assert seen[-1].trajectory.status == "max_iterations"
    assert Counter(e.starts for e in seen)[True] == Counter(e.starts for e in seen)[False]


def test_dspy_callbacks_fire_for_turns_model_calls_cells_and_tools(serve):
    server, lm = serve(Script(tree_root, sub=sub_reply))
    recorder = Recorder()
    with dspy.context(callbacks=[recorder]):
        make_tree_rlm(lm)(context="abc")
    count = recorder.count()
    assert count["on_lm_start"] == count["on_lm_end"] == len(server.requests) == 7
    assert (
        count["on_interpreter_startup_start"] == count["on_interpreter_shutdown_end"] == 2
    )  # root + child sandbox
    assert (
        count["on_interpreter_execute_start"] == count["on_interpreter_execute_end"] == 3
    )  # 2 root cells + 1 child
    assert count["on_interpreter_tool_call_start"] == count["on_interpreter_tool_call_end"] == 6
    # module hooks: the top-level RLM (from dspy.Module), 3 root-level turns...
    # 2 root turns + child run + child turn
    assert count["on_module_start"] == count["on_module_end"] == 1 + 2 + 1 + 1
    lm_inputs = [kw["inputs"] for name, _, kw in recorder.calls if name == "on_lm_start"]
    assert lm_inputs[0]["messages"][0]["role"] == "system"  # the first root turn's request, in full
    tools = [
        kw["inputs"]["tool_name"]
        for name, _, kw in recorder.calls
        if name == "on_interpreter_tool_call_start"
    ]
    assert sorted(tools) == ["classify", "llm_query", "llm_query", "llm_query", "rlm_query", "word_count"]
    outputs = [kw["outputs"] for name, _, kw in recorder.calls if name == "on_lm_end"]
    assert outputs[0] == [server_reply for server_reply in [tree_root(server.requests[0])]]
    started = {cid for name, cid, _ in recorder.calls if name.endswith("_start")}
    ended = {cid for name, cid, _ in recorder.calls if name.endswith("_end")}
    assert started == ended


def test_callbacks_on_the_rlm_and_in_settings_both_fire(serve):
    server, lm = serve(Script([repl("SUBMIT(answer='x')")]))
    on_rlm, global_ = Recorder(), Recorder()
    rlm = rlmkit.RLM("context -> answer", lm=lm)
    rlm.callbacks = [on_rlm]
    with dspy.context(callbacks=[global_]):
        rlm(context="abc")
    assert on_rlm.count()["on_lm_start"] == global_.count()["on_lm_start"] == 1
    assert on_rlm.count()["on_interpreter_execute_end"] == 1


def test_concurrent_async_runs_never_see_each_others_events(serve):
    def root(body):
        tag = body["messages"][1]["content"].split("TAG")[1][:1]
        return repl(f"x = llm_query('{tag}')", f"SUBMIT(answer='{tag}')")

    server, lm = serve(Script(root), latency=0.02)
    rlm = rlmkit.RLM("context -> answer", lm=lm)
    recorders = {tag: Recorder() for tag in "ab"}
    listened = {tag: [] for tag in "ab"}

    async def one(tag):
        with dspy.context(callbacks=[recorders[tag]]), ev.listen(listened[tag].append):
            return await rlm.acall(context=f"TAG{tag}")

    async def both():
        return await asyncio.gather(one("a"), one("b"))

    preds = asyncio.run(both())
    assert [p.answer for p in preds] == ["a", "b"]
    for tag in "ab":
        prompts = [
            kw["inputs"]["messages"][-1]["content"]
            for name, _, kw in recorders[tag].calls
            if name == "on_lm_start"
        ]
        assert len(prompts) == 2 and prompts[1] == tag  # the run's own sub-call, nobody else's
        run_ids = {e.run_id for e in listened[tag]}
        assert run_ids == {preds["ab".index(tag)].trajectory.meta.run_id}


def test_track_usage_covers_the_whole_tree_like_the_trajectory(serve):
    server, lm = serve(Script(tree_root, sub=sub_reply))
    with dspy.context(track_usage=True):
        pred = make_tree_rlm(lm)(context="abc")
    usage = pred.get_lm_usage()
    assert set(usage) == {lm.model}
    traj = pred.trajectory.usage
    assert usage[lm.model]["prompt_tokens"] == traj.prompt_tokens > 0
    assert usage[lm.model]["completion_tokens"] == traj.completion_tokens > 0
    assert usage[lm.model]["total_tokens"] == traj.total_tokens


def test_root_turns_appear_in_dspy_history(serve, capsys):
    server, lm = serve(Script([repl("print('looking')"), repl("SUBMIT(answer='x')")]))
    rlm = rlmkit.RLM("context -> answer", lm=lm)
    rlm(context="abc")
    dspy.inspect_history(n=2)
    shown = capsys.readouterr().out
    assert "SUBMIT(answer='x')" in shown and "print('looking')" in shown
    assert [entry["outputs"][0] for entry in rlm.history[-2:]] == [
        repl("print('looking')"),
        repl("SUBMIT(answer='x')"),
    ]
