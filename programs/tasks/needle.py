"""Needle in a haystack (S-NIAH / RULER-like).

RULER's needle sentence, "One of the special magic {numbers|words|uuids} for {key} is:
{value}.", hidden in filler prose or repeated noise, with optional distractor needles for
other keys. ``depth`` (0 = start, 1 = end) places the first gold needle; left unset, the
examples of one call sweep the depth evenly from 0 to 1.

Score (RULER): the fraction of gold values found in the answer (case-insensitive substring).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Any

from programs.tasks.base import (
    Example,
    ProgramRecipe,
    Suite,
    TaskError,
    as_text,
    filler,
    generator,
    prediction_value,
)
from programs.tasks.splits import Split, pools

NAME = "needle"
KNOBS = {"kind": "numbers", "values": 1, "distractors": 2, "depth": None, "haystack": "essay"}
CHOICES = {"kind": ("numbers", "words", "uuids"), "haystack": ("essay", "noise")}

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "


@dataclass(frozen=True)
class Pool:
    """What one split's needles are made of: the two word lists keys (and word values) are built
    from, the needle's sentence and the question's wordings ({kind}: numbers, {one}: number)."""

    key_a: tuple[str, ...]
    key_b: tuple[str, ...]
    sentence: str  # {kind} {key} {value}
    ask_one: str  # {one} {key}
    ask_many: str  # {kind} {key} {values}


# RULER's own sentence and wordings: dev (the pools the evaluation matrix measured, unchanged)
# and train share them, since scripted teachers and worked examples are written against them;
# train's keys are its own. Test has its own words, sentence and wordings.
_RULER = (
    "One of the special magic {kind} for {key} is: {value}.",
    "What is the special magic {one} for {key} mentioned in the provided text?",
    "What are all the special magic {kind} for {key} mentioned in the provided text? "
    "There are {values} of them; list every one.",
)
POOLS: dict[Split, Pool] = {
    "train": Pool(
        tuple("azure bold crimson dapper elfin fancy giddy hardy inky jaunty kindly lucky mellow noble "
              "oaken perky quirky rosy sunny tawny".split()),
        tuple("acorn beacon candle dingo easel fiddle goblet hornet inkwell jackal koala ladle mitten "
              "napkin otter parrot quokka radish spindle teapot".split()),
        *_RULER,
    ),
    "dev": Pool(
        tuple("amber brisk cobalt dusky eager frosty glossy hazy icy jolly keen lofty misty nimble olive "
              "plucky rusty sly tidy vivid".split()),
        tuple("anchor badger cactus dynamo ember falcon gadget hammock igloo jigsaw kettle lagoon magnet "
              "nugget oyster pebble quill rocket saddle tulip umbrella violin walrus yodel zephyr".split()),
        *_RULER,
    ),
    "test": Pool(
        tuple("ashen balmy chalky dainty earthy feisty grainy husky itchy jumpy knotty leafy mossy nutty "
              "orchid peppy quaint ruddy silky thorny".split()),
        tuple("abacus bagpipe compass dulcimer eggplant flagon gondola harpoon iguana jukebox kayak "
              "lobster mandolin nutmeg ocelot pelican quiver raccoon sextant trombone".split()),
        "The registry lists {value} as a reserved {one_of} of {key}.",
        "What reserved {one} does the registry list for {key}?",
        "What reserved {kind} does the registry list for {key}? There are {values}; give them all.",
    ),
}  # fmt: skip


def _value(rng: random.Random, kind: str, pool: Pool) -> str:
    if kind == "numbers":
        return str(rng.randint(1_000_000, 9_999_999))
    if kind == "uuids":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return f"{rng.choice(pool.key_a)}{rng.choice(pool.key_b)}{rng.randint(10, 99)}"


def needle_sentence(kind: str, key: str, value: str, pool: Pool = POOLS["dev"]) -> str:
    return pool.sentence.format(kind=kind, one_of=kind[:-1], key=key, value=value)


def question_for(kind: str, key: str, values: int, pool: Pool = POOLS["dev"]) -> str:
    if values == 1:
        return pool.ask_one.format(one=kind[:-1], key=key)
    return pool.ask_many.format(kind=kind, key=key, values=values)


def _haystack(rng: random.Random, kind: str, chars: int) -> str:
    if kind == "noise":
        return (NOISE * (chars // len(NOISE) + 1))[:chars]
    return filler(rng, chars)[:chars]


def _insert_at_sentence(text: str, position: int, needle: str) -> str:
    """Insert ``needle`` at the sentence boundary at or before ``position``."""
    cut = text.rfind(". ", 0, position + 1)
    cut = 0 if cut < 0 else cut + 2
    return f"{text[:cut]}{needle} {text[cut:]}"


def _validate(knobs: dict) -> None:
    values, distractors, depth = knobs["values"], knobs["distractors"], knobs["depth"]
    if not isinstance(values, int) or values < 1 or not isinstance(distractors, int) or distractors < 0:
        raise TaskError(f"suite {NAME!r}: values must be >= 1 and distractors >= 0")
    if depth is not None and not 0.0 <= float(depth) <= 1.0:
        raise TaskError(f"suite {NAME!r}: depth must be between 0 and 1, got {depth!r}")


def _minimum(knobs: dict, length: int) -> tuple[int, str]:
    count = knobs["values"] + knobs["distractors"]
    longest = (
        max(len(needle_sentence(knobs["kind"], "x" * 20, "x" * 36, pool)) for pool in POOLS.values()) + 1
    )
    return longest * count + 200, f"{count} needles and some haystack"


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    kind, pool = knobs["kind"], pools(seed, POOLS)
    depth = float(knobs["depth"]) if knobs["depth"] is not None else (index / (n - 1) if n > 1 else 0.5)
    keys = rng.sample([f"{a}-{b}" for a in pool.key_a for b in pool.key_b], 1 + knobs["distractors"])
    key = keys[0]
    seen: set[str] = set()

    def fresh() -> str:
        while (value := _value(rng, kind, pool)) in seen:
            pass
        seen.add(value)
        return value

    gold = [fresh() for _ in range(knobs["values"])]
    needles = [(depth, needle_sentence(kind, key, gold[0], pool))]
    needles += [(rng.random(), needle_sentence(kind, key, v, pool)) for v in gold[1:]]
    needles += [(rng.random(), needle_sentence(kind, other, fresh(), pool)) for other in keys[1:]]
    hay = _haystack(rng, knobs["haystack"], length - sum(len(s) + 1 for _, s in needles))
    # insert from the deepest needle up, so earlier positions stay valid
    for at, sentence in sorted(needles, key=lambda p: -p[0]):
        hay = _insert_at_sentence(hay, int(at * len(hay)), sentence)
    inputs = {"context": hay, "question": question_for(kind, key, len(gold), pool)}
    return inputs, gold, {"key": key, "depth": round(depth, 4)}


def score(example: Example, prediction: Any) -> float:
    text = as_text(prediction_value(prediction)).lower()
    gold = example.gold
    return sum(1 for value in gold if value.lower() in text) / len(gold)


PROGRAM = ProgramRecipe(
    "signatures:NeedleQA",
    "Search `context` with code (re.findall on the key from the question); "
    "print only the matching sentences, then SUBMIT the values as a list.",
)
generate = generator(NAME, KNOBS, CHOICES, _one, minimum=_minimum, validate=_validate, seeded=True)

SUITE = Suite(NAME, generate, score, KNOBS, CHOICES, "needle in a haystack (RULER S-NIAH)", PROGRAM)
