"""``rlmkit compile sft|rl|dpo RUNS... --out DIR``: trajectories -> a training dataset folder.

The folder holds ``train.jsonl``, ``validation.jsonl`` (RL adds ``groups_*.jsonl``) and
``manifest.json`` (sources with sha256, options, counts, file hashes, the report).
Options left unset take each kind's defaults: SFT keeps good runs (score > 0, >= 2 turns,
status ok); RL and DPO keep every scored run, since low scores are their signal.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from optimizers.cli.compile_plan import CompilePlan, Kind, plan
from rlmkit.cli.common import console, exit_on_error
from rlmkit.errors import UserError


def compile_runs(
    kind: Annotated[Kind, typer.Argument(help="Dataset kind: sft, rl or dpo.")],
    runs: Annotated[list[Path], typer.Argument(help="Trajectory JSONL files, or directories holding them.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the dataset into.")],
    min_score: Annotated[float | None, typer.Option(help="Keep runs scoring at least this.")] = None,
    keep_zero_score: Annotated[
        bool | None, typer.Option("--keep-zero-score/--drop-zero-score", help="Keep runs scoring 0.0.")
    ] = None,
    min_turns: Annotated[int | None, typer.Option(help="Drop runs with fewer root turns.")] = None,
    max_chars: Annotated[
        int | None, typer.Option(help="Drop samples longer than this many characters (0: no limit).")
    ] = None,
    dedupe: Annotated[
        bool | None, typer.Option("--dedupe/--no-dedupe", help="Drop repeated samples.")
    ] = None,
    per_task_cap: Annotated[
        int | None, typer.Option(help="Keep at most this many runs per task (best first).")
    ] = None,
    max_answer_ratio: Annotated[
        float | None,
        typer.Option(
            help="sft: drop runs whose answer is more than this many times as long as the gold "
            "(right only by containing it; default 4, 0: no limit)."
        ),
    ] = None,
    status: Annotated[
        list[str] | None, typer.Option("--status", help="Run statuses to keep (repeatable); 'any' keeps all.")
    ] = None,
    per_turn: Annotated[
        bool | None,
        typer.Option(
            "--per-turn/--whole-runs",
            help="sft: also drop single turns whose code failed, that made up REPL output, had an "
            "answer rejected, or repeat an earlier turn (and every turn after a repeat).",
        ),
    ] = None,
    metric: Annotated[
        str | None, typer.Option(help="module:function scoring a run that has no score.")
    ] = None,
    mode: Annotated[
        str, typer.Option(help="sft/dpo: 'turn' (one sample per root turn) or 'conversation'.")
    ] = "turn",
    subcalls: Annotated[
        bool, typer.Option("--subcalls", help="sft: add sub-call samples (to train the sub-model).")
    ] = False,
    protocol: Annotated[
        str | None, typer.Option(help="Re-render into this protocol: submit, final or answer.")
    ] = None,
    repair: Annotated[
        bool, typer.Option("--repair/--no-repair", help="Fix templated protocol mistakes.")
    ] = True,
    system_prompt_file: Annotated[
        Path | None, typer.Option(help="Use this file's text as the root system prompt.")
    ] = None,
    scorer: Annotated[
        str | None, typer.Option(help="rl: module:function giving the reward (default: task['scorer']).")
    ] = None,
    min_group_size: Annotated[
        int, typer.Option(help="rl: fewest rollouts per example for a GRPO group.")
    ] = 2,
    drop_zero_advantage: Annotated[
        bool, typer.Option("--drop-zero-advantage", help="rl: drop groups with equal rewards.")
    ] = False,
    min_margin: Annotated[
        float, typer.Option(help="dpo: least score gap between chosen and rejected.")
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the train/validation split.")] = 0,
    val_fraction: Annotated[float, typer.Option(help="Fraction of tasks held out for validation.")] = 0.1,
    group_signatures: Annotated[
        bool,
        typer.Option("--group-signatures", help="Runs of several signatures: one sub-folder per signature."),
    ] = False,
    mixed_signatures: Annotated[
        bool,
        typer.Option(
            "--mixed-signatures",
            help="Runs of several signatures: one dataset of them all (a root model trained across tasks).",
        ),
    ] = False,
    tokenizer: Annotated[
        Path | None, typer.Option(help="tokenizer.json for exact token counts (default: chars/4).")
    ] = None,
) -> None:
    """Compile trajectories into an SFT, RL or DPO dataset.

    The dataset folder holds the rows and a manifest saying what went in.
    """
    with exit_on_error(errors=(UserError, ValueError, OSError)):
        run_plan(plan(**locals()))


def run_plan(p: CompilePlan) -> None:
    """One compile, as its plan says."""
    from optimizers.compile import Filters, by_signature, compile_dpo, compile_rl, compile_sft, load_runs
    from rlmkit.loading import load

    base = Filters() if p.kind is Kind.sft else Filters.rollouts()
    filters = dataclasses.replace(
        base,
        **_filter_overrides(
            min_score=p.min_score,
            keep_zero_score=p.keep_zero_score,
            min_turns=p.min_turns,
            max_chars=p.max_chars,
            dedupe=p.dedupe,
            per_task_cap=p.per_task_cap,
            max_answer_ratio=p.max_answer_ratio,
            status=p.status,
            per_turn=p.per_turn,
        ),
    )
    common: dict[str, Any] = {
        "filters": filters,
        "metric": load(p.metric) if p.metric else None,
        "protocol": p.protocol,
        "repair": p.repair,
        "tokenizer": _load_tokenizer(p.tokenizer) if p.tokenizer else None,
        "system_prompt": p.system_prompt_file.read_text(encoding="utf-8") if p.system_prompt_file else None,
        "mixed_signatures": p.mixed_signatures,
    }
    compiler, options = {
        Kind.sft: (compile_sft, {"mode": p.mode, "subcalls": p.subcalls}),
        Kind.rl: (
            compile_rl,
            {
                "scorer": p.scorer,
                "min_group_size": p.min_group_size,
                "drop_zero_advantage": p.drop_zero_advantage,
            },
        ),
        Kind.dpo: (compile_dpo, {"mode": p.mode, "min_margin": p.min_margin}),
    }[p.kind]
    runset = load_runs(list(p.runs))
    if p.group_signatures:
        jobs = [(p.out / _slug(sig), runs_of) for sig, runs_of in sorted(by_signature(runset.runs).items())]
    else:
        jobs = [(p.out, runset)]
    for folder, job_runs in jobs:
        if isinstance(job_runs, list):  # one signature's share: keep the file list for the manifest
            job_runs = dataclasses.replace(runset, runs=job_runs, duplicate_runs=0)
        result = compiler(job_runs, **options, **common)
        manifest = result.write(folder, seed=p.seed, val_fraction=p.val_fraction)
        console.print(escape(result.report.summary()))
        counts = ", ".join(f"{name}: {n}" for name, n in manifest["counts"].items())
        console.print(f"wrote {escape(str(folder))} ({escape(counts)})")


def _filter_overrides(**options: Any) -> dict[str, Any]:
    mapping = {
        "min_score": "min_score",
        "min_turns": "min_turns",
        "dedupe": "dedupe",
        "per_task_cap": "per_task_cap",
        "per_turn": "per_turn",
    }
    overrides = {field: options[name] for name, field in mapping.items() if options[name] is not None}
    if options["keep_zero_score"] is not None:
        overrides["drop_zero_score"] = not options["keep_zero_score"]
    if options["max_chars"] is not None:
        overrides["max_sample_chars"] = options["max_chars"] or None
    if options["max_answer_ratio"] is not None:
        overrides["max_answer_ratio"] = options["max_answer_ratio"] or None
    if options["status"]:
        overrides["statuses"] = None if "any" in options["status"] else tuple(options["status"])
    return overrides


def _load_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def _slug(signature: str) -> str:
    """A folder name per signature: readable head + short hash (two signatures never share one)."""
    head = re.sub(r"[^A-Za-z0-9]+", "_", signature).strip("_")[:60] or "signature"
    return f"{head}-{hashlib.sha256(signature.encode()).hexdigest()[:8]}"


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_runs)
