"""Two job writers behind one interface: an optuna sampler over the space, and an LM.

``propose(history)`` returns ``(ProposedJob, token)``; ``tell(token, reward)`` reports the
measured improvement (None for a failed job). The LM proposer writes the job as the typed
output of a dspy.Signature (parsed by DSPy's own ChatAdapter), sees every earlier job with
its reward, gets its parse or space errors fed back, and leaves its own calls as rlmkit
trajectories whose score is the reward: data for training the job writer itself.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import dspy
import optuna

from optimizers.trainloop.jobs import JobRecord, JobSpace, ProposedJob
from rlmkit.errors import RunError
from rlmkit.trajectory import Message, RunMeta, Trajectory, TrajectoryLog, Turn


class Proposer(ABC):
    name = "base"

    def __init__(self, space: JobSpace):
        self.space = space

    @abstractmethod
    def propose(self, history: list[JobRecord]) -> tuple[ProposedJob, Any]: ...

    def tell(self, token: Any, reward: float | None) -> None:
        """Report the reward of the job proposed with ``token`` (None: it failed)."""


class OptunaProposer(Proposer):
    """An optuna study over the declared space (resumes from its storage)."""

    name = "optuna"

    def __init__(self, space: JobSpace, storage: str, *, study_name: str = "train-loop", seed: int = 0):
        super().__init__(space)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(
            study_name=study_name,
            storage=storage,
            direction="maximize",
            sampler=optuna.samplers.TPESampler(seed=seed),
            load_if_exists=True,
        )
        for trial in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            self.study.tell(trial.number, state=optuna.trial.TrialState.FAIL)  # left by an interrupted loop

    def propose(self, history: list[JobRecord]) -> tuple[ProposedJob, int]:
        trial = self.study.ask()
        families = trial.suggest_categorical("families", self.space.trainable + ["all"])
        job = ProposedJob(
            families=self.space.trainable if families == "all" else [families],
            length=trial.suggest_categorical("length", self.space.lengths),
            min_score=trial.suggest_categorical("min_score", self.space.min_scores),
            backend=trial.suggest_categorical("backend", self.space.backends),
            lr=trial.suggest_float("lr", *self.space.lr, log=True),
            steps=trial.suggest_categorical("steps", self.space.steps),
            lora_rank=trial.suggest_categorical("lora_rank", self.space.lora_ranks),
            batch_size=trial.suggest_categorical("batch_size", self.space.batch_sizes),
        )
        return job, trial.number

    def tell(self, token: int, reward: float | None) -> None:
        if reward is None:
            self.study.tell(token, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(token, reward)


class WriteTrainJob(dspy.Signature):
    """You write training jobs for a small language model that runs as the root of a Recursive Language
    Model. Each job picks the task families and context length whose solved runs become supervised
    training data, a filter on run scores, a backend and hyperparameters. A job's reward is how much it
    improved the model on a hidden evaluation set (post score minus pre score). Study the history and
    write the job most likely to earn a high reward. Stay inside the space."""

    space: str = dspy.InputField(desc="the allowed choices, as JSON")
    history: str = dspy.InputField(desc="earlier jobs with their rewards, as JSON lines")
    job: ProposedJob = dspy.OutputField()


class LMProposer(Proposer):
    """An LM writes each job as ``WriteTrainJob``'s typed output; bad replies are fed back."""

    name = "lm"

    def __init__(self, space: JobSpace, lm: Any, *, log_dir: str | Path | None = None, max_repairs: int = 2):
        super().__init__(space)
        self.lm = lm
        self.max_repairs = max_repairs
        self.adapter = dspy.ChatAdapter()
        self.parse_errors = 0
        self.log = TrajectoryLog(log_dir) if log_dir is not None else None
        self._pending: dict[str, Trajectory] = {}

    def propose(self, history: list[JobRecord]) -> tuple[ProposedJob, str]:
        lines = [
            json.dumps({"proposal": r.proposal, "state": r.state, "reward": r.reward, "reason": r.reason})
            for r in history
        ]
        inputs = {"space": self.space.describe(), "history": "\n".join(lines) or "(no jobs yet)"}
        messages = self.adapter.format(WriteTrainJob, demos=[], inputs=inputs)
        trajectory = Trajectory(
            meta=RunMeta(
                signature="space, history -> job: ProposedJob",
                protocol="typed",
                sandbox="none",
                model=self.lm.model,
                task={"suite": "train-loop-proposer", "example_id": f"job-{len(history)}"},
            )
        )
        keep = 0
        for attempt in range(self.max_repairs + 1):
            completion = self.lm.complete(messages)
            trajectory.turns.append(
                Turn(
                    index=attempt,
                    keep=keep,
                    reply=completion.text,
                    usage=completion.usage,
                    new_messages=[Message(**m) for m in messages[keep:]],
                )
            )
            trajectory.usage = trajectory.usage.add(completion.usage)
            try:
                job = self.adapter.parse(WriteTrainJob, completion.text)["job"]
                job = job if isinstance(job, ProposedJob) else ProposedJob.model_validate(job)
                self.space.check(job)
            except Exception as exc:  # noqa: BLE001 - parse, validation and space errors all go back to the LM
                self.parse_errors += 1
                keep = len(messages) + 1
                messages = messages + [
                    {"role": "assistant", "content": completion.text},
                    {
                        "role": "user",
                        "content": f"That job is invalid: {exc}. Write it again, "
                        "in the same format, inside the space.",
                    },
                ]
                trajectory.turns[-1].feedback = messages[-1]["content"]
                continue
            trajectory.outputs, trajectory.status = {"job": job.model_dump()}, "ok"
            self._pending[trajectory.meta.run_id] = trajectory
            return job, trajectory.meta.run_id
        trajectory.status, trajectory.error = "error", "no valid job after repairs"
        if self.log is not None:
            self.log.write(trajectory)
        raise RunError(
            f"the LM proposer wrote no valid job in {self.max_repairs + 1} tries", trajectory=trajectory
        )

    def tell(self, token: str, reward: float | None) -> None:
        trajectory = self._pending.pop(token, None)
        if trajectory is None:
            return
        trajectory.score = reward  # the job writer's reward: compile_rl / compile_sft read it
        if self.log is not None:
            self.log.write(trajectory)
