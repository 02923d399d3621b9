"""A session call resolves its run's spec once and loads each of its inputs once: the task
message and the run read the same resolved spec, and an input given at open is never loaded again."""

from __future__ import annotations

from pathlib import Path

import rlmkit
import rlmkit.run.inputs as run_inputs
import rlmkit.run.spec as run_spec
import rlmkit.session.session as session_module
from rlmkit.testing import FunctionLM
from tests.helpers.replies import repl


def test_a_session_call_resolves_its_spec_once_and_loads_each_input_once(monkeypatch, tmp_path: Path):
    resolutions: list[object] = []
    loads: list[str] = []
    real_preset, real_load = run_spec.with_preset, run_inputs.load_input

    def counted_preset(*args, **kwargs):
        resolutions.append(args[0])
        return real_preset(*args, **kwargs)

    def counted_load(name, value):
        loads.append(name)
        return real_load(name, value)

    monkeypatch.setattr(run_spec, "with_preset", counted_preset)
    monkeypatch.setattr(run_inputs, "load_input", counted_load)
    monkeypatch.setattr(session_module, "load_input", counted_load)
    context = tmp_path / "log.txt"
    context.write_text("GET /a 500\n" * 50)
    rlm = rlmkit.RLM(
        "context, question -> answer",
        lm=FunctionLM(lambda messages: repl("SUBMIT(answer=f'{question}: {len(context)}')")),
    )
    with rlm.session(context=context) as session:
        assert loads == ["context"]  # the file is read as the session opens
        for question in ("first", "second"):
            loads.clear()
            resolutions.clear()
            answer = session(question=question).answer
            assert answer == f"{question}: {len('GET /a 500' * 50) + 50}"
            assert loads == ["question"]  # the context is the session's, loaded already
            assert len(resolutions) == 1  # the task message's spec is the run's


def test_a_resolved_spec_resolves_to_itself():
    spec = rlmkit.RLM("question -> answer", lm=FunctionLM(lambda m: "x")).run_spec()
    resolved = spec.resolved()
    assert resolved.is_resolved and not spec.is_resolved
    assert resolved.resolved() is resolved
    assert not resolved.child().is_resolved  # a child's models are its own, resolved as it starts
