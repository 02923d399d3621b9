"""Needle: the gold values are exactly the key's needles; RULER's fraction-found score."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from programs.tasks import needle
from programs.tasks.splits import pools


@settings(max_examples=15, deadline=None)
@given(
    length=st.integers(1_000, 80_000),
    seed=st.integers(0, 9_999),
    kind=st.sampled_from(needle.CHOICES["kind"]),
    values=st.integers(1, 3),
    haystack=st.sampled_from(needle.CHOICES["haystack"]),
)
def test_gold_is_derivable_from_the_context(length, seed, kind, values, haystack):
    example = needle.generate(1, length, seed, kind=kind, values=values, haystack=haystack)[0]
    key, pool = example.meta["key"], pools(seed, needle.POOLS)
    stated = re.escape(needle.needle_sentence(kind, "KEY", "VALUE", pool)).removesuffix(r"\.")
    pattern = stated.replace("KEY", re.escape(key)).replace("VALUE", r"(\S+?)") + r"\.?(?:\s|$)"
    assert sorted(re.findall(pattern, example.context)) == sorted(example.gold)
    assert key in example.inputs["question"]
    others = re.findall(
        stated.replace("VALUE", r"\S+?").replace("KEY", r"(\S+?)") + r"\.?(?:\s|$)", example.context
    )
    assert len(others) == values + 2  # two distractor keys by default
    assert others.count(key) == values


def test_depth_sweeps_from_start_to_end():
    examples = needle.generate(3, 50_000, seed=1)
    positions = [e.context.find(f"for {e.meta['key']} is: {e.gold[0]}") / len(e.context) for e in examples]
    assert [e.meta["depth"] for e in examples] == [0.0, 0.5, 1.0]
    assert positions[0] < 0.05 and 0.4 < positions[1] < 0.6 and positions[2] > 0.9


def test_score_is_the_fraction_of_values_found_case_insensitive():
    example = needle.generate(1, 5_000, seed=2, values=4, kind="uuids")[0]
    a, b, c, _d = example.gold
    assert needle.score(example, f"{a.upper()} and {b}") == 0.5
    assert needle.score(example, [a, b, c]) == 0.75
    assert needle.score(example, {"answer": " ".join(example.gold)}) == 1.0
    assert needle.score(example, "no idea") == 0.0
