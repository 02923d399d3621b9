"""Pair finding over records (OOLONG-Pairs-like).

The same records as ``aggregation``; the question asks for every pair of user IDs that
satisfies a predicate over both users' (inferred) labels:
``both`` (both have an instance of label L), ``both_min`` (both have at least m of L),
``cross`` (one has at least m of A and the other at least m of B; m = 1 when that
splits the users). The user count is capped (``users``, at most
40) so the pair set stays listable. Answer: one ``(id1, id2)`` per line, smaller id first.

Score: F1 over the predicted and gold pair sets.
"""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

from programs.tasks.base import Example, ProgramRecipe, Suite, as_text, generator, prediction_value
from programs.tasks.records import (
    CLASSIFY_INSTANCE,
    LABELS,
    RECORDS_STRATEGY,
    Records,
    minimum_length,
    records_context,
    users_check,
)

NAME = "pairs"
PREDICATES = ("both", "both_min", "cross")
KNOBS = {"predicate": "mixed", "labelled": False, "users": 12}
CHOICES = {"predicate": PREDICATES + ("mixed",), "labelled": (True, False)}
MAX_USERS = 40
FORMAT = "List every such pair once, smaller ID first, one per line as (id1, id2)."


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    records, context = records_context(rng, knobs, length, seed)
    kind = knobs["predicate"] if knobs["predicate"] != "mixed" else rng.choice(PREDICATES)
    question, gold = ask(rng, records, kind)
    meta = {"predicate": kind, "records": len(records.lines)}
    return {"context": context, "question": question}, [list(p) for p in gold], meta


def _per_user(records: Records) -> dict[int, dict[str, int]]:
    table = {user: dict.fromkeys(LABELS, 0) for user in sorted(set(records.users))}
    for (user, label), count in records.user_counts().items():
        table[user][label] = count
    return table


def _thresholds(table: dict[int, dict[str, int]], label: str) -> list[int]:
    """1 first (the plain predicate), then per-user count quantiles: at large lengths every
    user has every label, and only a threshold still splits the users."""
    counts = sorted(row[label] for row in table.values())
    picks = [counts[len(counts) * q // 4] for q in (2, 3, 1)] if counts else []
    return list(dict.fromkeys([1] + [max(1, c) for c in picks]))


def _phrase(least: int, label: str) -> str:
    return f"at least {least} instance{'s' if least > 1 else ''} labelled '{label}'"


def ask(rng: random.Random, records: Records, kind: str) -> tuple[str, list[tuple[int, int]]]:
    """A pair question: its text and the sorted gold pairs (non-empty whenever possible)."""
    table = _per_user(records)
    pairs = list(itertools.combinations(sorted(table), 2))
    options = []
    for label in rng.sample(LABELS, len(LABELS)):
        other = rng.choice([x for x in LABELS if x != label])
        thresholds = _thresholds(table, label)
        if kind == "both":
            thresholds = thresholds[:1]
        for least in thresholds:
            if kind in ("both", "both_min"):
                text = f"both users have {_phrase(least, label)}"
                keep = [(u, v) for u, v in pairs if table[u][label] >= least and table[v][label] >= least]
            else:
                text = f"one user has {_phrase(least, label)} and the other has {_phrase(least, other)}"
                keep = [
                    (u, v)
                    for u, v in pairs
                    if (table[u][label] >= least and table[v][other] >= least)
                    or (table[u][other] >= least and table[v][label] >= least)
                ]
            options.append((text, keep))
    # prefer a predicate that splits the pairs: neither empty nor all of them
    text, gold = next(
        ((t, k) for t, k in options if 0 < len(k) < len(pairs)),
        next(((t, k) for t, k in options if k), options[0]),
    )
    return f"In the data above, find all pairs of user IDs where {text}. {FORMAT}", sorted(gold)


_PAIR = re.compile(r"(\d+)\s*[,;]\s*(\d+)")


def parse_pairs(value: Any) -> set[tuple[int, int]]:
    """Pairs from text lines '(a, b)' or from a list of 2-item sequences, order-normalised."""
    found: set[tuple[int, int]] = set()
    items = value if isinstance(value, (list, tuple, set)) else [value]
    for item in items:
        if isinstance(item, (list, tuple)) and len(item) == 2:
            try:
                a, b = int(item[0]), int(item[1])
            except (TypeError, ValueError):
                continue
            found.add((min(a, b), max(a, b)))
            continue
        for a, b in _PAIR.findall(as_text(item)):
            a, b = int(a), int(b)
            found.add((min(a, b), max(a, b)))
    return found


def pair_f1(gold: set[tuple[int, int]], predicted: set[tuple[int, int]]) -> float:
    if not gold and not predicted:
        return 1.0
    hits = len(gold & predicted)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(predicted), hits / len(gold)
    return 2 * precision * recall / (precision + recall)


def score(example: Example, prediction: Any) -> float:
    gold = {(int(a), int(b)) for a, b in example.gold}
    return pair_f1(gold, parse_pairs(prediction_value(prediction)))


PROGRAM = ProgramRecipe(
    "signatures:PairFinding",
    RECORDS_STRATEGY + " Build per-user label counts, then test every pair of users "
    "with itertools.combinations.",
    {"classify": CLASSIFY_INSTANCE},
)
generate = generator(
    NAME,
    KNOBS,
    CHOICES,
    _one,
    minimum=minimum_length,
    validate=users_check(NAME, 2, MAX_USERS, " (the pair list grows with its square)"),
    seeded=True,
)

SUITE = Suite(
    NAME, generate, score, KNOBS, CHOICES, "pairs of users meeting a label predicate (OOLONG-Pairs)", PROGRAM
)
