"""Repeated requests in a long conversation (MRCR-like).

A transcript of ``User: Write a {form} about {topic}.`` / ``Assistant: ...`` turns. One
(form, topic) request occurs ``k`` times (2, 4 or 8), among distractor turns that share
its form or its topic. ``mode="nth"`` asks for the i-th of them prefixed with a random
hash; ``mode="count"`` asks how many times it was requested.

Score (MRCR): 0 unless the answer starts with the hash, else difflib's SequenceMatcher ratio
of the rest against the gold text; counts must be exact.
"""

from __future__ import annotations

import difflib
import random
import string
from dataclasses import dataclass
from typing import Any

from programs.tasks.base import (
    SENTENCES,
    Example,
    ProgramRecipe,
    Suite,
    TaskError,
    as_text,
    exact_length,
    generator,
    parse_number,
    prediction_value,
)
from programs.tasks.splits import Split, pools

NAME = "multi_needle"
KNOBS = {"k": 2, "mode": "nth", "index": None}
CHOICES = {"k": (2, 4, 8), "mode": ("nth", "count")}


@dataclass(frozen=True)
class Pool:
    """One split's requests and questions: the forms and topics a user asks for, and the
    question's wordings ({form}, {topic}; the nth wording also {tag}, {nth})."""

    forms: tuple[str, ...]
    topics: tuple[str, ...]
    ask_count: str
    ask_nth: str


POOLS: dict[Split, Pool] = {
    "train": Pool(
        ("ballad", "fable", "toast", "jingle", "monologue", "diary entry", "speech", "lullaby"),
        ("otters", "windmills", "deserts", "origami", "canoes", "fungi", "trams", "balloons", "geysers",
         "museums", "ravens", "cheese", "meteors", "canyons", "sundials", "starfish"),
        "How often did the user request a {form} about {topic}? Reply with the number.",
        "Give the {nth} (1-indexed) {form} about {topic} that the assistant wrote, prefixed with {tag}. "
        "Copy it exactly, starting with {tag}.",
    ),
    # dev: the pools the evaluation matrix measured, unchanged
    "dev": Pool(
        ("poem", "riddle", "short story", "haiku", "limerick", "essay", "letter", "song"),
        ("tapirs", "lighthouses", "glaciers", "chess", "bicycles", "moss", "submarines", "kites", "volcanoes",
         "libraries", "owls", "bread", "comets", "rivers", "clocks", "jellyfish"),
        "How many times did the user ask for a {form} about {topic}? Answer with a number.",
        "Prepend {tag} to the {nth} (1-indexed) {form} about {topic} the assistant wrote. "
        "Reply with that text exactly, starting with {tag}.",
    ),
    "test": Pool(
        ("sonnet", "ode", "elegy", "parable", "sea shanty", "fairy tale", "epigram", "nursery rhyme"),
        ("armadillos", "aqueducts", "tundras", "dominoes", "gondoliers", "lichen", "zeppelins", "yo-yos",
         "monsoons", "observatories", "herons", "noodles", "auroras", "fjords", "hourglasses", "seahorses"),
        "Count the user's requests for a {form} about {topic}. What is the count?",
        "Start your reply with {tag}, then quote word for word the assistant's {nth} (1-indexed) {form} "
        "about {topic}.",
    ),
}  # fmt: skip
FORMS, TOPICS = POOLS["dev"].forms, POOLS["dev"].topics
HEADER = "Below is a long conversation between a user and an assistant.\n\n"
# the longest turn a request can render to: the longest form/topic and three pool sentences
LONGEST_TURN = max(
    len(f"User: Write a {form} about {topic}.\nAssistant: \n\n\n\n")
    for pool in POOLS.values()
    for form in pool.forms
    for topic in pool.topics
) + 3 * max(map(len, SENTENCES))


def _reply(rng: random.Random) -> str:
    return "\n".join(rng.choices(SENTENCES, k=rng.randint(2, 3)))


def _turn(form: str, topic: str, reply: str) -> str:
    return f"User: Write a {form} about {topic}.\nAssistant: {reply}\n\n"


def _ordinal(i: int) -> str:
    return f"{i}{'th' if 10 <= i % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(i % 10, 'th')}"


def _validate(knobs: dict) -> None:
    index = knobs["index"]
    if index is not None and (not isinstance(index, int) or not 1 <= index <= knobs["k"]):
        raise TaskError(f"suite {NAME!r}: index must be from 1 to k={knobs['k']}, got {index!r}")


def _minimum(knobs: dict, _length: int) -> tuple[int, str]:
    return len(HEADER) + knobs["k"] * LONGEST_TURN, f"{knobs['k']} repeated requests"


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    k, pool = knobs["k"], pools(seed, POOLS)
    form, topic = rng.choice(pool.forms), rng.choice(pool.topics)
    targets = [_reply(rng) for _ in range(k)]
    budget = length - len(HEADER) - sum(len(_turn(form, topic, r)) for r in targets)
    turns: list[str] = []
    used = 0
    while True:  # distractors: same form or same topic half the time (hard negatives)
        roll = rng.random()
        d_form = form if roll < 0.25 else rng.choice([f for f in pool.forms if f != form])
        d_topic = topic if 0.25 <= roll < 0.5 else rng.choice([t for t in pool.topics if t != topic])
        turn = _turn(d_form, d_topic, _reply(rng))
        if used + len(turn) > budget:
            break
        turns.append(turn)
        used += len(turn)
    slots = sorted(rng.sample(range(len(turns) + k), k))
    for slot, reply in zip(slots, targets):  # ascending slots: the j-th target stays the j-th
        turns.insert(slot, _turn(form, topic, reply))
    context = exact_length(HEADER + "".join(turns), length)
    if knobs["mode"] == "count":
        question = pool.ask_count.format(form=form, topic=topic)
        gold: Any = k
        meta = {"form": form, "topic": topic}
    else:
        nth = knobs["index"] or rng.randint(1, k)
        tag = "".join(rng.choices(string.ascii_lowercase + string.digits, k=10))
        question = pool.ask_nth.format(tag=tag, nth=_ordinal(nth), form=form, topic=topic)
        gold = tag + targets[nth - 1]
        meta = {"form": form, "topic": topic, "hash": tag, "index": nth}
    return {"context": context, "question": question}, gold, meta


def score(example: Example, prediction: Any) -> float:
    value = prediction_value(prediction)
    if example.knobs.get("mode") == "count":
        return float(parse_number(value) == float(example.gold))
    tag = example.meta["hash"]
    text = as_text(value).strip()
    if not text.startswith(tag):
        return 0.0
    return difflib.SequenceMatcher(
        None, text.removeprefix(tag).strip(), example.gold.removeprefix(tag).strip()
    ).ratio()


PROGRAM = ProgramRecipe(
    "signatures:ConversationRecall",
    "Split `context` on blank lines into turns; find the user requests that match the "
    "question exactly (same form and topic), in order, and take the assistant reply that "
    "follows. Submit exactly what the question asks.",
)
generate = generator(NAME, KNOBS, CHOICES, _one, minimum=_minimum, validate=_validate, seeded=True)

SUITE = Suite(NAME, generate, score, KNOBS, CHOICES, "repeated requests in a conversation (MRCR)", PROGRAM)
