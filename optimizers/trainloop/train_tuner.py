"""``TrainTuner``: an outer loop whose reward is how much a training job improved the model.

    for each job: proposer writes a job -> its dataset is built -> a backend trains it
                  (through an executor) -> base and trained model are scored on a held-out
                  evaluation set -> reward = post - pre -> the proposer is told

Every finished job is one line of ``<out>/jobs.jsonl``, written whole, so an interrupted
loop resumes where it stopped (optuna's study lives beside it). The evaluation set may
hold task families that no job may train on (``JobSpace.held_out``); rewards are reported
for seen and withheld families apart. The best job is picked on that evaluation set, so its
reward there is biased upward: ``test_examples`` (disjoint from it) are scored once, for the
base model and the best job only, and that is the number to report (``report.test``).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from optimizers.trainloop.executors import LocalExecutor
from optimizers.trainloop.job_proposers import Proposer
from optimizers.trainloop.jobs import JobRecord, ProposedJob
from rlmkit.errors import RLMKitError, UserError


class ModelRef(BaseModel):
    """What to evaluate: a base model, optionally with a trained adapter / checkpoint."""

    base_model: str
    adapter: str | None = None


@dataclass
class BuiltDataset:
    path: Path
    example_ids: set[str]  # the task examples the training data came from (checked against the eval set)


BuildDataset = Callable[[ProposedJob, Path], BuiltDataset]
Evaluate = Callable[[ModelRef, list[Any]], dict[str, float]]  # -> mean score per task family


class TrainTuner:
    def __init__(
        self,
        *,
        proposer: Proposer,
        build_dataset: BuildDataset,
        evaluate: Evaluate,
        eval_examples: list[Any],
        base_model: str,
        out_dir: str | Path,
        executor: Any = None,
        example_id: Callable[[Any], str] = lambda ex: ex.id,
        family: Callable[[Any], str] = lambda ex: ex.suite,
        test_examples: list[Any] | None = None,
        job_options: dict[str, Any] | None = None,
    ):
        if not eval_examples:
            raise UserError("the evaluation set is empty")
        self.test_examples = list(test_examples or [])
        shared = {example_id(ex) for ex in self.test_examples} & {example_id(ex) for ex in eval_examples}
        if shared:
            raise UserError(f"the test set shares examples with the evaluation set: {sorted(shared)[:5]}")
        self.proposer, self.build_dataset, self.evaluate = proposer, build_dataset, evaluate
        self.eval_examples, self.base_model = list(eval_examples), base_model
        self.job_options = dict(job_options or {})  # backend options of every job (a GGUF base's file)
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.executor = executor or LocalExecutor()
        # no training data may come from either set
        self.eval_ids = {example_id(ex) for ex in self.eval_examples + self.test_examples}
        self.withheld = set(proposer.space.held_out)
        self.eval_families = {family(ex) for ex in self.eval_examples}

    # -- state on disk -------------------------------------------------------------------
    @property
    def records_path(self) -> Path:
        return self.out / "jobs.jsonl"

    def history(self) -> list[JobRecord]:
        if not self.records_path.exists():
            return []
        records = []
        for line in self.records_path.read_text().splitlines():
            try:
                records.append(JobRecord.model_validate_json(line))
            except ValueError:
                continue  # a half line from a killed loop: that job runs again
        return records

    def _append(self, record: JobRecord) -> None:
        with open(self.records_path, "a") as fh:
            fh.write(record.model_dump_json() + "\n")

    def pre_scores(self) -> dict[str, float]:
        """The base model's scores, measured once and kept beside the run."""
        path = self.out / "pre.json"
        if path.exists():
            return json.loads(path.read_text())
        scores = self.evaluate(ModelRef(base_model=self.base_model), self.eval_examples)
        path.write_text(json.dumps(scores))
        return scores

    # -- the loop ------------------------------------------------------------------------
    def run(self, n_jobs: int, on_record: Callable[[JobRecord], None] | None = None) -> TrainLoopReport:
        history = self.history()
        pre = self.pre_scores()
        while len(history) < n_jobs:
            record = self._one(len(history), history, pre)
            self._append(record)
            history.append(record)
            if on_record is not None:
                on_record(record)
        report = TrainLoopReport(records=history, pre=pre, withheld=sorted(self.withheld))
        report.test = self.test_scores(report.best)
        return report

    def test_scores(self, best: JobRecord | None) -> dict[str, Any] | None:
        """The base model and the best job on the test set, scored once per best job (kept on disk)."""
        if not self.test_examples or best is None:
            return None
        path = self.out / "test.json"
        if path.exists() and (kept := json.loads(path.read_text())).get("job") == best.index:
            return kept
        pre = self.evaluate(ModelRef(base_model=self.base_model), self.test_examples)
        post = self.evaluate(ModelRef(base_model=self.base_model, adapter=best.artifact), self.test_examples)
        result = {"job": best.index, "pre": pre, "post": post, "reward": _mean(post) - _mean(pre)}
        path.write_text(json.dumps(result))
        return result

    def _one(self, index: int, history: list[JobRecord], pre: dict[str, float]) -> JobRecord:
        start = time.monotonic()
        base = {"index": index, "proposer": self.proposer.name}
        try:
            proposal, token = self.proposer.propose(history)
        except RLMKitError as exc:
            return JobRecord(
                **base, state="rejected", reason=f"proposer: {exc}", wall_s=time.monotonic() - start
            )
        base["proposal"] = proposal.model_dump()
        base["trial"] = token if isinstance(token, int) else None
        try:  # whatever wrote the proposal, it stays inside the declared space
            self.proposer.space.check(proposal)
        except ValueError as exc:
            self.proposer.tell(token, None)
            return JobRecord(
                **base, state="rejected", reason=f"space: {exc}", wall_s=time.monotonic() - start
            )

        def fail(state: str, reason: str) -> JobRecord:
            self.proposer.tell(token, None)
            return JobRecord(**base, state=state, reason=reason, wall_s=time.monotonic() - start)

        job_dir = self.out / f"job-{index:03d}"
        try:
            built = self.build_dataset(proposal, job_dir / "data")
        except (RLMKitError, ValueError) as exc:
            return fail("rejected", f"dataset: {exc}")
        overlap = sorted(built.example_ids & self.eval_ids)
        if overlap:
            return fail(
                "rejected",
                f"training data overlaps the evaluation set: {overlap[:5]}"
                + (f" and {len(overlap) - 5} more" if len(overlap) > 5 else ""),
            )
        try:
            job = proposal.to_train_job(
                dataset=built.path,
                base_model=self.base_model,
                output_dir=job_dir / "train",
                options=self.job_options,
            )
        except RLMKitError as exc:
            return fail("rejected", f"job: {exc}")
        outcome = self.executor.run(job, proposal.backend)
        if outcome.result is None or outcome.result.status != "trained":  # "exported" is no model to serve
            return fail("failed", outcome.reason or f"{outcome.result.status}: {outcome.result.message}")
        adapter = str(outcome.result.artifact) if outcome.result.artifact else None
        post = self.evaluate(ModelRef(base_model=self.base_model, adapter=adapter), self.eval_examples)
        reward = _mean(post) - _mean(pre)
        seen = [f for f in post if f not in self.withheld]
        withheld = [f for f in post if f in self.withheld]
        self.proposer.tell(token, reward)
        return JobRecord(
            **base,
            state="done",
            reward=reward,
            pre=pre,
            post=post,
            artifact=adapter,
            reward_seen=_mean(post, seen) - _mean(pre, seen) if seen else None,
            reward_withheld=_mean(post, withheld) - _mean(pre, withheld) if withheld else None,
            wall_s=time.monotonic() - start,
        )


def _mean(scores: dict[str, float], keys: Iterable[str] | None = None) -> float:
    values = [scores[k] for k in (keys if keys is not None else scores) if k in scores]
    return statistics.fmean(values) if values else 0.0


@dataclass
class TrainLoopReport:
    records: list[JobRecord]
    pre: dict[str, float]
    withheld: list[str]
    test: dict[str, Any] | None = None  # the best job on the test set: {"job", "pre", "post", "reward"}

    @property
    def done(self) -> list[JobRecord]:
        return [r for r in self.records if r.state == "done"]

    @property
    def best(self) -> JobRecord | None:
        return max(self.done, key=lambda r: r.reward, default=None)

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "job": r.index,
                "state": r.state,
                "reward": r.reward,
                "seen": r.reward_seen,
                "withheld": r.reward_withheld,
                "wall_s": round(r.wall_s, 1),
                "reason": r.reason or "",
            }
            for r in self.records
        ]

    def plot(self, path: str | Path) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        for key, label in (
            ("reward", "all"),
            ("reward_seen", "seen families"),
            ("reward_withheld", "withheld"),
        ):
            points = [(r.index, getattr(r, key)) for r in self.done if getattr(r, key) is not None]
            if points:
                ax.plot(*zip(*points), marker="o", label=label)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xlabel("job")
        ax.set_ylabel("reward (post - pre)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return Path(path)
