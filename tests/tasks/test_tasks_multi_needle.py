"""Multi-needle (MRCR): the i-th request's reply is the gold; hash-gated difflib score."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from programs.tasks import multi_needle

TURN = re.compile(r"User: Write a (.+?) about (.+?)\.\nAssistant: (.*?)\n\n", re.DOTALL)


@settings(max_examples=15, deadline=None)
@given(length=st.integers(3_000, 80_000), seed=st.integers(0, 9_999), k=st.sampled_from((2, 4, 8)))
def test_gold_is_derivable_from_the_context(length, seed, k):
    nth, count = (multi_needle.generate(1, length, seed, k=k, mode=m)[0] for m in ("nth", "count"))
    meta = nth.meta
    replies = [r for f, t, r in TURN.findall(nth.context) if (f, t) == (meta["form"], meta["topic"])]
    assert len(replies) == k
    assert meta["hash"] + replies[meta["index"] - 1] == nth.gold
    asked = [(f, t) for f, t, _ in TURN.findall(count.context)].count(
        (count.meta["form"], count.meta["topic"])
    )
    assert asked == count.gold == k


def test_score_needs_the_hash_then_is_a_similarity_ratio():
    example = multi_needle.generate(1, 10_000, seed=4, k=4, index=2)[0]
    tag, text = example.meta["hash"], example.gold.removeprefix(example.meta["hash"])
    assert multi_needle.score(example, example.gold) == 1.0
    assert multi_needle.score(example, text) == 0.0  # right text, no hash
    half = multi_needle.score(example, tag + text[: len(text) // 2])
    assert 0.4 < half < 0.8
    assert multi_needle.score(example, tag + " nothing like it") < 0.3


def test_count_mode_is_exact():
    example = multi_needle.generate(1, 10_000, seed=5, k=8, mode="count")[0]
    assert multi_needle.score(example, "8") == 1.0
    assert multi_needle.score(example, "It was requested 8 times") == 1.0
    assert multi_needle.score(example, 7) == 0.0
