"""Sandbox numbers for the README: start-up, per-cell overhead, context transfer, hostile outcomes,
and which ordinary RLM code each backend runs.

    python benchmarks/sandbox/sandbox_bench.py [--sizes 10000000,100000000] [--skip-hostile]

Peak memory: the host's and the worker's VmHWM (Linux), the host's reset just before the
transfer (``/proc/self/clear_refs``), so the ratio shows what sending the context costs.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time

import _bootstrap  # noqa: F401 - the checkout and the benchmark folders on sys.path

from rlmkit.errors import Finish
from rlmkit.sandbox import SandboxLimits, make_sandbox
from rlmkit.testing.hostile_cases import HOSTILE_CASES, HostileEnv

BACKENDS = ["process", "inline"] + (["monty"] if importlib.util.find_spec("pydantic_monty") else [])

# Ordinary code a root model writes; each snippet runs in a fresh cell after `context` is set.
TYPICAL_CODE = {
    "slicing": "context[:20] + context[-5:]",
    "re.findall": "import re\nlen(re.findall(r'\\d+', context))",
    "re.finditer groups": "import re\n[m.group(1) for m in re.finditer(r'(\\w+)=(\\d+)', 'a=1 b=2')]",
    "json round trip": "import json\njson.loads(json.dumps({'a': [1, 2]}))['a']",
    "generator expression": "sum(len(w) for w in context.split()[:100])",
    "dict comprehension": "{k: v for k, v in zip('abc', range(3))}",
    "class with methods": "class Acc:\n    def __init__(self):\n        self.n = 0\n    def add(self, k):\n"
    "        self.n += k\n        return self\nAcc().add(3).add(4).n",
    "dataclass": "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\nP(3).x",
    "f-strings": "n = 42\nf'{n:>5}|{n/3:.2f}|{n!r}'",
    "collections.Counter": "from collections import Counter\nCounter(context.split()).most_common(1)",
    "defaultdict": "from collections import defaultdict\nd = defaultdict(list)\nd['a'].append(1)\ndict(d)",
    "try/except": "try:\n    1/0\nexcept ZeroDivisionError as e:\n    r = str(e)\nr",
    "host function": "llm_query('hi')",
    "host function in a loop": "[llm_query(str(i)) for i in range(5)]",
    "state across cells": "saved_state",
    "lambda sort key": "sorted(['bb', 'a', 'ccc'], key=lambda s: -len(s))",
    "chunking helper": (
        "def chunk(s, n):\n    return [s[i:i+n] for i in range(0, len(s), n)]\nlen(chunk(context, 10))"
    ),
    "nonlocal closure": "def outer():\n    c = 0\n    def inc():\n        nonlocal c\n        c += 1\n"
    "    inc()\n    return c\nouter()",
    "walrus": "[y for x in range(5) if (y := x * 2) > 4]",
    "generator function": "def gen(n):\n    for i in range(n):\n        yield i\nlist(gen(3))",
    "custom exception class": (
        "class MyErr(Exception):\n    pass\ntry:\n    raise MyErr('x')\nexcept MyErr:\n    r = 1\nr"
    ),
    "bytearray": "bytearray(b'ab')",
    "textwrap": "import textwrap\ntextwrap.shorten('hello world foo bar', 12)",
    "heapq": "import heapq\nheapq.nlargest(2, [3, 1, 4])",
    "statistics": "import statistics\nstatistics.mean([1, 2, 3])",
    "contextlib": "from contextlib import suppress\nwith suppress(KeyError):\n    {}['a']\n'ok'",
    "math": "import math\nmath.sqrt(16)",
    "itertools": "import itertools\nlist(itertools.islice(itertools.count(), 3))",
    "datetime": "import datetime\ndatetime.date(2024, 1, 2).isoformat()",
    "hashlib": "import hashlib\nhashlib.md5(b'a').hexdigest()[:6]",
}


def hwm_kib(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM"))


def timed(fn, repeat: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def bench_startup_and_cells() -> None:
    print("\n## Start-up and per-cell overhead (median of 10 starts, mean of 200 empty cells)")
    print("| backend | start (s) | empty cell (ms) | llm_query round trip (ms) |\n|---|---|---|---|")
    for name in BACKENDS:
        starts = []
        for _ in range(10):
            sb = make_sandbox(name)
            starts.append(timed(lambda sb=sb: sb.start({"context": "x"}, {"llm_query": str.upper})))
            sb.close()
        with make_sandbox(name) as sb:
            sb.start({"context": "x"}, {"llm_query": str.upper})
            cell = timed(lambda sb=sb: sb.run(""), 200)
            call = timed(lambda sb=sb: sb.run("llm_query('a')"), 200) - cell
        print(f"| {name} | {statistics.median(starts):.3f} | {cell * 1e3:.3f} | {call * 1e3:.3f} |")


def bench_context(sizes: list[int]) -> None:
    print("\n## Context transfer (process backend; ASCII text)")
    print(
        "| chars | start incl. transfer (s) | cell after (ms) | host peak (MiB) | worker peak (MiB) "
        "| (host+worker peak)/size |\n|---|---|---|---|---|---|"
    )
    for n in sizes:
        context = ("lorem ipsum dolor sit amet 0123456789 " * (n // 38 + 1))[:n]
        with open("/proc/self/clear_refs", "w") as fh:  # reset the host's VmHWM to its current RSS
            fh.write("5")
        limits = SandboxLimits(memory_bytes=max(4 * 1024**3, 4 * n))
        sb = make_sandbox("process", limits)
        start_s = timed(lambda sb=sb, context=context: sb.start({"context": context}, {}))
        cell_s = timed(lambda sb=sb: sb.run("n = len(context)"), 10)
        host, worker = hwm_kib(), hwm_kib(sb.pid)
        sb.close()
        print(
            f"| {n:.0e} | {start_s:.3f} | {cell_s * 1e3:.2f} | {host / 1024:.0f} | {worker / 1024:.0f} "
            f"| {(host + worker) * 1024 / n:.2f} |"
        )
        del context


def bench_hostile() -> None:
    print("\n## Hostile code (process backend; cell_timeout 2 s, grace 0.5 s)")
    print("| case | outcome | contained | time to contain (s) |\n|---|---|---|---|")
    limits = SandboxLimits(cell_timeout=2.0, interrupt_grace=0.5, max_disk_bytes=64 * 1024**2)
    with HostileEnv() as env, make_sandbox("process", limits) as sb:
        sb.start({"context": "x"}, {})
        for case in HOSTILE_CASES:
            t0 = time.perf_counter()
            result = sb.run(case.code(env))
            took = time.perf_counter() - t0
            try:
                outcome, ok = case.check(result, env), not env.harm()
            except AssertionError as exc:
                outcome, ok = str(exc).splitlines()[0][:80], False
            print(f"| {case.name} | {outcome} | {'yes' if ok else 'NO'} | {took:.2f} |")
    print("protections:", {k: v for k, v in sb.protection_notes.items()})


def bench_typical_code() -> None:
    print("\n## Typical RLM code per backend (ok / first line of the error)")
    print("| snippet | " + " | ".join(BACKENDS) + " |\n|---|" + "---|" * len(BACKENDS))
    rows: dict[str, list[str]] = {k: [] for k in TYPICAL_CODE}

    def submit(**kw):
        raise Finish(kw)

    for name in BACKENDS:
        with make_sandbox(name) as sb:
            context = "alpha=1 beta=22 gamma 333 " * 100
            sb.start({"context": context}, {"llm_query": lambda p: "R:" + p, "SUBMIT": submit})
            sb.run("saved_state = {'k': 1}")
            for label, code in TYPICAL_CODE.items():
                err = sb.run(code).error
                rows[label].append("ok" if err is None else err.strip().splitlines()[-1][:60])
    for label, cells in rows.items():
        print(f"| {label} | " + " | ".join(cells) + " |")
    for name, col in zip(BACKENDS, zip(*rows.values()), strict=True):
        print(f"{name}: {sum(c == 'ok' for c in col)}/{len(col)} snippets ran")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000000,100000000")
    parser.add_argument("--skip-hostile", action="store_true")
    args = parser.parse_args()
    bench_startup_and_cells()
    bench_context([int(s) for s in args.sizes.split(",") if s])
    if not args.skip_hostile:
        bench_hostile()
    bench_typical_code()
    print(f"\n(pid {os.getpid()}, {os.cpu_count()} CPUs, uid {os.geteuid()})")


if __name__ == "__main__":
    main()
