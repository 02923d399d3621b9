"""Aggregation over records (OOLONG-like).

Questions: ``count`` (instances of a label), ``compare`` (label A vs label B),
``per_user`` (instances of a label for one user), ``per_month`` (instances of a label in
one month), ``top_month`` (the month where a label is most frequent, answered as a date).
``question="mixed"`` draws one per example.

Score (OOLONG): numbers 0.75 ** |y - ŷ|; dates parsed and compared by month; everything
else exact, case-insensitive match.
"""

from __future__ import annotations

import random
import re
from typing import Any

from programs.tasks.base import (
    Example,
    ProgramRecipe,
    Suite,
    as_text,
    generator,
    normalize,
    parse_number,
    prediction_value,
)
from programs.tasks.records import (
    CLASSIFY_INSTANCE,
    LABELS,
    MONTH_NAMES,
    RECORDS_STRATEGY,
    Records,
    minimum_length,
    month_name,
    records_context,
    users_check,
)

NAME = "aggregation"
QUESTIONS = ("count", "compare", "per_user", "per_month", "top_month")
KNOBS = {"question": "mixed", "labelled": False, "users": 20}
CHOICES = {"question": QUESTIONS + ("mixed",), "labelled": (True, False)}
COMPARE_ANSWERS = ("more common than", "less common than", "same frequency as")
MAX_USERS = 1000


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    records, context = records_context(rng, knobs, length, seed)
    kind = knobs["question"] if knobs["question"] != "mixed" else rng.choice(QUESTIONS)
    question, gold, answer_type, kind = ask(rng, records, kind)
    meta = {"question_type": kind, "answer_type": answer_type, "records": len(records.lines)}
    return {"context": context, "question": question}, gold, meta


def ask(rng: random.Random, records: Records, kind: str) -> tuple[str, Any, str, str]:
    """A question of ``kind`` about ``records``: (question text, gold answer, answer type, kind asked).

    The kind asked differs only when ``top_month`` has no answer (every label's busiest month
    is tied): then a ``count`` question is asked instead."""
    counts = records.counts()
    present = [label for label in LABELS if counts[label]] or list(LABELS)
    label = rng.choice(present)
    tail = " Answer with a single number."
    if kind == "count":
        return (
            f"In the data above, how many instances should be labelled as '{label}'?{tail}",
            counts[label],
            "number",
            kind,
        )
    if kind == "compare":
        other = rng.choice([x for x in LABELS if x != label])
        a, b = counts[label], counts[other]
        gold = COMPARE_ANSWERS[0] if a > b else COMPARE_ANSWERS[1] if a < b else COMPARE_ANSWERS[2]
        return (
            (
                f"In the data above, is the label '{label}' more common, less common, or the same "
                f"frequency as the label '{other}'? Answer with exactly one of: "
                f"{', '.join(COMPARE_ANSWERS)}."
            ),
            gold,
            "choice",
            kind,
        )
    if kind == "per_user":
        user = rng.choice(sorted(set(records.users)) or records.user_ids)
        return (
            (
                f"In the data above, how many instances from User {user} should be labelled as "
                f"'{label}'?{tail}"
            ),
            records.user_counts()[(user, label)],
            "number",
            kind,
        )
    month_counts = records.month_counts()
    months = sorted({m for m, _ in month_counts})
    if kind == "per_month":
        month = rng.choice(months)
        return (
            (
                f"In the data above, how many instances dated in {month_name(month)} should be "
                f"labelled as '{label}'?{tail}"
            ),
            month_counts[(month, label)],
            "number",
            kind,
        )
    # top_month: only labels whose busiest month is unique have an answer
    for candidate in [label] + [x for x in present if x != label]:
        per = sorted(((month_counts[(m, candidate)], m) for m in months), reverse=True)
        if per and per[0][0] > 0 and (len(per) == 1 or per[0][0] > per[1][0]):
            return (
                (
                    f"In the data above, in which month do instances labelled as '{candidate}' occur "
                    f"most often? Answer as Month YYYY."
                ),
                month_name(per[0][1]),
                "month",
                kind,
            )
    return ask(rng, records, "count")


_MONTH = re.compile(
    r"\b(" + "|".join(m[:3] for m in MONTH_NAMES) + r")[a-z]*\.?\s*,?\s*(\d{4})", re.IGNORECASE
)
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})\b")


def parse_month(value: Any) -> tuple[int, int] | None:
    text = as_text(value)
    if match := _MONTH.search(text):
        month = [m[:3].lower() for m in MONTH_NAMES].index(match.group(1)[:3].lower()) + 1
        return int(match.group(2)), month
    if (match := _ISO.search(text)) and 1 <= int(match.group(2)) <= 12:
        return int(match.group(1)), int(match.group(2))
    return None


def oolong_score(gold: Any, answer_type: str, predicted: Any) -> float:
    """OOLONG's rule, shared by callers that score record questions."""
    if answer_type == "number":
        value = parse_number(predicted)
        return 0.0 if value is None else 0.75 ** abs(float(gold) - value)
    if answer_type == "month":
        return float(parse_month(predicted) is not None and parse_month(predicted) == parse_month(gold))
    return float(normalize(predicted) == normalize(gold))


def score(example: Example, prediction: Any) -> float:
    return oolong_score(example.gold, example.meta.get("answer_type", "choice"), prediction_value(prediction))


PROGRAM = ProgramRecipe("signatures:AggregationQA", RECORDS_STRATEGY, {"classify": CLASSIFY_INSTANCE})
generate = generator(
    NAME, KNOBS, CHOICES, _one, minimum=minimum_length, validate=users_check(NAME, 1, MAX_USERS), seeded=True
)

SUITE = Suite(NAME, generate, score, KNOBS, CHOICES, "aggregation over inferred labels (OOLONG)", PROGRAM)
