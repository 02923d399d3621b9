"""Build the real-text corpora the ``prose`` and ``source`` task families read from.

    python scripts/build_text_corpus.py      # writes programs/tasks/corpus/{prose,source}.json.gz

Both come from text that ships offline with every Debian machine and every CPython: the Python
Language Reference as pydoc carries it (``pydoc_data.topics``), the licence texts Debian keeps
in /usr/share/common-licenses, and modules of the Python standard library. They are copied into
the repository once, so an example is the same bytes on every machine whatever Python it runs.

Every document gets a split, fixed here: ``train`` (generator seeds below 1000 draw from these)
or ``held_out`` (seeds from 1000 up). Documents that share paragraphs (the reference repeats
whole sections under several topics; GPL-2 and LGPL-2 share clauses) form one group and go to
one split together, so no held-out example carries text that a training example carried.
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
HELD_OUT_SHARE = 1 / 3
LICENCES = Path("/usr/share/common-licenses")
# The reference's topics that only concatenate other topics (every compound statement; every
# special method): left out, so that every paragraph appears in one document only.
AGGREGATE_TOPICS = {"compound", "specialnames"}
SOURCE_MIN_CHARS, SOURCE_MAX_CHARS, SOURCE_FILES = 6_000, 40_000, 72


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
        split = "held_out" if held + size <= HELD_OUT_SHARE * total else "train"
        held += size if split == "held_out" else 0
        for i in members:
            documents[i]["split"] = split
            documents[i]["group"] = min(documents[j]["id"] for j in members)
    return documents


def prose() -> dict:
    from pydoc_data.topics import topics

    documents = [
        {"id": f"reference/{name}", "title": text.strip().splitlines()[0].strip(), "text": text.strip()}
        for name, text in sorted(topics.items())
        if name not in AGGREGATE_TOPICS and len(text) >= 1_000
    ]
    for path in sorted(LICENCES.iterdir()):
        if path.is_file() and not path.is_symlink():
            documents.append({"id": f"licence/{path.name}", "title": path.name, "text": path.read_text()})
    return {
        "what": "The Python Language Reference (pydoc_data.topics) and Debian's common licence texts",
        "licence": "PSF License Agreement (Python documentation); each licence text permits verbatim copies",
        "built_with": f"Python {sys.version.split()[0]}, {LICENCES}",
        "documents": _split(documents),
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
            candidates.append({"id": f"stdlib/{path.name}", "title": path.name, "text": text})
    # an even spread over the alphabet, the same files whatever the list's length
    step = max(1, len(candidates) // SOURCE_FILES)
    documents = candidates[::step][:SOURCE_FILES]
    return {
        "what": "Modules of the Python standard library (Lib/*.py)",
        "licence": "PSF License Agreement",
        "built_with": f"Python {sys.version.split()[0]}",
        "documents": _split(documents),
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
            for s in ("train", "held_out")
        }
        print(
            f"{path}: {len(corpus['documents'])} documents, characters by split {split}, "
            f"{path.stat().st_size:,} bytes"
        )


if __name__ == "__main__":
    main()
