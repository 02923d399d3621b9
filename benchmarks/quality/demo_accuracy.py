"""How often ``rlmkit demo`` answers right: the demo's own task and program on held-out seeds.

    nice -n 10 python benchmarks/quality/demo_accuracy.py --seeds 2000-2019 --threads 1

Each seed is exactly what ``rlmkit demo --seed N`` runs (``programs/demo_task.py``) on the
embedded model, at the demo's temperature (0) and caps. Seeds from 1000 up were never used
in tuning. One seed at a time by default, as the demo runs: ``--workers N`` runs seeds side
by side on the server's slots, faster, but batched decoding can change the model's greedy
replies (a seed answered right alone was answered wrong three at a time). The demo's
budget caps model calls, not seconds, so a busy machine slows the runs without changing
their scores. Resumable: rows already in ``--out`` (of the same adapter) are kept and their
seeds not run again; the file is rewritten after every seed, stamped with the command, date,
commit, machine and load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _bootstrap import RESULTS, ROOT

import rlmkit  # noqa: E402
from programs.demo_task import (  # noqa: E402
    DEMO_LENGTH,
    DEMO_MAX_CALLS,
    DEMO_SUITE,
    EMBEDDED_MAX_TOKENS,
    demo_example,
    demo_rlm,
)
from programs.tasks import score  # noqa: E402

RESULTS = RESULTS / "demo_accuracy.json"


def parse_seeds(text: str, *, training: bool = False) -> list[int]:
    """'2000-2019' or '2000,2005,2007': the seeds to run, each >= 1000 (held out), or each
    below 1000 when ``training`` (seeds to try a change on before it meets the held-out ones)."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    if training and any(seed >= 1000 for seed in seeds):
        raise SystemExit("--training takes tuning seeds only (below 1000)")
    if not training and any(seed < 1000 for seed in seeds):
        raise SystemExit("seeds below 1000 are tuning seeds: measure on 1000 and up, or pass --training")
    return seeds


def stamp(argv: list[str]) -> dict:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "command": "python benchmarks/quality/demo_accuracy.py " + shlex.join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit or None,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def run_seed(lm, seed: int, *, hold_unread_answers: bool = False) -> dict:
    example = demo_example(seed)
    started = time.monotonic()
    rlm = demo_rlm(lm)
    if hold_unread_answers:  # a knob to try on training seeds; the demo itself runs without it
        rlm.hold_unread_answers = True
    try:
        prediction = rlm(**example.inputs)
        answer, trajectory, error = prediction.answer, prediction.trajectory, None
    except rlmkit.errors.RunError as exc:
        answer, trajectory, error = None, exc.trajectory, f"{type(exc).__name__}: {exc}"[:200]
    return {
        "seed": seed,
        "id": example.id,
        "depth": example.meta.get("depth"),
        "gold": example.gold,
        "answer": answer,
        "score": score(example, answer) if answer is not None else 0.0,
        "seconds": round(time.monotonic() - started, 1),
        "turns": trajectory.n_turns if trajectory else 0,
        "error": error,
        **held_answer(example, trajectory),
    }


def held_answer(example, trajectory) -> dict:
    """The first answer ``hold_unread_answers`` held back, and its score: at temperature 0 the
    run without the hold is this run up to that turn, where it would have ended with that answer."""
    held = next((turn.held for turn in trajectory.turns if turn.held), None) if trajectory else None
    if held is None:
        return {}
    answer = held.get("answer")
    return {"held": answer, "held_score": score(example, answer) if answer is not None else 0.0}


def summary(rows: list[dict]) -> dict:
    scores = [row["score"] for row in rows]
    return {
        "n": len(rows),
        "accuracy": round(statistics.mean(scores), 3) if scores else None,
        "right": sum(score >= 0.999 for score in scores),
        "median_seconds": statistics.median(row["seconds"] for row in rows) if rows else None,
        "cut_at_budget": sum((row["error"] or "").startswith("BudgetExceeded") for row in rows),
        **without_hold(rows),
    }


def without_hold(rows: list[dict]) -> dict:
    """Right answers had each run ended at its first held answer (the run without the hold)."""
    if not any("held" in row for row in rows):
        return {}
    first = [row.get("held_score", row["score"]) for row in rows]
    return {
        "right_without_hold": sum(score >= 0.999 for score in first),
        "held": sum("held" in r for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="2000-2019", help="e.g. 2000-2019 (each >= 1000)")
    parser.add_argument("--workers", type=int, default=1, help="seeds run at once (<= the server's slots)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="serve the model from this process's own server with this many llama.cpp threads "
        "(1 on a crowded machine: 2 threads that keep losing the CPU wait on each other); "
        "default: the machine's shared server",
    )
    parser.add_argument(
        "--training",
        action="store_true",
        help="run tuning seeds (below 1000) to try a change; needs an --out other than the held-out file",
    )
    parser.add_argument(
        "--hold-unread-answers",
        action="store_true",
        help="run the demo's program with hold_unread_answers=True (the demo runs without it)",
    )
    parser.add_argument(
        "--adapter",
        default="default",
        help="GGUF LoRA adapter on the embedded model: a path, 'none' (the base model), 'shipped', or "
        "'default' ($RLMKIT_LOCAL_ADAPTER, else the shipped adapter if it passed its gate, else none)",
    )
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds, training=args.training)
    if args.training and args.out.resolve() == RESULTS.resolve():
        raise SystemExit(f"--training results never go to {RESULTS.name}: pass --out")
    from rlmkit.local import LocalServerConfig, local_lm, resolve_adapter

    adapter = resolve_adapter(args.adapter)
    adapter_name = adapter.name if adapter else None  # the file, not this machine's path to it
    previous = json.loads(args.out.read_text()) if args.out.is_file() else {}
    if previous.get("adapter") != adapter_name:  # another model's rows are not this one's to keep
        if previous.get("rows"):
            print(f"{args.out} holds rows of adapter {previous.get('adapter')}: measuring afresh")
        previous = {}
    rows = [row for row in previous.get("rows", []) if row["seed"] in seeds]
    done = {row["seed"] for row in rows}

    own = {"config": LocalServerConfig(threads=args.threads, parallel=args.workers), "private": True}
    lm = local_lm(
        **(own if args.threads else {}),
        adapter=args.adapter,
        cache=False,
        temperature=0.0,
        max_tokens=EMBEDDED_MAX_TOKENS,
    )
    lock = threading.Lock()
    started = stamp(sys.argv[1:])  # the commit that ran; the load is sampled again at each write

    def measure(seed: int) -> None:
        row = run_seed(lm, seed, hold_unread_answers=args.hold_unread_answers)
        with lock:  # one writer at a time: the file always holds every finished seed
            rows.append(row)
            print(json.dumps(row, default=str), flush=True)
            result = {
                **started,
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "seeds": "training (tuning seeds, below 1000)" if args.training else "held out",
                "task": {"suite": DEMO_SUITE, "length": DEMO_LENGTH, "max_calls": DEMO_MAX_CALLS},
                "model": "embedded (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, llama.cpp, CPU)",
                "adapter": adapter_name,
                "workers": args.workers,
                "server": f"own, {args.threads} thread(s)" if args.threads else "the machine's shared one",
                "summary": summary(rows),
                "rows": sorted(rows, key=lambda row: row["seed"]),
            }
            args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        list(pool.map(measure, [seed for seed in seeds if seed not in done]))
    print(json.dumps(summary(rows)))


if __name__ == "__main__":
    main()
