"""Clients other than the openai SDK calling a served RLM for real: litellm (plain and streaming),
``dspy.LM``, and a served RLM as the ``sub_lm`` of another rlmkit RLM."""

from __future__ import annotations

import dspy
import litellm
import pytest

import rlmkit
from rlmkit.testing import FunctionLM
from tests.helpers.replies import repl
from tests.helpers.serve_programs import qa_rlm, served

KEY = "clients-key"


@pytest.fixture(scope="module")
def url():
    with served(qa_rlm(), api_key=KEY) as base:
        yield base


def test_litellm_completion_with_an_api_base(url):
    reply = litellm.completion(
        model="openai/rlmkit",
        api_base=url,
        api_key=KEY,
        messages=[{"role": "user", "content": "from litellm"}],
    )
    assert reply.choices[0].message.content == "FROM LITELLM (0 chars)"
    assert reply.usage.total_tokens > 0


def test_litellm_streaming_shows_the_reasoning_then_the_answer(url):
    stream = litellm.completion(
        model="openai/rlmkit",
        api_base=url,
        api_key=KEY,
        messages=[{"role": "user", "content": "streamed"}],
        stream=True,
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    assert content == "STREAMED (0 chars)" and "[turn 1]" in reasoning


def test_dspy_lm_calls_the_served_rlm_as_a_model(url):
    lm = dspy.LM("openai/rlmkit", api_base=url, api_key=KEY, cache=False)
    (output,) = lm("from dspy")  # DSPy keeps a reasoning model's reasoning beside the text
    assert output["text"] == "FROM DSPY (0 chars)" and "[turn 1]" in output["reasoning_content"]


def test_a_served_rlm_is_another_rlms_sub_lm(url):
    root = FunctionLM(lambda messages: repl("a = llm_query('what is up')", "SUBMIT(answer=a)"))
    outer = rlmkit.RLM(
        "context -> answer", lm=root, sub_lm=dspy.LM("openai/rlmkit", api_base=url, api_key=KEY, cache=False)
    )
    prediction = outer(context="anything")
    assert prediction.answer == "WHAT IS UP (0 chars)"
    (subcall,) = list(prediction.trajectory.iter_subcalls())
    assert subcall.model == "openai/rlmkit" and subcall.reply == "WHAT IS UP (0 chars)"
