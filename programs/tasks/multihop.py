"""Multi-hop questions over a document corpus (BrowseComp-Plus-like).

A fictional knowledge graph is rendered into numbered documents. The question composes
``hops`` relations ("the river that flows through the birthplace of the founder of X");
each hop's fact sits in its own evidence document. Hard negatives are entities whose names
share a stem with a chain entity ("Orvalix Labs" / "Orvalix Works") and carry the same
relation with a different value. Every relation is stated at most once per subject, so
the answer is unique. ``meta["evidence"]`` lists the evidence documents (for citations).

Score: exact entity match (case-insensitive; a leading "the" ignored).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from programs.tasks.base import (
    Example,
    LengthError,
    ProgramRecipe,
    Suite,
    TaskError,
    exact_length,
    filler,
    generator,
    normalize,
    prediction_value,
)
from programs.tasks.splits import Split, pools

NAME = "multihop"
KNOBS = {"hops": 3, "negatives": 1, "doc_chars": 600}
CHOICES = {"hops": (1, 2, 3, 4, 5), "negatives": (0, 1, 2, 3)}
HEADER = "The following documents describe people, organisations, cities and rivers.\n\n"
ESSENTIAL_DOC_MAX = 125  # a bare document (id line, title, one fact) with long names; checked below


@dataclass(frozen=True)
class Pool:
    """One split's knowledge-graph vocabulary: relation -> (subject type, object type, fact
    template, question phrase), the parts entity names are built from, and the question."""

    relations: dict[str, tuple[str, str, str, str]]
    first: tuple[str, ...]
    syllables: tuple[str, ...]
    orgs: tuple[str, ...]
    cities: tuple[str, ...]
    river: str  # the word after a river's stem
    ask: str  # the question around the composed phrase, {phrase}


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


POOLS: dict[Split, Pool] = {
    "train": Pool(
        {
            "founder": ("org", "person", "{o} started {s}.", "the starter of {x}"),
            "headquarters": ("org", "city", "{s} is based in {o}.", "the base city of {x}"),
            "birthplace": ("person", "city", "{s} grew up in {o}.", "the home town of {x}"),
            "employer": ("person", "org", "{s} is employed at {o}.", "the workplace of {x}"),
            "mentor": ("person", "person", "{s} was taught by {o}.", "the teacher of {x}"),
            "mayor": ("city", "person", "{o} governs {s} as mayor.", "the governing mayor of {x}"),
            "river": ("city", "river", "{s} lies on the {o}.", "the river beside {x}"),
        },
        _words("Anouk Berit Caius Delphine Elio Freya Gideon Hollis Isolde Jasper Katya Lorcan Maren "
               "Niall Orla Piers Quinta Rhea Soren Tobin"),
        _words("an bel cas dun eth fal gor hul ist jen kil lum mor nal orv pim qua ros sev tam ulm vay "
               "wex yor"),
        _words("Systems Partners Studio Workshop Society Trust Media Group"),
        _words("field burgh dale cliff gate hurst moor well"),
        "Stream",
        "Which entity is {phrase}? Give only its name.",
    ),
    # dev: the pools the evaluation matrix measured, unchanged
    "dev": Pool(
        {
            "founder": ("org", "person", "{s} was founded by {o}.", "the founder of {x}"),
            "headquarters": ("org", "city", "{s} has its headquarters in {o}.",
                             "the city where {x} has its headquarters"),
            "birthplace": ("person", "city", "{s} was born in {o}.", "the birthplace of {x}"),
            "employer": ("person", "org", "{s} works for {o}.", "the employer of {x}"),
            "mentor": ("person", "person", "{s} trained under {o}.", "the mentor of {x}"),
            "mayor": ("city", "person", "The mayor of {s} is {o}.", "the mayor of {x}"),
            "river": ("city", "river", "The {o} flows through {s}.", "the river that flows through {x}"),
        },
        _words("Tamsin Oren Ilse Bram Calla Dorian Esme Fenwick Greta Halvard Ines Jory Kestrel Linnea "
               "Marek Nell Osric Petra Quill Rosalind"),
        _words("vel mar dor quen sil bra tor lin fen gal ris nox pel hab zur cor ven tal mir oss ka lo ru "
               "te"),
        _words("Labs Works Foundry Collective Institute Guild Press Holdings"),
        _words("ford haven mere stead ton wick bury port"),
        "River",
        "What is {phrase}? Answer with the name only.",
    ),
    "test": Pool(
        {
            "founder": ("org", "person", "The creator of {s} was {o}.", "the creator of {x}"),
            "headquarters": ("org", "city", "The main office of {s} sits in {o}.",
                             "the city housing the main office of {x}"),
            "birthplace": ("person", "city", "{o} is the hometown of {s}.", "the hometown of {x}"),
            "employer": ("person", "org", "{s} draws a salary from {o}.", "the payer of the salary of {x}"),
            "mentor": ("person", "person", "{o} coached {s} for years.", "the coach of {x}"),
            "mayor": ("city", "person", "{s} elected {o} to lead its council.",
                      "the council leader elected by {x}"),
            "river": ("city", "river", "Barges on the {o} dock at {s}.",
                      "the waterway whose barges dock at {x}"),
        },
        _words("Wilhelmina Xanthe Yannick Zelda Augustin Bettina Cosimo Dagny Evander Florian Gwendolyn "
               "Hesper Ivo Leontyne Konstantin Leocadia Mireille Nikolai Ottilie Pascoe"),
        _words("bix cru dax eph fyn gru hix jup kry lyx myr nyx pux quo rhy syx tru uxo vyr wyn xan yle "
               "zor"),
        _words("Cooperative Consortium Alliance Syndicate Federation Network Ventures Bureau"),
        _words("grad shire keld thorpe wold combe holm ness"),
        "Canal",
        "Name {phrase}. Reply with that name alone.",
    ),
}  # fmt: skip
RELATIONS = POOLS["dev"].relations


class Names:
    """Fresh, unique entity names (and near-miss variants for hard negatives)."""

    def __init__(self, rng: random.Random, pool: Pool = POOLS["dev"]):
        self.rng, self.pool = rng, pool
        self.used: set[str] = set()

    def _stem(self) -> str:
        return "".join(
            self.rng.choice(self.pool.syllables) for _ in range(self.rng.randint(2, 3))
        ).capitalize()

    def _fresh(self, make) -> str:
        while (name := make()) in self.used:
            pass
        self.used.add(name)
        return name

    def new(self, kind: str) -> str:
        return self._fresh(lambda: self._render(kind, self._stem()))

    def near(self, kind: str, name: str) -> str:
        """A different entity whose name shares a stem with ``name``."""
        stem = name.split()[-1] if kind == "person" else name.split()[0]
        stem = stem.removeprefix("the ").rstrip(",")
        for suffix in self.pool.cities:
            stem = stem.removesuffix(suffix) if kind == "city" and len(stem) > len(suffix) + 2 else stem
        return self._fresh(lambda: self._render(kind, stem, variant=True))

    def _render(self, kind: str, stem: str, variant: bool = False) -> str:
        rng, pool = self.rng, self.pool
        if kind == "person":
            last = stem + (rng.choice(pool.syllables) if variant and rng.random() < 0.5 else "")
            return f"{rng.choice(pool.first)} {last}"
        if kind == "org":
            return f"{stem} {rng.choice(pool.orgs)}"
        if kind == "city":
            return f"{stem}{rng.choice(pool.cities)}"
        return f"{stem}{rng.choice(pool.syllables) if variant else ''} {pool.river}"


def fact(relation: str, subject: str, obj: str, pool: Pool = POOLS["dev"]) -> str:
    return pool.relations[relation][2].format(s=subject, o=obj)


def _chain(rng: random.Random, hops: int) -> list[str]:
    """Relations for a random walk of ``hops`` steps (a river ends a walk: it has no relations)."""
    for _ in range(100):
        kind = rng.choice(("org", "person", "city"))
        walk = []
        for step in range(hops):
            options = [
                r
                for r, (dom, rng_type, *_rest) in RELATIONS.items()
                if dom == kind and (step == hops - 1 or rng_type != "river")
            ]
            relation = rng.choice(options)
            walk.append(relation)
            kind = RELATIONS[relation][1]
        return walk
    raise AssertionError("unreachable")


def _validate(knobs: dict) -> None:
    if not isinstance(knobs["doc_chars"], int) or not 200 <= knobs["doc_chars"] <= 100_000:
        raise TaskError(f"suite {NAME!r}: doc_chars must be an int from 200 to 100,000")


def _minimum(knobs: dict, _length: int) -> tuple[int, str]:
    essential = knobs["hops"] * (1 + knobs["negatives"])
    return len(HEADER) + essential * ESSENTIAL_DOC_MAX, f"{essential} evidence and hard-negative documents"


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    pool = pools(seed, POOLS)
    names = Names(rng, pool)
    relations = _chain(rng, knobs["hops"])
    start = names.new(RELATIONS[relations[0]][0])
    docs: list[tuple[str, str, bool]] = []  # (title, facts, is evidence)
    subject, phrase = start, start
    for relation in relations:
        kind, obj_kind, _, ask = RELATIONS[relation]
        ask = pool.relations[relation][3]
        obj = names.new(obj_kind)
        docs.append((subject, fact(relation, subject, obj, pool), True))
        for _ in range(knobs["negatives"]):
            twin = names.near(kind, subject)
            docs.append((twin, fact(relation, twin, names.new(obj_kind), pool), False))
        phrase = ask.format(x=phrase)
        subject = obj
    gold = subject
    chain_titles = [title for title, _, evidence in docs if evidence]
    budget = length - len(HEADER)
    width = len(str(budget // 40))  # zero-padded ids: every document's size is known up front

    def render(number, title, body):
        return f"[Doc {number:0{width}d}] {title}\n{body}\n\n"

    if budget < sum(len(render(0, t, b)) for t, b, _ in docs):
        raise LengthError(f"suite {NAME!r}: length {length:,} is too small for this chain's documents")
    # pad evidence like the rest only when the corpus is big enough to hide them
    pad = knobs["doc_chars"] if budget > 3 * len(docs) * knobs["doc_chars"] else 0
    docs = [(t, b + ("\n" + filler(rng, pad - len(b)) if pad > len(b) + 40 else ""), e) for t, b, e in docs]
    used = sum(len(render(0, t, b)) for t, b, _ in docs)
    while budget - used > 60:
        relation = rng.choice(list(RELATIONS))
        kind, obj_kind = RELATIONS[relation][:2]
        title = names.new(kind)
        body = fact(relation, title, names.new(obj_kind), pool)
        want = min(knobs["doc_chars"], budget - used) - len(title) - 20
        if want > len(body) + 40:
            body += "\n" + filler(rng, want - len(body))
        overflow = used + len(render(0, title, body)) - budget
        if overflow > 0:  # cut the last filler doc to fit, never a fact
            if len(body) - overflow < len(body.split("\n")[0]) + 20:
                break
            body = body[: len(body) - overflow].rstrip()
        docs.append((title, body, False))
        used += len(render(0, title, body))
    rng.shuffle(docs)
    text = "".join(render(j + 1, title, body) for j, (title, body, _) in enumerate(docs))
    number = {title: j + 1 for j, (title, _, _e) in enumerate(docs)}
    question = pool.ask.format(phrase=phrase)
    meta = {
        "start": start,
        "relations": relations,
        "evidence": [number[t] for t in chain_titles],
        "documents": len(docs),
    }
    return {"context": exact_length(HEADER + text, length), "question": question}, gold, meta


def _entity(text: Any) -> str:
    return normalize(text).removeprefix("the ").strip()


def score(example: Example, prediction: Any) -> float:
    return float(_entity(prediction_value(prediction)) == _entity(example.gold))


PROGRAM = ProgramRecipe(
    "signatures:MultiHopQA",
    "Documents start with '[Doc N] Title'. Resolve the question from the innermost "
    "entity outwards: find the sentence stating each hop with re, check the entity name "
    "matches exactly (look-alike names are traps), and note each document number for "
    "citations.",
)
generate = generator(NAME, KNOBS, CHOICES, _one, minimum=_minimum, validate=_validate, seeded=True)

SUITE = Suite(
    NAME,
    generate,
    score,
    KNOBS,
    CHOICES,
    "multi-hop entity questions over documents (BrowseComp-Plus)",
    PROGRAM,
)
