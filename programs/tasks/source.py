"""Questions about real code: standard-library modules, read whole.

A context is whole Python files (``real_text``: held-out seeds read other files than training
seeds), each led by a ``# ===== file: NAME =====`` line. The question is drawn from one file of
the context, parsed with ``ast``, in one of several wordings; its answer is a file name (which
file defines a function), a number (how many methods a class defines), a list (a function's
parameters) or a sentence (the first sentence of a function's docstring). Only names defined once
in the whole context are asked about, so the answer is never ambiguous.

Score (``real_text.score_form``): the name of the file (with or without ``.py``); the number
exactly; the share of the parameters named; the share of the docstring sentence's key words.
"""

from __future__ import annotations

import ast
import functools
import random
import re
from typing import Any

from programs.tasks import real_text
from programs.tasks.base import Example, ProgramRecipe, Suite, TaskError, build_examples, prediction_value

NAME = "source"
KNOBS = {"form": "mixed"}
CHOICES = {"form": ("mixed", *real_text.FORMS)}
HEADER = "# ===== file: {title} =====\n"

_WORDINGS = {
    "name": (
        "Which file defines the function `{f}`?",
        "In which of the files is `def {f}(` written? Give the file name.",
        "Name the module (its file name) where the function `{f}` is defined.",
    ),
    "number": (
        "How many methods does the class `{c}` define directly in its body?",
        "Count the `def` statements directly inside the body of class `{c}`. How many are there?",
        "The class `{c}` defines some methods itself. How many? Answer with a number.",
    ),
    "list": (
        "List the parameters of the function `{f}`, in order.",
        "What are the names of the parameters `{f}` takes? List them all.",
        "Give every parameter name in the definition of `{f}`.",
    ),
    "sentence": (
        "What is the first sentence of the docstring of `{f}`?",
        "Quote the first sentence of the documentation string of the function `{f}`.",
        "What does the docstring of `{f}` say first? Give its first sentence.",
    ),
}


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    return [name for name in names if name not in ("self", "cls")]


def _first_sentence(fn: ast.FunctionDef) -> str | None:
    doc = ast.get_docstring(fn)
    if not doc:
        return None
    sentence = re.split(r"(?<=[.!?])\s", " ".join(doc.split()), maxsplit=1)[0]
    return sentence if len(real_text.key_words(sentence)) >= 4 else None


def _candidates(form: str, tree: ast.Module, once: set[str]) -> list[tuple[dict, Any]]:
    """(what the question names, gold) pairs of ``form`` in one parsed file."""
    out: list[tuple[dict, Any]] = []
    if form == "number":
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name in once):
            defs = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            nested = any(isinstance(n, (ast.If, ast.Try, ast.With)) for n in cls.body)
            if 2 <= len(defs) <= 15 and not nested:
                out.append(({"c": cls.name}, len(defs)))
        return out
    for fn in _functions(tree):
        if fn.name not in once or fn.name.startswith("__"):
            continue
        if form == "name":
            out.append(({"f": fn.name}, None))  # the gold is the file, filled in by the caller
        elif form == "list" and 2 <= len(params := _params(fn)) <= 6:
            out.append(({"f": fn.name}, params))
        elif form == "sentence" and (sentence := _first_sentence(fn)):
            out.append(({"f": fn.name}, sentence))
    return out


def _defined_once(parts: list[dict]) -> set[str]:
    counts: dict[str, int] = {}
    for name in re.findall(
        r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", "\n".join(p["text"] for p in parts), re.M
    ):
        counts[name] = counts.get(name, 0) + 1
    return {name for name, count in counts.items() if count == 1}


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    form = real_text.FORMS[index % 4] if knobs["form"] == "mixed" else knobs["form"]
    parts = real_text.assemble(rng, real_text.documents(NAME, seed), length, HEADER)
    once = _defined_once(parts)
    # the form asked for, else (a short context may hold no class to count) the next that fits
    tries = [(f, part) for f in _from(form) for part in rng.sample(parts, len(parts))]
    trees = {id(part): ast.parse(whole_definitions(part["text"])) for part in parts}
    for form, part in tries:
        if found := _candidates(form, trees[id(part)], once):
            names, gold = rng.choice(found)
            gold = part["title"] if form == "name" else gold
            question = rng.choice(_WORDINGS[form]).format(**names)
            meta = {"form": form, "file": part["title"], **names}
            return {"context": real_text.joined(parts), "question": question}, gold, meta
    raise TaskError(f"suite {NAME!r}: no {form} question fits {length:,} characters; use a longer length")


def _from(form: str) -> list[str]:
    at = real_text.FORMS.index(form)
    return [*real_text.FORMS[at:], *real_text.FORMS[:at]]


def whole_definitions(text: str) -> str:
    """``text`` up to the last top-level statement that starts a line: a cut file still parses."""
    lines = text.splitlines()
    for end in range(len(lines), 0, -1):
        candidate = "\n".join(lines[:end])
        try:
            ast.parse(candidate)
            return candidate
        except SyntaxError:
            continue
    return ""


def generate(n: int, length: int, seed: int = 0, **knobs: Any) -> list[Example]:
    real_text.check_fits(NAME, "source", length)
    build = functools.partial(_one, seed=seed)
    return build_examples(
        NAME, n, length, seed, knobs, defaults=KNOBS, choices=CHOICES, build=build,
        minimum=lambda knobs, length: (50_000, "several whole source files"),
    )  # fmt: skip


def score(example: Example, prediction: Any) -> float:
    form, gold, answer = example.meta["form"], example.gold, prediction_value(prediction)
    if form == "name":  # the module's name is as good as its file name
        return max(
            real_text.score_form("name", gold, answer),
            real_text.score_form("name", gold.removesuffix(".py"), answer),
        )
    return real_text.score_form(form, gold, answer)


PROGRAM = ProgramRecipe(
    "signatures:LongDocQA",
    "Search `context` with code for the name the question gives (re.finditer on `def name` or "
    "`class name`); print the code around each match, then SUBMIT the answer as the printed code shows it.",
)

SUITE = Suite(
    NAME, generate, score, KNOBS, CHOICES, "questions about real code (standard-library modules)", PROGRAM
)
