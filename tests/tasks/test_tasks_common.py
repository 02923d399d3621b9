"""Properties every task family shares: same seed -> same bytes, lengths honoured,
gold scores 1 with each prediction shape, bad requests raise typed errors."""

from __future__ import annotations

import time

import dspy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from programs.tasks import (
    SUITES,
    LengthError,
    TaskError,
    UnknownKnobError,
    UnknownSuiteError,
    generate,
    parse_knobs,
    real_text,
    score,
)
from rlmkit.errors import UserError

MIN_BY_SUITE = {
    "codeqa": 2_000,
    "source": 50_000,
    "code_facts": 50_000,
    "section_facts": 30_000,
}  # the families that need more than 1,000 characters
PROPS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("suite", sorted(SUITES))
@PROPS
@given(length=st.integers(1_000, 120_000), seed=st.integers(0, 10_000))
def test_same_seed_same_bytes_and_length_honoured(suite, length, seed):
    length = max(length, MIN_BY_SUITE.get(suite, 0))
    first = generate(suite, n=2, length=length, seed=seed)
    again = generate(suite, n=2, length=length, seed=seed)
    assert [e.model_dump() for e in first] == [e.model_dump() for e in again]
    for example in first:
        assert abs(len(example.context) - length) <= length * 0.01
        assert example.suite == suite and example.seed == seed
    if "context_group" in first[0].meta:  # a family of questions over one context: the questions differ
        assert first[0].inputs["question"] != first[1].inputs["question"] or first[0].gold != first[1].gold
    else:
        assert first[0].context != first[1].context  # examples differ from each other
    other = generate(suite, n=1, length=length, seed=seed + 1)[0]
    if suite in real_text.FAMILIES:  # a split's few documents: another seed may read the same ones
        assert (other.context, other.inputs["question"]) != (first[0].context, first[0].inputs["question"])
    else:
        assert other.context != first[0].context


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_gold_scores_one_in_every_prediction_shape(suite):
    for example in generate(suite, n=4, length=max(20_000, MIN_BY_SUITE.get(suite, 0)), seed=3):
        gold = example.gold
        assert score(example, gold) == 1.0
        assert score(example, {"answer": gold}) == 1.0
        assert score(example, dspy.Prediction(answer=gold)) == 1.0
        assert score(example, None) == 0.0 or suite == "aggregation" and example.gold == 0
        assert 0.0 <= score(example, "something else entirely") <= 1.0


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_ten_million_characters_generate_fast(suite):
    if suite in real_text.FAMILIES:  # whole documents of one split: their corpus sets the longest context
        with pytest.raises(LengthError, match="more real text than its corpus holds"):
            generate(suite, n=1, length=10_000_000, seed=11)
        return
    start = time.perf_counter()
    example = generate(suite, n=1, length=10_000_000, seed=11)[0]
    elapsed = time.perf_counter() - start
    assert abs(len(example.context) - 10_000_000) <= 100_000
    assert elapsed < 10.0, f"{suite} took {elapsed:.1f}s for 10M characters"


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_bad_requests_are_user_errors(suite):
    with pytest.raises(UnknownKnobError, match="no knob 'colour'"):
        generate(suite, n=1, length=5_000, colour="red")
    with pytest.raises(LengthError, match="too small"):
        generate(suite, n=1, length=999)
    with pytest.raises(LengthError, match="over the supported"):
        generate(suite, n=1, length=10_000_001)
    with pytest.raises(TaskError):
        generate(suite, n=0, length=5_000)
    assert issubclass(TaskError, UserError)


def test_unknown_suite_and_choice_knobs():
    with pytest.raises(UnknownSuiteError, match="known suites: needle"):
        generate("nope", n=1, length=5_000)
    with pytest.raises(UnknownKnobError, match="not one of"):
        generate("needle", n=1, length=5_000, kind="colours")
    with pytest.raises(LengthError, match="8 repeated requests"):
        generate("multi_needle", n=1, length=1_500, k=8)


def test_parse_knobs_types_values():
    assert parse_knobs("aggregation", ["labelled=true", "users=5"]) == {"labelled": True, "users": 5}
    assert parse_knobs("needle", ["depth=0.5", "kind=uuids"]) == {"depth": 0.5, "kind": "uuids"}
    with pytest.raises(UnknownKnobError, match="no knob 'x'"):
        parse_knobs("needle", ["x=1"])
    with pytest.raises(UnknownKnobError, match="name=value"):
        parse_knobs("needle", ["depth"])
