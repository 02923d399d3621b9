"""Aggregation (OOLONG): answers recomputed from the text alone; OOLONG's scoring rule."""

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from programs.tasks import aggregation
from programs.tasks.records import MONTH_NAMES, MONTHS, POOLS

LABEL_OF = {text: label for pool in POOLS.values() for label, texts in pool.items() for text in texts}
LINE = re.compile(
    r"^Date: (\w{3}) \d\d, (\d{4}) \|\| User: (\d+) \|\| Instance: (.+?)(?: \|\| Label: (\w+))?$",
    re.MULTILINE,
)


def parsed(context):
    rows = []
    for mon, year, user, text, label in LINE.findall(context):
        assert LABEL_OF[text] == (label or LABEL_OF[text])  # the written label agrees with the text
        rows.append(((int(year), MONTHS.index(mon) + 1), int(user), LABEL_OF[text]))
    return rows


def recompute(example):
    rows, q = parsed(example.context), example.inputs["question"]
    labels = re.findall(r"'(\w+)'", q)
    kind = example.meta["question_type"]
    if kind == "count":
        return sum(r[2] == labels[0] for r in rows)
    if kind == "compare":
        a, b = (sum(r[2] == x for r in rows) for x in labels)
        return aggregation.COMPARE_ANSWERS[0 if a > b else 1 if a < b else 2]
    if kind == "per_user":
        user = int(re.search(r"User (\d+)", q).group(1))
        return sum(r[1] == user and r[2] == labels[0] for r in rows)
    if kind == "per_month":
        name, year = re.search(r"dated in (\w+) (\d{4})", q).groups()
        month = (int(year), MONTH_NAMES.index(name) + 1)
        return sum(r[0] == month and r[2] == labels[0] for r in rows)
    per = Counter(r[0] for r in rows if r[2] == labels[0]).most_common(2)
    assert len(per) == 1 or per[0][1] > per[1][1]
    return f"{MONTH_NAMES[per[0][0][1] - 1]} {per[0][0][0]}"


@settings(max_examples=20, deadline=None)
@given(
    length=st.integers(1_000, 60_000),
    seed=st.integers(0, 9_999),
    labelled=st.booleans(),
    question=st.sampled_from(aggregation.QUESTIONS),
)
def test_gold_is_derivable_from_the_context(length, seed, labelled, question):
    example = aggregation.generate(1, length, seed, labelled=labelled, question=question)[0]
    assert len(parsed(example.context)) == example.meta["records"]
    assert recompute(example) == example.gold


@pytest.mark.parametrize(
    "predicted,expected",
    [(12, 1.0), ("12", 1.0), ("about 14 instances", 0.75**2), ("9", 0.75**3), ("none", 0.0)],
)
def test_numbers_score_three_quarters_per_unit_off(predicted, expected):
    example = aggregation.generate(1, 5_000, seed=1, question="count")[0].model_copy(update={"gold": 12})
    assert aggregation.score(example, predicted) == pytest.approx(expected)


def test_dates_are_parsed_and_labels_match_case_insensitively():
    month = next(
        e
        for e in aggregation.generate(6, 30_000, seed=2, question="top_month")
        if e.meta["answer_type"] == "month"
    )
    name, year = month.gold.split()
    assert aggregation.score(month, f"{name[:3]} {year}") == 1.0
    assert aggregation.score(month, f"{year}-{MONTH_NAMES.index(name) + 1:02d}") == 1.0
    assert aggregation.score(month, f"{name} {int(year) + 1}") == 0.0
    compare = aggregation.generate(1, 5_000, seed=3, question="compare")[0]
    assert aggregation.score(compare, compare.gold.upper() + ".") == 1.0
    assert aggregation.score(compare, "it depends") == 0.0
