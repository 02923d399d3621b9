"""DSPy CodeInterpreters as rlmkit sandboxes: DSPy's LocalInterpreter and any class written
against DSPy's protocol run a run's cells; started and shut down as in dspy, on success and error;
the inputs cross once; a FinalOutput goes through the run's own SUBMIT checks."""

from __future__ import annotations

import dspy
import pytest
from dspy.primitives.code_interpreter import CodeExecutionError, CodeInterpreterError, FinalOutput
from dspy.primitives.local_interpreter import LocalInterpreter
from dspy.utils.dummies import DummyLM

import rlmkit
from rlmkit.errors import SandboxError


class Recorder:
    """A CodeInterpreter written against DSPy's protocol: it answers each code from a script
    ({code: [replies]}; other code, such as the REPL's own snippets, prints nothing)."""

    made: list[Recorder] = []

    def __init__(self, replies=None):
        self.replies = {code: list(r) for code, r in (replies or {}).items()}
        self.tools: dict = {}
        self.output_fields = None
        self.calls: list[tuple[str, dict | None]] = []
        self.started = self.shut = False
        Recorder.made.append(self)

    def start(self):
        self.started = True

    def execute(self, code, variables=None):
        if self.shut:
            raise CodeInterpreterError("shutdown")
        self.calls.append((code, variables))
        key = next((k for k in self.replies if code == k or code.endswith("\n" + k)), None)
        script = self.replies.get(key) or [""]
        reply = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def shutdown(self):
        self.shut = True


@pytest.fixture(autouse=True)
def fresh_recorders():
    Recorder.made = []


def recorders(replies):
    """A factory of Recorders answering from ``replies``."""
    return lambda: Recorder(replies)


def steps(*codes):
    return DummyLM([{"reasoning": f"step {i}", "code": c} for i, c in enumerate(codes)])


def test_dspy_local_interpreter_runs_the_cells():
    lm = steps("words = context.split()\nprint(len(words))", "SUBMIT(answer=len(words))")
    rlm = rlmkit.RLM("context -> answer: int", lm=lm, interpreter_factory=LocalInterpreter)
    pred = rlm(context="one two three")
    assert pred.answer == 3 and pred.trajectory[0]["output"] == "3"
    assert pred.trajectory.meta.sandbox == "interpreter:LocalInterpreter"


def test_a_protocol_interpreter_gets_inputs_once_tools_and_is_shut_down():
    lm = steps("print(context)", "SUBMIT('x')")
    factory = recorders({"print(context)": ["shown"], "SUBMIT('x')": [FinalOutput({"answer": "done"})]})
    pred = rlmkit.RLM("context -> answer", lm=lm, interpreter_factory=factory)(context="big input")
    (interp,) = Recorder.made
    assert pred.answer == "done" and pred.trajectory[0]["output"] == "shown"
    assert interp.started and interp.shut
    assert [v for _, v in interp.calls] == [{"context": "big input"}, None]  # the inputs crossed once
    assert interp.calls[0][0].endswith("\nprint(context)") and interp.calls[1][0] == "SUBMIT('x')"
    assert {"llm_query", "llm_query_batched"} <= set(interp.tools) and "SUBMIT" not in interp.tools
    assert interp.output_fields == [{"name": "answer", "type": "str"}]


def test_the_interpreter_is_shut_down_when_the_model_fails():
    class Boom(dspy.BaseLM):
        def __init__(self):
            super().__init__("boom/model")

        async def aforward(self, prompt=None, messages=None, **kwargs):
            raise ValueError("model failure")

    with pytest.raises(ValueError, match="model failure"):
        rlmkit.RLM("context -> answer", lm=Boom(), interpreter_factory=Recorder)(context="c")
    (interp,) = Recorder.made
    assert interp.shut


def test_code_errors_are_the_models_to_fix_and_interpreter_failures_end_the_run():
    lm = steps("bad(", "SUBMIT('x')")
    factory = recorders(
        {"bad(": [SyntaxError("invalid syntax")], "SUBMIT('x')": [FinalOutput({"answer": "ok"})]}
    )
    pred = rlmkit.RLM("context -> answer", lm=lm, interpreter_factory=factory)(context="c")
    assert pred.answer == "ok" and pred.trajectory[0]["output"] == "[Error] invalid syntax"

    factory = recorders({"x": [CodeExecutionError("NameError: x"), CodeInterpreterError("worker died")]})
    with pytest.raises(CodeInterpreterError, match="worker died") as failed:
        rlmkit.RLM("context -> answer", lm=steps("x", "x"), interpreter_factory=factory)(context="c")
    assert isinstance(failed.value, SandboxError)  # rlmkit's run error too: the trajectory so far rides on it
    assert all(i.shut for i in Recorder.made)


def test_a_submission_is_checked_against_the_signature():
    lm = steps("SUBMIT('many')", "SUBMIT(3)")
    factory = recorders(
        {"SUBMIT('many')": [FinalOutput({"answer": "many"})], "SUBMIT(3)": [FinalOutput({"answer": 3})]}
    )
    pred = rlmkit.RLM("context -> answer: int", lm=lm, interpreter_factory=factory)(context="c")
    assert pred.answer == 3 and len(pred.trajectory) == 2


def test_a_factory_per_call_and_a_bad_factory():
    lm = steps("SUBMIT('x')")
    rlm = rlmkit.RLM("context -> answer", lm=lm, sandbox="inline")
    factory = recorders({"SUBMIT('x')": [FinalOutput({"answer": "per call"})]})
    assert rlm(context="c", interpreter_factory=factory).answer == "per call"
    with pytest.raises(TypeError, match="must return a CodeInterpreter, not NoneType"):
        rlmkit.RLM("context -> answer", lm=steps("x"), interpreter_factory=lambda: None)(context="c")


def test_a_callers_interpreter_is_used_and_left_running():
    interp = Recorder({"SUBMIT('x')": [FinalOutput({"answer": "first"}), FinalOutput({"answer": "second"})]})
    for context, answer in (("a", "first"), ("b", "second")):  # sequential calls share it
        rlm = rlmkit.RLM("context -> answer", lm=steps("SUBMIT('x')"), sandbox="inline")
        assert rlm(interp, context=context).answer == answer
    assert not interp.shut and len(Recorder.made) == 1


def test_a_factorys_return_is_checked_before_the_model_is_resolved(monkeypatch):
    monkeypatch.setenv("RLMKIT_MODEL", "openai/gpt-4o-mini")  # the default model: one with no key here
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(rlmkit.errors.LMConfigError, match="no API key"):
        rlmkit.RLM("query -> answer")(query="q")
    with pytest.raises(TypeError, match="must return a CodeInterpreter, not NoneType"):
        rlmkit.RLM("query -> answer", interpreter_factory=lambda: None)(query="q")
    with pytest.raises(rlmkit.errors.LMConfigError, match="no API key"):
        rlmkit.RLM("query -> answer", interpreter_factory=Recorder)(query="q")
    (interp,) = Recorder.made
    assert interp.shut and not interp.started  # made before the model failed, then shut down


def test_a_child_run_uses_the_parents_interpreter_factory():
    def model(messages):
        task = messages[1]["content"]
        if "'inner question'" in task:  # the child's task: its question is shown in full
            return "```repl\nSUBMIT(answer='from the child')\n```"
        return "```repl\nSUBMIT(answer=rlm_query('inner question', context='c'))\n```"

    rlm = rlmkit.RLM(
        "context -> answer", lm=rlmkit.FunctionLM(model), max_depth=2, interpreter_factory=LocalInterpreter
    )
    pred = rlm(context="outer")
    (sub,) = pred.trajectory.turns[0].blocks[0].subcalls
    assert pred.answer == "from the child" and sub.kind == "rlm_query"
    assert sub.child.meta.sandbox == "interpreter:LocalInterpreter"  # not rlmkit's own sandbox
