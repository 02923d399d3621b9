"""Evaluate a program over generated examples: concurrently, resumably, failure-tolerant.

    result = evaluate(lambda: program_for("needle", lm=lm), examples, workers=4, out_dir="runs/n1")
    print(result.render())

``out_dir`` holds ``config.json`` (the run's configuration and its hash),
``results.jsonl`` (one row per finished example, appended as each finishes) and
``trajectories/`` (every run's trajectory, via ``rlmkit.TrajectoryLog``). ``samples=K`` runs
each example K times as K distinct samples (rollout ids 0..K-1: distinct LM cache entries),
which rejection fine-tuning, GRPO groups and DPO pairs need. Running again
with the same configuration skips the runs already in ``results.jsonl``; a directory
holding another configuration is refused, so results are never mixed. An example whose
program raises is recorded with its failure kind, and the others go on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dspy

from programs.eval_results import EvalResult, ExampleResult
from programs.executors import make_executor
from programs.tasks import Example
from programs.tasks import score as suite_score
from rlmkit.errors import (
    BudgetExceeded,
    ConfigError,
    LMError,
    MaxIterationsError,
    RunError,
    SandboxError,
    UserError,
)
from rlmkit.loading import load
from rlmkit.models.lm_cache import rollout
from rlmkit.trajectory import Trajectory, TrajectoryLog, drop_torn_tail

Metric = Callable[[Example, Any], float]
FAILURE_KINDS = (
    (BudgetExceeded, "budget_exceeded"),
    (MaxIterationsError, "max_iterations"),
    (SandboxError, "sandbox"),
    (LMError, "lm_error"),
    (RunError, "run_error"),
    (UserError, "user_error"),
)


# ------------------------------------------------------------------ the run directory
class RunDir:
    """``config.json`` + ``results.jsonl`` + ``trajectories/``; refuses a foreign config."""

    def __init__(self, path: str | Path, config: dict[str, Any]):
        self.path = Path(path)
        self.config = config
        self.hash = config_hash(config)
        self._lock = threading.Lock()
        stored = self.path / "config.json"
        if stored.exists():
            old = json.loads(stored.read_text())
            if old.get("hash") != self.hash:
                raise ConfigError(
                    f"{self.path} holds runs of another configuration (hash {old.get('hash')}, this one is "
                    f"{self.hash}); stored: {json.dumps(old.get('config'), sort_keys=True)}. "
                    "Use a new --out directory, or the same arguments to resume."
                )
        self.path.mkdir(parents=True, exist_ok=True)
        stored.write_text(
            json.dumps({"hash": self.hash, "config": config}, indent=2, sort_keys=True, default=str)
        )
        self.log = TrajectoryLog(self.path / "trajectories")
        drop_torn_tail(self.results_path)  # a killed run's half line must not swallow the next row

    @property
    def results_path(self) -> Path:
        return self.path / "results.jsonl"

    def finished(self) -> list[ExampleResult]:
        return latest_rows(self.results_path)

    def record(self, row: ExampleResult, trajectory: Trajectory | None) -> None:
        if trajectory is not None:
            self.log.write(trajectory)
        with self._lock, open(self.results_path, "a", encoding="utf-8") as fh:
            fh.write(row.model_dump_json() + "\n")
            fh.flush()


def latest_rows(results: Path) -> list[ExampleResult]:
    """The latest row of each run in a ``results.jsonl`` (a run done again, after its model could
    not be reached, appends a new row that replaces the old one)."""
    if not results.exists():
        return []
    rows: dict[tuple[str, int, str], ExampleResult] = {}
    for line in results.read_text().splitlines():
        try:
            row = ExampleResult.model_validate_json(line)
        except ValueError:  # a half-written last line from a killed run: that example reruns
            continue
        rows.pop(row.key, None)  # the replacement takes the place of the last run
        rows[row.key] = row
    return list(rows.values())


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def default_config(program: Any, examples: Sequence[Example]) -> dict[str, Any]:
    """What identifies a run when the caller gives no config: the task settings and the program type."""
    tasks = sorted(
        {
            json.dumps(
                {"suite": e.suite, "length": e.length, "seed": e.seed, "knobs": e.knobs},
                sort_keys=True,
                default=str,
            )
            for e in examples
        }
    )
    return {
        "tasks": [json.loads(t) for t in tasks],
        "program": getattr(program, "__qualname__", type(program).__name__),
    }


# ------------------------------------------------------------------ running one example
def failure_kind(exc: BaseException) -> str:
    for cls, kind in FAILURE_KINDS:
        if isinstance(exc, cls):
            return kind
    return "exception"


def _json_safe(value: Any, limit: int = 4_000) -> Any:
    try:
        value = json.loads(
            json.dumps(value, default=lambda o: o.model_dump() if hasattr(o, "model_dump") else str(o))
        )
    except (TypeError, ValueError):
        value = str(value)
    if isinstance(value, str) and len(value) > limit:
        value = value[:limit] + " ..."
    return value


def _prediction_answer(prediction: Any) -> Any:
    if isinstance(prediction, dspy.Prediction):
        return {k: v for k, v in prediction.items() if k != "trajectory"}
    return prediction


def scorer_spec(metric: Metric) -> str | None:
    """``module:function`` naming ``metric`` when importing that gives it back (so a compiled RL
    row can name its reward); None for a lambda or a local function."""
    module, name = getattr(metric, "__module__", None), getattr(metric, "__qualname__", "")
    if not module or not name or "<" in name:
        return None
    try:
        found = load(f"{module}:{name}")
    except ConfigError:
        return None
    return f"{module}:{name}" if found is metric else None


def run_one(
    program: Callable[..., Any], example: Example, metric: Metric, kind: str, sample: int = 0
) -> tuple[ExampleResult, Trajectory | None]:
    started = time.monotonic()
    row = ExampleResult(
        id=example.id, suite=example.suite, sample=sample, program=kind, gold=_json_safe(example.gold)
    )
    trajectory = None
    try:
        with rollout(sample or None):  # sample 0 keeps rollout id None: a one-sample eval's cache entries
            prediction = program(**example.inputs)
        trajectory = getattr(prediction, "trajectory", None) if not isinstance(prediction, dict) else None
        answer = _prediction_answer(prediction)
        row.answer = _json_safe(answer.get("answer", answer) if isinstance(answer, dict) else answer)
        row.score = float(metric(example, prediction))
    except Exception as exc:  # noqa: BLE001 - recorded with its kind; the evaluation goes on
        trajectory = getattr(exc, "trajectory", None)
        row.status, row.failure, row.error = (
            "failed",
            failure_kind(exc),
            f"{type(exc).__name__}: {exc}"[:2_000],
        )
        row.score = 0.0
    row.wall_s = time.monotonic() - started
    if isinstance(trajectory, Trajectory):
        usage = trajectory.usage
        row.cost, row.calls, row.cached_calls = usage.cost, usage.calls, usage.cached_calls
        row.prompt_tokens, row.completion_tokens = usage.prompt_tokens, usage.completion_tokens
        row.subcalls = sum(1 for _ in trajectory.iter_subcalls())
        row.iterations, row.run_id = trajectory.n_turns, trajectory.meta.run_id
        trajectory.score = row.score
        # what compiling needs without flags: the gold answer and the scorer (RL reward), the sample
        scorer = scorer_spec(metric)
        trajectory.meta.task = {
            **trajectory.meta.task,
            "suite": example.suite,
            "example_id": example.id,
            "seed": example.seed,
            "length": example.length,
            "knobs": example.knobs,
            "program": kind,
            "sample": sample,
            "rollout_id": sample or None,
            "gold": row.gold,
            "meta": _json_safe(example.meta),
            **({"scorer": scorer} if scorer else {}),
        }
    else:
        trajectory = None
    return row, trajectory


# ------------------------------------------------------------------ questions sharing a context
def group_by_context(jobs: list[tuple]) -> list[tuple]:
    """Jobs whose examples share a context (``meta["context_group"]``, same program and sample)
    become one job holding a tuple of examples, in their order; the others stay as they are."""
    grouped: dict[tuple, list] = {}
    out: list[Any] = []
    for kind, source, example, sample in jobs:
        group = example.meta.get("context_group")
        if group is None:
            out.append((kind, source, example, sample))
            continue
        key = (kind, group, sample)
        if key not in grouped:
            grouped[key] = []
            out.append(key)
        grouped[key].append((source, example))
    return [
        job if len(job) == 4 else (job[0], grouped[job][0][0], tuple(e for _, e in grouped[job]), job[2])
        for job in out
    ]


def run_job(program: Any, example: Any, metric: Metric, kind: str, sample: int = 0) -> Any:
    """One example, or a group sharing a context: asked one after another in one session of
    ``program`` (an RLM: the context crosses once), each scored on its own."""
    if not isinstance(example, tuple):
        return run_one(program, example, metric, kind, sample)
    open_session = getattr(program, "session", None)
    if open_session is None:  # e.g. the baseline: each question on its own
        return [run_one(program, e, metric, kind, sample) for e in example]
    first = example[0].inputs
    shared = {k: v for k, v in first.items() if all(e.inputs.get(k) is v for e in example)}
    with open_session(**shared) as session:

        def ask(**inputs: Any) -> Any:
            return session(**{k: v for k, v in inputs.items() if k not in shared})

        return [run_one(ask, e, metric, kind, sample) for e in example]


# ------------------------------------------------------------------ the API
def evaluate(
    program: Any,
    examples: Sequence[Example],
    *,
    workers: int = 4,
    out_dir: str | Path | None = None,
    metric: Metric | None = None,
    baseline: Any = False,
    plain: Any = False,
    config: dict[str, Any] | None = None,
    samples: int = 1,
    retry_failed: bool = False,
    on_result: Callable[[ExampleResult], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    ray: bool | str | None = None,
) -> EvalResult:
    """Run ``program`` (or a zero-argument factory of programs) on every example.

    ``baseline``: False, or a program (e.g. ``programs.baseline.BaselineLM``) run on the same
    examples for comparison; its rows land in ``result.baseline``. ``plain``: likewise, a program
    (or factory) without the suite's instructions and strategy, e.g.
    ``programs.suite_programs.plain_for(suite)`` beside a suite's own program; its rows land in
    ``result.plain``. ``samples``: runs per example (each a distinct sample; not part of the
    config, so raising it on resume adds samples).
    ``on_result`` is called in the caller's thread after each example, ``on_start(to_run, already_done)`` once
    before the first (progress bars). ``ray``: run the examples as Ray tasks (True or
    ``"local"``: a Ray instance started for the call; else a cluster address such as ``"auto"``),
    see ``programs.executors``; rows still stream into ``out_dir`` here as each finishes, and
    ``workers`` does not apply (Ray runs one job per cluster CPU). Either way, examples sharing a
    context (``meta["context_group"]``) are one job, asked in one session of the program.
    """
    if not isinstance(samples, int) or samples < 1:
        raise UserError(f"samples must be an int >= 1, got {samples!r}")
    if not examples:
        raise UserError("no examples to evaluate")
    ids = [e.id for e in examples]
    if len(set(ids)) != len(ids):
        raise UserError("example ids must be unique (they key the resumable results)")
    return evaluate_plan(
        program,
        [(e, k) for e in examples for k in range(samples)],
        workers=workers,
        out_dir=out_dir,
        metric=metric,
        baseline=baseline,
        plain=plain,
        config=config,
        retry_failed=retry_failed,
        on_result=on_result,
        on_start=on_start,
        ray=ray,
    )


def evaluate_plan(
    program: Any,
    plan: Sequence[tuple[Example, int]],
    *,
    workers: int = 4,
    out_dir: str | Path | None = None,
    metric: Metric | None = None,
    baseline: Any = False,
    plain: Any = False,
    config: dict[str, Any] | None = None,
    retry_failed: bool = False,
    on_result: Callable[[ExampleResult], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    ray: bool | str | None = None,
    runner: Callable[..., Any] = run_job,
) -> EvalResult:
    """``evaluate`` over an explicit plan: each ``(example, sample)`` pair is one run, under that
    sample's rollout id. ``runner(program, example, metric=, kind=, sample=)`` runs one job
    (default ``run_job``). The rows come in the plan's order."""
    if not isinstance(workers, int) or workers < 1:
        raise UserError(f"workers must be an int >= 1, got {workers!r}")
    keys = [(e.id, k) for e, k in plan]
    if not keys or len(set(keys)) != len(keys):
        raise UserError("a plan needs runs, each (example id, sample) once (they key the resumable results)")
    examples = list({e.id: e for e, _ in plan}.values())
    metric = metric or suite_score
    config = config if config is not None else default_config(program, examples)
    run_dir = RunDir(out_dir, config) if out_dir is not None else None
    previous = run_dir.finished() if run_dir else []
    jobs = [("program", program)] + [
        (kind, other)
        for kind, other in (("plain", plain), ("baseline", baseline))
        if other not in (False, None)
    ]
    results = {kind: {} for kind, _ in jobs}
    wanted = set(keys)
    for row in previous:
        if (
            row.program in results
            and (row.id, row.sample) in wanted
            and not (retry_failed and row.status == "failed")
            and not row.never_answered
        ):
            results[row.program][(row.id, row.sample)] = row
    todo = [(kind, source, e, k) for kind, source in jobs for e, k in plan if (e.id, k) not in results[kind]]
    if on_start:
        on_start(len(todo), sum(len(done) for done in results.values()))
    jobs_to_run = group_by_context(todo)  # a context's questions: one job, one session (a Ray task)
    for finished in make_executor(workers, ray).run(jobs_to_run, functools.partial(runner, metric=metric)):
        for row, trajectory in finished if isinstance(finished, list) else [finished]:
            results[row.program][(row.id, row.sample)] = row
            if run_dir:
                run_dir.record(row, trajectory)
            if on_result:
                on_result(row)
    ordered = {kind: [results[kind][key] for key in keys] for kind in results}
    result = EvalResult(
        config=config, rows=ordered["program"], out_dir=str(run_dir.path) if run_dir else None
    )
    if "plain" in ordered:
        result.plain = EvalResult(config=config, rows=ordered["plain"])
    if "baseline" in ordered:
        result.baseline = EvalResult(config=config, rows=ordered["baseline"])
    return result
