"""What a reading recipe's sampling has yielded so far: per sampled suite, its runs, and the rows
its filters keep, turn by turn, with every removal counted by reason.

    python benchmarks/training/reading_recipe_yield.py                 # the first round
    python benchmarks/training/reading_recipe_yield.py --round round2  # the second
    python benchmarks/training/reading_recipe_yield.py --round round3  # the third

A round's recipe is sampled by ``rlmkit self-train --recipe FILE --out WORK --archive ARCHIVE``
(``ROUNDS`` names each). Its finished sampling stages are read from the archive; an unfinished one
is snapshotted from the work folder first (so the next run resumes it) and read from that snapshot,
so these counts are what a checkout of the results holds. Rows are compiled as the recipe's dataset
stage compiles them (``rlmkit compile sft --per-turn``; ``compile dpo`` for pairs), in a scratch
folder, with the runs of the earlier rounds the recipe compiles (``runs_from``). Writes the round's
results file, rendered in ``docs/guide/training.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from _bootstrap import RESULTS, ROOT

import provenance

from optimizers.selftrain.rounds import read_registry

# Every round of the reading recipe, as the rounds registry names them; each writes its own
# results file, named after its archive.
ROUNDS = {where.name: where for where in read_registry().rounds}


def results_file(name: str) -> Path:
    return RESULTS / f"{Path(ROUNDS[name].archive).name}_yield.json"


def compiled(kind: str, trajectories: list[Path], min_score: float | None) -> dict[str, Any]:
    """One compile's counts: rows and examples per family, and what each filter removed."""
    from optimizers.compile import EmptyDatasetError, Filters, compile_dpo, compile_sft, load_runs
    from optimizers.selftrain.eval_rows import what_was_kept

    folders = [path for path in trajectories if path.is_dir()]
    if not folders:
        return {"rows": 0, "examples": 0, "per_family": {}, "runs_read": 0}
    runs = load_runs(folders)
    continued = {}
    try:
        if kind == "sft":
            filters = Filters(per_turn=True, min_score=min_score)
            result = compile_sft(runs, filters=filters, mixed_signatures=True)
        else:
            result = compile_dpo(runs, filters=Filters.rollouts(), mixed_signatures=True)
            # pairs of a continued run and its continuations (ids TASK:branch:RUN:pair)
            continued = {"continued_pairs": sum(":branch:" in row.id for row in result.rows)}
        report = result.report
    except EmptyDatasetError as exc:  # no row yet is a count, not a failure
        report = exc.report
    return what_was_kept(report.to_dict()) | continued


def collect(name: str = "reading") -> dict[str, Any]:
    from optimizers.selftrain import earlier_round
    from optimizers.selftrain.eval_rows import read_rows, sample_counts
    from optimizers.selftrain.recipe import Recipe
    from optimizers.selftrain.stages import StageStore

    where = ROUNDS[name]
    archive = ROOT / where.archive
    recipe = Recipe.model_validate(json.loads((archive / "recipe.json").read_text()))
    live = where.store(ROOT)
    suites, folders = [], []
    with tempfile.TemporaryDirectory() as scratch:
        store = StageStore(Path(scratch), archive)  # reads what the archive holds, as a checkout would
        kinds = ("sample", "branch") if recipe.branch_samples else ("sample",)
        for kind, plan in [(kind, plan) for kind in kinds for plan in recipe.train]:
            stage = f"{kind}-{plan.label}"
            live.snapshot(stage)  # an unfinished stage's runs so far, committed so they resume
            record = store.record(stage)
            finished = record is not None
            folder = store.folder(stage) if finished else store.restore(stage)
            planned = {
                "suite": plan.label if kind == "sample" else f"{plan.label} continued",
                # a continuing stage's runs depend on how many runs failed: none planned ahead
                "planned_runs": plan.n * recipe.samples if kind == "sample" else None,
                "closed_early": bool(record and record.get("closed_early")),  # `--close-sampling`
            }
            if not (folder / "results.jsonl").is_file():
                suites.append({**planned, "started": False})
                continue
            folders.append(folder / "trajectories")
            suites.append(
                {
                    **planned,
                    "started": True,
                    "finished": finished,
                    **sample_counts(read_rows(folder)),
                    "sft": compiled("sft", [folder / "trajectories"], recipe.min_score),
                }
            )
        with_earlier = folders.copy()
        for spec in recipe.runs_from:  # the earlier rounds' runs, compiled beside this round's
            with_earlier += earlier_round.runs(str(ROOT / spec), Path(scratch))
        total = {
            "sft": compiled("sft", with_earlier, recipe.min_score),
            "dpo": compiled("dpo", with_earlier, None),
        }
        training = [
            trained(name, store.record(name), history(store.output(name)))
            for name in TRAIN_STAGES
            if store.record(name)
        ]
    return {
        "round": name,
        "recipe": where.recipe,
        "sample_seed": recipe.sample_seed,
        "sample_adapter": recipe.sample_adapter,
        "runs_from": list(recipe.runs_from),
        "samples": recipe.samples,
        "branch_samples": recipe.branch_samples,
        "temperature": recipe.temperature,
        "hinted": [plan.label for plan in recipe.train if recipe.hinted(plan)],
        "min_score": recipe.min_score,
        "max_seconds": recipe.max_seconds,
        "lora_rank": recipe.lora_rank,
        "lr": recipe.lr,
        "suites": suites,
        "total": total,
        "training": training,
    }


# The recipe's training stages, as its archive records them once finished.
TRAIN_STAGES = {"train": "SFT", "train-dpo": "DPO on from the SFT adapter"}
# How many steps at each end of training the loss is averaged over.
LOSS_WINDOW = 10


def history(folder: Path) -> list[dict[str, Any]]:
    """A training stage's logged steps (TRL's ``log_history``, archived with the stage)."""
    path = folder / "log_history.json"
    return json.loads(path.read_text()) if path.exists() else []


def _ends(values: list[float], window: int) -> tuple[float | None, float | None]:
    """The mean of the first and of the last ``window`` values."""
    if not values or not window:
        return None, None
    return (round(sum(values[:window]) / window, 4), round(sum(values[-window:]) / window, 4))


def trained(name: str, record: dict[str, Any], logged: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """A finished training stage: its size, speed and loss at the start and at the end; for DPO
    also how far the chosen reply's reward leads the rejected one's, and how often it leads, from
    the stage's logged steps (the reference is the adapter DPO started from, so both start at 0)."""
    losses, runtime = record.get("losses") or [], record.get("train_runtime_s")
    run_here = record["steps"] - record.get("resumed_at_step", 0)  # the steps the runtime covers
    window = losses[: min(LOSS_WINDOW, len(losses) // 2)] or losses
    preference = {}
    margins = [float(e["rewards/margins"]) for e in logged if "rewards/margins" in e and "loss" in e]
    if margins:
        leads = [float(e["rewards/accuracies"]) for e in logged if "rewards/margins" in e and "loss" in e]
        ends = min(LOSS_WINDOW, len(margins) // 2) or len(margins)
        (margin_first, margin_last), (lead_first, lead_last) = _ends(margins, ends), _ends(leads, ends)
        preference = {"margin_first": margin_first, "margin_last": margin_last,
                      "leads_first": lead_first, "leads_last": lead_last}  # fmt: skip
    return preference | {
        "stage": name,
        "init_adapter": record.get("init_adapter"),
        "rows": record["rows"],
        "steps": record["steps"],
        "precision": record["precision"],
        "train_runtime_s": runtime,
        "resumed_at_step": record.get("resumed_at_step", 0),
        "s_per_step": round(runtime / run_here, 1) if runtime and run_here > 0 else None,
        "loss_window": len(window),
        "loss_first": round(sum(window) / len(window), 4) if window else None,
        "loss_last": round(sum(losses[-len(window) :]) / len(window), 4) if window else None,
    }


def training_lines(data: dict[str, Any]) -> list[str]:
    training = data.get("training", [])
    lines = []
    for stage in training:
        runtime = stage["train_runtime_s"]
        lines.append(
            f"- `{stage['stage']}` ({TRAIN_STAGES[stage['stage']]}): {stage['steps']} steps on "
            f"{stage['rows']} training {'pairs' if stage['stage'] == 'train-dpo' else 'rows'}, one a "
            f"step, {stage['precision']}"
            + (f", {runtime / 60:.0f} minutes of training" if runtime else "")
            + (
                f" for steps {stage['resumed_at_step'] + 1}-{stage['steps']} after a stop at step "
                f"{stage['resumed_at_step']}"
                if runtime and stage.get("resumed_at_step")
                else ""
            )
            + (f" ({stage['s_per_step']} s a step)" if runtime else "")
            + (
                f"; mean loss {stage['loss_first']:.3f} over the first {stage['loss_window']} steps and "
                f"{stage['loss_last']:.3f} over the last {stage['loss_window']}"
                if stage["loss_first"] is not None
                else ""
            )
            + (
                f"; reward margin (chosen minus rejected) {stage['margin_first']:+.3f}, the chosen reply "
                f"ahead in {stage['leads_first']:.0%} of pairs, over the first {stage['loss_window']} "
                f"steps, and {stage['margin_last']:+.3f}, ahead in {stage['leads_last']:.0%}, over the "
                f"last {stage['loss_window']}"
                if stage.get("margin_first") is not None
                else ""
            )
            + (
                "; it started from the SFT adapter read back from its GGUF (float16, as served)"
                if stage.get("init_adapter") == "adapter-sft"
                else ""
            )
            + "."
        )
    if not lines:
        return []
    lora = f" (a LoRA of rank {data['lora_rank']} at learning rate {data['lr']:g})" if "lr" in data else ""
    return ["", f"Training on these rows{lora}, on a CPU:", "", *lines]


def block(name: str = "reading") -> str:
    """The round's yield block of ``docs/guide/training.md`` (``reading-yield``, ``round2-yield``, ...)."""
    out = results_file(name)
    if not out.exists():
        flag = "" if name == "reading" else f" --round {name}"
        return f"Not sampled yet: run `python benchmarks/training/reading_recipe_yield.py{flag}`."
    return section(json.loads(out.read_text()))


def section(data: dict[str, Any]) -> str:
    lines = [
        provenance.stamp(data),
        "",
        f"`{data['recipe']}` on training examples (generator seed {data.get('sample_seed', 0)}; real-text "
        "suites read the training split's documents)"
        + (
            f", sampled through the adapter of `{data['sample_adapter']}`"
            if data.get("sample_adapter")
            else ""
        )
        + f": {data['samples']} runs per example at temperature {data['temperature']}, "
        + (f"hinted on {', '.join(data['hinted'])} only, " if data["hinted"] else "unhinted, ")
        + f"each under a {data['max_seconds']:.0f}-second budget. SFT rows are compiled turn by turn "
        "(`compile sft --per-turn`) from runs scoring "
        + (f"at least {data['min_score']}" if data["min_score"] else "above 0")
        + ", DPO pairs by "
        "`compile dpo`. A run is counted under the first filter that removes it."
        + (
            f" A suite's *continued* row holds its failed runs continued from their last turn, "
            f"{data['branch_samples']} times each (`rlmkit eval --branch-from`)."
            if data.get("branch_samples")
            else ""
        ),
        "",
        "| suite | runs (of planned) | examples | runs scoring above 0 | SFT rows | examples in rows "
        "| runs removed |",
        "|---|---|---|---|---|---|---|",
    ]
    for suite in data["suites"]:
        if not suite["started"]:
            why = "closed before sampling" if suite.get("closed_early") else "not sampled yet"
            planned = f"0 of {suite['planned_runs']}" if suite["planned_runs"] else "0"
            lines.append(f"| {suite['suite']} | {planned} | | | | | {why} |")
            continue
        sft = suite["sft"]
        removed = ", ".join(f"{n} {reason}" for reason, n in sorted(sft.get("runs_dropped", {}).items()))
        state = (
            " *(closed early)*"
            if suite.get("closed_early")
            else ""
            if suite["finished"]
            else " *(unfinished)*"
        )
        lines.append(
            f"| {suite['suite']}{state} | {suite['runs']}"
            + (f" of {suite['planned_runs']}" if suite["planned_runs"] else "")
            + f" | {suite['examples']} "
            f"| {suite['scored_above_0']} | {sft['rows']} | {sft['examples']} | {removed} |"
        )
    total = data["total"]
    turns = ", ".join(f"{n} {reason}" for reason, n in sorted(total["sft"].get("turns_dropped", {}).items()))
    earlier = ", ".join(f"`{spec}`" for spec in data.get("runs_from", []))
    lines += [
        "",
        (f"In all, with the runs of {earlier} compiled beside these: " if earlier else "In all: ")
        + f"**{total['sft']['rows']} SFT rows from {total['sft']['examples']} example(s)** "
        f"(the recipe's target is at least 150 rows from at least 40 examples), "
        f"{total['dpo']['rows']} DPO pair(s) from {total['dpo']['examples']} example(s)"
        + (
            f" ({total['dpo']['continued_pairs']} of them a continued run against its continuations, at "
            "its last turn)"
            if total["dpo"].get("continued_pairs")
            else ""
        )
        + (f"; turns removed from kept runs: {turns}" if turns else "")
        + ". Reasons: `status` the run ran out of its budget or turns; `zero_score` it answered wrong; "
        "`min_score` it was partly right (a count off by one, a near miss); "
        "`hint_not_read` it scored above 0 but no output before its last turn showed the gold (the "
        "answer came from the hint); `hint_used` its code or a sub-call touched the hint; "
        "`answer_padded` its answer holds the gold inside a much longer text; `answer_typed` it typed "
        "in its answer before any output showed it (a guess).",
        *training_lines(data),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--round", choices=list(ROUNDS), default="reading", help="which recipe's yield")
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()[0]
    shown = [] if args.round == "reading" else ["--round", args.round]
    data = {**provenance.record(__file__, shown, load_at_start), **collect(args.round)}
    out = results_file(args.round)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
