"""Facts that real prose states, with nothing inserted: under which heading a term is defined.

A context is whole documents of the seed's split of the prose corpus (``real_text``): the Python
Language Reference's topics and licence texts. A term is *defined* where the reference gives its
grammar rule (``slice_list ::= ...``) or a licence says what a quoted term means (``"Contributor"
means ...``). The question names the term; the answer is the section heading above its
definition, which the question does not name: to answer, find the definition and walk up to the
nearest heading (an underlined line, a numbered section line, or a line in capitals).

A term is asked about only when it is defined once in the assembled context and its heading is
not the term itself. Score: exact match of the heading's words (case, punctuation and quotes
do not matter; a section number before it is optional).
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any

from programs.tasks import real_text
from programs.tasks.base import (
    Example,
    ProgramRecipe,
    Suite,
    TaskError,
    as_text,
    build_examples,
    prediction_value,
)

NAME = "section_facts"
KNOBS: dict[str, Any] = {}
CHOICES: dict[str, tuple] = {}

_WORDINGS = {
    "rule": (
        "Under which section heading is the grammar symbol `{term}` defined?",
        "The grammar rule for `{term}` is given in one section. What is that section's heading?",
    ),
    "term": (
        'Under which section heading is the term "{term}" defined?',
        'One section says what "{term}" means. What is that section\'s heading?',
    ),
}
_UNDERLINED = re.compile(r"^(\S.*)\n([*=\-~^])\2{2,}[ \t]*$", re.M)
_NUMBERED = re.compile(r"(?:^|\n\n)[ \t]*(\d+(?:\.\d+)*\.?[ \t]+[A-Z][^\n]{2,60})\n(?=\n)")
_CAPITALS = re.compile(r"(?:^|\n\n)[ \t]*([A-Z][A-Z ,;'-]{6,70})\n(?=\n)")
_RULE = re.compile(r"^[ \t]+(\w+)[ \t]+::=", re.M)
_TERM = re.compile(r'"([A-Z]?[A-Za-z][A-Za-z -]{1,40})"\s*(?:\n\s*)?(?:means|shall mean|refers to)\b')


def heading_key(text: Any) -> str:
    """A heading's words: lower case, no punctuation, no section number in front."""
    words = re.sub(r"[^a-z0-9]+", " ", as_text(text).lower()).split()
    while words and words[0].isdigit():
        words.pop(0)
    return " ".join(words)


def _headings(text: str) -> list[tuple[int, str]]:
    """(offset, heading) of every heading in ``text``, in order."""
    found = [(m.start(1), m.group(1).strip()) for m in _UNDERLINED.finditer(text)]
    found += [(m.start(1), m.group(1).strip()) for m in _NUMBERED.finditer(text)]
    found += [(m.start(1), m.group(1).strip()) for m in _CAPITALS.finditer(text)]
    return sorted(found)


def _definitions(text: str) -> list[tuple[str, str, int]]:
    """(kind, term, offset) of every definition in ``text``."""
    out = [("rule", m.group(1), m.start(1)) for m in _RULE.finditer(text)]
    return out + [("term", " ".join(m.group(1).split()), m.start(1)) for m in _TERM.finditer(text)]


def _questions(parts: list[dict]) -> list[tuple[str, str, str]]:
    """(kind, term, heading) for every term defined once in the context under a heading of its
    own document."""
    defined = [(part, *definition) for part in parts for definition in _definitions(part["text"])]
    counts: dict[tuple[str, str], int] = {}
    for _, kind, term, _ in defined:
        counts[kind, term.lower()] = counts.get((kind, term.lower()), 0) + 1
    headings = {id(part): _headings(part["text"]) for part in parts}
    out = []
    for part, kind, term, at in defined:
        above = [h for offset, h in headings[id(part)] if offset < at]
        if counts[kind, term.lower()] != 1 or not above:
            continue
        heading = above[-1]
        if heading_key(heading).rstrip("s") not in ("", heading_key(term).rstrip("s")):
            out.append((kind, term, heading))
    return out


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    for _ in range(20):  # another draw of documents when the first holds no defined term
        parts = real_text.assemble(rng, real_text.documents("prose", seed), length)
        if found := _questions(parts):
            break
    else:
        raise TaskError(f"suite {NAME!r}: no defined term fits {length:,} characters; use a longer length")
    # a heading first, then one of its terms: a section with many rules (a grammar's) would
    # otherwise be the answer so often that naming it without reading would score
    heading = rng.choice(sorted({h for _, _, h in found}))
    kind, term, heading = rng.choice([q for q in found if q[2] == heading])
    question = rng.choice(_WORDINGS[kind]).format(term=term)
    return {"context": real_text.joined(parts), "question": question}, heading, {"kind": kind, "term": term}


def generate(n: int, length: int, seed: int = 0, **knobs: Any) -> list[Example]:
    real_text.check_fits(NAME, "prose", length)
    build = functools.partial(_one, seed=seed)
    return build_examples(
        NAME, n, length, seed, knobs, defaults=KNOBS, choices=CHOICES, build=build,
        minimum=lambda knobs, length: (30_000, "several whole documents"),
    )  # fmt: skip


def score(example: Example, prediction: Any) -> float:
    return float(heading_key(prediction_value(prediction)) == heading_key(example.gold))


PROGRAM = ProgramRecipe(
    "signatures:LongDocQA",
    "Search `context` with code for the term the question quotes (re.finditer); the answer is "
    "not the term: from the match, walk back to the nearest heading line above it (a line "
    "underlined with *, = or -, or a numbered section line) and SUBMIT that heading only.",
)

SUITE = Suite(
    NAME, generate, score, KNOBS, CHOICES,
    "the section heading a term is defined under, in real prose, nothing inserted", PROGRAM,
)  # fmt: skip
