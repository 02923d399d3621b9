"""Three splits in one place: which seed reads which documents and which pools, with nothing
shared between them that a template habit could carry from one split to another."""

from __future__ import annotations

import dataclasses
import re
import string

import pytest

from optimizers.selftrain.recipe import HELD_OUT_SEEDS
from programs.tasks import generate, multi_needle, multihop, needle, prose, real_text, records
from programs.tasks.base import TaskError
from programs.tasks.splits import DEV_SEEDS, SPLITS, TEST_SEEDS, split_for

POOLED = {"needle": needle, "prose": prose, "multi_needle": multi_needle, "multihop": multihop}
# dev and train share RULER's needle sentence and wordings (scripted teachers are written against it)
SHARED_BY_TRAIN_AND_DEV = {"needle": set(needle._RULER)}
LENGTHS = {"prose": 20_000}


def test_seeds_fall_in_three_splits_and_training_stops_where_the_recipe_does():
    assert [split_for(s) for s in (0, 999, 1000, 4999, 5000, 10**6)] == [
        "train", "train", "dev", "dev", "test", "test",
    ]  # fmt: skip
    assert DEV_SEEDS == HELD_OUT_SEEDS == real_text.HELD_OUT_SEEDS and TEST_SEEDS == 5000
    with pytest.raises(TaskError, match="seed"):
        split_for(-1)


def strings(value) -> set[str]:
    """Every string inside a pool (dataclass fields, dicts, tuples)."""
    if isinstance(value, str):
        return {value}
    if dataclasses.is_dataclass(value):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    elif isinstance(value, dict):
        value = [*value.keys(), *value.values()] if not _relation_keys(value) else list(value.values())
    return set().union(*(strings(v) for v in value)) if value else set()


def _relation_keys(value: dict) -> bool:  # relation and label names are the task's, shared on purpose
    return set(value) <= set(multihop.RELATIONS) | set(records.LABELS) | set(real_text.FORMS)


def pool_strings(module, split: str) -> set[str]:
    found = strings(module.POOLS[split])
    structural = {"org", "person", "city", "river"}  # entity types of multihop's relations
    return found - structural


@pytest.mark.parametrize("family", sorted(POOLED))
def test_each_splits_pools_are_disjoint(family):
    module = POOLED[family]
    train, dev, test = (pool_strings(module, s) for s in SPLITS)
    assert not test & train and not test & dev
    assert train & dev <= SHARED_BY_TRAIN_AND_DEV.get(family, set())


def test_record_texts_are_disjoint_between_splits():
    texts = {s: {t for ts in records.POOLS[s].values() for t in ts} for s in SPLITS}
    assert not texts["train"] & texts["dev"] and not texts["train"] & texts["test"]
    assert not texts["dev"] & texts["test"]


def fragments(text: str) -> list[str]:
    """What of a pool string an example would show: a name whole; of a template, its literal
    parts between fields long enough to be its own (not a joining word like "about")."""
    if "{" not in text:
        return [text] if len(text) >= 4 else []
    parts = [literal.strip() for literal, *_ in string.Formatter().parse(text)]
    return [p for p in parts if len(p) >= 12]


def test_no_test_pool_string_appears_in_an_example_from_a_train_seed():
    banned = {
        frag for module in POOLED.values() for s in pool_strings(module, "test") for frag in fragments(s)
    }
    banned |= {t for ts in records.POOLS["test"].values() for t in ts}
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(f)}(?!\w)" for f in sorted(banned, key=len)[::-1]))
    families = [*POOLED, "aggregation", "pairs", "shared_context"]
    for family in families:
        for seed in (0, 1, 999):
            for example in generate(family, n=4, length=LENGTHS.get(family, 8_000), seed=seed):
                text = example.context + "\n" + example.inputs["question"]
                assert not pattern.search(text), (family, seed, pattern.search(text).group())


def test_corpus_documents_record_their_origin_and_none_from_debian_docs_is_in_train():
    for name in ("prose", "source"):
        documents = real_text.corpus(name)["documents"]
        assert {d["split"] for d in documents} == set(SPLITS)
        assert all(d["origin"].startswith(("cpython:", "debian:")) for d in documents)
        assert not [
            d["title"] for d in documents if d["split"] == "train" and d["origin"].startswith("debian:")
        ]
    licences = [d for d in real_text.corpus("prose")["documents"] if d["id"].startswith("licence/")]
    assert licences and all(d["origin"].startswith("debian:/usr/share/") for d in licences)


def test_no_paragraph_is_shared_between_documents_of_two_splits():
    for name in ("prose", "source"):
        seen: dict[str, str] = {}
        for doc in real_text.corpus(name)["documents"]:
            for paragraph in {p.strip() for p in doc["text"].split("\n\n") if len(p.strip()) > 80}:
                assert seen.setdefault(paragraph, doc["split"]) == doc["split"], (name, doc["title"])


def test_real_text_examples_read_only_their_splits_documents():
    for seed in (3, 1003, 5003):
        own = {d["title"] for d in real_text.documents("source", seed)}
        for suite in ("source", "code_facts"):
            example = generate(suite, n=1, length=60_000, seed=seed)[0]
            shown = set(re.findall(r"^# ===== file: (.+) =====$", example.context, re.M))
            assert shown and shown <= own
