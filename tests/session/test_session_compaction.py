"""Compaction: a long session's task message stays within its share of the model's window, while
every REPL variable stays, and the trajectory says what was summarised or left out."""

from __future__ import annotations

import re

import pytest

import rlmkit
from rlmkit.errors import UserError
from rlmkit.model_choice import window_tokens_of
from rlmkit.session.compaction import CHARS_PER_TOKEN, DEFAULT_COMPACT_AT
from rlmkit.trajectory import Compaction, Trajectory
from tests.helpers.replies import repl

CONTEXT = "GET /a 200\nGET /b 500\n" * 200
ANSWER = "the hosts were " + "abcdefgh " * 160  # ~1,500 characters: each call's answer is long
LIMIT = int(16_384 * DEFAULT_COMPACT_AT * CHARS_PER_TOKEN)


class Model:
    """Call ``i`` (question ``q{i}``) makes ``v{i}``; call 1 also ``first``; the last reads them."""

    def __init__(self, last: int):
        self.last = last
        self.tasks: list[str] = []

    def __call__(self, messages: list[dict]) -> str:
        task = messages[1]["content"]
        self.tasks.append(task)
        number = int(re.search(r"`question` \(str[^)]*\): 'q(\d+)'", task).group(1))
        code = [f"v{number} = list(range({number}))"]
        if number == 1:
            code.append("first = {'made at': 1, 'hosts': ['a', 'b']}")
        if number == self.last:
            names = ", ".join(f"v{i}" for i in range(1, number + 1))
            code.append(f"SUBMIT(answer=repr((first, [len(v) for v in ({names},)])))")
        else:
            code.append(f"SUBMIT(answer={ANSWER!r})")
        return repl("\n".join(code))


def long_session(rlm: rlmkit.RLM, **options) -> rlmkit.Session:
    # every call remembered in full until the window says otherwise
    return rlm.session(context=CONTEXT, history_calls=50, history_chars=500_000, **options)


def test_a_50_call_session_on_a_16k_window_keeps_answering_within_its_share():
    model = Model(last=50)
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model, window_tokens=16_384))
    with long_session(rlm) as s:
        preds = [s(question=f"q{i}") for i in range(1, 51)]

    assert len(model.tasks) == 50 and max(len(task) for task in model.tasks) <= LIMIT
    first, lengths = eval(preds[-1].answer)  # the last call read every variable the calls made
    assert first == {"made at": 1, "hosts": ["a", "b"]} and lengths == list(range(1, 51))
    assert {"first", "v1", "v49"} <= set(s.variables)

    records = [p.trajectory.meta.compaction for p in preds]
    assert records[0] is None and records[-1] is not None  # nothing to compact at first
    last = records[-1]
    assert isinstance(last, Compaction) and last.window_tokens == 16_384 and last.limit_chars == LIMIT
    assert last.full_chars > LIMIT >= last.task_chars == len(model.tasks[-1])
    shortened = last.left_out_calls + last.summarised_calls
    assert shortened == list(range(1, len(shortened) + 1)) and 49 not in shortened  # oldest first
    assert "[49] question: q49" in model.tasks[-1]  # the newest call is shown in full
    summary = model.tasks[-1].split("[1] question: q1\n    -> answer: ")[1].split("\n")[0]
    assert 1 in last.summarised_calls and len(summary) < 200 < len(ANSWER)  # one short line


def test_the_record_survives_the_trajectory_file_typed():
    model = Model(last=0)
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model, window_tokens=16_384))
    with long_session(rlm) as s:
        preds = [s(question=f"q{i}") for i in range(1, 14)]
    record = preds[-1].trajectory.meta.compaction
    assert record is not None and record.summarised_calls
    again = Trajectory.model_validate_json(preds[-1].trajectory.model_dump_json())
    assert again.meta.compaction == record


def test_when_calls_alone_do_not_fit_old_variables_are_left_to_show_vars():
    model = Model(last=0)
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model))
    with long_session(rlm, window_tokens=512, compact_at=1.0) as s:  # the session's own window
        preds = [s(question=f"q{i}") for i in range(1, 61)]
    record = preds[-1].trajectory.meta.compaction
    assert record.unlisted_variables[:2] == ["v1", "first"] and record.task_chars <= 2_048
    assert "SHOW_VARS() lists them all" in model.tasks[-1] and "`v1`" not in model.tasks[-1]
    assert {"v1", "first"} <= set(s.variables)  # unlisted, not gone


def test_without_a_known_window_nothing_is_compacted():
    model = Model(last=0)
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model))
    assert window_tokens_of(rlm.lm) is None
    with long_session(rlm) as s:
        preds = [s(question=f"q{i}") for i in range(1, 13)]
    assert all(p.trajectory.meta.compaction is None for p in preds)
    assert "[11] question: q11" in model.tasks[-1] and "[1] question: q1\n" in model.tasks[-1]


def test_bad_compaction_settings_fail_at_open():
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(Model(last=0)))
    with pytest.raises(UserError, match="compact_at"):
        rlm.session(context=CONTEXT, compact_at=1.5)
    with pytest.raises(UserError, match="window_tokens"):
        rlm.session(context=CONTEXT, window_tokens=10)
