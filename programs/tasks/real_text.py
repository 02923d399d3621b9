"""What the real-text families share: their corpora, the split of documents between train, dev
and test seeds, contexts assembled from whole documents, and scoring by the answer's form.

The corpora (``programs/tasks/corpus/*.json.gz``, built by ``scripts/build_text_corpus.py``) are
real text copied from what every Debian machine and CPython ship: the Python Language Reference,
licence texts, standard-library modules. Each document belongs to one split (``splits.split_for``
says which seeds read which), so an example never shows text that an example of another split
showed (not only another seed of the same text). Each document records its ``origin``; none from
Debian's installed documentation is in ``train``.
"""

from __future__ import annotations

import functools
import gzip
import json
import random
import re
from pathlib import Path
from typing import Any

from programs.tasks.base import MAX_LENGTH, LengthError, TaskError, as_text, normalize, parse_number
from programs.tasks.splits import DEV_SEEDS, SPLITS, split_for

CORPUS = Path(__file__).parent / "corpus"
HELD_OUT_SEEDS = DEV_SEEDS  # the first seed no training example is drawn from (programs.hints reads it)
FORMS = ("number", "name", "sentence", "list")
CORPORA = ("prose", "source")  # the corpus files under corpus/
FAMILIES = ("prose", "source", "code_facts", "section_facts")  # the families built on these corpora
# Words a sentence answer is not scored on: its key words are the rest.
_STOP = frozenset(
    "a an the and or of to in on at by for with from that this these those is are was were be been "
    "it its as into than then there their they which who whom what when where how not no must may "
    "can will shall should would could".split()
)


@functools.cache
def corpus(name: str) -> dict[str, Any]:
    """A corpus file, read once: ``{"what", "licence", "built_with", "documents": [...]}``."""
    path = CORPUS / f"{name}.json.gz"
    if not path.exists():
        raise TaskError(
            f"the {name} corpus is missing ({path}); rebuild it: python scripts/build_text_corpus.py"
        )
    return json.loads(gzip.decompress(path.read_bytes()))


def check_fits(suite: str, name: str, length: int) -> None:
    """A context is whole documents of one split: it cannot be longer than the smaller split."""
    room = min(
        sum(len(doc["text"]) for doc in corpus(name)["documents"] if doc["split"] == split)
        for split in SPLITS
    )
    if room < length <= MAX_LENGTH:  # past MAX_LENGTH, the check every family shares says so
        raise LengthError(
            f"suite {suite!r}: length {length:,} is more real text than its corpus holds for one split "
            f"({room:,} characters)"
        )


def documents(name: str, seed: int) -> list[dict[str, Any]]:
    """The documents of corpus ``name`` that examples drawn from generator ``seed`` may show."""
    split = split_for(seed)
    return [doc for doc in corpus(name)["documents"] if doc["split"] == split]


def assemble(rng: random.Random, docs: list[dict[str, Any]], length: int, header: str = "") -> list[dict]:
    """Whole documents in a random order, as many as fit in ``length`` characters (the last one
    cut at a line or word break); each is ``{"title", "text"}`` with ``header`` (a format
    string over ``title``) leading its text. Joined with blank lines by ``joined``."""
    order = list(docs)
    rng.shuffle(order)
    out, used = [], 0
    for doc in order:
        text = (header.format(title=doc["title"]) + doc["text"]).strip()
        room = length - used - (3 if out else 0)
        if room <= 0:
            break
        if len(text) > room:  # cut at the last line or word break that fits
            cut = max(text.rfind("\n", 0, room), text.rfind(" ", 0, room))
            text = text[: cut if cut > room * 0.9 else room]
        out.append({"title": doc["title"], "text": text})
        used += len(text) + (3 if len(out) > 1 else 0)
    return out


def joined(parts: list[dict]) -> str:
    return "\n\n\n".join(part["text"] for part in parts)


def key_words(text: str) -> list[str]:
    """The words of ``text`` a sentence answer is scored on (lower case, stop-words left out)."""
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 2]


def score_form(form: str, gold: Any, answer: Any, decoys: list[Any] = ()) -> float:
    """An answer's score in [0, 1] by the gold's form; ``decoys`` are the values the context
    states for the other subjects, and an answer that carries one is not rewarded for it:
    - number: 1 when the first number in the answer is the gold;
    - name: 1 when the gold name is in the answer, 0.5 for its last word only; 0 when the answer
      also names a decoy (naming every candidate is not an answer);
    - sentence: the share of the gold's key words the answer carries, less the largest share of
      any decoy's own key words (those not in the gold) it carries: a sentence that merges the
      fact with a decoy's does not score 1;
    - list: the share of gold items the answer names (as whole words), less the share of decoy
      items it names.
    """
    text = normalize(answer)
    if form == "number":
        value = parse_number(answer)
        return 1.0 if value is not None and value == float(gold) else 0.0
    if form == "name":
        name = normalize(gold)
        if any(_says(text, decoy) for decoy in decoys):
            return 0.0
        if name in text:
            return 1.0
        return 0.5 if name.split()[-1] in text.split() else 0.0
    if form == "sentence":
        wanted = set(key_words(as_text(gold)))
        said = set(key_words(as_text(answer)))
        if not wanted:
            return 0.0
        borrowed = [set(key_words(as_text(decoy))) - wanted for decoy in decoys]
        wrong = max((len(words & said) / len(words) for words in borrowed if words), default=0.0)
        return max(0.0, len(wanted & said) / len(wanted) - wrong)
    if form == "list":
        found = sum(_says(text, item) for item in gold)
        wrong = sum(_says(text, item) for item in decoys)
        return max(0.0, (found - wrong) / len(gold))
    raise TaskError(f"unknown answer form {form!r}; forms are {FORMS}")


def _says(text: str, item: Any) -> bool:
    """Whether normalised ``text`` names ``item`` as a whole word (``x`` is not in ``index``)."""
    return re.search(rf"(?<![a-z0-9_]){re.escape(normalize(item))}(?![a-z0-9_])", text) is not None
