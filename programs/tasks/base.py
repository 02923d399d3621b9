"""What every task family shares: the Example record, knob and length checks, reading a
prediction, and fast deterministic filler text.

Generators are pure functions of (suite, seed, example index, length, knobs): each example
gets its own ``random.Random`` seeded from a string, so example ``i`` is the same bytes
whether you ask for 3 examples or 300, on any machine (``random.seed(str)`` hashes the
string with SHA-512, so it does not depend on ``PYTHONHASHSEED``).
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from rlmkit.errors import UserError

MIN_LENGTH = 1_000
MAX_LENGTH = 10_000_000


class TaskError(UserError):
    """A task request that cannot be generated (unknown suite or knob, bad length)."""


class UnknownSuiteError(TaskError):
    pass


class UnknownKnobError(TaskError):
    pass


class LengthError(TaskError):
    pass


class Example(BaseModel):
    """One generated task: the program's inputs, the gold answer, and how it was made."""

    id: str
    suite: str
    inputs: dict[str, Any]  # e.g. {"context": ..., "question": ...}: passed to the program as kwargs
    gold: Any
    knobs: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    length: int = 0  # requested context length in characters
    meta: dict[str, Any] = Field(default_factory=dict)  # what scoring / checks need (hash, evidence ...)

    @property
    def context(self) -> str:
        return self.inputs.get("context", "")

    def summary(self) -> dict[str, Any]:
        """Everything but the context body (for logs and trajectories)."""
        return {
            "id": self.id,
            "suite": self.suite,
            "seed": self.seed,
            "length": self.length,
            "knobs": self.knobs,
        }


Generator = Callable[..., "list[Example]"]
Scorer = Callable[[Example, Any], float]


@dataclass(frozen=True)
class ProgramRecipe:
    """How a family runs as an RLM: its signature and typed sub-calls as ``"module:Name"`` paths
    (imported only when a program is built, so generating examples never imports dspy), and the
    strategy added to the signature's instructions (small models need it spelled out)."""

    signature: str
    instructions: str
    subcalls: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Suite:
    """A task family, whole: how to generate it, how to score it, which knobs it takes, and the
    program that answers it. One ``SUITE`` per family module, listed once in ``FAMILIES``."""

    name: str
    generate: Generator
    score: Scorer
    knobs: dict[str, Any]  # knob -> default
    choices: dict[str, tuple] = field(default_factory=dict)  # knob -> allowed values (when finite)
    description: str = ""
    program: ProgramRecipe | None = None

    def __post_init__(self) -> None:
        for part in ("generate", "score"):
            if not callable(getattr(self, part)):
                raise TaskError(f"task family {self.name!r}: {part} must be a function")
        if self.program is not None and not isinstance(self.program, ProgramRecipe):
            raise TaskError(f"task family {self.name!r}: program must be a ProgramRecipe")


# ------------------------------------------------------------------ checks
def check_knobs(
    suite: str,
    given: Mapping[str, Any],
    defaults: Mapping[str, Any],
    choices: Mapping[str, tuple] | None = None,
) -> dict[str, Any]:
    """Merge ``given`` into ``defaults``; unknown knobs or values outside ``choices`` are errors."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise UnknownKnobError(
            f"suite {suite!r} has no knob {', '.join(map(repr, unknown))}; "
            f"its knobs are: {', '.join(f'{k} (default {v!r})' for k, v in defaults.items())}"
        )
    knobs = {**defaults, **given}
    for name, allowed in (choices or {}).items():
        if knobs[name] not in allowed:
            raise UnknownKnobError(
                f"suite {suite!r}: knob {name}={knobs[name]!r} is not one of {list(allowed)}"
            )
    return knobs


def check_length(suite: str, length: int, minimum: int = MIN_LENGTH, why: str = "") -> None:
    if not isinstance(length, int) or isinstance(length, bool):
        raise LengthError(f"suite {suite!r}: length must be an int number of characters, got {length!r}")
    floor = max(MIN_LENGTH, minimum)
    if length < floor:
        reason = f" ({why})" if why else ""
        raise LengthError(
            f"suite {suite!r}: length {length:,} is too small; it needs at least {floor:,} characters{reason}"
        )
    if length > MAX_LENGTH:
        raise LengthError(
            f"suite {suite!r}: length {length:,} is over the supported {MAX_LENGTH:,} characters"
        )


def check_count(suite: str, n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise TaskError(f"suite {suite!r}: n must be a positive int, got {n!r}")


Build = Callable[[random.Random, dict, int, int, int], "tuple[dict[str, Any], Any, dict[str, Any]]"]


def build_examples(
    suite: str,
    n: int,
    length: int,
    seed: int,
    given: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any],
    choices: Mapping[str, tuple],
    build: Build,
    minimum: Callable[[dict, int], tuple[int, str]] | None = None,
    validate: Callable[[dict], None] | None = None,
) -> list[Example]:
    """The part every generator shares: check the request, then one seeded ``build`` per example.

    ``build(rng, knobs, index, n, length) -> (inputs, gold, meta)``; ``minimum(knobs, length)
    -> (characters, why)`` is the family's smallest workable length for those knobs.
    """
    knobs = check_knobs(suite, given, defaults, choices)
    check_count(suite, n)
    if validate is not None:
        validate(knobs)
    check_length(suite, length)
    if minimum is not None:
        check_length(suite, length, *minimum(knobs, length))
    examples = []
    for index in range(n):
        rng = example_rng(suite, seed, index, length, knobs)
        inputs, gold, meta = build(rng, knobs, index, n, length)
        examples.append(
            Example(
                id=example_id(suite, seed, index),
                suite=suite,
                inputs=inputs,
                gold=gold,
                knobs=knobs,
                seed=seed,
                length=length,
                meta=meta,
            )
        )
    return examples


def generator(
    suite: str,
    defaults: Mapping[str, Any],
    choices: Mapping[str, tuple],
    build: Build,
    *,
    minimum: Callable[[dict, int], tuple[int, str]] | None = None,
    validate: Callable[[dict], None] | None = None,
    seeded: bool = False,
) -> Generator:
    """The ``generate(n, length, seed, **knobs)`` of a family whose examples are built one at a
    time by ``build`` (see ``build_examples``). ``seeded``: ``build`` also takes ``seed=`` (a
    family whose pools depend on the seed's split)."""

    def generate(n: int, length: int, seed: int = 0, **knobs: Any) -> list[Example]:
        return build_examples(
            suite,
            n,
            length,
            seed,
            knobs,
            defaults=defaults,
            choices=choices,
            build=functools.partial(build, seed=seed) if seeded else build,
            minimum=minimum,
            validate=validate,
        )

    return generate


def example_rng(suite: str, seed: int, index: int, length: int, knobs: Mapping[str, Any]) -> random.Random:
    knob_text = ",".join(f"{k}={knobs[k]!r}" for k in sorted(knobs))
    return random.Random(f"{suite}|{seed}|{index}|{length}|{knob_text}")


def example_id(suite: str, seed: int, index: int) -> str:
    return f"{suite}-s{seed}-{index:04d}"


# ------------------------------------------------------------------ predictions
def prediction_value(prediction: Any, field_name: str = "answer") -> Any:
    """The answer inside a dspy.Prediction, a dict, or a raw value."""
    if isinstance(prediction, Mapping):
        return prediction.get(field_name)
    plain = isinstance(prediction, (str, int, float, list, tuple))
    if prediction is not None and not plain and hasattr(prediction, field_name):
        return getattr(prediction, field_name)
    return prediction


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple, set)):
        return "\n".join(as_text(v) for v in value)
    return str(value)


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def parse_number(value: Any) -> float | None:
    """The first number in ``value`` (ints and floats pass through; '1,234' reads as 1234)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    match = _NUMBER.search(as_text(value))
    if not match:
        return None
    try:
        return float(match.group().replace(",", ""))
    except ValueError:
        return None


def normalize(text: Any) -> str:
    """Lower case, outer quotes/punctuation and extra spaces removed: for exact-match scoring."""
    return " ".join(as_text(text).strip().strip(" \t\n'\"`.,;:!?()[]").lower().split())


# ------------------------------------------------------------------ filler text
_ADJ = (
    "quiet",
    "bright",
    "ancient",
    "narrow",
    "gentle",
    "restless",
    "hollow",
    "silver",
    "distant",
    "careful",
    "humble",
    "patient",
    "crowded",
    "sudden",
    "steady",
    "wooden",
    "golden",
    "open",
)
_NOUN = (
    "river",
    "garden",
    "lantern",
    "market",
    "harbor",
    "valley",
    "library",
    "orchard",
    "bridge",
    "meadow",
    "workshop",
    "village",
    "tower",
    "forest",
    "kitchen",
    "archive",
    "station",
    "field",
)
_VERB = (
    "watches",
    "remembers",
    "follows",
    "shelters",
    "crosses",
    "measures",
    "carries",
    "greets",
    "outlasts",
    "frames",
    "reflects",
    "joins",
    "circles",
    "hides",
    "guides",
    "warms",
)
_TAIL = (
    "in the early morning",
    "after the long winter",
    "without a sound",
    "as the seasons turn",
    "for reasons nobody recalls",
    "near the old road",
    "under a pale sky",
    "every other year",
    "when the work is done",
    "long before the maps",
    "at the edge of town",
    "in plain sight",
)


def _build_sentence_pool(size: int = 1500) -> tuple[str, ...]:
    rng = random.Random("rlmkit-filler-v1")
    pool = []
    for _ in range(size):
        pool.append(
            f"The {rng.choice(_ADJ)} {rng.choice(_NOUN)} {rng.choice(_VERB)} the "
            f"{rng.choice(_ADJ)} {rng.choice(_NOUN)} {rng.choice(_TAIL)}."
        )
    return tuple(pool)


SENTENCES = _build_sentence_pool()
_MEAN_SENTENCE = sum(len(s) + 1 for s in SENTENCES) / len(SENTENCES)


def filler(rng: random.Random, chars: int) -> str:
    """About ``chars`` characters of neutral prose (whole sentences; may run a little over)."""
    if chars <= 0:
        return ""
    parts: list[str] = []
    have = 0
    while have < chars:  # usually one round; a second when the draw ran short of the mean
        count = max(1, int((chars - have) / _MEAN_SENTENCE * 1.02) + 1)
        chunk = " ".join(rng.choices(SENTENCES, k=count))
        parts.append(chunk)
        have += len(chunk) + 1
    return " ".join(parts)


def exact_length(text: str, length: int, pad: str = " ") -> str:
    """Cut or pad ``text`` to exactly ``length`` characters (callers only cut filler)."""
    if len(text) >= length:
        return text[:length]
    return text + pad * (length - len(text))
