"""dspy.GEPA optimises an ``rlmkit.RLM`` on the embedded model: tuned on training seeds, the plain
and the optimised program then answer the same held-out examples.

    python benchmarks/quality/gepa_embedded.py --train 4 --heldout 10 --max-metric-calls 14

The program is ``rlmkit.RLM("context, question -> answer: str")`` with the default prompt
(``use_preset=False``: GEPA starts from rlmkit's own instructions, not the program shipped for
the embedded model) and the embedded Qwen2.5-Coder-1.5B as the root, on the needle suite at
20,000 characters. GEPA's reflection model is the same embedded model, reached as a
``dspy.LM`` on the machine's one local server: no other model is involved. Its metric scores
with the suite's scorer and says what was wrong (the answer given, the gold answer), which is
what GEPA's reflection reads. Training examples come from seeds below 1000, held-out ones from
1000 up.

Resumable: the optimised program, GEPA's own run state and every finished held-out row stay in
``--work`` (a rerun loads the program and skips the rows it has); the results file is rewritten
after every row, marked ``partial`` until both programs have answered every held-out example.
The evaluated "gepa" program is the one loaded back from its saved file, so the scores also
show that the optimised program saves and loads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _bootstrap import RESULTS

import dspy  # noqa: E402
import provenance  # noqa: E402
from local_quality import run_one  # noqa: E402

import rlmkit  # noqa: E402
from programs.eval_results import bootstrap_ci  # noqa: E402
from programs.tasks import generate, score  # noqa: E402

SIGNATURE = "context, question -> answer: str"
RESULTS = RESULTS / "gepa_embedded.json"
REFLECTION_NOTE = "the embedded model itself, as a dspy.LM on the same local server"


def as_dspy(example) -> dspy.Example:
    """A task example as GEPA takes it: its inputs, plus the id the metric looks the gold up by."""
    return dspy.Example(**example.inputs, task_id=example.id).with_inputs(*example.inputs)


def feedback_metric(examples: list) -> Any:
    """GEPA's metric: the suite's score, and feedback that names the answer and the gold one."""
    by_id = {example.id: example for example in examples}

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        example = by_id[gold.task_id]
        answer = getattr(pred, "answer", None)
        value = score(example, answer) if answer is not None else 0.0
        if value >= 1.0:
            feedback = "Correct."
        else:
            feedback = f"Wrong: the program answered {answer!r}; the correct answer is {example.gold!r}."
        return dspy.Prediction(score=value, feedback=feedback)

    return metric


def optimise(make_program, reflection_lm, train: list, work: Path, max_metric_calls: int) -> dict:
    """Run GEPA once (or reuse its saved program) and say what it did."""
    saved, about = work / "optimised_program.json", work / "optimised_program.meta.json"
    if saved.exists() and about.exists():
        return json.loads(about.read_text())
    optimizer = dspy.GEPA(
        metric=feedback_metric(train),
        reflection_lm=reflection_lm,
        max_metric_calls=max_metric_calls,
        reflection_minibatch_size=2,
        use_merge=False,
        num_threads=1,  # the model server is the bottleneck; threads would only queue on it
        log_dir=str(work / "gepa"),  # GEPA's own state: a rerun continues where it stopped
        seed=0,
    )
    student = make_program()
    started = time.monotonic()
    compiled = optimizer.compile(student, trainset=[as_dspy(e) for e in train])
    info = {
        "seconds": round(time.monotonic() - started, 1),
        "max_metric_calls": max_metric_calls,
        "train_ids": [e.id for e in train],
        "instructions_before": student.instructions,
        "instructions_after": compiled.instructions,
    }
    compiled.save(str(saved))
    about.write_text(json.dumps(info, indent=1) + "\n")
    return info


def load_optimised(make_program, work: Path) -> rlmkit.RLM:
    program = make_program()
    program.load(str(work / "optimised_program.json"))
    return program


def cached_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open()] if path.exists() else []


def summary(rows: list[dict]) -> dict:
    scores = [r["score"] for r in rows]
    low, high = bootstrap_ci(scores) if scores else (None, None)
    return {
        "n": len(rows),
        "mean": round(statistics.fmean(scores), 3) if scores else None,
        "ci95": [low, high],
        "seconds_per_example": round(statistics.fmean(r["seconds"] for r in rows), 1) if rows else None,
    }


def study(make_program, reflection_lm, train: list, heldout: list, work: Path, out: Path, args, meta) -> dict:
    """GEPA on ``train``, then both programs on each of ``heldout`` in turn (a run cut short
    still compares them on the same examples); ``out`` is rewritten after every row."""
    work.mkdir(parents=True, exist_ok=True)
    gepa = optimise(make_program, reflection_lm, train, work, args.max_metric_calls)
    loaded = load_optimised(make_program, work)
    gepa["round_trip"] = loaded.instructions == gepa["instructions_after"]
    programs = {"plain": make_program(), "gepa": loaded}
    rows_path = work / "heldout_rows.jsonl"
    rows = cached_rows(rows_path)
    done = {(r["program"], r["id"]) for r in rows}
    write_results(out, rows, gepa, heldout, args, meta)
    for example in heldout:
        for name, program in programs.items():
            if (name, example.id) in done:
                continue
            row = run_one(program, example, name)
            rows.append(row)
            with rows_path.open("a") as handle:
                handle.write(json.dumps(row, default=str) + "\n")
            print(json.dumps(row, default=str), flush=True)
            write_results(out, rows, gepa, heldout, args, meta)
    return write_results(out, rows, gepa, heldout, args, meta)


def write_results(out: Path, rows: list[dict], gepa: dict, heldout: list, args, meta) -> dict:
    wanted = {e.id for e in heldout}
    rows = [r for r in rows if r["id"] in wanted]
    by_program = {name: [r for r in rows if r["program"] == name] for name in ("plain", "gepa")}
    doc = {
        "about": "dspy.GEPA on an rlmkit.RLM with the embedded model: held-out scores before and after",
        "partial": any(len(mine) < len(heldout) for mine in by_program.values()),
        "suite": "needle",
        "length": args.length,
        "signature": SIGNATURE,
        "max_iterations": args.max_iterations,
        "max_seconds_per_run": args.max_seconds,
        "reflection_lm": REFLECTION_NOTE,
        "heldout_ids": [e.id for e in heldout],
        "gepa": gepa,
        "programs": {name: summary(mine) for name, mine in by_program.items()},
        "rows": rows,
        **provenance.record(__file__, meta["argv"], meta["load_at_start"]),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return doc


def embedded_models(args) -> tuple[Any, Any]:
    """The root LM and GEPA's reflection LM: both the embedded model on the machine's one server."""
    from rlmkit.local import LOCAL_MODEL_NAME, ensure_model, local_lm, machine_server

    root = local_lm(cache=False, temperature=0.0)
    server = machine_server(ensure_model(), None)
    reflection = dspy.LM(
        LOCAL_MODEL_NAME, api_base=server.url, api_key="local", temperature=0.7, max_tokens=1024, cache=False
    )
    return root, reflection


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=4, help="training examples (seed --train-seed)")
    parser.add_argument("--train-seed", type=int, default=0, help="< 1000")
    parser.add_argument("--heldout", type=int, default=10, help="held-out examples (seed --heldout-seed)")
    parser.add_argument("--heldout-seed", type=int, default=1000, help=">= 1000")
    parser.add_argument("--length", type=int, default=20_000, help="context characters")
    parser.add_argument("--max-metric-calls", type=int, default=14, help="GEPA's budget")
    parser.add_argument("--max-iterations", type=int, default=6)
    parser.add_argument("--max-seconds", type=float, default=150.0, help="Budget(max_seconds) per run")
    parser.add_argument("--work", type=Path, default=Path("benchmarks/out/gepa_embedded"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.train_seed >= 1000 or args.heldout_seed < 1000:
        parser.error("training seeds are below 1000, held-out seeds 1000 and up")
    meta = {"argv": sys.argv[1:] if argv is None else argv, "load_at_start": os.getloadavg()[0]}
    root, reflection = embedded_models(args)

    def make_program() -> rlmkit.RLM:
        return rlmkit.RLM(
            SIGNATURE,
            lm=root,
            max_iterations=args.max_iterations,
            budget=rlmkit.Budget(max_seconds=args.max_seconds),
            use_preset=False,
        )

    train = generate("needle", n=args.train, length=args.length, seed=args.train_seed)
    heldout = generate("needle", n=args.heldout, length=args.length, seed=args.heldout_seed)
    doc = study(make_program, reflection, train, heldout, args.work, args.out, args, meta)
    for name, info in doc["programs"].items():
        print(f"{name}: {info}")


if __name__ == "__main__":
    main()
