"""Facts in real prose: the Python Language Reference and licence texts, with one inserted fact.

A context is whole documents of real prose (``real_text``: held-out seeds read other documents
than training seeds) with one short paragraph added at a random depth, stating a fact about a
made-up subject, plus ``decoys`` paragraphs stating the same kind of fact about other subjects.
The question asks for the first subject's fact, in one of several wordings; the answer is a
number, a name, a sentence or a list (``form``; ``mixed`` cycles through the four).

Score (``real_text.score_form``): a number exactly; a name whole (0.5 for the last name only; 0
when a decoy's name is in the answer too); a sentence by the share of its key words, less the
share of a decoy's own key words it carries; a list by the share of its items, less decoy items.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any

from programs.tasks import real_text
from programs.tasks.base import Example, ProgramRecipe, Suite, TaskError, build_examples, prediction_value
from programs.tasks.splits import Split, pools

NAME = "prose"
KNOBS = {"form": "mixed", "decoys": 1}
CHOICES = {"form": ("mixed", *real_text.FORMS)}


@dataclass(frozen=True)
class Pool:
    """What one split's facts are made of: subjects, the values' parts, and per form the fact's
    sentence and the question's wordings ({s} is the subject, {v} the value)."""

    subjects: tuple[str, ...]
    first: tuple[str, ...]
    last: tuple[str, ...]
    cities: tuple[str, ...]
    clauses: tuple[str, ...]
    frames: dict[str, tuple[str, tuple[str, ...]]]


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# dev: the pools the evaluation matrix measured, unchanged
_DEV = Pool(
    _words(
        "Kestrel Marlin Juniper Osprey Tamarack Heron Larkspur Basalt Quarry Saffron Wren Cobalt Thistle "
        "Granite Alder Lantern Meridian Halcyon"
    ),
    _words("Mirela Tomas Ingrid Kwame Lucia Anders Priya Oskar Yuki Dario"),
    _words("Tosh Varga Okafor Lindqvist Moreau Castellan Brandt Ishikawa Rourke"),
    _words("Lisbon Tallinn Osaka Nairobi Quito Dundee Porto Gdansk Hobart Tromso Valparaiso Ljubljana"),
    (
        "release candidates must be signed by two maintainers",
        "deprecated options stay available for three more releases",
        "every public function needs a worked example in its docstring",
        "benchmarks run on a quiet machine before each tagged release",
        "translations are frozen one week before the final build",
        "security reports are answered within two working days",
        "the nightly archive keeps only the last forty snapshots",
        "configuration files are read from the home folder before the system folder",
    ),
    {
        "number": (
            "A note on the {s} project: its build farm runs {v} nightly jobs.",
            (
                "How many nightly jobs does the {s} project's build farm run?",
                "According to the text, what number of nightly jobs runs on the build farm of the {s} "
                "project?",
                "The text mentions the {s} project's build farm. How many nightly jobs does it run? "
                "Give the number.",
            ),
        ),
        "name": (
            "A note on the {s} project: its steering group is chaired by {v}.",
            (
                "Who chairs the steering group of the {s} project?",
                "Name the person who chairs the {s} project's steering group.",
                "According to the text, which person is the chair of the {s} project's steering group?",
            ),
        ),
        "sentence": (
            "A note on the {s} project: its maintainers agreed that {v}.",
            (
                "What did the maintainers of the {s} project agree?",
                "State the rule the {s} project's maintainers agreed on.",
                "According to the text, what was agreed by the {s} project's maintainers? "
                "Answer in one sentence.",
            ),
        ),
        "list": (
            "A note on the {s} project: its download mirrors are hosted in {v}.",
            (
                "In which cities are the {s} project's download mirrors hosted? List every one.",
                "List all the cities hosting download mirrors of the {s} project.",
                "According to the text, where are the {s} project's download mirrors? Name each city.",
            ),
        ),
    },
)
_TRAIN = Pool(
    _words(
        "Bittern Pipit Rowan Hawthorn Sorrel Obsidian Feldspar Puffin Yarrow Cormorant Sycamore Jasper "
        "Mallow Plover Tansy Dunlin Bracken Gannet"
    ),
    _words("Amara Bjorn Chiara Dmitri Elif Farid Greer Hamish Ilona Jovan"),
    _words("Achterberg Bianchi Chukwu Dalgaard Esposito Fairweather Grimaldi Halloran Ivanova"),
    _words("Bergen Cordoba Dakar Esbjerg Fukuoka Galway Haifa Izmir Kaunas Leipzig Malmo Nantes"),
    (
        "new contributors pair with a reviewer for their first three patches",
        "the issue tracker closes questions that wait a month for an answer",
        "every merge to the main branch is followed by a full documentation build",
        "release notes are drafted by whoever tags the release",
        "optional dependencies are pinned only in the continuous integration setup",
        "the test suite must finish in under ten minutes on a laptop",
        "breaking changes are announced on the mailing list a full cycle ahead",
        "each module keeps its own changelog fragment until the release",
    ),
    {
        "number": (
            "From the {s} team's records: the team keeps {v} open tickets on average.",
            (
                "How many open tickets does the {s} team keep on average?",
                "What is the average number of open tickets of the {s} team?",
            ),
        ),
        "name": (
            "From the {s} team's records: the team's release manager is {v}.",
            (
                "Who is the release manager of the {s} team?",
                "Which person manages releases for the {s} team?",
            ),
        ),
        "sentence": (
            "From the {s} team's records: the team has settled that {v}.",
            (
                "What has the {s} team settled?",
                "Which rule did the {s} team settle on?",
            ),
        ),
        "list": (
            "From the {s} team's records: the team holds its meetups in {v}.",
            (
                "In which cities does the {s} team hold its meetups?",
                "Name every city where the {s} team meets up.",
            ),
        ),
    },
)
# test: words, frames and wordings no other split uses
_TEST = Pool(
    _words(
        "Quetzal Vireo Wombat Zircon Ocotillo Pangolin Tupelo Xerus Ibex Nautilus Capybara Marmot "
        "Tourmaline Sassafras Umbra Verbena Kinkajou Galangal"
    ),
    _words("Zofia Ruairi Thandiwe Vesna Ulrike Sakura Leopold Noor Kiri Emeric"),
    _words("Wojcik Zamorano Quispe Nyberg Uchenna Hakobyan Szabo Pemberton Rautio"),
    _words(
        "Arequipa Bilbao Cuenca Durban Salvador Thessaloniki Uppsala Windhoek Yerevan Zadar Antofagasta "
        "Kraljevo"
    ),
    (
        "archived datasets are checksummed again every spring",
        "no pull request is merged on a Friday afternoon",
        "plugin authors sign a short licence grant before publishing",
        "the public roadmap is rewritten after every second release",
        "telemetry stays off unless a user switches it on",
        "support for an operating system ends a year after its vendor drops it",
        "style questions are settled by the formatter and never in review",
        "a retired maintainer keeps commit rights for six months",
    ),
    {
        "number": (
            "Per the {s} consortium's ledger, {v} volunteers staff its help desk.",
            (
                "How many volunteers staff the help desk of the {s} consortium?",
                "What headcount of volunteers does the {s} consortium's help desk have?",
            ),
        ),
        "name": (
            "Per the {s} consortium's ledger, {v} audits its accounts.",
            (
                "Who audits the accounts of the {s} consortium?",
                "Which person is the auditor of the {s} consortium's accounts?",
            ),
        ),
        "sentence": (
            "Per the {s} consortium's ledger, its charter requires that {v}.",
            (
                "What does the charter of the {s} consortium require?",
                "Which requirement is written in the {s} consortium's charter?",
            ),
        ),
        "list": (
            "Per the {s} consortium's ledger, its regional offices are in {v}.",
            (
                "Where are the regional offices of the {s} consortium? Give every city.",
                "Which cities host a regional office of the {s} consortium?",
            ),
        ),
    },
)
POOLS: dict[Split, Pool] = {"train": _TRAIN, "dev": _DEV, "test": _TEST}  # fmt: skip


def _value(rng: random.Random, form: str, pool: Pool) -> Any:
    if form == "number":
        return rng.randint(12, 9_800)
    if form == "name":
        return f"{rng.choice(pool.first)} {rng.choice(pool.last)}"
    if form == "sentence":
        return rng.choice(pool.clauses)
    return rng.sample(pool.cities, 3)


def _stated(value: Any) -> str:
    if isinstance(value, list):
        return f"{', '.join(value[:-1])} and {value[-1]}"
    return str(value)


def _shared(a: Any, b: Any) -> bool:
    return bool(set(a) & set(b)) if isinstance(a, list) else _stated(a) == _stated(b)


def _insert(text: str, rng: random.Random, paragraph: str) -> str:
    """``paragraph`` on its own between two paragraphs of ``text``, at a random one."""
    breaks = [i for i in range(len(text)) if text.startswith("\n\n", i)] or [len(text)]
    at = rng.choice(breaks)
    return f"{text[:at]}\n\n{paragraph}{text[at:]}"


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    form = real_text.FORMS[index % 4] if knobs["form"] == "mixed" else knobs["form"]
    pool = pools(seed, POOLS)
    sentence, wordings = pool.frames[form]
    subjects = rng.sample(pool.subjects, 1 + knobs["decoys"])
    values: list[Any] = []
    while len(values) < len(subjects):  # no value shares a part with another, or a decoy would be right
        value = _value(rng, form, pool)
        if all(not _shared(value, v) for v in values):
            values.append(value)
    facts = [sentence.format(s=s, v=_stated(v)) for s, v in zip(subjects, values)]
    room = length - sum(len(f) + 2 for f in facts)
    text = real_text.joined(real_text.assemble(rng, real_text.documents("prose", seed), room))
    for fact in facts:
        text = _insert(text, rng, fact)
    question = rng.choice(wordings).format(s=subjects[0])
    meta = {"form": form, "subject": subjects[0], "decoys": values[1:], "fact": facts[0]}
    return {"context": text, "question": question}, values[0], meta


def generate(n: int, length: int, seed: int = 0, **knobs: Any) -> list[Example]:
    most = min(len(pool.subjects) for pool in POOLS.values()) - 1
    if knobs.get("decoys", 1) not in range(0, most + 1):
        raise TaskError(f"suite {NAME!r}: decoys must be an int from 0 to {most}")
    real_text.check_fits(NAME, "prose", length)
    build = functools.partial(_one, seed=seed)
    return build_examples(NAME, n, length, seed, knobs, defaults=KNOBS, choices=CHOICES, build=build)


def score(example: Example, prediction: Any) -> float:
    meta = example.meta
    if meta["form"] == "list":
        decoys = [item for value in meta["decoys"] for item in value]
    else:  # a name or a sentence that also carries another subject's value is not the answer
        decoys = [] if meta["form"] == "number" else list(meta["decoys"])
    return real_text.score_form(meta["form"], example.gold, prediction_value(prediction), decoys)


PROGRAM = ProgramRecipe(
    "signatures:LongDocQA",
    "Search `context` with code for the names the question gives (re.finditer); print the text "
    "around each match, then SUBMIT the answer as the printed text states it.",
)

SUITE = Suite(
    NAME, generate, score, KNOBS, CHOICES, "a fact in real prose (language reference, licences)", PROGRAM
)
