"""Sessions: inputs cross once, the model's variables live on between calls and survive a dead
worker, an idle stop, and a save + load in another process."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
from pathlib import Path

import dspy
import pytest

import rlmkit
from rlmkit.errors import BudgetExceeded, SessionBusyError, SessionClosedError, SessionFileError
from rlmkit.sandbox.host import WorkerHost
from tests.helpers.replies import repl
from tests.helpers.waiting import wait_for

CONTEXT = "GET /a 200\nGET /b 500\nGET /c 500\n" * 100


def question_of(messages: list[dict]) -> str:
    """The call's question, as the task message previews it (short inputs are shown in full)."""
    task = messages[1]["content"]
    return task.split("`question` (str")[1].split("): ", 1)[1].split("\n", 1)[0].strip("'")


class Model:
    """Replies by question: ``script[question]`` is the reply list of that call, by turn."""

    def __init__(self, script: dict[str, list[str]]):
        self.script = script
        self.tasks: list[str] = []  # each call's task message

    def __call__(self, messages: list[dict]) -> str:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if turn == 0:
            self.tasks.append(messages[1]["content"])
        replies = self.script[question_of(messages)]
        return replies[min(turn, len(replies) - 1)]


def make_rlm(script: dict[str, list[str]], signature: str = "context, question -> answer") -> tuple:
    model = Model(script)
    return rlmkit.RLM(signature, lm=rlmkit.FunctionLM(model)), model


SCRIPT = {
    "count": [
        repl("fails = [l for l in context.splitlines() if ' 500' in l]", "SUBMIT(answer=str(len(fails)))")
    ],
    "hosts": [
        repl("def path(line): return line.split()[1]", "SUBMIT(answer=str(sorted({path(l) for l in fails})))")
    ],
    "again": [repl("SUBMIT(answer=str(len(fails)) + ' ' + path(fails[0]))")],
}


def test_a_session_call_returns_and_traces_what_a_plain_call_does():
    """To DSPy a session call is a plain call: the same Prediction fields (the outputs, the
    trajectory, final_reasoning) and the same entry in ``dspy.settings.trace``."""
    reply = "Count the failing lines.\n" + repl("SUBMIT(answer=str(context.count(' 500')))")
    rlm, _ = make_rlm({"count": [reply]})
    with dspy.context(trace=[]):
        plain = rlm(context=CONTEXT, question="count")
        with rlm.session(context=CONTEXT) as s:
            in_session = s(question="count")
        trace = list(dspy.settings.trace)
    assert sorted(in_session.keys()) == sorted(plain.keys()) == ["answer", "final_reasoning", "trajectory"]
    assert in_session.answer == plain.answer == "200"
    assert in_session.final_reasoning == plain.final_reasoning == "Count the failing lines."
    assert [step["code"] for step in in_session.trajectory] == [step["code"] for step in plain.trajectory]
    [(predictor, inputs, outputs), (session_predictor, session_inputs, session_outputs)] = trace
    assert predictor is session_predictor is rlm.root
    assert session_inputs == inputs and set(inputs) == {"context", "question"}
    assert session_outputs.toDict() == outputs.toDict() == {"answer": "200"}


def test_variables_persist_and_the_prompt_lists_them():
    rlm, model = make_rlm(SCRIPT)
    with rlm.session(context=CONTEXT) as s:
        assert s(question="count").answer == "200"
        assert s.variables == {"fails": "list, 200 items"}
        assert s(question="hosts").answer == "['/b', '/c']"
        assert set(s.variables) == {"fails", "path"}
    assert "Variables that earlier calls made" not in model.tasks[0]
    assert "- `fails`: list, 200 items" in model.tasks[1]
    assert "[1] question: count\n    -> answer: 200" in model.tasks[1]


def test_a_call_reads_in_chat_order_earlier_calls_first_its_question_last():
    rlm, model = make_rlm(SCRIPT)
    with rlm.session(context=CONTEXT) as s:
        s(question="count")
        s(question="hosts")
    task = model.tasks[1]
    inputs = [line for line in task.splitlines() if line.startswith("- `") and "`: " not in line]
    assert inputs[-1].startswith("- `question` (str") and inputs[-1].endswith("'hosts'")  # the last input
    assert inputs[0].startswith("- `context` (str")
    earlier, now = task.index("[1] question: count"), task.index("'hosts'")
    assert earlier < task.index("Your inputs are loaded") < now  # what was asked before comes first
    assert task.index("- `fails`: list, 200 items") < now


def test_inputs_cross_once_and_again_only_when_changed(monkeypatch):
    sent: list[list[str]] = []
    original = WorkerHost._send_variables

    def spy(self, variables):
        sent.append(sorted(variables))
        return original(self, variables)

    monkeypatch.setattr(WorkerHost, "_send_variables", spy)
    script = {"q": [repl("SUBMIT(answer=str(len(context)))")]}
    rlm, _ = make_rlm(script)
    with rlm.session(context=CONTEXT) as s:
        s(question="q")
        s(question="".join("q"), context="".join(CONTEXT))  # equal values, other objects: nothing crosses
        assert s(question="q", context="short").answer == "5"
    assert sent == [["context", "question"], [], ["context"]]


def test_history_is_bounded_by_calls():
    script = {f"q{i}": [repl(f"SUBMIT(answer='a{i}')")] for i in range(4)}
    rlm, model = make_rlm(script)
    with rlm.session(context=CONTEXT, history_calls=2) as s:
        for i in range(4):
            s(question=f"q{i}")
    last = model.tasks[-1]
    assert "question: q1" in last and "question: q2" in last and "question: q0" not in last


def test_a_dspy_history_field_gets_the_earlier_calls():
    class Ask(dspy.Signature):
        context: str = dspy.InputField()
        question: str = dspy.InputField()
        history: dspy.History = dspy.InputField()
        answer: str = dspy.OutputField()

    script = {"one": [repl("SUBMIT(answer='first')")], "two": [repl("SUBMIT(answer=str(history))")]}
    model = Model(script)
    rlm = rlmkit.RLM(Ask, lm=rlmkit.FunctionLM(model))
    with rlm.session(context=CONTEXT) as s:
        s(question="one")
        answer = s(question="two").answer
    assert answer == str([{"question": "one", "answer": "first"}])
    assert "Earlier calls in this session" not in model.tasks[1]  # the field carries it


def test_a_second_concurrent_call_raises_at_once():
    release = asyncio.Event()

    async def model(messages):
        if question_of(messages) == "slow":
            await release.wait()
        return repl("SUBMIT(answer='ok')")

    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model))

    async def main():
        async with rlm.session(context=CONTEXT) as s:
            first = asyncio.ensure_future(s.acall(question="slow"))
            while not s._busy.locked():
                await asyncio.sleep(0.001)
            with pytest.raises(SessionBusyError):
                await s.acall(question="fast")
            release.set()
            assert (await first).answer == "ok"
            assert (await s.acall(question="fast")).answer == "ok"

    asyncio.run(main())


def test_two_sessions_never_share_variables():
    script = {"set": [repl("mine = question", "SUBMIT(answer='set')")],
              "get": [repl("SUBMIT(answer=str(globals().get('mine')))")]}  # fmt: skip
    rlm, _ = make_rlm(script)
    with rlm.session(context="a") as one, rlm.session(context="b") as two:
        one(question="set")
        assert two(question="get").answer == "None"
        assert one(question="get").answer == "set"
        assert one.sandbox.pid != two.sandbox.pid and one.id != two.id


def test_session_budget_stops_before_any_model_call():
    rlm, model = make_rlm({"q": [repl("SUBMIT(answer='x')")]})
    with rlm.session(context=CONTEXT, budget=rlmkit.Budget(max_calls=2)) as s:
        s(question="q")
        s(question="q")
        with pytest.raises(BudgetExceeded, match="session budget"):
            s(question="q")
    assert len(model.tasks) == 2 and s.spent["calls"] == 2


def test_a_call_stops_at_what_the_session_has_left_and_charges_it():
    rlm, _ = make_rlm({"long": [repl("x = 1"), repl("SUBMIT(answer='late')")]})
    with rlm.session(context=CONTEXT, budget=rlmkit.Budget(max_calls=1)) as s:
        with pytest.raises(BudgetExceeded, match="session budget exceeded: calls used 1 of 1"):
            s(question="long")
    assert s.spent["calls"] == 1 and s.spent["seconds"] > 0


def test_a_killed_worker_comes_back_with_the_last_checkpoint():
    script = {**SCRIPT, "gen": [repl("stream = (x for x in range(3))", "SUBMIT(answer='gen')")]}
    rlm, model = make_rlm(script)
    with rlm.session(context=CONTEXT) as s:
        s(question="count")
        s(question="hosts")
        s(question="gen")
        assert "stream" in s.variables and "stream" in s.checkpoint.unsaved()  # a generator cannot pickle
        os.kill(s.sandbox.pid, signal.SIGKILL)
        wait_for(lambda: not s.worker_running)
        pred = s(question="again")
    assert pred.answer == "200 /b"
    meta = pred.trajectory.meta.session
    assert meta["restored"] == "worker_died" and meta["call"] == 4
    assert list(meta["lost"]) == ["stream"] and meta["lost"]["stream"].startswith("generator: ")
    assert "died after the last call" in model.tasks[-1] and "`stream` (generator" in model.tasks[-1]


def test_a_module_the_model_imported_is_imported_again_after_a_rebuild():
    script = {
        "imp": [repl("import json as js", "SUBMIT(answer='ok')")],
        "use": [repl("SUBMIT(answer=js.dumps([1]))")],
    }
    rlm, model = make_rlm(script)
    with rlm.session(context=CONTEXT) as s:
        s(question="imp")
        os.kill(s.sandbox.pid, signal.SIGKILL)
        wait_for(lambda: not s.worker_running)
        assert s(question="use").answer == "[1]"
    assert "`js`" not in model.tasks[-1]  # modules are not listed as the model's variables


def test_a_worker_dying_inside_a_cell_is_rebuilt_from_the_checkpoint():
    script = {
        **SCRIPT,
        "crash": [repl("import os", "os._exit(3)"), repl("SUBMIT(answer=str(len(fails)))")],
    }
    rlm, model = make_rlm(script)
    with rlm.session(context=CONTEXT) as s:
        s(question="count")
        pred = s(question="crash")
    assert pred.answer == "200"
    assert pred.trajectory.turns[0].blocks[0].restarted
    assert "put back as of the last finished call" in pred.trajectory.turns[0].blocks[0].error


def test_idle_timeout_stops_the_worker_and_the_next_call_restores_it():
    rlm, _ = make_rlm(SCRIPT)
    with rlm.session(context=CONTEXT, idle_timeout=0.2) as s:
        s(question="count")
        s(question="hosts")
        wait_for(lambda: not s.worker_running)
        pred = s(question="again")
    assert pred.answer == "200 /b"
    assert pred.trajectory.meta.session["restored"] == "idle"


def test_a_call_made_while_the_idle_stop_closes_the_worker_waits_for_it():
    rlm, _ = make_rlm(SCRIPT)
    with rlm.session(context=CONTEXT) as s:
        s(question="count")
        closing, release = threading.Event(), threading.Event()
        close = s.sandbox.close

        def slow_close():
            closing.set()
            release.wait(10)
            close()

        # the idle stop is armed only once the slow close is in place: a timer armed at the first
        # call could fire before it, on a busy machine
        s.sandbox.close = slow_close
        s.idle_timeout = 0.05
        s(question="count")
        assert closing.wait(10)  # the idle stop is inside close, holding the session's turn
        turns: list[bool] = []
        take_turn = s._take_turn
        s._take_turn = lambda *a: turns.append(take_turn(*a)) or turns[-1]
        done: dict = {}
        caller = threading.Thread(target=lambda: done.update(pred=s(question="hosts")))
        caller.start()
        wait_for(lambda: turns == [False])  # told to wait, not refused
        release.set()
        caller.join(30)
    assert done["pred"].answer == "['/b', '/c']"
    assert done["pred"].trajectory.meta.session["restored"] == "idle"


def test_save_and_load_in_another_process(tmp_path):
    rlm, _ = make_rlm(SCRIPT)
    with rlm.session(context=CONTEXT) as s:
        s(question="count")
        s(question="hosts")
        s.save(tmp_path / "saved")
    manifest = json.loads((tmp_path / "saved" / "manifest.json").read_text())
    assert manifest["format"] == "rlmkit-session" and manifest["version"] == 1
    assert set(manifest["variables"]) == {"fails", "path"} and manifest["calls"] == 2
    assert (tmp_path / "saved" / "inputs" / "context.txt").read_text() == CONTEXT
    child = f"""
import sys; sys.path.insert(0, {os.getcwd()!r})
import rlmkit
from tests.session.test_session import SCRIPT, make_rlm
rlm, model = make_rlm(SCRIPT)
s = rlmkit.Session.load({str(tmp_path / "saved")!r}, rlm)
pred = s(question="again")
print(pred.answer, pred.trajectory.meta.session["restored"], pred.trajectory.meta.session["call"])
print("fails" in model.tasks[0] and "[2] question: hosts" in model.tasks[0])
s.close()
"""
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["200 /b loaded 3", "True"]


def test_checkpoints_follow_each_call_into_the_directory(tmp_path):
    rlm, _ = make_rlm(SCRIPT)
    with rlm.session(context=CONTEXT, path=tmp_path / "live") as s:
        s(question="count")
        first = json.loads((tmp_path / "live" / "manifest.json").read_text())
        s(question="hosts")
    second = json.loads((tmp_path / "live" / "manifest.json").read_text())
    assert set(first["variables"]) == {"fails"} and set(second["variables"]) == {"fails", "path"}
    assert first["variables"]["fails"] == second["variables"]["fails"]  # unchanged: not rewritten
    assert len(list((tmp_path / "live" / "variables").iterdir())) == 2


@pytest.fixture
def saved(tmp_path) -> Path:
    rlm, _ = make_rlm(SCRIPT)
    with rlm.session(context=CONTEXT) as s:
        s(question="count")
        return s.save(tmp_path / "saved")


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    "damage, culprit",
    [
        (lambda d: (d / "manifest.json").unlink(), "manifest.json"),
        (lambda d: (d / "manifest.json").write_text("{not json"), "manifest.json"),
        (lambda d: _edit(d / "manifest.json", lambda m: m.update(format="other")), "manifest.json"),
        (lambda d: _edit(d / "manifest.json", lambda m: m.update(version=99)), "manifest.json"),
        (lambda d: _edit(d / "manifest.json", lambda m: m.pop("inputs")), "manifest.json"),
        (lambda d: (d / "inputs" / "context.txt").write_text("short"), "context.txt"),
        (lambda d: next((d / "variables").iterdir()).write_bytes(b"tampered"), ".pkl"),
        (
            lambda d: _edit(
                d / "manifest.json", lambda m: m["variables"]["fails"].update(file="../../etc/passwd")
            ),
            "manifest.json",
        ),
    ],
)
def test_a_damaged_directory_is_a_typed_error_naming_the_file(saved, damage, culprit):
    damage(saved)
    rlm, _ = make_rlm(SCRIPT)
    with pytest.raises(SessionFileError) as caught:
        rlmkit.Session.load(saved, rlm)
    assert str(caught.value.path).endswith(culprit) and str(caught.value.path) in str(caught.value)


class _WritesOnLoad:
    """A pickle whose loading writes a file: it must only ever be loaded inside the sandbox."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (exec, (f"open({self.target!r}, 'w').write('pwned')",))


def test_a_crafted_variable_runs_only_inside_the_sandbox(saved, tmp_path):
    target = str(tmp_path / "written-by-the-pickle")
    blob = pickle.dumps(_WritesOnLoad(target))
    import hashlib

    digest = hashlib.blake2b(blob, digest_size=16).hexdigest()
    (saved / "variables" / f"fails-{digest}.pkl").write_bytes(blob)
    _edit(saved / "manifest.json", lambda m: m["variables"]["fails"].update(digest=digest,
          file=f"variables/fails-{digest}.pkl"))  # fmt: skip
    rlm, _ = make_rlm({"q": [repl("SUBMIT(answer='ok')")]})
    s = rlmkit.Session.load(saved, rlm)  # the host reads bytes and checks digests: it unpickles nothing
    assert not os.path.exists(target)
    try:
        pred = s(question="q")
        if not s.sandbox.protections.get("landlock_fs"):
            pytest.skip("no Landlock here: the worker could write outside its directory")
    finally:
        s.close()
    assert pred.answer == "ok" and not os.path.exists(target)


def test_a_closed_session_refuses_calls():
    rlm, _ = make_rlm(SCRIPT)
    s = rlm.session(context=CONTEXT)
    s.close()
    with pytest.raises(SessionClosedError):
        s(question="count")


def test_events_and_traces_of_every_call_carry_the_session_id():
    script = {
        "child": [repl("r = rlm_query('inner', context='abc')", "SUBMIT(answer=r)")],
        "inner": [repl("SUBMIT(answer='deep')")],
        "plain": [repl("SUBMIT(answer='x')")],
    }
    rlm, _ = make_rlm(script)
    rlm.max_depth = 2
    seen: list[rlmkit.events.Event] = []
    with rlmkit.events.listen(seen.append), rlm.session(context=CONTEXT) as s:
        assert s(question="child").answer == "deep"
        s(question="plain")
    runs = [e for e in seen if isinstance(e, rlmkit.events.RunStarted)]
    assert [(r.depth, r.meta.session.get("call")) for r in runs] == [(0, 1), (1, None), (0, 2)]
    assert {e.session_id for e in seen} == {s.id}  # the child run's events too
    calls = {(e.depth, e.session_call) for e in seen}  # and the number of the call they are part of
    assert calls == {(0, 1), (1, 1), (0, 2)}
    plain = rlm(context="a", question="plain")
    assert plain.trajectory.meta.session == {}


def test_otel_spans_name_the_session_as_the_conversation():
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rlmkit.observe import otel

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stop = otel.instrument(tracer_provider=provider)
    try:
        rlm, _ = make_rlm(SCRIPT)
        with rlm.session(context=CONTEXT) as s:
            s(question="count")
            s(question="hosts")
    finally:
        stop()
    agents = [span for span in exporter.get_finished_spans() if span.name == "invoke_agent rlm"]
    assert len(agents) == 2 and {span.attributes["gen_ai.conversation.id"] for span in agents} == {s.id}
    assert [span.attributes["rlmkit.session_call"] for span in agents] == [1, 2]


def test_a_call_streams_its_events_then_its_prediction():
    rlm, _ = make_rlm(SCRIPT)

    async def main():
        async with rlm.session(context=CONTEXT) as s:
            await s.acall(question="count")
            items = [item async for item in s.stream(question="hosts")]
        return s, items

    s, items = asyncio.run(main())
    *events, pred = items
    assert isinstance(pred, dspy.Prediction) and pred.answer == "['/b', '/c']"
    assert isinstance(events[0], rlmkit.events.RunStarted) and {e.session_id for e in events} == {s.id}


def test_the_viewer_lists_a_sessions_calls_in_order(tmp_path):
    from rlmkit.view.render import find_logs, load_runs, summarize

    model = Model(SCRIPT)
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model), log_dir=tmp_path)
    with rlm.session(context=CONTEXT) as s:
        s(question="count")
        s(question="hosts")
    runs, _ = load_runs(find_logs([tmp_path]))
    summaries = sorted((summarize(path, run) for path, run in runs), key=lambda row: row["created"])
    assert [row["session_call"] for row in summaries] == [1, 2] and {row["session"] for row in summaries} == {
        s.id
    }
    assert summaries[1]["task"].startswith(f"session {s.id[:8]} call 2: ")


def test_a_session_needs_a_worker_sandbox():
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(lambda m: "x"), sandbox="inline")
    with pytest.raises(rlmkit.errors.ConfigError, match="worker sandbox"):
        rlm.session(context="abc")


def test_dspy_callbacks_see_each_call_as_a_module_call():
    from dspy.utils.callback import BaseCallback

    class Recorder(BaseCallback):
        def __init__(self):
            self.starts, self.ends = [], []

        def on_module_start(self, call_id, instance, inputs):
            if isinstance(instance, rlmkit.RLM):
                self.starts.append(inputs.get("question"))

        def on_module_end(self, call_id, outputs, exception=None):
            if outputs is not None and "answer" in outputs:
                self.ends.append(outputs["answer"])

    recorder = Recorder()
    rlm, _ = make_rlm(SCRIPT)
    with dspy.context(callbacks=[recorder]), rlm.session(context=CONTEXT) as s:
        s(question="count")
        s(question="hosts")
    assert recorder.starts == ["count", "hosts"] and recorder.ends == ["200", "['/b', '/c']"]


def test_dspy_callbacks_can_tell_the_session_and_call_of_every_event():
    from dspy.clients.base_lm import GLOBAL_HISTORY
    from dspy.utils.callback import BaseCallback

    class Recorder(BaseCallback):
        """Keeps each start hook's metadata by call_id, and which end hooks closed which call_id."""

        def __init__(self):
            self.starts: dict[str, tuple[str, dict | None]] = {}
            self.ends: list[str] = []

        def _start(self, hook, call_id, inputs):
            self.starts[call_id] = (hook, inputs.get("callback_metadata"))

        def on_module_start(self, call_id, instance, inputs):
            self._start("module", call_id, inputs)

        def on_lm_start(self, call_id, instance, inputs):
            self._start("lm", call_id, inputs)

        def on_interpreter_execute_start(self, call_id, instance, inputs):
            self._start("cell", call_id, inputs)

        def on_interpreter_tool_call_start(self, call_id, instance, inputs):
            self._start("tool", call_id, inputs)

        def on_module_end(self, call_id, outputs, exception=None):
            self.ends.append(call_id)

        on_lm_end = on_interpreter_execute_end = on_interpreter_tool_call_end = on_module_end

    script = {
        **SCRIPT,
        "child": [repl("r = rlm_query('inner', context='abc')", "SUBMIT(answer=r)")],
        "inner": [repl("SUBMIT(answer='deep')")],
    }
    rlm, _ = make_rlm(script)
    rlm.max_depth = 2
    recorder = Recorder()
    with dspy.context(callbacks=[recorder]):
        with rlm.session(context=CONTEXT) as one, rlm.session(context=CONTEXT) as two:
            one(question="child")
            two(question="count")
            one(question="count")
        plain_from = len(recorder.starts)
        rlm(context=CONTEXT, question="count")
    in_sessions = list(recorder.starts.values())[:plain_from]
    assert all(meta is not None for _, meta in in_sessions)  # every start hook of every call says
    seen = {(meta["session_id"], meta["session_call"], meta["depth"], hook) for hook, meta in in_sessions}
    hooks = {(s, n, d): set() for s, n, d, _ in seen}
    for s_id, number, depth, hook in seen:
        hooks[s_id, number, depth].add(hook)
    assert hooks == {
        (one.id, 1, 0): {"module", "lm", "cell", "tool"},  # the rlm_query is a tool call of that cell
        (one.id, 1, 1): {"module", "lm", "cell"},  # the child RLM's run: that call's, one level down
        (two.id, 1, 0): {"module", "lm", "cell"},
        (one.id, 2, 0): {"module", "lm", "cell"},
    }
    assert set(recorder.ends) == set(recorder.starts)  # each end hook has its start's call_id
    plain = list(recorder.starts.values())[plain_from:]
    assert plain and all(meta is None for _, meta in plain)  # a plain call's payloads are DSPy's own
    history = [entry.get("rlmkit", {}) for entry in GLOBAL_HISTORY]  # dspy.inspect_history's entries
    assert {(h.get("session_id"), h.get("session_call")) for h in history} >= {(one.id, 2), (two.id, 1)}


def test_a_missing_input_fails_before_the_call_counts_and_history_stays_small():
    rlm, model = make_rlm({"q": [repl("SUBMIT(answer='ok')")]})
    with rlm.session() as s:
        with pytest.raises(rlmkit.errors.MissingInputError, match="context"):
            s(question="q")
        assert s.calls == 0 and model.tasks == []
        s(question="q", context="y" * 100_000)
    [(asked, said)] = s.history
    assert (
        len(json.dumps(asked)) < 5_000 and "characters cut" in asked["context"] and said == {"answer": "ok"}
    )


def test_a_sync_call_from_code_running_on_the_shared_loop_does_not_wait_on_itself():
    inner_rlm, _ = make_rlm({"q": [repl("SUBMIT(answer='inner')")]})
    inner = inner_rlm.session(context="abc")

    def outer_model(messages):  # a sync model function runs on the shared loop
        return repl(f"SUBMIT(answer={inner(question='q').answer!r})")

    try:
        outer = rlmkit.RLM("context -> answer", lm=rlmkit.FunctionLM(outer_model))
        assert outer(context="x").answer == "inner"
    finally:
        inner.close()


def test_the_rlms_own_budget_limits_each_call_and_the_session_goes_on():
    script = {
        "long": [repl("x = 1"), repl("SUBMIT(answer='late')")],
        "short": [repl("SUBMIT(answer=str(x))")],
    }
    model = Model(script)
    rlm = rlmkit.RLM(
        "context, question -> answer", lm=rlmkit.FunctionLM(model), budget=rlmkit.Budget(max_calls=1)
    )
    with rlm.session(context=CONTEXT) as s:
        with pytest.raises(BudgetExceeded):
            s(question="long")
        assert s(question="short").answer == "1"  # the failed call's variable was checkpointed
    assert s.spent["calls"] == 2


def test_a_plain_call_and_a_session_call_give_the_run_the_same_hooks():
    """The run reads one ``CallHooks``: a plain call's fresh worker and a session call's live one
    answer the same methods, so the loop has no branch for sessions."""
    from rlmkit.run.hooks import CallHooks, PlainCall
    from rlmkit.session.call import SessionCall

    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(lambda messages: "x"))
    with rlm.session(context=CONTEXT) as session:
        call = SessionCall(session, number=1, restored=None, lost={}, notes="earlier calls")
        assert isinstance(call, CallHooks) and isinstance(PlainCall(), CallHooks)
        budget = rlmkit.Budget(max_calls=5)
        assert call.spending(budget).budget.max_calls == 5 == PlainCall().spending(budget).budget.max_calls
