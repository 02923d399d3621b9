"""How reliably RLMTuner finds the one right configuration, over several sampler seeds.

    python benchmarks/quality/tuner_seeds.py [--seeds 10] [--trials 12] [--examples 4]

The setup of ``tests/tuner/test_tuner.py``: a real ``rlmkit.RLM`` (inline sandbox) against the
scripted ``KeywordResponder`` on 127.0.0.1, which answers right only when the instruction
holds its keyword and ``max_iterations >= 3``. The space: 4 candidate instructions x
``max_iterations`` 1..4 = 16 configurations, 2 of them correct. Each seed is a fresh study
(optuna's TPE sampler seeded with it); a seed "finds" the best configuration when some trial
scores accuracy 1.0 within ``--trials`` trials and the tuner's pick is that configuration.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import _bootstrap  # noqa: F401 - the checkout and the benchmark folders on sys.path

import optuna

import rlmkit
from optimizers import IntKnob, RLMTuner, SearchSpace
from optimizers.tuner.scripted import KEYWORD, KeywordResponder, secret_examples, secret_metric
from rlmkit.testing import ScriptedServer

CANDIDATES = [  # the candidate instructions of tests/tuner/test_tuner.py
    "Answer quickly.",
    "Think step by step before you write code.",
    f"{KEYWORD}: look at the data first, then search every line for what is asked.",
    "Use llm_query on chunks of the context.",
]


def run_seed(seed: int, n_trials: int, n_examples: int, url: str, out: Path) -> dict:
    lm = rlmkit.LM("openai/scripted", api_base=url, api_key="test-key", cache=False)
    base = rlmkit.RLM("context, question -> answer: int", lm=lm, sandbox="inline", max_iterations=3)
    space = SearchSpace(knobs=[IntKnob("max_iterations", 1, 4)], instructions=list(CANDIDATES))
    result = RLMTuner(
        base,
        secret_metric,
        secret_examples(n_examples),
        space=space,
        n_trials=n_trials,
        cost_unit="tokens",
        out_dir=out / f"seed{seed}",
        seed=seed,
    ).fit()
    hits = [r.number for r in result.rows if r.complete and r.accuracy == 1.0]
    picked = result.config
    picked_right = (
        picked is not None and KEYWORD in picked.instruction and picked.knobs.get("max_iterations", 0) >= 3
    )
    return {
        "seed": seed,
        "first_hit": min(hits) + 1 if hits else None,
        "picked_right": picked_right,
        "trials": len(result.rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--examples", type=int, default=4)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    start = time.monotonic()
    rows = []
    with (
        ScriptedServer(KeywordResponder()) as server,
        tempfile.TemporaryDirectory(prefix="tuner-seeds-") as tmp,
    ):
        for seed in range(args.seeds):
            row = run_seed(seed, args.trials, args.examples, server.url, Path(tmp))
            rows.append(row)
            hit = f"first perfect trial {row['first_hit']}" if row["first_hit"] else "no perfect trial"
            print(
                f"seed {seed}: {hit} of {row['trials']}; picked the right configuration: "
                f"{'yes' if row['picked_right'] else 'no'}",
                flush=True,
            )
    found = [r for r in rows if r["first_hit"] and r["picked_right"]]
    firsts = [r["first_hit"] for r in found]
    median = (
        f"median {statistics.median(firsts):g} trials, worst {max(firsts)}" if firsts else "no seed found it"
    )
    print(
        f"found the best configuration in {len(found)} of {len(rows)} seeds within {args.trials} trials "
        f"({median}); 16 configurations, 2 correct; {time.monotonic() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
