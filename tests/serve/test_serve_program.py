"""What ``rlmkit serve PROGRAM`` can name (a signature, a saved program, module:attr, a DSPy module
holding an RLM), and per-request budgets that may lower the program's caps but never raise them."""

from __future__ import annotations

import dspy
import openai
import pytest

import rlmkit
from rlmkit.budget import Budget
from rlmkit.errors import ConfigError
from rlmkit.serve import load_program
from rlmkit.testing import FunctionLM
from tests.helpers.serve_programs import looping_rlm, qa_model, qa_rlm, served


def test_a_signature_string_builds_an_rlm_with_the_given_model():
    made = []
    program = load_program("document, query -> summary", lm=lambda: made.append(1) or FunctionLM(qa_model))
    assert list(program.inputs) == ["document", "query"] and list(program.outputs) == ["summary"]
    assert program.is_rlm and made == [1]


def test_a_saved_program_and_its_folder_load_with_their_prompts(tmp_path):
    rlm = qa_rlm()
    rlm.instructions = "Tuned instructions."
    (tmp_path / "best").mkdir()
    rlm.save(str(tmp_path / "best" / "program.json"))
    for spec in (tmp_path / "best", tmp_path / "best" / "program.json"):
        program = load_program(str(spec), lm=lambda: FunctionLM(qa_model))
        assert program.rlm.instructions == "Tuned instructions."
    with pytest.raises(ConfigError, match="no saved program"):
        load_program(str(tmp_path / "missing.json"))


def test_module_attr_names_an_rlm_and_a_bad_spec_says_what_is_accepted():
    assert load_program("tests.helpers.serve_programs:qa").rlm.signature.output_fields.keys() == {"answer"}
    with pytest.raises(ConfigError, match="has no attribute"):
        load_program("tests.helpers.serve_programs:nothing")
    with pytest.raises(ConfigError, match="module:attr"):
        load_program("just words")


class Twice(dspy.Module):
    """A DSPy program around an RLM: asks it twice, so its usage is two runs'."""

    def __init__(self):
        super().__init__()
        self.rlm = qa_rlm()

    def forward(self, context, question):
        first = self.rlm(context=context, question=question)
        return self.rlm(context=context, question=first.answer)


def test_a_dspy_module_holding_an_rlm_is_served_with_both_runs_counted():
    with served(Twice()) as url:
        reply = openai.OpenAI(base_url=url, api_key="x").chat.completions.create(
            model="rlmkit", messages=[{"role": "user", "content": "q"}]
        )
    assert reply.choices[0].message.content == "Q (0 CHARS) (0 chars)"
    assert reply.usage.rlm_calls == 4  # two runs of a root turn and a sub-call each


def test_a_request_budget_lowers_the_cap_and_cannot_raise_it():
    client_budget = {"max_calls": 1}
    with served(qa_rlm()) as url:
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(
                model="rlmkit",
                messages=[{"role": "user", "content": "q"}],
                extra_body={"budget": client_budget},
            )
        assert info.value.status_code == 502 and info.value.body["code"] == "budget_exceeded"
        assert client.chat.completions.create(model="rlmkit", messages=[{"role": "user", "content": "q"}])
    capped = rlmkit.RLM("context, question -> answer", lm=FunctionLM(qa_model), budget=Budget(max_calls=1))
    with served(capped) as url:
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(
                model="rlmkit",
                messages=[{"role": "user", "content": "q"}],
                extra_body={"budget": {"max_calls": 100}},
            )
        assert info.value.body["code"] == "budget_exceeded"


def test_a_model_that_fails_is_a_502_and_the_connection_stays():
    from rlmkit.testing import ProviderError

    def down(messages):
        raise ProviderError("upstream overloaded", status=400)  # not retried: the call fails at once

    failing = rlmkit.RLM("context, question -> answer", lm=FunctionLM(down))
    with served(failing) as url:
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="rlmkit", messages=[{"role": "user", "content": "q"}])
        assert info.value.status_code == 502 and info.value.body["code"] == "model_error"
        assert client.models.list().data  # the same client, the same kept-alive connection


class Broken(dspy.Module):
    """A module whose own code fails, with a message that must stay on the server."""

    def __init__(self):
        super().__init__()
        self.rlm = qa_rlm()

    def forward(self, context, question):
        raise RuntimeError("internal detail: /srv/secret/path")


def test_an_unexpected_failure_is_a_500_that_tells_the_client_nothing_of_it():
    with served(Broken()) as url:
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="rlmkit", messages=[{"role": "user", "content": "q"}])
        assert info.value.body["code"] == "internal_error" and "secret" not in str(info.value.body)
        assert client.models.list().data


def test_without_the_serve_extra_the_error_names_its_install():
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import sys; sys.modules['fastapi'] = None\n"  # as if the extra were not installed
        "from rlmkit.errors import ConfigError\n"
        "try:\n    from rlmkit.serve import app\nexcept ConfigError as exc:\n    print(exc)\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert "pip install -e '.[serve]'" in out.stdout, out.stdout + out.stderr


def test_a_run_that_fails_mid_stream_ends_the_stream_with_an_openai_error():
    with served(looping_rlm()) as url:
        stream = openai.OpenAI(base_url=url, api_key="x", max_retries=0).chat.completions.create(
            model="rlmkit", messages=[{"role": "user", "content": "q"}], stream=True
        )
        seen = []
        with pytest.raises(openai.APIError, match="without an answer"):
            for chunk in stream:
                seen.append(chunk)
    assert any(getattr(c.choices[0].delta, "reasoning_content", None) for c in seen if c.choices)


def test_module_attr_is_found_in_the_folder_the_command_runs_from(tmp_path):
    import os
    import subprocess

    from tests.helpers.serve_programs import ROOT, SERVE, serving_url, write_module

    write_module(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [*SERVE, "mymodule:program", "--port", "0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = serving_url(server)
        reply = openai.OpenAI(base_url=url, api_key="x", max_retries=0).chat.completions.create(
            model="rlmkit", messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.choices[0].message.content == "from mymodule: hi"
    finally:
        server.terminate()
        server.wait(60)
