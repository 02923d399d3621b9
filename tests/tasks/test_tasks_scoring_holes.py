"""Scorers that do not reward wrong answers: a sentence merged with a decoy's, a name answer that
names every candidate, a list of every candidate, always answering one letter."""

from __future__ import annotations

from programs.eval_results import EvalResult, ExampleResult
from programs.tasks import codeqa, generate, real_text, score


def _prose(form: str, seed: int = 1000):
    for example in generate("prose", n=4, length=20_000, seed=seed, decoys=1):
        if example.meta["form"] == form:
            return example
    raise AssertionError(form)


def test_a_sentence_that_merges_the_fact_with_a_decoys_does_not_score_one():
    example = _prose("sentence")
    gold, decoy = example.gold, example.meta["decoys"][0]
    assert score(example, gold) == 1.0
    merged = f"{gold}, and also {decoy}"
    assert score(example, merged) <= 0.5
    assert score(example, decoy) == 0.0
    # the rule itself: decoy words the gold does not have are taken off
    assert (
        real_text.score_form("sentence", "the cat sat on red mats", "the cat sat on red mats", ["dogs bark"])
        == 1
    )
    assert (
        real_text.score_form("sentence", "cat sat red mats", "cat sat red mats dogs bark", ["dogs bark"]) == 0
    )


def test_a_name_answer_that_names_every_candidate_scores_zero():
    example = _prose("name")
    assert score(example, example.gold) == 1.0
    assert score(example, f"{example.gold} or {example.meta['decoys'][0]}") == 0.0


def test_a_list_answer_that_names_every_candidate_scores_zero():
    example = _prose("list")
    everything = example.gold + example.meta["decoys"][0]
    assert score(example, example.gold) == 1.0 and score(example, everything) == 0.0


def test_codeqa_gold_letters_are_balanced_and_always_one_letter_scores_a_quarter():
    for seed in (0, 1000, 5000):
        examples = generate("codeqa", n=8, length=3_000, seed=seed)
        golds = [e.gold for e in examples]
        assert sorted(golds) == sorted("AABBCCDD")  # each letter twice in eight, whatever the seed
        assert golds == [e.gold for e in generate("codeqa", n=8, length=3_000, seed=seed)]
        for letter in codeqa.LETTERS:
            assert sum(score(e, letter) for e in examples) / len(examples) == 0.25
        assert codeqa.same_letter_baseline(examples) == 0.25
        for example in examples:  # the gold letter still points at the correct option
            assert example.meta["options"][codeqa.LETTERS.index(example.gold)] == example.meta["correct"]
    unbalanced = generate("codeqa", n=6, length=3_000, seed=2)  # six: two letters come up twice
    assert codeqa.same_letter_baseline(unbalanced) == 2 / 6


def test_a_multiple_choice_suites_summary_shows_the_same_letter_baseline_beside_its_mean():
    examples = generate("codeqa", n=4, length=3_000, seed=1000)
    always_a = [
        ExampleResult(id=e.id, suite="codeqa", gold=e.gold, answer="A", score=score(e, "A")) for e in examples
    ]
    summary = EvalResult(rows=always_a).summary()
    assert summary["mean"] == summary["same_letter_baseline"] == 0.25
    needle = [ExampleResult(id="n", suite="needle", gold=["123"], answer="123", score=1.0)]
    assert "same_letter_baseline" not in EvalResult(rows=needle).summary()
