"""The RLM core end to end, against a scripted model behind a real HTTP server."""

from __future__ import annotations

import dataclasses
import json
import re
import time

import dspy
import pytest

import rlmkit
from rlmkit.errors import (
    BudgetExceeded,
    ConfigError,
    ContextError,
    MaxIterationsError,
    MissingInputError,
    SignatureError,
)
from rlmkit.trajectory import read_runs
from tests.helpers.replies import repl
from tests.helpers.script import Script, root_turn


# ------------------------------------------------------------------ protocols
@pytest.mark.parametrize(
    "protocol, finish",
    [
        ("submit", repl("n = context.count('apple')", "SUBMIT(answer=n)")),
        ("final", repl("n = context.count('apple')") + "\nFINAL_VAR(n)"),
        ("final", repl("n = context.count('apple')", "FINAL(n)")),
        ("answer", repl("answer['content'] = context.count('apple')", "answer['ready'] = True")),
    ],
)
def test_each_protocol_ends_with_a_typed_answer(serve, protocol, finish):
    server, lm = serve(Script([repl("print(len(context))"), finish]))
    rlm = rlmkit.RLM("context, question -> answer: int", lm=lm, protocol=protocol)
    pred = rlm(context="apple pear apple " * 50, question="How many apples?")
    assert pred.answer == 100 and isinstance(pred.answer, int)
    traj = pred.trajectory
    assert traj.status == "ok" and traj.n_turns == 2
    assert traj.turns[0].blocks[0].stdout.strip() == str(len("apple pear apple " * 50))
    assert traj.meta.protocol == protocol


def test_final_in_prose_tolerates_quotes_and_trailing_text(serve):
    server, lm = serve(Script(['I computed it.\nFINAL("42") -- that is my answer.']))
    pred = rlmkit.RLM("context, question -> answer: int", lm=lm, protocol="final")(context="x", question="q")
    assert pred.answer == 42


def test_type_error_in_submit_is_fed_back_and_the_loop_goes_on(serve):
    server, lm = serve(Script([repl("SUBMIT(answer='not a number')"), repl("SUBMIT(answer=7)")]))
    pred = rlmkit.RLM("context -> answer: int", lm=lm)(context="abc")
    assert pred.answer == 7
    first_error = pred.trajectory.turns[0].blocks[0].error
    assert "answer must be int" in first_error
    # the model saw the error as the cell's output in its next prompt
    second_prompt = server.requests[1]["messages"][-1]["content"]
    assert "answer must be int" in second_prompt


def test_reply_without_code_is_told_and_messages_alternate(serve):
    server, lm = serve(Script(["Let me think about it.", repl("SUBMIT(answer='done')")]))
    pred = rlmkit.RLM("context -> answer", lm=lm)(context="abc")
    assert pred.answer == "done"
    roles = [m["role"] for m in server.requests[1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert "no ```repl code block" in server.requests[1]["messages"][-1]["content"]


def test_max_iterations_asks_once_then_raises_with_partial_trajectory(serve):
    server, lm = serve(Script([repl("print('still looking')")]))
    rlm = rlmkit.RLM("context -> answer", lm=lm, max_iterations=2)
    with pytest.raises(MaxIterationsError) as info:
        rlm(context="abc")
    traj = info.value.trajectory
    assert traj.status == "max_iterations" and traj.n_turns == 3  # 2 turns + the "answer now" turn
    assert "out of turns" in server.requests[-1]["messages"][-1]["content"]
    assert [m["role"] for m in server.requests[-1]["messages"]][-2:] == ["assistant", "user"]


def test_turn_messages_rebuild_exactly_what_was_sent(serve):
    server, lm = serve(Script([repl("x = 1", "print(x)"), "no code", repl("SUBMIT(answer=str(x))")]))
    pred = rlmkit.RLM("context -> answer", lm=lm)(context="abc")
    for i, request in enumerate(server.requests):
        rebuilt = [m.model_dump() for m in pred.trajectory.turn_messages(i)]
        assert rebuilt == request["messages"]


# ------------------------------------------------------------------ sub-calls
class Sentiment(dspy.Signature):
    """Classify the sentiment of a review."""

    text: str = dspy.InputField()
    label: str = dspy.OutputField(desc="positive or negative")
    confidence: float = dspy.OutputField()


def test_llm_query_and_typed_subcalls_are_recorded(serve):
    def sub(prompt):
        if "Classify" in prompt or "text:" in prompt:
            return json.dumps({"label": "positive" if "good" in prompt else "negative", "confidence": 0.9})
        return "SUB:" + prompt[:10]

    root = repl(
        "a = llm_query('hello there')",
        "r = classify(text='good film')",
        "many = classify.batched([{'text': 'good'}, {'text': 'bad'}])",
        "SUBMIT(answer=f'{a}|{r.label}|{r.confidence}|{[m.label for m in many]}')",
    )
    server, lm = serve(Script([root], sub=sub))
    rlm = rlmkit.RLM("context -> answer", lm=lm, subcalls={"classify": Sentiment})
    pred = rlm(context="abc")
    assert pred.answer == "SUB:hello ther|positive|0.9|['positive', 'negative']"
    calls = list(pred.trajectory.iter_subcalls())
    assert [c.kind for c in calls].count("typed") == 3 and calls[0].kind == "llm_query"
    typed = calls[1]
    assert [m.role for m in typed.messages] == [
        "system",
        "user",
    ] and "positive or negative" in typed.messages[0].content
    system = server.requests[0]["messages"][0]["content"]
    assert "classify(text: str) -> object with .label: str" in system


def test_batched_failures_stay_per_item(serve):
    def sub(prompt):
        if "boom" in prompt:
            return {"error": "not a chat response"}  # malformed body -> this item fails
        return "ok"

    root = repl("r = llm_query_batched(['a', 'boom', 'c'])", "SUBMIT(answer=repr([x[:6] for x in r]))")
    server, lm = serve(Script([root], sub=sub))
    pred = rlmkit.RLM("context -> answer", lm=lm)(context="abc")
    items = eval(pred.answer)  # noqa: S307 - our own repr
    assert items[0] == "ok" and items[2] == "ok" and items[1].startswith("Error:")


def test_concurrency_reaches_but_never_exceeds_max_concurrency(serve):
    root = repl("r = llm_query_batched([f'q{i}' for i in range(24)])", "SUBMIT(answer=str(len(r)))")
    started = []

    def sub(prompt):
        # Hold each sub-call until 6 are in flight at once (a state, waited for), so a loaded
        # machine cannot make the batch look less concurrent than it is.
        deadline = time.monotonic() + 30
        while started[0].max_in_flight < 6 and time.monotonic() < deadline:
            time.sleep(0.005)
        return "ok"

    server, lm = serve(Script([root], sub=sub), latency=0.05, lm_kwargs={"max_concurrency": 64})
    started.append(server)
    pred = rlmkit.RLM("context -> answer", lm=lm, max_concurrency=6)(context="abc")
    assert pred.answer == "24"
    assert server.max_in_flight == 6


@pytest.mark.parametrize("depth", [2, 3])
def test_recursive_rlm_query_nests_child_trajectories(serve, depth):
    def root(body):
        user = body["messages"][1]["content"]
        if "question" in user and "child task" in user:  # a child RLM: answer from its context
            return repl("r = rlm_query('child task', context[:20])", "SUBMIT(answer='c(' + r + ')')")
        return repl("r = rlm_query('child task', context)", "SUBMIT(answer=r)")

    server, lm = serve(Script(root, sub=lambda p: "leaf"))
    pred = rlmkit.RLM("context -> answer", lm=lm, max_depth=depth)(context="x" * 5000)
    assert pred.answer == "c(" * (depth - 1) + "leaf" + ")" * (depth - 1)
    node = next(pred.trajectory.iter_subcalls(recursive=False))
    for level in range(1, depth):
        assert node.kind == "rlm_query" and node.child.meta.depth == level
        node = next(node.child.iter_subcalls(recursive=False))
    assert node.kind == "llm_query"  # at max_depth rlm_query falls back to a plain call


# ------------------------------------------------------------------ budgets
def test_call_budget_ends_run_with_partial_trajectory(serve):
    server, lm = serve(Script([repl("x = llm_query('a')", "print(x)")]))
    rlm = rlmkit.RLM("context -> answer", lm=lm, budget=rlmkit.Budget(max_calls=3))
    with pytest.raises(BudgetExceeded) as info:
        rlm(context="abc")
    assert info.value.kind == "calls"
    traj = info.value.trajectory
    assert traj.status == "budget_exceeded" and traj.n_turns >= 1
    assert len(server.requests) == 3


def test_a_budget_is_limits_and_each_call_counts_afresh(serve):
    """The program's Budget is frozen limits; each call tree counts its own spending against it,
    so a call that spent the budget leaves the next one the whole of it."""
    budget = rlmkit.Budget(max_calls=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        budget.max_calls = 10
    server, lm = serve(Script([repl("x = llm_query('a')", "print(x)")]))
    rlm = rlmkit.RLM("context -> answer", lm=lm, budget=budget)
    for call in (1, 2):
        with pytest.raises(BudgetExceeded) as info:
            rlm(context="abc")
        assert info.value.used == 3 and len(server.requests) == 3 * call
    assert rlm.budget == rlmkit.Budget(max_calls=3)


def test_token_budget(serve):
    server, lm = serve(Script([repl("print('x' * 10)")]))
    rlm = rlmkit.RLM("context -> answer", lm=lm, budget=rlmkit.Budget(max_tokens=50))
    with pytest.raises(BudgetExceeded) as info:
        rlm(context="abc")
    assert info.value.kind == "tokens" and info.value.used > 50


def test_cost_budget_uses_the_cost_map(serve):
    # a new cell each turn: the same code twice would be stopped as a loop before the money runs out
    server, _ = serve(Script(lambda body: repl(f"print('spend', {root_turn(body)})")))
    lm = rlmkit.LM("openai/gpt-4o-mini", api_base=server.url, api_key="test-key", cache=False)
    rlm = rlmkit.RLM("context -> answer", lm=lm, budget=rlmkit.Budget(max_cost=0.0005))
    with pytest.raises(BudgetExceeded) as info:
        rlm(context="word " * 2000)
    assert info.value.kind == "cost"
    assert info.value.trajectory.usage.cost > 0.0005


def test_wall_time_budget_cuts_a_long_cell(serve):
    server, lm = serve(Script([repl("import time", "time.sleep(30)")]))
    rlm = rlmkit.RLM("context -> answer", lm=lm, budget=rlmkit.Budget(max_seconds=1.5))
    with pytest.raises(BudgetExceeded) as info:
        rlm(context="abc")
    assert info.value.kind == "seconds"
    assert info.value.trajectory.turns[0].blocks[0].timed_out


def test_cell_timeout_is_reported_and_the_run_goes_on(serve):
    server, lm = serve(Script([repl("keep = 5", "while True: pass"), repl("SUBMIT(answer=str(keep))")]))
    pred = rlmkit.RLM("context -> answer", lm=lm, cell_timeout=1.0)(context="abc")
    assert pred.trajectory.turns[0].blocks[0].timed_out
    assert "time limit" in server.requests[1]["messages"][-1]["content"]
    assert pred.answer == "5"  # state survived the interrupted cell


def test_dead_worker_is_restarted_with_inputs_back(serve):
    server, lm = serve(Script([repl("import os", "os._exit(3)"), repl("SUBMIT(answer=context)")]))
    pred = rlmkit.RLM("context -> answer", lm=lm)(context="still here")
    assert pred.trajectory.turns[0].blocks[0].restarted
    assert pred.answer == "still here"


# ------------------------------------------------------------------ big contexts and logs
def test_ten_million_char_context_is_never_resent(serve, tmp_path):
    context = ("lorem ipsum dolor " * 600_000)[:10_000_000]
    turns = [
        repl("print(len(context))"),
        repl("print(context[:10])"),
        repl("SUBMIT(answer=str(len(context)))"),
    ]
    server, lm = serve(Script(turns))
    pred = rlmkit.RLM("context -> answer", lm=lm, log_dir=tmp_path)(context=context)
    assert pred.answer == "10000000"
    sizes = [len(json.dumps(r["messages"])) for r in server.requests]
    assert max(sizes) < 20_000  # prompts carry a preview, never the body
    log_bytes = sum(p.stat().st_size for p in tmp_path.glob("*.jsonl"))
    assert log_bytes < 50_000  # so does the trajectory log
    runs, bad = read_runs(next(tmp_path.glob("*.jsonl")))
    assert bad == 0 and runs[0].status == "ok" and runs[0].meta.inputs[0].size == 10_000_000


def test_file_and_directory_inputs(serve, tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("beta")
    server, lm = serve(Script([repl("SUBMIT(answer=','.join(sorted(context)))")]))
    from pathlib import Path

    pred = rlmkit.RLM("context -> answer", lm=lm)(context=Path(tmp_path))
    assert pred.answer == "a.txt,sub/b.txt"


# ------------------------------------------------------------------ bad input, before any LM call
def test_bad_input_fails_before_any_lm_call(serve):
    server, lm = serve(Script([repl("SUBMIT(answer='x')")]))
    with pytest.raises(SignatureError):
        rlmkit.RLM("context ->", lm=lm)
    with pytest.raises(ConfigError):
        rlmkit.RLM("context -> answer", lm=lm, protocol="telepathy")
    with pytest.raises(ConfigError):
        rlmkit.RLM("context -> answer", lm=lm, sandbox="docker")
    rlm = rlmkit.RLM("context, question -> answer", lm=lm)
    with pytest.raises(MissingInputError):
        rlm(context="abc")
    import threading

    with pytest.raises(ContextError):
        rlm(context=[threading.Lock()], question="q")
    assert server.requests == []


# ------------------------------------------------------------------ DSPy integration
def test_composes_inside_a_dspy_module_and_exposes_its_predictor(serve):
    server, lm = serve(Script([repl("SUBMIT(answer=str(context.count('a')))")]))

    class Pipeline(dspy.Module):
        def __init__(self):
            super().__init__()
            self.count = rlmkit.RLM("context -> answer", lm=lm)

        def forward(self, text):
            return dspy.Prediction(total=int(self.count(context=text).answer) * 2)

    program = Pipeline()
    assert program(text="banana").total == 6
    names = [name for name, _ in program.named_predictors()]
    assert names == ["count.root"]


def test_save_load_round_trips_instructions_demos_and_knobs(serve, tmp_path):
    server, lm = serve(Script(["FINAL(ok)"]))
    rlm = rlmkit.RLM("context -> answer", lm=lm, max_iterations=7, protocol="final")
    rlm.instructions = "Count carefully."
    rlm.root.demos = [dspy.Example(context="aa", answer="2")]
    path = tmp_path / "rlm.json"
    rlm.save(str(path))
    loaded = rlmkit.RLM("context -> answer", lm=lm)
    loaded.load(str(path))
    assert loaded.instructions == "Count carefully."
    assert loaded.max_iterations == 7 and loaded.protocol.name == "final"
    assert len(loaded.demos) == 1
    loaded(context="x")
    system = server.requests[-1]["messages"][0]["content"]
    assert "Count carefully." in system and "Example 1" in system


def test_acall_runs_concurrently(serve):
    import asyncio

    server, lm = serve(Script([repl("SUBMIT(answer=context)")]), latency=0.3)
    rlm = rlmkit.RLM("context -> answer", lm=lm)

    async def main():
        return await asyncio.gather(*(rlm.acall(context=str(i)) for i in range(4)))

    preds = asyncio.run(main())
    assert [p.answer for p in preds] == ["0", "1", "2", "3"]
    assert server.max_in_flight >= 2


def test_the_dspy_trace_stays_within_its_size():
    """A call records itself in DSPy's trace for the optimizers, bounded as DSPy bounds a Predict's
    records (``max_trace_size``): a process that serves calls all day does not grow with them."""
    from rlmkit.rlm import _record_dspy_trace

    predictor = dspy.Predict("context -> answer")
    with dspy.context(trace=[], max_trace_size=3):
        for i in range(5):
            _record_dspy_trace(predictor, {"context": f"call {i}"}, {"answer": str(i)})
        assert [inputs["context"] for _, inputs, _ in dspy.settings.trace] == ["call 2", "call 3", "call 4"]
    with dspy.context(trace=[], max_trace_size=0):
        _record_dspy_trace(predictor, {"context": "x"}, {"answer": "y"})
        assert dspy.settings.trace == []


def test_the_docstring_documents_every_constructor_argument():
    import inspect

    documented = set(re.findall(r"^        (\w+): ", rlmkit.RLM.__doc__, re.MULTILINE))
    arguments = set(inspect.signature(rlmkit.RLM.__init__).parameters) - {"self"}
    assert arguments - documented == set()
