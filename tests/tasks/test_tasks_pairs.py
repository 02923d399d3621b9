"""Pairs (OOLONG-Pairs): the pair set recomputed from the text; F1 scoring."""

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from programs.tasks import TaskError, pairs
from tests.tasks.test_tasks_aggregation import parsed


def recompute(example):
    table = {}
    for _, user, label in parsed(example.context):
        table.setdefault(user, {}).setdefault(label, 0)
        table[user][label] += 1
    terms = [
        (int(m), lab)
        for m, lab in re.findall(r"at least (\d+) instances? labelled '(\w+)'", example.inputs["question"])
    ]

    def has(user, term):
        return table[user].get(term[1], 0) >= term[0]

    gold = set()
    for u, v in itertools.combinations(sorted(table), 2):
        if len(terms) == 1 and has(u, terms[0]) and has(v, terms[0]):
            gold.add((u, v))
        if len(terms) == 2 and (
            (has(u, terms[0]) and has(v, terms[1])) or (has(u, terms[1]) and has(v, terms[0]))
        ):
            gold.add((u, v))
    return gold


@settings(max_examples=20, deadline=None)
@given(
    length=st.integers(1_000, 60_000),
    seed=st.integers(0, 9_999),
    users=st.integers(2, 15),
    predicate=st.sampled_from(pairs.PREDICATES),
)
def test_gold_is_derivable_from_the_context(length, seed, users, predicate):
    example = pairs.generate(1, length, seed, users=users, predicate=predicate)[0]
    assert recompute(example) == {tuple(p) for p in example.gold}
    assert all(a < b for a, b in example.gold)


def test_score_is_f1_over_pairs():
    example = pairs.generate(1, 30_000, seed=5, users=10)[0]
    gold = [tuple(p) for p in example.gold]
    assert len(gold) >= 2
    lines = "\n".join(f"({b}, {a})" for a, b in gold)  # order inside a pair does not matter
    assert pairs.score(example, lines) == 1.0
    half = gold[: len(gold) // 2]
    recall = len(half) / len(gold)
    assert pairs.score(example, [list(p) for p in half]) == pytest.approx(2 * recall / (1 + recall))
    assert pairs.score(example, "(1, 2)") == 0.0
    assert pairs.pair_f1(set(), set()) == 1.0


def test_user_count_is_capped():
    with pytest.raises(TaskError, match="from 2 to 40"):
        pairs.generate(1, 5_000, users=41)
