"""Natural-fact families: the answer is in the real documents with nothing inserted, is not the
words the question names, is unique in the context, and is scored by exact match."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from programs.tasks import code_facts, generate, score, section_facts

LENGTH = 100_000


@pytest.mark.parametrize("suite", ["code_facts", "section_facts"])
@pytest.mark.parametrize("seed", [1000, 5000])
def test_thirty_examples_on_dev_and_on_test_without_running_out(suite, seed):
    examples = generate(suite, n=30, length=LENGTH, seed=seed)
    asked = Counter((e.inputs["question"], str(e.gold)) for e in examples)
    assert len(asked) >= 18  # mostly different questions, not one question over many contexts
    golds = Counter(str(e.gold) for e in examples)
    assert golds.most_common(1)[0][1] <= 8  # no one answer passes the suite by being guessed
    for example in examples:
        assert score(example, example.gold) == 1.0
        if example.meta.get("kind") != "default":  # a value such as 0 may be a digit of a name
            assert str(example.gold).lower() not in example.inputs["question"].lower()


def test_code_facts_answers_are_what_the_code_says_and_unique():
    for example in generate("code_facts", n=9, length=LENGTH, seed=1000):
        context, meta, gold = example.context, example.meta, example.gold
        if meta["kind"] == "method":
            assert len(re.findall(rf"^\s*(?:async\s+)?def {meta['m']}\(", context, re.M)) == 1
            cls_at = context.rfind(f"class {gold}", 0, context.find(f"def {meta['m']}("))
            assert cls_at >= 0
        elif meta["kind"] == "default":
            assert len(re.findall(rf"^\s*(?:async\s+)?def {meta['f']}\(", context, re.M)) == 1
            signature = context[context.find(f"def {meta['f']}(") :].split(":\n", 1)[0]
            assert meta["p"] in signature and gold.replace(" ", "") in signature.replace(" ", "")
        else:
            assert [line.strip() for line in context.splitlines()].count(meta["line"]) == 1
            at = context.find(meta["line"])
            assert re.findall(r"def (\w+)\(", context[:at])[-1] == gold or f"def {gold}(" in context[:at]


def test_section_facts_heading_is_above_the_only_definition():
    for example in generate("section_facts", n=10, length=LENGTH, seed=5000):
        term, context = example.meta["term"], example.context
        defined = [
            m.start()
            for m in re.finditer(rf"\b{re.escape(term)}\b\W+(?:::=|means|shall mean|refers to)", context)
        ]
        assert len(defined) == 1, term
        assert context.rfind(example.gold, 0, defined[0]) >= 0


def _one(suite, kind):
    for example in generate(suite, n=6, length=LENGTH, seed=1000):
        if example.meta["kind"] == kind:
            return example
    raise AssertionError(kind)


def test_code_facts_exact_scoring():
    method = _one("code_facts", "method")
    assert score(method, f"`{method.gold}`") == 1.0
    assert score(method, f"{method.gold}.{method.meta['m']}") == 1.0
    assert score(method, f"{method.gold} or Other") == 0.0  # naming several candidates is no match
    assert score(method, method.meta["m"]) == 0.0  # the name the question gives is not the answer
    default = _one("code_facts", "default")
    assert score(default, f"{default.meta['p']}={default.gold}") == 1.0
    assert score(default, default.gold.replace("'", '"')) == 1.0
    assert score(default, "None") == 0.0
    enclosing = _one("code_facts", "enclosing")
    assert score(enclosing, f"{enclosing.gold}()") == 1.0
    assert score(enclosing, f"{enclosing.gold} and then something") == 0.0


def test_section_facts_exact_scoring():
    example = generate("section_facts", n=1, length=LENGTH, seed=5000)[0]
    gold = example.gold
    assert score(example, gold.upper()) == 1.0
    assert score(example, f'"{gold}"') == 1.0
    assert score(example, f"{gold} or Definitions") == 0.0
    assert section_facts.heading_key("0. Definitions.") == section_facts.heading_key("Definitions")
    assert code_facts.score(generate("code_facts", n=1, length=LENGTH, seed=5000)[0], "") == 0.0
