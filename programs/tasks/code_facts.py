"""Facts that real code states, with nothing inserted: standard-library modules, read whole.

A context is whole Python files of the seed's split (``real_text``), each led by a
``# ===== file: NAME =====`` line, as in ``source``. The question names one thing and asks for
another that the code's structure gives, found by ``ast``:

- ``method``: which class defines the method ``m`` (asked only when one ``def m`` is in the context);
- ``default``: the default value of the parameter ``p`` of ``f`` (``f`` defined once);
- ``enclosing``: which function encloses a quoted line (the line occurs once in the context).

So the answer is never the words the question names, and never ambiguous: each fact is checked
unique in the assembled context before it is asked.

Score: exact match after normalising (case, outer quotes and punctuation; for ``default`` the
quote style and spaces of the value; for a method's class or a function, ``Class.name`` is as good
as the name the gold gives). An answer naming several candidates is not a match.
"""

from __future__ import annotations

import ast
import functools
import random
import re
from typing import Any

from programs.tasks import real_text
from programs.tasks.base import (
    Example,
    ProgramRecipe,
    Suite,
    TaskError,
    as_text,
    build_examples,
    prediction_value,
)
from programs.tasks.source import HEADER, whole_definitions

NAME = "code_facts"
KINDS = ("method", "default", "enclosing")
KNOBS = {"kind": "mixed"}
CHOICES = {"kind": ("mixed", *KINDS)}

_WORDINGS = {
    "method": (
        "Which class defines the method `{m}`?",
        "`def {m}(` is written inside the body of one class. Which class?",
    ),
    "default": (
        "What is the default value of the parameter `{p}` of `{f}`?",
        "If `{f}` is called without `{p}`, what value does `{p}` take? Give the default as written.",
    ),
    "enclosing": (
        "Which function encloses the line `{line}`?",
        "The line `{line}` is in the body of a function. What is that function's name?",
    ),
}
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Defaults so common that answering one of them without reading would often be right: not asked.
_GUESSABLE = frozenset({"None", "True", "False"})


def _def_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in re.findall(r"^\s*(?:async\s+)?def\s+(\w+)", text, re.M):
        counts[name] = counts.get(name, 0) + 1
    return counts


def _methods(tree: ast.Module, once: set[str]) -> list[tuple[dict, str]]:
    return [
        ({"m": fn.name}, cls.name)
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        for fn in cls.body
        if isinstance(fn, _DEFS) and fn.name in once and not fn.name.startswith("__")
    ]


def _defaults(tree: ast.Module, once: set[str]) -> list[tuple[dict, str]]:
    out = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, _DEFS) and n.name in once):
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults))
        pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        for arg, default in pairs:
            value = ast.unparse(default)
            if len(value) <= 40 and value not in _GUESSABLE:
                out.append(({"f": fn.name, "p": arg.arg}, value))
    return out


def _enclosing(tree: ast.Module, text: str, once: set[str]) -> list[tuple[dict, str]]:
    """Statement lines inside a function (not inside a function nested in it), with that function."""
    lines, out = text.splitlines(), []
    for fn in (n for n in ast.walk(tree) if isinstance(n, _DEFS) and n.name in once):
        nested = {
            line for inner in ast.walk(fn) if inner is not fn and isinstance(inner, (*_DEFS, ast.ClassDef))
            for line in range(inner.lineno, (inner.end_lineno or inner.lineno) + 1)
        }  # fmt: skip
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Assign, ast.Return, ast.Raise, ast.Expr, ast.AugAssign)):
                continue
            if node.lineno != node.end_lineno or node.lineno in nested or node is fn.body[0]:
                continue  # one line, this function's own, and not the docstring
            line = lines[node.lineno - 1].strip()
            if 25 <= len(line) <= 90 and "`" not in line and fn.name not in line:  # the line gives no hint
                out.append(({"line": line}, fn.name))
    return out


def _lines_once(context: str) -> set[str]:
    counts: dict[str, int] = {}
    for line in context.splitlines():
        counts[line.strip()] = counts.get(line.strip(), 0) + 1
    return {line for line, count in counts.items() if count == 1}


def _candidates(kind: str, tree: ast.Module, text: str, once: set[str], lines: set[str]):
    if kind == "method":
        return _methods(tree, once)
    if kind == "default":
        return _defaults(tree, once)
    return [(names, gold) for names, gold in _enclosing(tree, text, once) if names["line"] in lines]


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    kind = KINDS[index % len(KINDS)] if knobs["kind"] == "mixed" else knobs["kind"]
    parts = real_text.assemble(rng, real_text.documents("source", seed), length, HEADER)
    context = real_text.joined(parts)
    once = {name for name, count in _def_counts(context).items() if count == 1}
    lines = _lines_once(context)
    trees = {id(part): whole_definitions(part["text"]) for part in parts}
    # the kind asked for, else (a few files may hold no such fact) the next kind that fits
    at = KINDS.index(kind)
    tries = [(k, part) for k in (*KINDS[at:], *KINDS[:at]) for part in rng.sample(parts, len(parts))]
    for kind, part in tries:
        text = trees[id(part)]
        if found := _candidates(kind, ast.parse(text), text, once, lines):
            names, gold = rng.choice(sorted(found, key=repr))
            question = rng.choice(_WORDINGS[kind]).format(**names)
            meta = {"kind": kind, "file": part["title"], **names}
            return {"context": context, "question": question}, gold, meta
    raise TaskError(f"suite {NAME!r}: no {kind} question fits {length:,} characters; use a longer length")


def generate(n: int, length: int, seed: int = 0, **knobs: Any) -> list[Example]:
    real_text.check_fits(NAME, "source", length)
    build = functools.partial(_one, seed=seed)
    return build_examples(
        NAME, n, length, seed, knobs, defaults=KNOBS, choices=CHOICES, build=build,
        minimum=lambda knobs, length: (50_000, "several whole source files"),
    )  # fmt: skip


def _value_key(text: Any) -> str:
    """A default value as a comparable string: spaces and quote style do not matter."""
    value = as_text(text).strip().strip("`").strip()
    try:
        value = ast.unparse(ast.parse(value, mode="eval"))
    except SyntaxError:
        pass
    return re.sub(r"\s+", "", value).replace('"', "'").rstrip(".").lower()


def _name_key(text: Any) -> str:
    return as_text(text).strip().strip("`'\".,:;!? ").removesuffix("()").lower()


def score(example: Example, prediction: Any) -> float:
    kind, gold, answer = example.meta["kind"], example.gold, prediction_value(prediction)
    if kind == "default":
        said = _value_key(answer)
        param = example.meta["p"].lower() + "="
        return float(said == _value_key(gold) or said.removeprefix(param) == _value_key(gold))
    said = _name_key(answer)
    if kind == "method":  # `Class.method` names the class too
        said = said.removesuffix("." + example.meta["m"].lower())
    return float(said == gold.lower() or said.rpartition(".")[2] == gold.lower() and kind == "enclosing")


PROGRAM = ProgramRecipe(
    "signatures:LongDocQA",
    "Search `context` with code for the name or line the question quotes (re.finditer, str.find); "
    "the answer is not that name: walk back from the match to the enclosing `def` or `class` line, "
    "or read the parameter's default in the `def` line, then SUBMIT only that name or value.",
)

SUITE = Suite(
    NAME, generate, score, KNOBS, CHOICES,
    "facts real code states, nothing inserted (class of a method, a default, the enclosing function)",
    PROGRAM,
)  # fmt: skip
