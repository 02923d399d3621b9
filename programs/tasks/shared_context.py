"""Several questions over one long context (aggregation questions over one set of records).

Examples come in groups of ``questions``: every example of a group has the same context (the
same str object) and its own question, and ``meta["context_group"]`` names the group.
``programs.evaluate`` runs a group's questions one after another in one ``rlmkit.Session``
(the context crosses into the REPL once; what the model computed for one question is there
for the next) and scores each question on its own, with OOLONG's rule.
"""

from __future__ import annotations

import random
from typing import Any

from programs.tasks.aggregation import QUESTIONS, ask
from programs.tasks.aggregation import score as aggregation_score
from programs.tasks.base import Example, ProgramRecipe, Suite, build_examples, example_rng
from programs.tasks.records import (
    CLASSIFY_INSTANCE,
    RECORDS_STRATEGY,
    minimum_length,
    records_context,
    users_check,
)

NAME = "shared_context"
KNOBS = {"questions": 4, "labelled": False, "users": 20}
CHOICES = {"labelled": (True, False), "questions": tuple(range(1, 21))}
MAX_USERS = 1000
MAX_DRAWS = 100  # questions drawn for one example until one its group has not asked yet


def generate(n: int, length: int, seed: int = 0, **knobs: Any) -> list[Example]:
    contexts: dict[int, tuple[Any, str]] = {}  # group -> (records, context): one object per group
    asked: dict[int, set[str]] = {}  # group -> its questions so far: a group never asks one twice

    def one(rng: random.Random, knobs: dict, index: int, n: int, length: int):
        group = index // knobs["questions"]
        if group not in contexts:  # the context depends on the group only, not on n or the index
            contexts[group] = records_context(
                example_rng(NAME, seed, -1 - group, length, knobs), knobs, length, seed
            )
        records, context = contexts[group]
        seen = asked.setdefault(group, set())
        for _ in range(MAX_DRAWS):  # independent draws over a few records can repeat a question
            question, gold, answer_type, kind = ask(rng, records, rng.choice(QUESTIONS))
            if question not in seen:
                break
        seen.add(question)
        meta = {"question_type": kind, "answer_type": answer_type, "records": len(records.lines),
                "context_group": f"{NAME}-{seed}-{group}"}  # fmt: skip
        return {"context": context, "question": question}, gold, meta

    return build_examples(NAME, n, length, seed, knobs, defaults=KNOBS, choices=CHOICES, build=one,
                          minimum=minimum_length, validate=users_check(NAME, 1, MAX_USERS))  # fmt: skip


def score(example: Example, prediction: Any) -> float:
    return aggregation_score(example, prediction)


PROGRAM = ProgramRecipe("signatures:AggregationQA", RECORDS_STRATEGY, {"classify": CLASSIFY_INSTANCE})
SUITE = Suite(
    NAME, generate, score, KNOBS, CHOICES, "several questions over one context, in one session", PROGRAM
)
