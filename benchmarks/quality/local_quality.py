"""How well the embedded model answers unseen long-context questions through ``rlmkit.RLM``.

    nice -n 10 python benchmarks/quality/local_quality.py --n 5 --length 200000 --seed 1000 --program default
    nice -n 10 python benchmarks/quality/local_quality.py --n 5 --length 200000 --seed 1000 --program shipped

The program is ``rlmkit.RLM("context, question -> answer: str", max_iterations=8)`` with no
instructions, the embedded Qwen2.5-Coder-1.5B as the root (the machine's one local server).
``--program default`` runs the default prompt (``use_preset=False``); ``--program shipped``
runs the program shipped for the embedded model (``rlmkit/local/tuned_program.json``, tuned by
``scripts/tune_embedded.py`` on seeds below 1000). Suites: needle and labelled aggregation
(``labelled=True``, every question kind) by default; ``--suites`` takes any of the six. Seeds
from 1000 up are held out: no tuning or demo ever used them. Prints one row per example and a
table (the mean score with a 95% bootstrap interval, seconds and turns per example); ``--out`` also
writes the rows as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import _bootstrap  # noqa: F401 - the checkout and the benchmark folders on sys.path

import provenance  # noqa: E402

import rlmkit  # noqa: E402
from programs.eval_results import bootstrap_ci  # noqa: E402
from programs.tasks import generate, score  # noqa: E402
from rlmkit.local import LocalServerConfig, local_lm  # noqa: E402

SUITES = {"needle": {}, "aggregation": {"labelled": True}}  # the others: no knobs
DEFAULT_SUITES = "needle,aggregation"


def run_one(rlm: rlmkit.RLM, example, program: str) -> dict:
    started = time.monotonic()
    try:
        pred = rlm(**example.inputs)
        answer, trajectory, error = pred.answer, pred.trajectory, None
    except rlmkit.errors.RunError as exc:
        answer, trajectory, error = None, exc.trajectory, f"{type(exc).__name__}: {exc}"[:200]
    longest = (
        max(
            [t.usage.completion_tokens for t in trajectory.turns]
            + [c.usage.completion_tokens for c in trajectory.iter_subcalls()],
            default=0,
        )
        if trajectory
        else 0
    )
    turns = trajectory.n_turns if trajectory else 0
    return result_row(example, program, answer, time.monotonic() - started, turns, longest, error)


def result_row(
    example, program: str, answer, seconds: float, turns: int, longest_reply_tokens: int, error: str | None
) -> dict:
    """One example's row, the same for rlmkit and for the peers (local_quality_peers.py)."""
    return {
        "suite": example.suite,
        "program": program,
        "id": example.id,
        "seed": example.seed,
        "length": example.length,
        "gold": example.gold,
        "answer": answer,
        "score": score(example, answer) if answer is not None else 0.0,
        "seconds": round(seconds, 1),
        "turns": turns,
        # the guard rails' targets: a completion never passes its cap, a run never its deadline
        "longest_reply_tokens": longest_reply_tokens,
        "error": error,
    }


def table(rows: list[dict], suites: list[str], length: int) -> None:
    """The markdown table: one line per suite and program (local_quality_peers.py prints it too)."""
    print("\n| suite | program | length | n | mean score (95% bootstrap CI) | s/example | turns/example |")
    print("|---|---|---|---|---|---|---|")
    for suite in suites:
        for program in dict.fromkeys(r["program"] for r in rows if r["suite"] == suite):
            mine = [r for r in rows if r["suite"] == suite and r["program"] == program]
            mean = statistics.fmean(r["score"] for r in mine)
            low, high = bootstrap_ci([r["score"] for r in mine])
            label = " (labelled)" if suite == "aggregation" else ""
            seconds = statistics.mean(r["seconds"] for r in mine)
            turns = statistics.mean(r["turns"] for r in mine)
            print(
                f"| {suite}{label} | {program} | {length:,} | {len(mine)} | "
                f"{mean:.2f} ({low:.2f}-{high:.2f}) | {seconds:.0f} | {turns:.1f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5, help="examples per suite")
    parser.add_argument("--length", type=int, default=200_000, help="context characters")
    parser.add_argument("--seed", type=int, default=1000, help="held-out seed (>= 1000)")
    parser.add_argument("--suites", default=DEFAULT_SUITES)
    parser.add_argument(
        "--program",
        choices=("default", "shipped"),
        default="default",
        help="default prompt, or the program shipped for the embedded model",
    )
    parser.add_argument("--max-iterations", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=300.0,
        help="Budget(max_seconds) per example: past it the run ends, scored 0",
    )
    parser.add_argument("--log-dir", type=Path, default=None, help="write each run's trajectory here (JSONL)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="llama.cpp threads if this starts the server (1 on a crowded machine: "
        "2 threads that keep losing the CPU to others wait on each other)",
    )
    args = parser.parse_args()
    config = LocalServerConfig(threads=args.threads) if args.threads else None
    lm = local_lm(config, cache=False, temperature=0.0)
    rlm = rlmkit.RLM(
        "context, question -> answer: str",
        lm=lm,
        max_iterations=args.max_iterations,
        log_dir=args.log_dir,
        budget=rlmkit.Budget(max_seconds=args.max_seconds),
        use_preset=args.program == "shipped",
    )
    if args.program == "shipped" and not lm.traits.preset:
        parser.error("this build ships no program for the embedded model (rlmkit/local/tuned_program.json)")
    first_line, load_at_start = provenance.lines_in(args.out) + 1, os.getloadavg()[0]
    rows = []
    per_suite = [
        generate(suite, n=args.n, length=args.length, seed=args.seed, **SUITES.get(suite, {}))
        for suite in args.suites.split(",")
    ]
    for batch in zip(*per_suite):  # suites alternate, so a run cut short still measures each
        for example in batch:
            row = run_one(rlm, example, args.program)
            rows.append(row)
            print(json.dumps(row, default=str), flush=True)
            if args.out:
                with args.out.open("a") as handle:
                    handle.write(json.dumps(row, default=str) + "\n")
    if args.out and rows:
        run = provenance.record(__file__, sys.argv[1:], load_at_start)
        provenance.record_rows(args.out, first_line, first_line + len(rows) - 1, run)
    deadline_rows = [r for r in rows if (r["error"] or "").startswith("BudgetExceeded")]
    over = max((r["seconds"] - args.max_seconds for r in deadline_rows), default=None)
    print(
        f"\nlongest reply: {max((r['longest_reply_tokens'] for r in rows), default=0)} tokens; "
        f"{len(deadline_rows)} runs ended at the deadline"
        + (f", the latest {over:+.1f} s past it" if over is not None else "")
    )
    table(rows, args.suites.split(","), args.length)


if __name__ == "__main__":
    main()
