"""Multi-hop (BrowseComp-Plus): the chain walked through the text reaches the gold; facts are unique."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from programs.tasks import multihop
from programs.tasks.splits import pools

DOC = re.compile(r"^\[Doc (\d+)\] (.+)$", re.MULTILINE)


def facts(context, relations=multihop.RELATIONS):
    table = {}
    for relation, (_, _, template, _) in relations.items():
        pattern = (
            re.escape(template)
            .replace(r"\{s\}", r"(?P<s>[A-Z][\w ]*?)")
            .replace(r"\{o\}", r"(?P<o>[A-Z][\w ]*?)")
        )
        for match in re.finditer(rf"^{pattern}$", context, re.MULTILINE):
            key = (relation, match["s"])
            assert key not in table, f"two {relation} facts for {match['s']}"
            table[key] = match["o"]
    return table


@settings(max_examples=15, deadline=None)
@given(
    length=st.integers(1_000, 80_000),
    seed=st.integers(0, 9_999),
    hops=st.integers(1, 3),
    negatives=st.integers(0, 1),
)
def test_chain_through_the_text_reaches_the_gold(length, seed, hops, negatives):
    example = multihop.generate(1, length, seed, hops=hops, negatives=negatives)[0]
    table, entity = facts(example.context, pools(seed, multihop.POOLS).relations), example.meta["start"]
    docs = {int(n): title for n, title in DOC.findall(example.context)}
    for relation, doc in zip(example.meta["relations"], example.meta["evidence"]):
        assert docs[doc] == entity  # each evidence document is about the hop's subject
        entity = table[(relation, entity)]
    assert entity == example.gold
    assert example.meta["start"] in example.inputs["question"]


def test_hard_negatives_share_name_stems():
    example = multihop.generate(1, 20_000, seed=2, hops=2, negatives=2)[0]
    titles = [t for _, t in DOC.findall(example.context)]
    start = example.meta["start"]
    stem = (
        start.split()[-1][:4]
        if example.meta["relations"][0] in ("birthplace", "employer", "mentor")
        else start[:4]
    )
    assert sum(stem in t for t in titles) >= 2


def test_exact_entity_score():
    example = multihop.generate(1, 5_000, seed=3, hops=2)[0]
    assert multihop.score(example, example.gold.upper()) == 1.0
    assert multihop.score(example, f"the {example.gold}.") == 1.0
    assert multihop.score(example, example.gold + " Jr") == 0.0
