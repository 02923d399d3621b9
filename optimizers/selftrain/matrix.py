"""The held-out matrix: every suite measured on several arms, side by side on one machine.

An arm is the embedded model with one adapter (or none) and one set of prompt moves; a matrix is
a list of suites (held-out generator seed, greedy) run on every arm. Each (arm, suite) pair is a
stage of its own (``eval-ARM-LABEL``) in a ``StageStore``, so a run resumes where it stopped, and
the arms run side by side, suite after suite, each on its own server: what has finished is
paired example by example.

    rlmkit eval SUITE --seed 1000 --temperature 0 --adapter none --moves count --local-threads 1 ...

The arms compare with ``paired_compare`` against the first arm (the base with today's prompt);
``gate.verdict`` then says whether a candidate ships."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optimizers.selftrain.eval_rows import never_answered, read_rows, replayed_runs, report_row
from optimizers.selftrain.paired import paired_compare
from optimizers.selftrain.pipeline import StageFailed, rlmkit_command, shown
from optimizers.selftrain.recipe import HELD_OUT_SEEDS, SuitePlan
from optimizers.selftrain.stages import StageStore
from optimizers.selftrain.subprocesses import subprocesses_stopped_on_exit
from rlmkit.errors import UserError

# A run scoring this much answered right. Suites give partial credit below it (a count one off, a
# wrong passage's overlap with the right one), so a mean can move while no arm answers any right.
RIGHT_SCORE = 0.9


class Arm(BaseModel):
    """One way of running the embedded model: ``adapter`` is a GGUF LoRA path or ``none``;
    ``moves`` and ``hold_unread_answers`` change what the model is told, never its weights."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    adapter: str = "none"
    moves: str = "count"
    hold_unread_answers: bool = False


class Matrix(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    suites: tuple[SuitePlan, ...] = Field(min_length=1)
    arms: tuple[Arm, ...] = Field(
        min_length=2, description="the first is the base every arm is compared with"
    )
    seed: int = Field(
        HELD_OUT_SEEDS, ge=HELD_OUT_SEEDS, description="generator seed of the held-out examples"
    )
    program: str = "plain"
    iterations: int = Field(6, ge=1, description="root turns per run")
    threads: int = Field(1, ge=1, description="llama.cpp threads of each arm's own server")
    max_seconds: float | None = Field(
        None, gt=0, description="wall-time budget of each run (a run past it stops and scores 0)"
    )


class MatrixRun:
    """Runs ``matrix`` over ``store``; ``runner`` runs one command and returns its exit status."""

    def __init__(
        self,
        matrix: Matrix,
        store: StageStore,
        *,
        runner: Callable[[list[str]], int],
        log=print,
        code: Callable[[], str] | None = None,
        machine: Callable[[], str] | None = None,
    ):
        """``code`` names the code a stage runs (a commit) and ``machine`` the machine it runs on:
        each stage records both as it starts, so a matrix measured over days says which code and
        which CPU made which suite."""
        self.matrix, self.store, self.runner, self.log = matrix, store, runner, log
        self.code, self.machine = code, machine

    def stage_name(self, arm: Arm, plan: SuitePlan) -> str:
        return f"eval-{arm.name}-{plan.label}"

    def command(self, arm: Arm, plan: SuitePlan, folder: Path) -> list[str]:
        m = self.matrix
        return rlmkit_command(
            "eval", plan.suite, "--n", str(plan.n), "--length", str(plan.length), "--seed", str(m.seed),
            "--lm", "local", "--program", m.program, "--max-iterations", str(m.iterations),
            "--temperature", "0", "--adapter", arm.adapter, "--moves", arm.moves,
            "--local-threads", str(m.threads), "--workers", "1", "--out", str(folder),
            "--lm-cache", str(self.store.lm_cache(folder.name)),
            *(["--hold-unread-answers"] if arm.hold_unread_answers else []),
            *(["--max-seconds", str(m.max_seconds)] if m.max_seconds else []),
        )  # fmt: skip

    def run(self, only: Callable[[str], bool] = lambda name: True, first: Sequence[str] = ()) -> None:
        """Every suite in order, its arms side by side; finished stages are kept. Arms may be
        added after the ones a folder was measured with (a new adapter, a new prompt), so the base
        is not run again for each candidate; the earlier arms stay as they were.

        The stages form one queue, suite by suite, taken by one worker per arm: an arm that
        finishes a suite early starts the next one instead of leaving its core idle until the
        slowest arm catches up (a budget-bound base can take twice as long as an adapter).
        ``first``: suite families to run before the others, in that order (the ones that can
        still decide a verdict, say), the rest in the matrix's order."""
        if (kept := self.store.recipe()) is not None:
            before = tuple(Arm(**arm) for arm in kept["arms"])
            if self.matrix.arms[: len(before)] != before:
                raise UserError(
                    f"{self.store.archive or self.store.work} was measured with the arms "
                    f"{', '.join(arm.name for arm in before)}: a matrix's arms may only grow, the earlier "
                    "ones first and unchanged"
                )
        self.store.keep_recipe(self.matrix.model_dump(mode="json"), may_change=("suites", "arms"))
        rank = {suite: place for place, suite in enumerate(first)}
        suites = sorted(self.matrix.suites, key=lambda plan: rank.get(plan.suite, len(rank)))
        todo = [
            (arm, plan) for plan in suites for arm in self.matrix.arms if only(self.stage_name(arm, plan))
        ]
        if not todo:
            return
        arms, plans = zip(*todo, strict=True)
        with ThreadPoolExecutor(max_workers=len(set(arms))) as pool, subprocesses_stopped_on_exit():
            list(pool.map(self._stage, arms, plans))

    def _stage(self, arm: Arm, plan: SuitePlan) -> dict[str, Any]:
        def evaluate(folder: Path) -> dict[str, Any]:
            commit = self.code() if self.code else None
            machine = self.machine() if self.machine else None
            command = self.command(arm, plan, folder)
            self.log("$ " + shown(command, self.store.work))
            if (code := self.runner(command)) != 0:
                raise StageFailed(
                    f"`{shown(command, self.store.work)}` exited with status {code}; rerun to resume"
                )
            rows = read_rows(folder)
            if unanswered := [row["id"] for row in rows if never_answered(row)]:
                raise StageFailed(
                    f"the model could not be reached for {len(unanswered)} run(s); rerun to resume"
                )
            rows = [report_row(row) for row in rows]
            return {"command": shown(command, self.store.work), "arm": arm.name, "suite": plan.label,
                    "commit": commit, "machine": machine, "rows": rows}  # fmt: skip

        return self.store.run(self.stage_name(arm, plan), evaluate)

    def rows(self, arm: Arm, plan: SuitePlan) -> tuple[dict[str, float], bool]:
        """An arm's scores by example on a suite, and whether its stage finished."""
        name = self.stage_name(arm, plan)
        if (record := self.store.record(name)) is not None:
            return {row["id"]: row["score"] for row in record["rows"]}, True
        runs = read_rows(self.store.restore(name))  # a committed snapshot's runs count in a fresh checkout
        return {row["id"]: row["score"] for row in runs if not never_answered(row)}, False

    def replayed(self, arm: Arm, plan: SuitePlan) -> tuple[int, int]:
        """How many of an arm's runs on a suite replayed replies cached before, of how many
        (stages before each had its own cache could; see ``StageStore.lm_cache``)."""
        name = self.stage_name(arm, plan)
        folder = self.store.output(name) if self.store.record(name) is not None else self.store.restore(name)
        rows = read_rows(folder)
        return len(replayed_runs(folder, rows)), len(rows)

    def table(self, arms: tuple[Arm, ...] | None = None) -> list[dict[str, Any]]:
        """Per suite: each arm's mean on the examples every arm has finished, and each arm but
        the first compared with the first, paired. ``arms`` (default: all, the base first) limits
        the view, so an arm added later does not narrow the others' rows to what it has run."""
        arms = arms or self.matrix.arms
        out = []
        for plan in self.matrix.suites:
            scores, finished = {}, True
            for arm in arms:
                scores[arm.name], done = self.rows(arm, plan)
                finished &= done
            # sorted: a set's order follows string hashing, and a float sum its order
            shared = sorted(set.intersection(*(set(s) for s in scores.values())))
            if not shared:
                continue
            base = arms[0].name
            kept = {name: {i: s[i] for i in shared} for name, s in scores.items()}
            out.append(
                {
                    "suite": plan.label,
                    "family": plan.suite,
                    "finished": finished,
                    "n": len(shared),
                    "means": {name: sum(s.values()) / len(s) for name, s in kept.items()},
                    "right": {name: sum(v >= RIGHT_SCORE for v in s.values()) for name, s in kept.items()},
                    "versus_base": {
                        name: paired_compare(kept[base], s).model_dump()
                        for name, s in kept.items()
                        if name != base
                    },
                }
            )
        return out
