"""Questions about a generated Python package (LongBench-v2 CodeQA-like).

The context is a package rendered file by file (``# ===== file: pkg/loader.py =====``): a
few core modules with a known call graph, ``config.py`` (DEFAULTS) and ``settings.py``
(OVERRIDES), hidden among filler modules that never touch the core. Decoys that fool a
text search but not a parser: comments naming functions that are not called, similar
function names, a commented-out override.

Questions (four options, answer a letter): ``callee`` (which function does X call),
``caller`` (which function calls X), ``unreachable`` (which is not reachable from
``cli.main``), ``config`` (the effective value of a setting). The gold answer is computed
with ``ast`` from the rendered source, not from the generator's own bookkeeping.

Gold letters are balanced (``gold_letter``): each block of four examples holds each letter once,
so always answering one letter scores 0.25 on a suite of 4k examples; ``same_letter_baseline``
reports the best such score for any suite, shown beside every arm.

Score: exact letter (an answer that repeats an option's text counts as that letter).
"""

from __future__ import annotations

import ast
import random
import re
from typing import Any

from programs.tasks.base import (
    Example,
    LengthError,
    ProgramRecipe,
    Suite,
    exact_length,
    filler,
    generator,
    normalize,
    prediction_value,
)

NAME = "codeqa"
QUESTIONS = ("callee", "caller", "unreachable", "config")
KNOBS = {"question": "mixed", "functions": None}  # None: 7 core functions at 2,000 chars, up to 16
CHOICES = {"question": QUESTIONS + ("mixed",), "functions": (None,) + tuple(range(7, 25))}
LETTERS = "ABCD"
CORE = ("loader", "pipeline", "storage", "report")
FILE_HEADER = "# ===== file: {path} =====\n"
_FILE_SPLIT = re.compile(r"^# ===== file: (\S+) =====\n", re.MULTILINE)
_VERBS = (
    "load",
    "parse",
    "merge",
    "score",
    "render",
    "flush",
    "index",
    "fetch",
    "clean",
    "split",
    "rank",
    "emit",
)
_NOUNS = ("items", "rows", "cache", "report", "tokens", "batch", "graph", "records", "pages", "events")
_SETTINGS = {
    "batch_size": (8, 16, 32, 64, 128),
    "timeout_s": (5.0, 10.0, 30.0, 60.0),
    "retries": (0, 1, 3, 5),
    "mode": ("fast", "safe", "debug", "strict"),
    "cache_dir": ("/tmp/c", "~/.cache/x", "./cache"),
    "workers": (1, 2, 4, 8, 16),
    "verbose": (True, False),
    "region": ("eu", "us", "ap"),
}
MIN_CORE_CHARS = 2_000  # 7 core functions, main and the two config files (measured: 1,400-1,750)
PER_FUNCTION_CHARS = 160


# ------------------------------------------------------------------ analysis (ast)
def split_files(context: str) -> dict[str, str]:
    """Rebuild ``{path: source}`` from a rendered package."""
    parts = _FILE_SPLIT.split(context)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def call_graph(files: dict[str, str]) -> dict[str, set[str]]:
    """``module.function -> {module.function it calls}`` for every function in ``files``."""
    graph: dict[str, set[str]] = {}
    for path, source in files.items():
        module = path.rsplit("/", 1)[-1].removesuffix(".py")
        tree = ast.parse(source)
        imported = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        local = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            calls = graph.setdefault(f"{module}.{node.name}", set())
            for call in ast.walk(node):
                if not isinstance(call, ast.Call):
                    continue
                func = call.func
                if isinstance(func, ast.Name) and func.id in local:
                    calls.add(f"{module}.{func.id}")
                elif (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and func.value.id in imported
                ):
                    calls.add(f"{func.value.id}.{func.attr}")
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for callee in graph.get(todo.pop(), ()):
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


def effective_settings(files: dict[str, str]) -> dict[str, Any]:
    """DEFAULTS from config.py updated by OVERRIDES from settings.py, read with ast."""

    def dict_named(source: str, name: str) -> dict:
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                return ast.literal_eval(node.value)
        return {}

    by_name = {path.rsplit("/", 1)[-1]: source for path, source in files.items()}
    return {**dict_named(by_name["config.py"], "DEFAULTS"), **dict_named(by_name["settings.py"], "OVERRIDES")}


# ------------------------------------------------------------------ generation
def _core_count(knobs: dict, length: int) -> int:
    return knobs["functions"] or max(7, min(16, 7 + (length - 2_000) // 2_000))


def _minimum(knobs: dict, length: int) -> tuple[int, str]:
    count = _core_count(knobs, length)
    return MIN_CORE_CHARS + PER_FUNCTION_CHARS * (count - 7), f"{count} core functions and the config files"


def _core(rng: random.Random, count: int) -> tuple[dict[str, str], list[str], list[str]]:
    """Core module sources, the core functions (qualified), and the orphan functions."""
    names = rng.sample([f"{v}_{o}" for v in _VERBS for o in _NOUNS], count)
    funcs = [f"{rng.choice(CORE)}.{name}" for name in names]
    orphans = funcs[-3:]  # never called by anyone: unreachable from main by construction
    body: dict[str, list[str]] = {m: [] for m in CORE}
    for i, qual in enumerate(funcs):
        module, name = qual.split(".")
        later = [f for f in funcs[i + 1 :] if f not in orphans]
        callees = rng.sample(later, min(len(later), rng.randint(1, 3)))
        lines = [f"def {name}(data):"]
        decoy = rng.choice([f for f in funcs if f != qual and f not in callees] or [qual])
        if rng.random() < 0.5:  # a comment a grep would count as a call
            lines.append(f"    # {decoy.split('.')[1]}(data) used to run here")
        for callee in callees:
            c_mod, c_name = callee.split(".")
            lines.append(
                f"    data = {c_name}(data)" if c_mod == module else f"    data = {c_mod}.{c_name}(data)"
            )
        lines.append("    return data\n")
        body[module].append("\n".join(lines))
    sources = {
        f"{m}.py": "from . import " + ", ".join(x for x in CORE if x != m) + "\n\n\n" + "\n\n".join(b)
        for m, b in body.items()
    }
    entry = rng.sample([f for f in funcs if f not in orphans], 3)  # >= 3 live functions for options
    sources["cli.py"] = (
        "from . import "
        + ", ".join(CORE)
        + "\n\n\ndef main(data=None):\n"
        + "".join(f"    data = {f}(data)\n" for f in entry)
        + "    return data\n"
    )
    return sources, funcs, orphans


def _config(rng: random.Random) -> dict[str, str]:
    keys = rng.sample(list(_SETTINGS), 6)
    defaults = {k: rng.choice(_SETTINGS[k]) for k in keys}
    overrides = {k: rng.choice([v for v in _SETTINGS[k] if v != defaults[k]]) for k in rng.sample(keys, 3)}
    ghost = rng.choice(keys)  # a commented-out override: text search sees it, Python does not
    ghost_value = rng.choice(_SETTINGS[ghost])
    over_lines = "".join(f"    {k!r}: {v!r},\n" for k, v in overrides.items())
    return {
        "config.py": "DEFAULTS = {\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in defaults.items()) + "}\n",
        "settings.py": f"from .config import DEFAULTS\n\nOVERRIDES = {{\n    # {ghost!r}: {ghost_value!r},\n"
        f"{over_lines}}}\nSETTINGS = {{**DEFAULTS, **OVERRIDES}}\n",
    }


def _filler_module(rng: random.Random, index: int, budget: int) -> str:
    """A module of helpers that only call each other (never the core)."""
    out = ['"""' + filler(rng, 120) + '"""\n']
    used = len(out[0])
    names: list[str] = []
    while True:
        name = f"step_{rng.choice(_NOUNS)}_{index}_{len(names)}"
        call = f"    value = {rng.choice(names)}(value)\n" if names else ""
        text = (
            f'\n\ndef {name}(value):\n    """{filler(rng, rng.randint(60, 200))}"""\n'
            f"{call}    return value * {rng.randint(2, 9)} + {rng.randint(0, 99)}\n"
        )
        if used + len(text) > budget:
            return "".join(out)
        out.append(text)
        names.append(name)
        used += len(text)


def gold_letter(seed: int, index: int) -> str:
    """Example ``index``'s gold letter: each block of four examples holds each letter once, in an
    order drawn from the seed, so a suite of 4k examples has each letter k times and answering
    one letter always scores 0.25."""
    block = random.Random(f"{NAME}-letters|{seed}|{index // len(LETTERS)}").sample(LETTERS, len(LETTERS))
    return block[index % len(LETTERS)]


def same_letter_baseline(examples: list[Example]) -> float:
    """The best score of answering one letter to every example: what an arm must beat."""
    if not examples:
        return 0.0
    return max(sum(e.gold == letter for e in examples) for letter in LETTERS) / len(examples)


def _one(rng: random.Random, knobs: dict, index: int, n: int, length: int, *, seed: int):
    letter = gold_letter(seed, index)
    package = "pkg_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5))
    core, _funcs, orphans = _core(rng, _core_count(knobs, length))
    core.update(_config(rng))
    files = [(f"{package}/{name}", src) for name, src in core.items()]
    used = sum(len(FILE_HEADER.format(path=p)) + len(s) + 1 for p, s in files)
    if used > length:  # the generous minimum makes this rare; never cut into the core
        raise LengthError(
            f"suite {NAME!r}: this package's core needs {used:,} characters; "
            f"ask for a longer length than {length:,}"
        )
    index = 0
    while length - used > 400:  # filler modules of ~4,000-12,000 characters
        path = f"{package}/helpers_{index:04d}.py"
        room = min(rng.randint(4_000, 12_000), length - used - len(FILE_HEADER.format(path=path)) - 1)
        source = _filler_module(rng, index, room)
        files.append((path, source))
        used += len(FILE_HEADER.format(path=path)) + len(source) + 1
        index += 1
    rest = length - used - len(FILE_HEADER.format(path=f"{package}/notes.py")) - 1
    if rest > 10:  # the last few hundred characters: a comment-only module, not blank padding
        files.append((f"{package}/notes.py", ("# " + filler(rng, rest))[: rest - 1] + "\n"))
    rng.shuffle(files)
    context = "".join(FILE_HEADER.format(path=p) + s + "\n" for p, s in files)
    kind = knobs["question"] if knobs["question"] != "mixed" else rng.choice(QUESTIONS)
    question, options, correct = _ask(
        rng, {p: s for p, s in files if not p.split("/")[-1].startswith("helpers_")}, kind, orphans
    )
    rng.shuffle(options)
    at, to = options.index(correct), LETTERS.index(letter)
    options[at], options[to] = options[to], options[at]
    listed = "\n".join(f"{LETTERS[j]}) {opt}" for j, opt in enumerate(options))
    inputs = {
        "context": exact_length(context, length),
        "question": f"{question}\n{listed}\nAnswer with the letter of the correct option.",
    }
    return inputs, letter, {"question_type": kind, "options": options, "correct": correct, "package": package}


def _ask(rng: random.Random, core_files: dict[str, str], kind: str, orphans: list[str]):
    """(question, four options, the correct one), decided by ast over the core files."""
    graph = call_graph(core_files)
    funcs = sorted(f for f in graph if not f.startswith("cli."))
    if kind == "config":
        settings = effective_settings(core_files)
        key = rng.choice(sorted(settings))
        values = [v for v in _SETTINGS[key] if v != settings[key]]
        wrong = [repr(v) for v in rng.sample(values, min(3, len(values)))]
        wrong += ["None", "it is not set"][: 3 - len(wrong)]
        correct = repr(settings[key])
        return (
            (
                f"What is the effective value of the setting {key!r} (DEFAULTS in config.py, updated by "
                f"OVERRIDES in settings.py)?"
            ),
            [correct] + wrong,
            correct,
        )
    if kind == "unreachable":
        live = reachable(graph, "cli.main") - {"cli.main"}
        dead = [f for f in funcs if f not in live]
        correct = rng.choice(dead)
        return (
            "Which function is NOT reachable from cli.main through direct calls?",
            [correct] + rng.sample(sorted(live), min(3, len(live))),
            correct,
        )
    if kind == "callee":
        subject = rng.choice([f for f in funcs if graph[f]])
        correct = rng.choice(sorted(graph[subject]))
        others = [f for f in funcs if f not in graph[subject] and f != subject]
        return f"Which function does {subject} call directly?", [correct] + rng.sample(others, 3), correct
    callers = {f: {g for g in graph if f in graph[g]} for f in funcs}
    subject = rng.choice([f for f in funcs if callers[f]])
    correct = rng.choice(sorted(callers[subject]))
    others = [f for f in funcs if f not in callers[subject] and f != subject]
    return f"Which function calls {subject} directly?", [correct] + rng.sample(others, 3), correct


_LETTER = re.compile(r"^\s*\(?([A-Da-d])\)?(?:[.:)\s]|$)")
_SAYS = re.compile(r"\b(?:answer|option)\s*(?:is|:)?\s*\(?([A-D])\b", re.IGNORECASE)


def parse_letter(value: Any, options: list[str]) -> str | None:
    text = str(value if value is not None else "")
    for j, option in enumerate(options):
        if normalize(text) == normalize(option) or normalize(text) == normalize(f"{LETTERS[j]}) {option}"):
            return LETTERS[j]
    match = _LETTER.match(text) or _SAYS.search(text)
    return match.group(1).upper() if match else None


def score(example: Example, prediction: Any) -> float:
    return float(parse_letter(prediction_value(prediction), example.meta["options"]) == example.gold)


PROGRAM = ProgramRecipe(
    "signatures:CodeQA",
    "Split `context` into files on the '# ===== file: ' lines, parse them with the ast "
    "module, and answer from the parse (comments mention functions that are not called). "
    "Submit the option letter.",
)
generate = generator(NAME, KNOBS, CHOICES, _one, minimum=_minimum, seeded=True)

SUITE = Suite(
    NAME, generate, score, KNOBS, CHOICES, "four-option questions about a generated package (CodeQA)", PROGRAM
)
