"""OOLONG-style records shared by the aggregation and pairs families.

Each line is ``Date: Mar 14, 2023 || User: 48213 || Instance: <a question>``. The label
of an instance is not written (unless ``labelled``): it must be inferred from the text,
which comes from label-specific templates, as in OOLONG's TREC-coarse split. The labelled
variant appends ``|| Label: <label>``, which makes every question countable with code.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from programs.tasks.splits import Split, pools

LABELS = ("location", "person", "number", "description", "entity", "abbreviation")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@dataclass(frozen=True)
class Vocabulary:
    """One split's instance texts are built from these: per label, its question templates, and
    the words they are filled with."""

    templates: dict[str, tuple[str, ...]]
    adj: tuple[str, ...]
    noun: tuple[str, ...]
    verb: tuple[str, ...]
    seed: str  # of the draw that builds the texts


_DEV = Vocabulary(
    {
        "location": (
            "Where is the {adj} {noun} located?",
            "Which country has the most {noun}s?",
            "In what city can you find the {noun} museum?",
            "Where do {noun}s spend the winter?",
        ),
        "person": (
            "Who invented the {noun}?",
            "Who was the first person to cross the {adj} {noun}?",
            "Which painter is famous for the {adj} {noun}?",
            "Who wrote the book about the {noun}?",
        ),
        "number": (
            "How many {noun}s fit in a {noun}?",
            "In what year was the {adj} {noun} built?",
            "How far is the {noun} from the {noun}?",
            "How much does a {adj} {noun} cost?",
        ),
        "description": (
            "Why do {noun}s {verb}?",
            "What does it mean to {verb} a {noun}?",
            "How does a {adj} {noun} work?",
            "What is the meaning of the {adj} {noun}?",
        ),
        "entity": (
            "What tool is used to {verb} a {noun}?",
            "Which animal lives near a {adj} {noun}?",
            "What is the name of the {adj} {noun} game?",
            "What plant grows beside a {noun}?",
        ),
        "abbreviation": (
            "What does {abbr} stand for?",
            "What is the abbreviation of the {adj} {noun} society?",
            "What is the full form of {abbr}?",
            "What is {abbr} short for?",
        ),
    },
    ("old", "red", "tall", "frozen", "northern", "sacred", "tiny", "famous", "hidden", "royal"),
    ("bridge", "violin", "glacier", "lighthouse", "tortoise", "canal", "comet", "harp", "mill", "volcano"),
    ("polish", "repair", "measure", "fold", "balance", "tune", "sharpen", "carve"),
    "rlmkit-records-v1",
)
_TRAIN = Vocabulary(
    {
        "location": (
            "On which continent is the {adj} {noun}?",
            "Where was the first {noun} found?",
            "In which region do {noun}s grow best?",
        ),
        "person": (
            "Who discovered the {adj} {noun}?",
            "Which scientist named the {noun}?",
            "Who designed the {adj} {noun}?",
        ),
        "number": (
            "How old is the {adj} {noun}?",
            "How many {noun}s live in one {noun}?",
            "What is the population of {noun}s?",
        ),
        "description": (
            "Why is the {adj} {noun} famous?",
            "How do you {verb} a {noun}?",
            "What causes a {noun} to {verb}?",
        ),
        "entity": (
            "Which instrument sounds like a {adj} {noun}?",
            "What do {noun}s eat?",
            "Which machine can {verb} a {noun}?",
        ),
        "abbreviation": (
            "What is {abbr} an acronym for?",
            "Which words make up {abbr}?",
            "How is {abbr} written out in full?",
        ),
    },
    ("ancient", "blue", "giant", "wild", "southern", "hollow", "bright", "lost", "narrow", "quiet"),
    ("tower", "flute", "desert", "harbour", "beetle", "fountain", "planet", "drum", "barn", "island"),
    ("paint", "weave", "count", "lift", "sort", "clean", "grind", "bend"),
    "rlmkit-records-train-v1",
)
_TEST = Vocabulary(
    {
        "location": (
            "Near which mountain range is the {adj} {noun}?",
            "What is the home country of the {noun}?",
            "Along which coast are {noun}s common?",
        ),
        "person": (
            "Whose portrait hangs beside the {adj} {noun}?",
            "Which explorer mapped the {noun}?",
            "Who first photographed the {adj} {noun}?",
        ),
        "number": (
            "How tall is the {adj} {noun} in metres?",
            "What percentage of {noun}s are {adj}?",
            "How many days does a {noun} take to {verb}?",
        ),
        "description": (
            "What explains the colour of the {adj} {noun}?",
            "In what way does a {noun} {verb}?",
            "What is the purpose of a {adj} {noun}?",
        ),
        "entity": (
            "Which bird nests inside a {adj} {noun}?",
            "What fabric is used to {verb} a {noun}?",
            "Which mineral gives the {noun} its shine?",
        ),
        "abbreviation": (
            "Spell out the letters {abbr}.",
            "What name hides behind the initials {abbr}?",
            "Expand the initialism {abbr}.",
        ),
    },
    ("foggy", "copper", "slender", "humid", "eastern", "painted", "woollen", "vast", "sunken", "gilded"),
    ("pagoda", "oboe", "marsh", "quay", "cricket", "obelisk", "nebula", "lute", "granary", "atoll"),
    ("dye", "knit", "weigh", "hoist", "stack", "rinse", "glaze", "coil"),
    "rlmkit-records-test-v1",
)


def _pool(vocabulary: Vocabulary, per_label: int = 100) -> dict[str, tuple[str, ...]]:
    """Instance texts per label, built once (a record then costs one choice, not a format)."""
    rng = random.Random(vocabulary.seed)
    pool = {}
    for label, templates in vocabulary.templates.items():
        texts = set()
        while len(texts) < per_label:
            abbr = "".join(rng.choice("ABCDEFGHIKLMNPRSTUW") for _ in range(rng.randint(2, 4)))
            texts.add(
                rng.choice(templates).format(
                    adj=rng.choice(vocabulary.adj),
                    noun=rng.choice(vocabulary.noun),
                    verb=rng.choice(vocabulary.verb),
                    abbr=abbr,
                )
            )
        pool[label] = tuple(sorted(texts))
    return pool


# split -> label -> instance texts; dev's are the texts the evaluation matrix measured
POOLS: dict[Split, dict[str, tuple[str, ...]]] = {
    "train": _pool(_TRAIN),
    "dev": _pool(_DEV),
    "test": _pool(_TEST),
}
POOL = POOLS["dev"]


@dataclass
class Records:
    lines: list[str]
    labels: list[str]
    users: list[int]
    months: list[tuple[int, int]]  # (year, month 1-12)
    user_ids: list[int]  # every user that may appear (sorted)

    def counts(self) -> Counter:
        return Counter(self.labels)

    def user_counts(self) -> Counter:
        return Counter(zip(self.users, self.labels))

    def month_counts(self) -> Counter:
        return Counter(zip(self.months, self.labels))


def header(labelled: bool) -> str:
    how = (
        "Each line carries its label."
        if labelled
        else "Labels are not given: infer each instance's label from its text."
    )
    return (
        f"The following lines are general-knowledge questions asked by users. Each question "
        f"belongs to exactly one of these labels: {', '.join(LABELS)}. {how}\n"
    )


def make_records(
    rng: random.Random, budget: int, n_users: int, labelled: bool, pool: dict[str, tuple[str, ...]] = POOL
) -> Records:
    """Records whose lines (each plus a newline) fill at most ``budget`` characters, their
    instances drawn from ``pool`` (label -> texts)."""
    user_ids = sorted(rng.sample(range(10_000, 99_999), n_users))
    weights = [0.3 + rng.random() for _ in LABELS]  # uneven, so comparisons have an answer
    year = rng.randint(2019, 2024)
    suffix = len(" || Label: abbreviation") if labelled else 0
    estimate = max(8, int(budget / (70 + suffix) * 1.1))  # a draw rarely needs a second round
    lines: list[str] = []
    labels: list[str] = []
    users: list[int] = []
    months: list[tuple[int, int]] = []
    used = 0
    while True:
        draw_labels = rng.choices(LABELS, weights, k=estimate)
        draw_users = rng.choices(user_ids, k=estimate)
        draw_days = rng.choices(range(12 * 28), k=estimate)
        for label, user, day in zip(draw_labels, draw_users, draw_days):
            month, dom = divmod(day, 28)
            line = (
                f"Date: {MONTHS[month]} {dom + 1:02d}, {year} || User: {user} || "
                f"Instance: {rng.choice(pool[label])}"
            )
            if labelled:
                line += f" || Label: {label}"
            if used + len(line) + 1 > budget:
                return Records(lines, labels, users, months, user_ids)
            lines.append(line)
            labels.append(label)
            users.append(user)
            months.append((year, month + 1))
            used += len(line) + 1


def render(records: Records, labelled: bool) -> str:
    return header(labelled) + "\n".join(records.lines) + "\n"


def month_name(year_month: tuple[int, int]) -> str:
    year, month = year_month
    return f"{MONTH_NAMES[month - 1]} {year}"


MIN_RECORD_CHARS = 120  # the longest line, with margin


def minimum_length(knobs: dict, _length: int) -> tuple[int, str]:
    return len(header(knobs["labelled"])) + 6 * MIN_RECORD_CHARS, "the header plus a handful of records"


def users_check(suite: str, low: int, high: int, why: str = ""):
    """A knob validator: ``users`` must be an int in [low, high]."""
    from programs.tasks.base import TaskError

    def validate(knobs: dict) -> None:
        users = knobs["users"]
        if not isinstance(users, int) or isinstance(users, bool) or not low <= users <= high:
            raise TaskError(f"suite {suite!r}: users must be an int from {low} to {high}{why}, got {users!r}")

    return validate


def records_context(rng: random.Random, knobs: dict, length: int, seed: int) -> tuple[Records, str]:
    """Records filling ``length`` characters (header included) and the rendered context, their
    instances from the texts of ``seed``'s split."""
    from programs.tasks.base import exact_length

    budget = length - len(header(knobs["labelled"]))
    records = make_records(rng, budget, knobs["users"], knobs["labelled"], pools(seed, POOLS))
    return records, exact_length(render(records, knobs["labelled"]), length)


# The aggregation and pairs programs: how to read records, and a typed sub-call over LABELS.
RECORDS_STRATEGY = (
    "`context` holds one record per line after a header: 'Date: ... || User: ... || Instance: ...'. "
    "If lines end with '|| Label: x', read labels with code (split on ' || '). Otherwise label the "
    "instances with classify.batched([{'text': t} for t in texts]) (each call costs time: classify each "
    "distinct text once and reuse the result). Then compute the answer with Python, not by reading."
)
CLASSIFY_INSTANCE = "programs.suite_programs:ClassifyInstance"  # classifier(LABELS), built with dspy
