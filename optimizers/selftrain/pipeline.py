"""The recipe's stages, in order, each a verb of rlmkit run as a subprocess (see ``__init__``).

Stage functions take their folder and return their record; ``SelfTrain.run`` hands them to the
``StageStore``, which skips any that finished before. Nothing here imports a task suite: the
suites are reached through ``rlmkit eval``, so this package stays below ``programs``."""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from optimizers.selftrain import earlier_round
from optimizers.selftrain.eval_rows import (
    count_lines,
    never_answered,
    per_example,
    read_rows,
    report_row,
    sample_counts,
    what_was_kept,
)
from optimizers.selftrain.paired import paired_compare
from optimizers.selftrain.recipe import DATASET_ONLY, MEASURED_ONLY, Measurement, Recipe, SuitePlan
from optimizers.selftrain.stages import StageStore
from optimizers.selftrain.subprocesses import run_subprocess, subprocesses_stopped_on_exit
from rlmkit.errors import RLMKitError

ARMS = ("base", "adapter")


class StageFailed(RLMKitError):
    """A stage's command exited with an error; everything finished before it is kept."""


def rlmkit_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlmkit", *args]


def shown(command: list[str], work: Path | None = None) -> str:
    """``python -m rlmkit ARGS`` as a user types it, the work folder written ``OUT``."""
    text = " ".join(["rlmkit", *command[3:]])
    return text.replace(str(work), "OUT") if work is not None else text


class SelfTrain:
    """One self-training run: ``recipe`` over ``store``; ``base_gguf`` is the model file trained
    (the embedded model's when the recipe's lm is 'local') and the base its adapter is served on.

    ``train_from``: TrainJob's ``base_model`` and ``options`` when training should read another
    copy of the same weights (default: transformers dequantises ``base_gguf``). ``runner`` runs
    one command and returns its exit status (default: a subprocess in this terminal)."""

    def __init__(
        self,
        recipe: Recipe,
        store: StageStore,
        base_gguf: Path,
        *,
        log: Callable[[str], None] = print,
        runner: Callable[[list[str]], int] | None = None,
        train_from: dict[str, Any] | None = None,
    ):
        self.recipe, self.store, self.base_gguf, self.log = recipe, store, Path(base_gguf), log
        self.runner = runner or run_subprocess
        self.train_from = train_from or {
            "base_model": str(self.base_gguf.parent),
            "options": {"gguf_file": self.base_gguf.name},
        }

    # -- the plan ---------------------------------------------------------------------
    def stages(self) -> Iterator[tuple[str, Callable[[Path], dict[str, Any]], tuple[str, ...]]]:
        """(name, function, files left out of the archive), in the order they run."""
        for plan in self.recipe.train:
            yield f"sample-{plan.label}", _bind(self.sample, plan), ()
        if self.recipe.branch_samples:  # after every sampling stage: a closed one has its runs too
            for plan in self.recipe.train:
                yield f"branch-{plan.label}", _bind(self.branch, plan), ()
        yield "dataset", self.dataset, ()
        yield "train", self.train, ("adapter/*.safetensors", "trainer", "data")
        if self.recipe.dpo:
            # the SFT adapter as GGUF too: it can be measured while DPO trains on from it
            yield "adapter-sft", _bind(self.adapter, "train"), ()
            yield (
                "train-dpo",
                self.train_dpo,
                ("adapter/*.safetensors", "adapter/ref", "sft-adapter", "trainer", "data"),
            )
        yield "adapter", _bind(self.adapter, "train-dpo" if self.recipe.dpo else "train"), ()
        for measurement in self.recipe.measurements():  # both arms of a suite before the next
            for arm in ARMS:
                yield f"eval-{arm}-{measurement.label}", _bind(self.evaluate, measurement, arm), ()

    def will_run(self, name: str, only: Callable[[str], bool] = lambda name: True) -> bool:
        """Whether ``run(only)`` would run stage ``name`` (selected, and not finished before)."""
        return only(name) and self.store.record(name) is None

    def run(self, only: Callable[[str], bool] = lambda name: True) -> dict[str, dict[str, Any]]:
        """Run the stages ``only`` selects, in order, keeping those done before. With
        ``eval_threads`` the two arms of a suite run side by side, each on its own server: an
        interruption then leaves them at about the same example, so what finished is paired."""
        self._keep_recipe()
        planned = [stage for stage in self.stages() if only(stage[0])]
        self.log("stages: " + ", ".join(name for name, _, _ in planned))
        done: dict[str, dict[str, Any]] = {}
        while planned:
            together = 2 if self.recipe.eval_threads and planned[0][0].startswith("eval-base-") else 1
            batch, planned = planned[:together], planned[together:]
            with ThreadPoolExecutor(max_workers=len(batch)) as pool, subprocesses_stopped_on_exit():
                for name, record in zip([b[0] for b in batch], pool.map(self._run_one, batch)):
                    done[name] = record
        return done

    def close_sampling(self) -> list[str]:
        """Finish every sampling stage not finished yet with the runs it has (none, for one never
        started), its record saying it was closed early and how many runs were planned: the
        dataset stage reads only finished stages, and a suite that yields little need not hold
        the others' rows back for hours. The stages closed, by name."""
        self._keep_recipe()
        closed = []
        for plan in self.recipe.train:
            name = f"sample-{plan.label}"
            if self.store.record(name) is None:
                record = self.store.run(name, _bind(self._closed, plan))
                self.log(f"[{name}] closed early with {record['runs']} of {record['planned_runs']} runs")
                closed.append(name)
        return closed

    def _closed(self, plan: SuitePlan, folder: Path) -> dict[str, Any]:
        planned = {"closed_early": True, "planned_runs": plan.n * self.recipe.samples}
        return planned | self._sampled(plan, folder)

    def _sampled(self, plan: SuitePlan, folder: Path) -> dict[str, Any]:
        """A sampling stage's record past its command: what it drew, and every run in its folder
        (an earlier, larger plan's runs too)."""
        return {
            "suite": plan.suite,
            "length": plan.length,
            "generator_seed": self.recipe.sample_seed,  # drawn per (seed, index): 0, 1000 never meet
            **sample_counts(read_rows(folder)),
        }

    def _keep_recipe(self) -> None:
        self.store.keep_recipe(
            self.recipe.model_dump(mode="json"),
            may_change=MEASURED_ONLY + self._plans_added(),
            added_later=Recipe.added_later(),
        )

    def _plans_added(self) -> tuple[str, ...]:
        """What may change while the kept recipe's dataset stage has not run: ``DATASET_ONLY``
        fields, which no finished stage read, and ``train`` when the recipe only adds suites to
        sample or drops ones never started (every kept plan that ran is still there as it was, so
        no sampled stage changes meaning, and the new ones are sampled before the dataset reads
        them all)."""
        kept = self.store.recipe()
        if kept is None or self.store.record("dataset") is not None:
            return ()
        plans = self.recipe.model_dump(mode="json")["train"]
        started = [plan for plan in kept["train"] if self._started(SuitePlan.model_validate(plan))]
        return DATASET_ONLY + (("train",) if all(plan in plans for plan in started) else ())

    def _started(self, plan: SuitePlan) -> bool:
        """Whether ``plan``'s sampling stage has any run, finished or snapshotted: a plan that never
        ran one may leave the recipe (a length its suite refused, say), as no stage read it."""
        name = f"sample-{plan.label}"
        partial = self.store.archive / f"{name}.partial.tar.gz" if self.store.archive else None
        folder = self.store.folder(name)
        return (
            self.store.record(name) is not None
            or bool(partial and partial.exists())
            or bool(folder.is_dir() and read_rows(folder))
        )

    def _run_one(self, stage: tuple[str, Callable[[Path], dict[str, Any]], tuple[str, ...]]) -> dict:
        name, function, skip = stage
        kept = self.store.record(name)
        self.log(f"[{name}] " + ("done before, kept" if kept else f"running (started {_now()})"))
        if kept:
            return kept
        record = self.store.run(name, function, skip=skip)
        self.log(f"[{name}] finished in {record['wall_s'] / 60:.1f} min")
        return record

    def shown(self, command: list[str]) -> str:
        adapter = str(self.store.folder("adapter") / "adapter.gguf")  # where it is, or will be
        return shown([part.replace(adapter, "ADAPTER") for part in command], self.store.work)

    def _call(self, command: list[str]) -> None:
        self.log("$ " + shown(command))
        code = self.runner(command)
        if code != 0:
            raise StageFailed(f"`{shown(command)}` exited with status {code}; rerun to resume")

    # -- stages -----------------------------------------------------------------------
    def eval_command(
        self, plan: SuitePlan, out: Path, *extra: str, iterations: int | None = None, cache: str | None = None
    ) -> list[str]:
        """``rlmkit eval`` of ``plan`` into ``out``, with the LM cache of stage ``cache`` (default:
        ``out``'s own)."""
        r = self.recipe
        return rlmkit_command(
            "eval", plan.suite, "--n", str(plan.n), "--length", str(plan.length), "--lm", r.lm,
            "--program", r.program, "--max-iterations", str(iterations or r.max_iterations),
            "--workers", str(r.workers), "--out", str(out),
            "--lm-cache", str(self.store.lm_cache(cache or out.name)),
            *(["--max-seconds", str(r.max_seconds)] if r.max_seconds else []), *extra,
        )  # fmt: skip

    def sample(self, plan: SuitePlan, folder: Path) -> dict[str, Any]:
        command, through = self._sampling(plan, folder, self.recipe.samples)
        self._call(command)  # resumes from its folder by itself
        return {"command": self.shown(command)} | through | self._sampled(plan, folder)

    def branch(self, plan: SuitePlan, folder: Path) -> dict[str, Any]:
        """The sampling stage's failed runs continued from their last turn, with the same arguments
        and LM cache (sub-calls before that turn are answered as they were)."""
        r, sampled = self.recipe, f"sample-{plan.label}"
        extra = ("--branch-from", str(self.store.output(sampled)), "--branch-below", str(r.min_score or 1.0))
        command, through = self._sampling(plan, folder, r.branch_samples, *extra, cache=sampled)
        self._call(command)
        return {"command": self.shown(command), "from": sampled} | through | self._sampled(plan, folder)

    def _sampling(
        self, plan: SuitePlan, folder: Path, samples: int, *extra: str, cache: str | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The sampling command of ``plan`` (training seed, temperature, hint, the sampling adapter)
        and the adapter it samples through (empty: the base)."""
        r = self.recipe
        through: dict[str, str] = {}
        if r.sample_adapter:
            gguf = earlier_round.adapter_gguf(r.sample_adapter, self.store.work)
            through = earlier_round.adapter_identity(r.sample_adapter, gguf)
        command = self.eval_command(
            plan, folder, "--seed", str(r.sample_seed), "--samples", str(samples),
            "--temperature", str(r.temperature), *(["--hint"] if r.hinted(plan) else []),
            *(["--local-threads", str(r.sample_threads)] if r.sample_threads else []),
            *(["--adapter", str(gguf)] if through else []), *extra, cache=cache,
        )  # fmt: skip
        return command, through

    def dataset(self, folder: Path) -> dict[str, Any]:
        kinds = ("sample", "branch") if self.recipe.branch_samples else ("sample",)
        stages = [f"{kind}-{plan.label}" for kind in kinds for plan in self.recipe.train]
        sampled = [self.store.output(name) / "trajectories" for name in stages]
        sampled += [
            folder for spec in self.recipe.runs_from for folder in earlier_round.runs(spec, self.store.work)
        ]
        runs = [str(folder) for folder in sampled if folder.is_dir()]  # a stage closed before any run: none
        record: dict[str, Any] = {}
        if self.recipe.runs_from:
            record["runs_from"] = {
                spec: [name for name, _ in earlier_round.sampled_stages(spec)]
                for spec in self.recipe.runs_from
            }
        for kind in ("sft", "dpo"):
            per_turn = ["--per-turn"] if self.recipe.per_turn and kind == "sft" else []
            if kind == "sft" and self.recipe.min_score is not None:
                per_turn += ["--min-score", str(self.recipe.min_score)]
            # one model is trained across the recipe's families, whose signatures differ
            command = rlmkit_command(
                "compile", kind, *runs, "--out", str(folder / kind), "--mixed-signatures", *per_turn
            )
            if kind == "dpo" and not self.recipe.dpo:  # a by-product here: none is a count, not a failure
                self.log("$ " + shown(command))
                if self.runner(command) != 0:
                    record[kind] = {"command": self.shown(command), "counts": {}, "note": "no row survived"}
                    continue
            else:
                self._call(command)
            manifest = json.loads((folder / kind / "manifest.json").read_text())
            record[kind] = {"command": self.shown(command), "counts": manifest["counts"]} | what_was_kept(
                manifest["report"]
            )
        return record

    def train(self, folder: Path) -> dict[str, Any]:
        """SFT: a LoRA on the compiled rows, from the base model."""
        return self._train("sft", self.recipe.backend, folder, {})

    def train_dpo(self, folder: Path) -> dict[str, Any]:
        """DPO after SFT: the SFT adapter trained on with the compiled pairs, against a copy of itself."""
        start, source = self.store.output("train") / "adapter", "train"
        if not (start / "adapter_model.safetensors").is_file():
            start, source = self._sft_adapter_from_gguf(folder / "sft-adapter"), "adapter-sft"
        options = {"init_adapter": str(start.resolve()), "beta": self.recipe.dpo_beta}
        return self._train("dpo", "trl-dpo", folder, options) | {"init_adapter": source}

    def _sft_adapter_from_gguf(self, out: Path) -> Path:
        """The SFT adapter's peft weights, read back from the adapter-sft stage's GGUF: a fresh
        work folder has only the archive, which keeps the GGUF (float16) and not the weights."""
        from optimizers.backends.trl_common import module_names
        from optimizers.gguf_lora import restore_adapter

        if self.store.record("adapter-sft") is None:
            raise StageFailed(
                f"the SFT adapter's weights are not in {self.store.folder('train') / 'adapter'} and "
                "no adapter-sft stage has its GGUF: rerun the train stage (--stages train) before train-dpo"
            )
        self.log("[train-dpo] the SFT adapter from the adapter-sft stage's GGUF (float16, as it was served)")
        modules = module_names(
            self.train_from["base_model"], self.train_from.get("options", {}).get("gguf_file")
        )
        return restore_adapter(
            self.store.output("adapter-sft") / "adapter.gguf",
            out,
            config=self.store.output("train") / "adapter" / "adapter_config.json",
            modules=modules,
            base=self.base_gguf,
        )

    def _train(self, kind: str, backend: str, folder: Path, options: dict[str, Any]) -> dict[str, Any]:
        from optimizers.backends.base import LoRA, TrainJob
        from optimizers.backends.trl_common import precision, resume_point

        r = self.recipe
        rows = count_lines(self.store.output("dataset") / kind / "train.jsonl")
        if rows == 0:
            raise StageFailed(
                f"the compiled {kind.upper()} dataset has no training rows: no run passed the filters"
            )
        steps = min(r.max_steps, math.ceil(rows * r.epochs))
        job = TrainJob(
            kind=kind,
            # absolute: a job file's relative paths are read relative to the file itself
            dataset=(self.store.output("dataset") / kind).resolve(),
            base_model=self.train_from["base_model"],
            output_dir=folder.resolve(),
            lr=r.lr,
            steps=steps,
            batch_size=1,
            lora=LoRA(rank=r.lora_rank, alpha=2 * r.lora_rank),
            max_seq_len=r.max_seq_len,
            max_completion_tokens=1024,
            options={
                **self.train_from.get("options", {}),
                "precision": r.precision,
                "save_every": r.save_every,
                "trainer": {"disable_tqdm": False},  # TRL's own bar, with its time estimate
                **options,
            },
        )
        chosen = precision(job)
        stage = "train" if kind == "sft" else f"train-{kind}"
        self.log(f"[{stage}] {steps} steps on {rows} rows, {chosen} (the CPU's native bf16 when it has it)")
        # a stage stopped before goes on from its checkpoint: its runtime then covers only the rest
        checkpoint = resume_point(job)
        resumed = int(checkpoint.name.rpartition("-")[2]) if checkpoint else 0
        job_file = folder / "self-train-job.toml"
        job_file.write_text(job.dump_toml())
        command = rlmkit_command("train", "--backend", backend, str(job_file))
        self._call(command)
        history = json.loads((folder / "log_history.json").read_text())
        losses = [entry["loss"] for entry in history if "loss" in entry]
        return {
            "command": self.shown(command),
            "rows": rows,
            "steps": steps,
            "precision": chosen,
            "losses": losses,
            "train_runtime_s": next((e["train_runtime"] for e in history if "train_runtime" in e), None),
            "resumed_at_step": resumed,
        }

    def adapter(self, source: str, folder: Path) -> dict[str, Any]:
        """The adapter trained by stage ``source`` as a GGUF LoRA for llama.cpp's server."""
        from optimizers.gguf_lora import convert_adapter

        trained = self.store.output(source) / "adapter"
        out = convert_adapter(trained, folder / "adapter.gguf", base=self.base_gguf, half=True)
        return {
            "from": source,
            "file": out.name,
            "bytes": out.stat().st_size,
            "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
            "base": self.base_gguf.name,
        }

    def adapter_path(self) -> Path:
        """The finished adapter stage's GGUF (unpacked from the archive if need be)."""
        return self.store.output("adapter") / "adapter.gguf"

    def evaluate(self, measurement: Measurement, arm: str, folder: Path) -> dict[str, Any]:
        r, plan = self.recipe, measurement.plan
        adapter = "none" if arm == "base" else str(self.adapter_path())
        command = self.eval_command(
            plan, folder, "--seed", str(measurement.seed), "--temperature", "0", "--adapter", adapter,
            iterations=r.eval_iterations,
        )  # fmt: skip
        if r.eval_threads:
            command += ["--local-threads", str(r.eval_threads)]
        self._call(command)
        rows = read_rows(folder)
        if unanswered := [row["id"] for row in rows if never_answered(row)]:
            raise StageFailed(
                f"the model could not be reached for {len(unanswered)} run(s) ({', '.join(unanswered[:5])}): "
                "they are not results; rerun to run them again"
            )
        return {
            "command": self.shown(command),
            "arm": arm,
            "suite": plan.suite,
            "length": plan.length,
            "generator_seed": measurement.seed,
            "examples": plan.n,
            "rows": [report_row(row) for row in rows],
        }

    # -- the report ------------------------------------------------------------------
    def arm_rows(self, label: str, arm: str) -> tuple[list[dict[str, Any]], bool]:
        """An arm's per-example rows and whether its stage finished (else the runs done so far)."""
        name = f"eval-{arm}-{label}"
        if (record := self.store.record(name)) is not None:
            return record["rows"], True
        runs = read_rows(self.store.folder(name))
        return [report_row(row) for row in runs if not never_answered(row)], False  # those run again

    def comparison(self) -> list[dict[str, Any]]:
        """Per measured suite: both arms compared, paired, on the examples both have finished
        (``finished`` says whether both stages did, or this is a look at an unfinished pair)."""
        out = []
        for measurement in self.recipe.measurements():
            arms, finished = {}, True
            for arm in ARMS:
                arms[arm], done = self.arm_rows(measurement.label, arm)
                finished &= done
            scores = {arm: {row["id"]: row["score"] for row in rows} for arm, rows in arms.items()}
            both = set(scores["base"]) & set(scores["adapter"])
            if not both:
                continue
            arms = {arm: [row for row in rows if row["id"] in both] for arm, rows in arms.items()}
            paired = paired_compare(scores["base"], scores["adapter"])
            out.append(
                {
                    "suite": measurement.label,
                    "generator_seed": measurement.seed,
                    "trained_on": self.recipe.trains_on(measurement.plan),
                    "finished": finished,
                    **paired.model_dump(),
                    **{f"{arm}_per_example": per_example(rows) for arm, rows in arms.items()},
                }
            )
        return out


def _now() -> str:
    return time.strftime("%H:%M", time.localtime())


def _bind(function: Callable[..., dict[str, Any]], *args: Any) -> Callable[[Path], dict[str, Any]]:
    return lambda folder: function(*args, folder)
