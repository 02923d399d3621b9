"""rlmkit.RLM takes what dspy.RLM takes: its keywords, its tools list, its name rules (checked at
construction, with its error types), and gives back what it gives: a trajectory that reads as a
list of steps, ``final_reasoning``, ValueErrors with its wording for bad inputs."""

from __future__ import annotations

import logging

import dspy
import pytest

import rlmkit
from rlmkit.errors import ConfigError
from rlmkit.prompting import Display

FENCE = "```"


def scripted(*replies: str) -> rlmkit.LM:
    """A root model that answers with ``replies`` in turn (the last one repeats)."""
    seen = []

    def answer(messages):
        seen.append(messages)
        return replies[min(len(seen), len(replies)) - 1]

    return rlmkit.FunctionLM(answer)


def code(text: str, reasoning: str = "") -> str:
    return f"{reasoning}\n{FENCE}repl\n{text}\n{FENCE}"


# -- constructor keywords ---------------------------------------------------------------------
def test_dspy_keywords_set_rlmkit_knobs():
    rlm = rlmkit.RLM("context -> answer", max_iters=4, max_llm_calls=7, max_output_chars=123, verbose=True)
    assert rlm.max_iters == rlm.max_iterations == 4
    assert rlm.max_llm_calls == 7 and rlm.display.max_output_chars == 123 and rlm.verbose


def test_defaults_and_models_read_as_dspy_rlm_gives_them():
    rlm = rlmkit.RLM("context -> answer")
    assert rlm.max_llm_calls == 50 and rlm.sub_lm is None  # dspy.RLM's defaults
    sub = dspy.LM("openai/gpt-4o-mini", api_key="unused")
    rlm = rlmkit.RLM("context -> answer", sub_lm=sub, max_llm_calls=None)
    assert rlm.sub_lm is sub and rlm.max_llm_calls is None  # the object passed; None: no cap
    assert rlm.resolved_sub_lm().model == "openai/gpt-4o-mini"


def test_interpreter_as_a_keyword_is_refused_unless_it_is_an_input():
    rlm = rlmkit.RLM("query -> answer", lm=scripted(code("SUBMIT(answer='x')")))
    with pytest.raises(TypeError, match="first positional argument"):
        rlm(query="q", interpreter=object())
    lm = scripted(code("SUBMIT(answer=interpreter)"))
    rlm = rlmkit.RLM("interpreter -> answer", lm=lm, sandbox="inline")
    assert rlm(interpreter="CPython").answer == "CPython"


def test_both_spellings_with_different_values_are_refused():
    with pytest.raises(ConfigError, match="max_iterations=3 and max_iters=5"):
        rlmkit.RLM("context -> answer", max_iterations=3, max_iters=5)
    assert rlmkit.RLM("context -> answer", max_iterations=5, max_iters=5).max_iterations == 5
    with pytest.raises(ConfigError, match="max_output_chars"):
        rlmkit.RLM("context -> answer", display=Display(max_output_chars=10), max_output_chars=20)


def test_an_interpreter_instance_is_not_a_factory():
    from dspy.primitives.local_interpreter import LocalInterpreter

    with pytest.raises(TypeError, match="zero-argument callable"):
        rlmkit.RLM("context -> answer", interpreter_factory=LocalInterpreter())


# -- names, checked before anything runs ----------------------------------------------------
@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: rlmkit.RLM("a -> b", tools=[dspy.Tool(len, name="not-valid")]), ValueError, "identifier"),
        (lambda: rlmkit.RLM("a -> b", tools=[dspy.Tool(len, name="while")]), ValueError, "keyword"),
        (lambda: rlmkit.RLM("a -> b", tools=[dspy.Tool(len, name="print")]), ValueError, "built-in sandbox"),
        (lambda: rlmkit.RLM("a -> b", tools=[dspy.Tool(len, name="SUBMIT")]), ValueError, "built-in sandbox"),
        (lambda: rlmkit.RLM("a -> b", tools=[len, dspy.Tool(abs, name="len")]), ValueError, "Duplicate"),
        (lambda: rlmkit.RLM("a -> b", tools=["len"]), TypeError, "must be callable"),
        (lambda: rlmkit.RLM("a -> b", tools={"len": len}), TypeError, "subcalls="),
        (lambda: rlmkit.RLM("print -> b"), ValueError, r"Input fields conflict with built-in.*\['print'\]"),
        (lambda: rlmkit.RLM("llm_query -> b"), ValueError, "built-in sandbox functions"),
        (lambda: rlmkit.RLM("len -> b", tools=[len]), ValueError, r"user tools: \['len'\]"),
        (lambda: rlmkit.RLM("a -> trajectory"), ValueError, r"result metadata: \['trajectory'\]"),
        (lambda: rlmkit.RLM("a -> final_reasoning"), ValueError, "result metadata"),
        (lambda: rlmkit.RLM("interpreter_factory -> b"), ValueError, "runtime configuration"),
    ],
)
def test_bad_names_fail_at_construction_with_dspy_error_types(make, error, words):
    with pytest.raises(error, match=words):
        make()


def test_missing_and_unexpected_inputs_raise_value_errors_before_any_call():
    asked = []
    lm = rlmkit.FunctionLM(lambda messages: asked.append(messages) or code("SUBMIT(answer='x')"))
    rlm = rlmkit.RLM("context, query -> answer", lm=lm, sandbox="inline")
    with pytest.raises(ValueError, match=r"Missing required inputs: \['query'\]"):
        rlm(context="c")
    with pytest.raises(ValueError, match=r"Unexpected inputs not declared in the signature: \['SUBMIT'\]"):
        rlm(context="c", query="q", SUBMIT="x")
    assert asked == []


# -- tools ------------------------------------------------------------------------------------
def test_tools_list_reaches_the_repl_sync_async_and_dspy_tool():
    def lookup(key: str) -> str:
        """Colour of a fruit."""
        return {"apple": "red"}.get(key, "?")

    async def double(x: int) -> int:
        return 2 * x

    shout = dspy.Tool(lambda text: text.upper(), name="shout", desc="Upper-case a text.")
    lm = scripted(
        code("SUBMIT(answer=f\"{lookup('apple')} {double(x=21)} {shout('hi')} {shout(text='yo')}\")")
    )
    rlm = rlmkit.RLM("context -> answer", lm=lm, tools=[lookup, double, shout], sandbox="inline")
    assert set(rlm.tools) == {"lookup", "double", "shout"}
    assert rlm(context="c").answer == "red 42 HI YO"


def test_a_failing_tool_is_an_error_the_model_sees_and_recovers_from():
    def broken() -> str:
        raise RuntimeError("tool is down")

    lm = scripted(code("broken()"), code("SUBMIT(answer='recovered')"))
    pred = rlmkit.RLM("context -> answer", lm=lm, tools=[broken], sandbox="inline")(context="c")
    assert pred.answer == "recovered" and "tool is down" in pred.trajectory[0]["output"]


# -- max_llm_calls: recoverable, per call --------------------------------------------------------
def test_llm_calls_past_max_llm_calls_raise_in_the_repl_not_abort():
    def model(messages):
        if "sub" in messages[-1]["content"] and len(messages) == 1:
            return "sub answer"
        return code(
            "out = []\nfor i in range(3):\n    try:\n        out.append(llm_query('sub'))\n"
            "    except RuntimeError as e:\n        out.append(str(e)[:23])\nSUBMIT(answer='|'.join(out))"
        )

    rlm = rlmkit.RLM("context -> answer", lm=rlmkit.FunctionLM(model), max_llm_calls=2, sandbox="inline")
    assert rlm(context="c").answer == "sub answer|sub answer|LLM call limit exceeded"
    assert rlm(context="c").answer.count("sub answer") == 2  # a fresh allowance per call


def test_children_inherit_the_interpreter_factory_verbosity_and_models():
    def factory():
        return None

    root, sub = scripted("unused"), scripted("unused")
    rlm = rlmkit.RLM(
        "context -> answer", lm=root, sub_lm=sub, interpreter_factory=factory, verbose=True, max_depth=2
    )
    child = rlm.run_spec().child()  # what an rlm_query child run reads
    assert child.interpreter_factory is factory and child.verbose and child.sub_lm is sub
    assert child.lm is root and child.depth == 1
    assert list(child.signature.input_fields) == ["context", "question"]
    rlm.child_lm = sub  # a rollout: only the top-level root is the policy
    assert rlm.run_spec().child().lm is sub and rlm.run_spec().lm is root


# -- the result ---------------------------------------------------------------------------------
def test_trajectory_reads_as_dspy_steps_and_final_reasoning_is_set():
    lm = scripted(code("print(len(context))", "Look first."), code("SUBMIT(answer='5')", "Now answer."))
    pred = rlmkit.RLM("context -> answer", lm=lm, sandbox="inline")(context="hello")
    assert len(pred.trajectory) == 2
    assert [step["code"] for step in pred.trajectory] == ["print(len(context))", "SUBMIT(answer='5')"]
    assert pred.trajectory[0] == {"reasoning": "Look first.", "code": "print(len(context))", "output": "5"}
    assert pred.final_reasoning == "Now answer."
    assert pred.trajectory.turns[0].blocks[0].stdout.strip() == "5"  # rlmkit's full model is still there


def test_a_reply_whose_code_is_not_python_is_an_error_step_the_run_recovers_from():
    lm = scripted(f"Wrong language.\n{FENCE}bash\nls -la\n{FENCE}", code("SUBMIT(answer='recovered')"))
    pred = rlmkit.RLM("context -> answer", lm=lm, sandbox="inline")(context="c")
    assert pred.answer == "recovered"
    first = pred.trajectory[0]["output"]
    assert first.startswith("[Error]") and "not a ```repl" in first
    assert pred.trajectory[1]["output"] == ""  # the submitting step ran and printed nothing


def test_verbose_logs_each_step(caplog):
    lm = scripted(code("print('seen')"), code("SUBMIT(answer='x')"))
    with caplog.at_level(logging.INFO, logger="rlmkit"):
        rlmkit.RLM("context -> answer", lm=lm, verbose=True, sandbox="inline")(context="c")
    steps = [r.getMessage() for r in caplog.records if r.getMessage().startswith("RLM step")]
    assert len(steps) == 2 and "print('seen')" in steps[0]


def test_quiet_by_default(caplog):
    lm = scripted(code("SUBMIT(answer='x')"))
    with caplog.at_level(logging.INFO, logger="rlmkit"):
        rlmkit.RLM("context -> answer", lm=lm, sandbox="inline")(context="c")
    assert not [r for r in caplog.records if r.getMessage().startswith("RLM step")]


def test_generate_action_and_extract_read_like_dspy_and_a_set_action_scripts_the_run():
    rlm = rlmkit.RLM("document, question -> summary, answer", instructions="Summarise.")
    action = rlm.generate_action.signature
    assert list(action.input_fields) == ["variables_info", "repl_history", "iteration"]
    assert list(action.output_fields) == ["reasoning", "code"]
    assert all(f"`{name}`" in action.instructions for name in ("document", "question", "summary"))
    assert action.instructions.startswith("Summarise.")
    assert list(rlm.extract.signature.output_fields) == ["summary", "answer"]

    class Script:
        def __init__(self):
            self.calls = []

        def __call__(self, **inputs):
            self.calls.append(inputs)
            return dspy.Prediction(reasoning="done", code="SUBMIT(summary='s', answer='a')")

    script = Script()
    rlm = rlmkit.RLM("document, question -> summary, answer", sandbox="inline")
    rlm.generate_action = script
    pred = rlm(document="d", question="q")
    assert (pred.summary, pred.answer, pred.final_reasoning) == ("s", "a", "done")
    assert script.calls[0]["iteration"] == "1/20"


def test_a_set_extract_answers_when_the_iterations_run_out():
    class Extract:
        def __call__(self, **inputs):
            self.inputs = inputs
            return dspy.Prediction(answer="extracted")

    lm = scripted(code("print('still looking')", "Look."))
    rlm = rlmkit.RLM("context -> answer", lm=lm, max_iters=2, sandbox="inline")
    with pytest.raises(rlmkit.errors.MaxIterationsError):
        rlm(context="c")
    rlm.extract = extract = Extract()
    pred = rlm(context="c")
    assert (pred.answer, pred.final_reasoning) == ("extracted", "Extract forced final output")
    assert "still looking" in extract.inputs["repl_history"]
