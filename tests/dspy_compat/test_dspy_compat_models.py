"""Every DSPy LM is called as itself: DummyLM, a custom BaseLM's own forward, a callable sub_lm;
dspy.configure / dspy.context choose the model when none is given; DSPy records the calls once."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils.dummies import DummyLM

import rlmkit
from rlmkit.model_choice import resolve_lm
from rlmkit.models.dspy_lm import DSPyLM, from_fields, reply_text


def test_dummy_lm_drives_a_run_through_dspy_configure_and_context():
    steps = [
        {"reasoning": "Count first.", "code": "n = len(context)\nprint(n)"},
        {"reasoning": "Submit.", "code": "SUBMIT(answer=n)"},
    ]
    rlm = rlmkit.RLM("context -> answer: int", sandbox="inline")
    lm = DummyLM(steps)
    with dspy.context(lm=lm):
        pred = rlm(context="abcd")
    assert pred.answer == 4 and len(pred.trajectory) == 2 and pred.trajectory[0]["output"] == "4"
    assert len(lm.history) == 2  # DSPy's own history of the LM, one entry per root turn

    other = DummyLM([{"reasoning": "r", "code": "SUBMIT(answer=7)"}])
    with dspy.context(lm=other):
        assert rlm(context="abcd").answer == 7  # the model in force at call time


def test_a_custom_base_lm_runs_its_own_forward():
    class Canned(dspy.BaseLM):
        def __init__(self):
            super().__init__("canned/model", cache=False)
            self.forwarded = 0

        def forward(self, prompt=None, messages=None, **kwargs):
            self.forwarded += 1
            text = "Done.\n```repl\nSUBMIT(answer='canned')\n```"
            return dspy.utils.dummies.DummyLM([{"x": text}]).forward(
                messages=[{"role": "user", "content": ""}]
            )

        async def aforward(self, prompt=None, messages=None, **kwargs):
            return self.forward(prompt, messages, **kwargs)

    lm = Canned()
    assert isinstance(resolve_lm(lm), DSPyLM)
    pred = rlmkit.RLM("context -> answer", lm=lm, sandbox="inline")(context="c")
    assert lm.forwarded == 1 and pred.answer == "canned"


def test_a_callable_sub_lm_answers_llm_query():
    prompts = []

    def sub_lm(prompt):
        prompts.append(prompt)
        return [f"echo:{prompt}"]

    root = DummyLM([{"reasoning": "ask", "code": "SUBMIT(answer=llm_query('ping'))"}])
    rlm = rlmkit.RLM("context -> answer", lm=root, sub_lm=sub_lm, sandbox="inline")
    assert rlm(context="c").answer == "echo:ping" and prompts == ["ping"]


def test_dspy_callbacks_see_each_dspy_lm_call_once():
    from dspy.utils.callback import BaseCallback

    class Count(BaseCallback):
        starts = 0

        def on_lm_start(self, call_id, instance, inputs):
            Count.starts += 1

    lm = DummyLM([{"reasoning": "r", "code": "print(1)"}, {"reasoning": "r", "code": "SUBMIT(answer='x')"}])
    with dspy.context(lm=lm, callbacks=[Count()]):
        rlmkit.RLM("context -> answer", sandbox="inline")(context="c")
    assert Count.starts == 2


@pytest.mark.parametrize(
    ("response", "text"),
    [("plain", "plain"), (["first", "second"], "first"), ([{"text": "t"}], "t")],
)
def test_reply_text_reads_dspy_response_shapes(response, text):
    assert reply_text(response) == text


@pytest.mark.parametrize(
    ("response", "words"),
    [(42, "non-empty list"), ([], "non-empty list"), ([{"tool_calls": []}], "must contain text")],
)
def test_reply_text_refuses_what_dspy_refuses(response, words):
    with pytest.raises(TypeError, match=words):
        reply_text(response)


def test_dspy_field_replies_become_a_code_block():
    reply = "[[ ## reasoning ## ]]\nThink.\n\n[[ ## code ## ]]\nprint(1)\n\n[[ ## completed ## ]]"
    assert from_fields(reply) == "Think.\n\n```repl\nprint(1)\n```"
    assert from_fields("no fields here") == "no fields here"


def test_model_strings_and_plain_dspy_lm_keep_the_direct_transport(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")
    assert isinstance(resolve_lm("openai/gpt-4o-mini"), rlmkit.LM)
    plain = dspy.LM("openai/gpt-4o-mini", api_key="x")
    assert isinstance(resolve_lm(plain).direct, rlmkit.LM) and resolve_lm(plain) is resolve_lm(plain)

    class Sub(dspy.LM):
        pass

    assert isinstance(resolve_lm(Sub("openai/gpt-4o-mini", api_key="x")), DSPyLM)  # its overrides run


def test_a_plain_dspy_lm_on_the_direct_transport_keeps_its_own_history_and_is_the_callback_instance(serve):
    from dspy.utils.callback import BaseCallback

    server, _ = serve(lambda body: "Done.\n```repl\nSUBMIT(answer='direct')\n```")
    lm = dspy.LM("openai/scripted", api_base=server.url, api_key="test-key", cache=False)
    seen = []

    class Instances(BaseCallback):
        def on_lm_start(self, call_id, instance, inputs):
            seen.append(instance)

    with dspy.context(callbacks=[Instances()]):
        pred = rlmkit.RLM("context -> answer", lm=lm, sandbox="inline")(context="c")
    assert pred.answer == "direct" and server.requests  # the direct transport made the request
    assert len(lm.history) == 1 and lm.history[0]["outputs"] == [
        "Done.\n```repl\nSUBMIT(answer='direct')\n```"
    ]
    assert seen == [lm]

    with_callbacks = dspy.LM("openai/scripted", api_base=server.url, api_key="k", callbacks=[Instances()])
    assert isinstance(resolve_lm(with_callbacks), DSPyLM)  # its own callbacks run only if it is called
