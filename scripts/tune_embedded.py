"""Tune the program shipped for the embedded model, on training seeds, and write it with its
provenance to ``rlmkit/local/tuned_program.json`` (which ``rlmkit.local.local_lm`` hands to RLMs).
A recipe for a shipped file, not a measurement, so it sits in ``scripts/`` beside the other
recipes; ``benchmarks/quality/local_quality.py`` measures what it ships.

    nice python scripts/tune_embedded.py --n 3 --trials 4 --seed 0

The optimizer is rlmkit's own (``optimizers.RLMTuner``, optuna): it runs the default program
(``rlmkit.RLM("context, question -> answer: str")`` on the embedded model) on a few training
examples, keeps the successful runs as demo candidates, asks the model for instructions, then
searches instructions, the number of demos and ``blocks_per_turn`` for accuracy (cost in
tokens breaks ties on the Pareto front). The training examples mix the needle suite and the
labelled aggregation suite at 200,000 characters, from seeds below 1000; the held-out
evaluation (``benchmarks/quality/local_quality.py``) uses seeds from 1000 up. Demos are the model's own
successful runs on those training examples: they hold the code that solved a training
question, so the shipped program's scores measure in-family transfer to unseen examples, and
the default prompt's scores are the zero-shot measure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import optuna  # noqa: E402

import rlmkit  # noqa: E402
from optimizers import Bootstrap, CategoricalKnob, RLMTuner, SearchSpace  # noqa: E402
from programs.tasks import generate, score  # noqa: E402
from rlmkit.local import SHIPPED_PROGRAM, local_lm  # noqa: E402

SUITES = {"needle": {}, "aggregation": {"labelled": True}}
SIGNATURE = "context, question -> answer: str"


def metric(example, prediction) -> float:
    return score(example, getattr(prediction, "answer", None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3, help="training examples per suite")
    parser.add_argument("--length", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0, help="training seed, < 1000 (held out: 1000 up)")
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--propose", type=int, default=2, help="instructions the model proposes")
    parser.add_argument("--demos", type=int, default=2, help="largest number of demos")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="Budget(max_seconds) per run")
    parser.add_argument("--out", type=Path, default=Path("rlmkit-tune-embedded"))
    parser.add_argument("--write", type=Path, default=SHIPPED_PROGRAM, help="where the program goes")
    parser.add_argument(
        "--no-prune",
        action="store_true",
        help="run every trial on every example (the dominance rule judges a trial after 1 of 4)",
    )
    parser.add_argument(
        "--grid",
        type=json.loads,
        default=None,
        help="optuna GridSampler over the study's params, e.g. '{\"blocks_per_turn\": [0], "
        '"instruction": [0], "n_demos": [1, 2]}\' (categorical params are indices into their choices)',
    )
    args = parser.parse_args()
    if args.seed >= 1000:
        parser.error("--seed must be < 1000: seeds from 1000 up are held out for evaluation")
    trainset = [
        example
        for suite, knobs in SUITES.items()
        for example in generate(suite, n=args.n, length=args.length, seed=args.seed, **knobs)
    ]
    # The tuner must see the program as it is without a preset (it is what we are making).
    lm = local_lm(cache=False, temperature=0.0, preset=None)
    base = rlmkit.RLM(
        SIGNATURE,
        lm=lm,
        max_iterations=8,
        budget=rlmkit.Budget(max_seconds=args.max_seconds),
        use_preset=False,
    )
    tuner = RLMTuner(
        base,
        metric,
        trainset,
        space=SearchSpace(knobs=[CategoricalKnob("blocks_per_turn", (1, None))], max_demos=args.demos),
        objectives=("accuracy", "cost"),
        cost_unit="tokens",
        n_trials=args.trials,
        study_name="embedded",
        out_dir=args.out,
        proposer_lm=lm if args.propose else None,
        bootstrap=Bootstrap(examples=len(trainset), n_instructions=args.propose, max_demos=args.demos),
        seed=args.seed,
        pruner=optuna.pruners.NopPruner() if args.no_prune else None,
        sampler=optuna.samplers.GridSampler(args.grid, seed=args.seed) if args.grid else None,
    )
    started = time.monotonic()

    def show(event: str, **info) -> None:
        print(f"[{time.monotonic() - started:6.0f}s] {event} {info}", flush=True)

    result = tuner.fit(on_progress=show)
    print(result.to_table(front_only=False))
    if result.config is None:
        raise SystemExit("no trial finished: nothing to ship")
    best, config = result.trial, result.config  # the tuner's choice: the front's most accurate
    program = {
        "instructions": config.instruction,
        "demos": [dict(demo) for demo in config.demos],
        "knobs": {k: v for k, v in config.knobs.items() if v is not None},
        "provenance": {
            "command": shlex.join(["python", f"scripts/{Path(__file__).name}", *sys.argv[1:]]),
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "train": [f"{e.suite} seed {e.seed} {e.id}" for e in trainset],
            "chosen_trial": best.number,
            "train_accuracy": best.accuracy,
            "trials": [
                {"number": r.number, "state": r.state, "accuracy": r.accuracy, "tokens": r.cost, **r.params}
                for r in result.rows
            ],
            "seconds": round(time.monotonic() - started),
        },
    }
    args.write.write_text(json.dumps(program, indent=1, default=str) + "\n")
    print(f"wrote {args.write}: trial {best.number}, training accuracy {best.accuracy:.3f}")


if __name__ == "__main__":
    main()
