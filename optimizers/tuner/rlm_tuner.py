"""``RLMTuner``: optuna search over an RLM's instructions, demos and knobs, for accuracy and cost.

    tuner = RLMTuner(base_rlm, metric, trainset,
                     space=SearchSpace(knobs=[IntKnob("max_iterations", 2, 8)]),
                     proposer_lm=lm, n_trials=30, out_dir="runs/tune")
    result = tuner.fit()
    print(result.to_table()); result.plot("front.png"); result.save("best/")

Objectives: ``("accuracy", "cost")`` gives a Pareto front (accuracy maximised, mean cost
per example minimised); ``("accuracy",)`` with ``cost_cap`` maximises accuracy among
configurations whose mean cost stays under the cap (optuna's constraints).

Pruning: trials run on a growing subsample. With one objective each stage is reported to
optuna's pruner (MedianPruner unless given). Optuna's pruners do not handle several
objectives, so there the rule is: after a stage short of the whole set, stop a trial whose
partial (accuracy, cost) is dominated by a finished Pareto-front trial — no cheaper, and more
accurate than the upper end of the partial accuracy's 95% Wilson interval (a trial is never
stopped for missing its first example). It is a heuristic (a partial cost can still fall).

The study (and the candidate instructions and demos, kept as study attributes so a resumed
run or a second worker uses the same ones) lives in the storage: ``study.db`` beside the
run by default.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optimizers.tuner.demos import DEFAULT_MAX_CHARS, ScoredRun, select_demos
from optimizers.tuner.evaluation import (
    COST_UNITS,
    Tally,
    TrialFailure,
    default_stages,
    evaluate_in_stages,
    example_inputs,
)
from optimizers.tuner.instruction_proposer import propose_instructions
from optimizers.tuner.report import TrialRow, dominated_by_front, pareto_front
from optimizers.tuner.result import TuningResult, rows_from_study
from optimizers.tuner.space import Config, SearchSpace, apply_config, factory_from_base, root_predictor
from optimizers.tuner.storage import open_storage
from optimizers.tuner.study_state import StudyProgress, fail_stale_trials, heartbeats_on, study_progress
from rlmkit.errors import ConfigError, RunError, UserError

logger = logging.getLogger(__name__)

OBJECTIVES = ("accuracy", "cost")
ATTR_INSTRUCTIONS = "rlmkit.instructions"
ATTR_DEMOS = "rlmkit.demos"


@dataclass
class Bootstrap:
    """Before the search: run the base program on a few examples, then propose and select.

    ``examples``: how many train examples to run; ``n_instructions``: how many instructions
    to ask ``proposer_lm`` for; ``max_demos``: size of the demo pool (0: no demos);
    ``demo_chars``: size cap of one demo transcript.
    """

    examples: int = 4
    n_instructions: int = 4
    max_demos: int = 2
    demo_chars: int = DEFAULT_MAX_CHARS

    def __post_init__(self) -> None:
        if min(self.examples, self.n_instructions, self.max_demos, self.demo_chars) < 0:
            raise ConfigError("Bootstrap settings must not be negative")


ProgressFn = Callable[..., None]


class RLMTuner:
    """Search a program's instructions, demos and knobs with optuna; ``fit()`` runs or resumes it."""

    def __init__(
        self,
        program: Any,
        metric: Callable[[Any, Any], float],
        trainset: Sequence[Any],
        *,
        space: SearchSpace | None = None,
        objectives: Sequence[str] = OBJECTIVES,
        cost_unit: str = "usd",
        cost_cap: float | None = None,
        n_trials: int = 20,
        storage: Any = None,
        study_name: str = "rlmkit-tune",
        out_dir: str | Path = "rlmkit-tune",
        pruner: Any = None,
        sampler: Any = None,
        proposer_lm: Any = None,
        bootstrap: Bootstrap | None = None,
        seed: int = 0,
        heartbeat_s: int | None = 10,
    ):
        """``program``: a base RLM (copied per trial) or a factory ``Config -> RLM``.

        ``heartbeat_s``: how often a running trial records a heartbeat in an RDB storage (SQLite
        or a server); a trial silent for twice that (its worker was killed) becomes FAIL and its
        configuration runs again. None turns heartbeats off.
        """
        self.trainset = list(trainset or [])
        self.metric = metric
        self.space = space or SearchSpace()
        self.objectives = tuple(objectives)
        self.cost_unit = cost_unit
        self.cost_cap = cost_cap
        self.n_trials = n_trials
        self.storage, self.study_name, self.out_dir = storage, study_name, Path(out_dir)
        self.pruner, self.sampler, self.seed = pruner, sampler, seed
        self.heartbeat_s = heartbeat_s
        self.proposer_lm = proposer_lm
        self.bootstrap = bootstrap or Bootstrap(max_demos=0)
        self._notify: ProgressFn = _silent
        if hasattr(program, "named_predictors"):
            self.factory = factory_from_base(program)
        elif callable(program):
            self.factory = program
        else:
            raise UserError("program must be an RLM (a dspy.Module) or a factory Config -> RLM")
        self._validate()

    # ------------------------------------------------------------------ checks
    def _validate(self) -> None:
        if not self.trainset:
            raise UserError("the train set is empty: the tuner needs examples to score configurations")
        for example in self.trainset:
            try:
                example_inputs(example)
            except Exception as exc:
                raise UserError(
                    f"train examples must be dspy.Example (with inputs set) or task Examples ({exc})"
                ) from exc
        if not callable(self.metric):
            raise UserError("metric must be a callable (example, prediction) -> number")
        if self.objectives not in (("accuracy", "cost"), ("accuracy",)):
            raise ConfigError(
                f"objectives must be ('accuracy', 'cost') or ('accuracy',), got {self.objectives}"
            )
        if self.cost_unit not in COST_UNITS:
            raise ConfigError(f"cost_unit must be one of {COST_UNITS}, got {self.cost_unit!r}")
        if self.cost_cap is not None and self.multi_objective:
            raise ConfigError("cost_cap is for the single-objective mode: use objectives=('accuracy',)")
        if self.n_trials < 1:
            raise ConfigError(f"n_trials must be at least 1, got {self.n_trials}")
        if self.multi_objective and self.pruner is not None and not self._no_pruning:
            raise ConfigError(
                "optuna pruners do not support several objectives; the tuner prunes multi-objective "
                "trials by its own dominance rule (pruner=None), or not at all (optuna.pruners.NopPruner())"
            )
        may_grow = self.proposer_lm is not None or self.bootstrap.max_demos > 0
        if not may_grow:
            self.space.require_searchable()

    @property
    def _no_pruning(self) -> bool:
        return type(self.pruner).__name__ == "NopPruner"

    @property
    def multi_objective(self) -> bool:
        return len(self.objectives) == 2

    # ------------------------------------------------------------------ study
    def _open_study(self) -> Any:
        import optuna

        storage = open_storage(self.storage, self.out_dir, self.heartbeat_s)  # fails before any LM call
        sampler = self.sampler
        if sampler is None:
            sampler = optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=5)
        # n_warmup_steps=1: a step is the number of examples scored, and one is no evidence
        median = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1)
        pruner = self.pruner or (None if self.multi_objective else median)
        directions = ["maximize", "minimize"] if self.multi_objective else ["maximize"]
        return optuna.create_study(
            storage=storage,
            sampler=sampler,
            pruner=pruner,
            study_name=self.study_name,
            directions=directions,
            load_if_exists=True,
        )

    # ------------------------------------------------------------------ candidates
    def _prepare_space(self, study: Any) -> SearchSpace:
        """The space with proposed instructions and demos; reuse a study's if it has them."""
        import dspy

        attrs = study.user_attrs
        if ATTR_INSTRUCTIONS not in attrs:
            instructions, demos = self._bootstrap_candidates()
            # Demos first: another worker that sees the instructions must find the demos too.
            study.set_user_attr(ATTR_DEMOS, [dict(demo) for demo in demos])
            study.set_user_attr(ATTR_INSTRUCTIONS, instructions)
            attrs = study.user_attrs  # another worker may have written first: theirs wins
        space = SearchSpace(
            knobs=list(self.space.knobs),
            instructions=list(attrs[ATTR_INSTRUCTIONS]),
            demos=[dspy.Example(**demo) for demo in attrs[ATTR_DEMOS]],
            max_demos=self.space.max_demos,
        )
        space.require_searchable()
        return space

    def _bootstrap_candidates(self) -> tuple[list[str], list[Any]]:
        instructions = list(self.space.instructions)
        demos = list(self.space.demos)
        settings = self.bootstrap
        if self.proposer_lm is None and settings.max_demos == 0:
            return instructions, demos
        base = self.factory(Config())
        root = root_predictor(base)
        current = root.signature.instructions
        runs = self._bootstrap_runs(base, settings.examples)
        if self.proposer_lm is not None and settings.n_instructions:
            proposed = propose_instructions(
                self.proposer_lm,
                signature=_signature_text(root.signature),
                current=current,
                runs=runs,
                n=settings.n_instructions,
            )
            if not instructions:
                instructions = [current]  # the program as it is stays a candidate
            instructions += [text for text in proposed if text not in instructions]
        demos += select_demos(runs, settings.max_demos, settings.demo_chars)
        return instructions, demos

    def _bootstrap_runs(self, program: Any, n: int) -> list[ScoredRun]:
        runs = []
        examples = self._ordered_examples()[:n]
        for done, example in enumerate(examples):
            self._notify("bootstrap", done=done, total=len(examples))
            try:
                prediction = program(**example_inputs(example))
                trajectory = prediction.trajectory
                score = float(self.metric(example, prediction))
            except RunError as exc:
                trajectory, score = exc.trajectory, 0.0
            except Exception as exc:  # noqa: BLE001 - a bootstrap run is optional; the search records failures
                logger.warning("bootstrap run failed, skipped: %s: %s", type(exc).__name__, exc)
                continue
            if trajectory is not None:
                runs.append(ScoredRun(trajectory=trajectory, score=score, example=example))
        return runs

    def _ordered_examples(self) -> list[Any]:
        examples = list(self.trainset)
        random.Random(self.seed).shuffle(examples)
        return examples

    # ------------------------------------------------------------------ search
    def fit(self, on_progress: ProgressFn | None = None) -> TuningResult:
        """Run (or resume) the study until it holds ``n_trials`` finished trials and none running.

        Several processes (on several machines, with a server storage) may fit one study: each
        stops when the study as a whole is done. A trial whose worker died is retried (see
        ``heartbeat_s``), and this worker waits for other workers' running trials to end or go
        stale, so the result lists no trial with heartbeats as running.
        """
        self._notify = on_progress or _silent
        study = self._open_study()
        space = self._prepare_space(study)
        while True:
            count = self._report(study)
            if count.done < self.n_trials or count.waiting:
                study.optimize(
                    lambda trial: self._objective(trial, space),
                    n_trials=max(1, self.n_trials - count.done + count.waiting),
                    catch=(TrialFailure,),
                    callbacks=[self._stop_when_done],
                )
            elif count.beating and heartbeats_on(study, self.heartbeat_s):
                # Other workers' trials: wait until they finish, or their heartbeats go stale. (A
                # trial without heartbeats, from a run that had them off, could wait forever: not it.)
                time.sleep(self.heartbeat_s)
                fail_stale_trials(study)
            else:
                break
        return self._result(study, space)

    def _stop_when_done(self, study: Any, trial: Any) -> None:
        count = self._report(study)
        if count.done >= self.n_trials and not count.waiting:
            study.stop()

    def _report(self, study: Any) -> StudyProgress:
        count = study_progress(study)  # every worker's trials, not only this process's
        self._notify("study", done=count.done, total=self.n_trials, running=count.running)
        return count

    def _objective(self, trial: Any, space: SearchSpace) -> Any:
        import optuna

        config = space.sample(trial)
        trial.set_user_attr("config", config.summary())
        trial.set_user_attr("worker", os.getpid())
        if heartbeats_on(trial.study, self.heartbeat_s):
            # other workers wait for this trial: it ends or goes stale
            trial.set_user_attr("heartbeat_s", self.heartbeat_s)
        examples = self._ordered_examples()
        stages = default_stages(len(examples))
        front = pareto_front(rows_from_study(trial.study)) if self.multi_objective else []
        notify = self._notify
        notify("trial_start", number=trial.number, total=len(examples), config=config)

        def after_example(tally: Tally) -> None:
            notify("example", number=trial.number, done=tally.n, total=len(examples))

        def after_stage(tally: Tally) -> None:
            # One write per stage (each is a storage round trip): what a pruned trial reached.
            trial.set_user_attr(
                "tally", {"accuracy": tally.accuracy, "cost": tally.cost, "n_examples": tally.n}
            )
            reason = None
            if tally.n >= len(examples):
                pass
            elif not self.multi_objective:
                trial.report(tally.accuracy, step=tally.n)
                if trial.should_prune():
                    reason = f"accuracy {tally.accuracy:.3g} after {tally.n} examples"
            elif not self._no_pruning and dominated_by_front(front, tally.accuracy, tally.cost, tally.n):
                reason = f"dominated by the front after {tally.n} examples"
            if self.cost_cap is not None and (reason or tally.n >= len(examples)):
                # Optuna keeps a trial's first constraint value only: set it once, at its end.
                trial.set_constraint("cost_over_cap", tally.cost - self.cost_cap)  # feasible when <= 0
            if reason:
                raise optuna.TrialPruned(reason)

        try:
            program = self.factory(config)
            tally = evaluate_in_stages(
                program, examples, self.metric, self.cost_unit, stages, after_stage, after_example
            )
        except TrialFailure as exc:
            trial.set_user_attr("error", str(exc))
            notify("trial_end", number=trial.number, state="FAIL", error=str(exc))
            raise
        except optuna.TrialPruned:
            notify("trial_end", number=trial.number, state="PRUNED")
            raise
        except Exception as exc:  # a factory that cannot build this config: record, go on
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}")
            notify("trial_end", number=trial.number, state="FAIL", error=str(exc))
            raise TrialFailure(f"building the program failed: {type(exc).__name__}: {exc}") from exc
        notify("trial_end", number=trial.number, state="COMPLETE", accuracy=tally.accuracy, cost=tally.cost)
        return (tally.accuracy, tally.cost) if self.multi_objective else tally.accuracy

    # ------------------------------------------------------------------ result
    def _result(self, study: Any, space: SearchSpace) -> TuningResult:
        rows = rows_from_study(study)
        chosen, within_cap = self._choose(rows)
        config = space.config_from_params(study.trials[chosen.number].params) if chosen else None
        program = self.factory(config) if config is not None else None
        return TuningResult(
            program=program,
            config=config,
            trial=chosen,
            rows=rows,
            cost_unit=self.cost_unit,
            within_cap=within_cap,
            study=study,
        )

    def _choose(self, rows: list[TrialRow]) -> tuple[TrialRow | None, bool]:
        """Most accurate (then cheapest) trial, among those under the cost cap if one is set."""
        done = [row for row in rows if row.complete]
        if not done:
            return None, False
        feasible = [row for row in done if self.cost_cap is None or row.cost <= self.cost_cap]
        if not feasible:  # nothing fits the cap: report the cheapest, flagged
            return min(done, key=lambda r: (r.cost, -r.accuracy)), False
        return min(feasible, key=lambda r: (-r.accuracy, r.cost, r.number)), True


def _silent(event: str, **info: Any) -> None:
    """The default progress callback: events are ``bootstrap``, ``trial_start``, ``example``,
    ``trial_end``, and ``study`` (``done``/``total``/``running``: the whole study's count, every
    worker's trials included)."""


def _signature_text(signature: Any) -> str:
    inputs = ", ".join(signature.input_fields)
    outputs = ", ".join(signature.output_fields)
    return f"{inputs} -> {outputs}"


__all__ = ["Bootstrap", "RLMTuner", "apply_config"]
