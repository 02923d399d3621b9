"""Build the real-text corpora the ``prose`` and ``source`` task families read from.

    python scripts/build_text_corpus.py      # writes programs/tasks/corpus/{prose,source}.json.gz

Both come from text that ships offline with every Debian machine and every CPython: the Python
Language Reference as pydoc carries it (``pydoc_data.topics``), the licence texts Debian keeps
in /usr/share/common-licenses, and modules of the Python standard library. They are copied into
the repository once, so an example is the same bytes on every machine whatever Python it runs.

Every document gets a split, fixed here (``programs/tasks/splits.py`` says which seeds read which):
``train``, ``dev`` or ``test``. Documents that share paragraphs (the reference repeats whole sections
under several topics; GPL-2 and LGPL-2 share clauses) form one group and go to one split together,
so no example of one split carries text that an example of another carried.

``dev`` is the split the project's choices were made on, so its documents never move: the first
division (train / dev) is made exactly as it always was, and ``test`` is made after it from
documents added for it (the reference's short topics, more standard-library modules) and from
train documents handed over whole. Each document records its ``origin``; the documentation Debian
installs for its packages (the licence texts) never stays in ``train``: the project's own
evaluations may read it, training and tuning data may not.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import sys
import sysconfig
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "programs" / "tasks" / "corpus"
HELD_OUT_SHARE = 1 / 3  # dev's share of the characters in the first division
TEST_SHARE = 1 / 3  # the share of train's reference characters handed to test
LICENCES = Path("/usr/share/common-licenses")
DEBIAN = "debian:"  # the origin prefix of documentation a Debian package installed
# The reference's topics that only concatenate other topics (every compound statement; every
# special method): left out, so that every paragraph appears in one document only.
AGGREGATE_TOPICS = {"compound", "specialnames"}
SOURCE_MIN_CHARS, SOURCE_MAX_CHARS, SOURCE_FILES, SOURCE_TEST_FILES = 6_000, 40_000, 72, 36
# Standard-library packages whose modules only test reads (none of them has a top-level module file)
TEST_PACKAGES = ("concurrent", "email", "html", "http", "importlib", "json", "logging", "sqlite3", "urllib",
                 "wsgiref", "xml", "xmlrpc", "zoneinfo", "dbm", "tomllib", "unittest", "asyncio")  # fmt: skip


def _paragraphs(text: str) -> set[str]:
    return {p.strip() for p in text.split("\n\n") if len(p.strip()) > 80}


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _split(documents: list[dict]) -> list[dict]:
    """Give each group of documents that share a paragraph one split."""
    parent = list(range(len(documents)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    paras = [_paragraphs(d["text"]) for d in documents]
    for i in range(len(documents)):
        for j in range(i + 1, len(documents)):
            if paras[i] & paras[j]:
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(documents)):
        groups.setdefault(root(i), []).append(i)
    # groups in the order of a hash of their first id, held out until a third of the characters is
    total, held = sum(len(d["text"]) for d in documents), 0
    ordered = sorted(groups.values(), key=lambda m: _hash(min(documents[i]["id"] for i in m)))
    for members in ordered:
        size = sum(len(documents[i]["text"]) for i in members)
        split = "dev" if held + size <= HELD_OUT_SHARE * total else "train"
        held += size if split == "dev" else 0
        for i in members:
            documents[i]["split"] = split
            documents[i]["group"] = min(documents[j]["id"] for j in members)
    return documents


def _add_test(documents: list[dict], added: list[dict]) -> list[dict]:
    """``added`` joins as ``test``, less any document sharing a paragraph with one already there."""
    seen = set().union(*(_paragraphs(d["text"]) for d in documents))
    for doc in added:
        if not _paragraphs(doc["text"]) & seen:
            documents.append({**doc, "split": "test", "group": doc["id"]})
            seen |= _paragraphs(doc["text"])
    return documents


def _hand_to_test(documents: list[dict], chosen: list[dict], share: float) -> None:
    """Whole train groups of ``chosen`` go to test, in the order of a hash of the group, until
    ``share`` of their characters has gone."""
    groups: dict[str, list[dict]] = {}
    for doc in chosen:
        groups.setdefault(doc["group"], []).append(doc)
    total, moved = sum(len(d["text"]) for d in chosen), 0
    for group in sorted(groups, key=_hash):
        size = sum(len(d["text"]) for d in groups[group])
        if moved + size <= share * total:
            moved += size
            for doc in groups[group]:
                doc["split"] = "test"


def prose() -> dict:
    from pydoc_data.topics import topics

    def topic(name: str, text: str) -> dict:
        title = text.strip().splitlines()[0].strip()
        return {
            "id": f"reference/{name}",
            "title": title,
            "text": text.strip(),
            "origin": "cpython:pydoc_data",
        }

    documents = [
        topic(name, text)
        for name, text in sorted(topics.items())
        if name not in AGGREGATE_TOPICS and len(text) >= 1_000
    ]
    for path in sorted(LICENCES.iterdir()):
        if path.is_file() and not path.is_symlink():
            documents.append(
                {"id": f"licence/{path.name}", "title": path.name, "text": path.read_text(),
                 "origin": f"{DEBIAN}{path}"}
            )  # fmt: skip
    documents = _split(documents)
    for doc in documents:  # Debian's installed documentation: out of training data
        if doc["split"] == "train" and doc["origin"].startswith(DEBIAN):
            doc["split"] = "test"
    train_reference = [d for d in documents if d["split"] == "train"]
    _hand_to_test(documents, train_reference, TEST_SHARE)
    short = [topic(n, t) for n, t in sorted(topics.items()) if n not in AGGREGATE_TOPICS and len(t) < 1_000]
    return {
        "what": "The Python Language Reference (pydoc_data.topics) and Debian's common licence texts",
        "licence": "PSF License Agreement (Python documentation); each licence text permits verbatim copies",
        "built_with": f"Python {sys.version.split()[0]}, {LICENCES}",
        "documents": _add_test(documents, short),
    }


def _defines_something(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return sum(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in tree.body) >= 4


def source() -> dict:
    lib = Path(sysconfig.get_path("stdlib"))
    candidates = []
    for path in sorted(lib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if SOURCE_MIN_CHARS <= len(text) <= SOURCE_MAX_CHARS and _defines_something(text):
            candidates.append(
                {"id": f"stdlib/{path.name}", "title": path.name, "text": text, "origin": "cpython:Lib"}
            )
    # an even spread over the alphabet, the same files whatever the list's length
    step = max(1, len(candidates) // SOURCE_FILES)
    documents = candidates[::step][:SOURCE_FILES]
    # test: modules no other split reads, the top level's leftovers and then modules of packages
    rest = [doc for doc in candidates if doc not in documents]
    for path in sorted(lib.glob("*/*.py")):
        if path.parent.name in TEST_PACKAGES:
            text = path.read_text(encoding="utf-8", errors="replace")
            if SOURCE_MIN_CHARS <= len(text) <= SOURCE_MAX_CHARS and _defines_something(text):
                name = f"{path.parent.name}/{path.name}"
                rest.append({"id": f"stdlib/{name}", "title": name, "text": text, "origin": "cpython:Lib"})
    test_step = max(1, len(rest) // SOURCE_TEST_FILES)
    return {
        "what": "Modules of the Python standard library (Lib/*.py)",
        "licence": "PSF License Agreement",
        "built_with": f"Python {sys.version.split()[0]}",
        "documents": _add_test(_split(documents), rest[::test_step][:SOURCE_TEST_FILES]),
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in (("prose", prose), ("source", source)):
        corpus = build()
        path = OUT / f"{name}.json.gz"
        with gzip.GzipFile(path, "wb", mtime=0) as f:  # mtime 0: the same bytes on every rebuild
            f.write(json.dumps(corpus, indent=0, sort_keys=True).encode())
        split = {
            s: sum(len(d["text"]) for d in corpus["documents"] if d["split"] == s)
            for s in ("train", "dev", "test")
        }
        print(
            f"{path}: {len(corpus['documents'])} documents, characters by split {split}, "
            f"{path.stat().st_size:,} bytes"
        )


if __name__ == "__main__":
    main()
