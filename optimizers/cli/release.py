"""``rlmkit self-train ship ARM``, ``hold-back ARM`` and ``read-test CANDIDATE``: the release path.

    rlmkit self-train ship round3          # serve round3's adapter by default, if the gate passes it
    rlmkit self-train hold-back adapter    # the shipped adapter's record names the rules it fails
    rlmkit self-train read-test round3     # the sealed test, once for this adapter, into the ledger
    rlmkit self-train read-test out/adapter.gguf --name mine --trained-on needle,prose

The verdicts come from the matrix's results file (``optimizers/selftrain/rounds.toml`` names it);
the sealed test's suites from the registry's ``test``. Wiring only: the suites' programs are built
here, where programs and optimizers meet, and handed to ``optimizers.selftrain`` as callables."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from rlmkit.cli.common import console, exit_on_error
from rlmkit.errors import UserError


def ship_command(
    arm: Annotated[str, typer.Argument(help="A round's adapter arm (round3, round3_sft ...).")],
) -> None:
    """Serve a round's adapter by default, if its gate passes."""
    from optimizers.selftrain.release import read_results, ship
    from optimizers.selftrain.rounds import read_registry

    with exit_on_error():
        registry = read_registry()
        path = ship(registry, arm, read_results(registry))
        console.print(f"shipped {arm}: {path} (its record beside it)", markup=False)


def hold_back_command(
    arm: Annotated[str, typer.Argument(help="The arm whose verdict applies (adapter, round3 ...).")],
) -> None:
    """Hold back the shipped adapter its gate fails."""
    from optimizers.selftrain.release import hold_back, read_results
    from optimizers.selftrain.rounds import read_registry

    with exit_on_error():
        registry = read_registry()
        changed = hold_back(registry, arm, read_results(registry))
        console.print(
            f"held back: the embedded model serves the base by default ({arm} fails its gate)"
            if changed
            else f"nothing changed: {arm}'s adapter is not the one shipped, passes, or is held back already",
            markup=False,
        )


def read_test_command(
    candidate: Annotated[str, typer.Argument(help="A registry arm (round3 ...) or a GGUF adapter file.")],
    name: Annotated[str | None, typer.Option("--name", help="The candidate's name in the ledger.")] = None,
    trained_on: Annotated[
        str | None, typer.Option("--trained-on", help="Families a file's adapter was trained on (a,b).")
    ] = None,
    work: Annotated[
        Path, typer.Option("--out", help="Where runs are kept as they finish (a stopped read resumes).")
    ] = Path("runs/read-test"),
    threads: Annotated[int, typer.Option("--local-threads", min=1, help="llama.cpp threads per arm.")] = 1,
) -> None:
    """Read the sealed test once for a frozen candidate."""
    from optimizers.selftrain.rounds import read_registry
    from optimizers.selftrain.sealed_test import Candidate, check_can_read, read_test
    from programs.tasks import real_text

    with exit_on_error():
        registry = read_registry()
        gguf, families = _candidate_file(registry, candidate, trained_on)
        chosen = Candidate.of(name or (candidate if gguf != Path(candidate) else gguf.stem), gguf, "adapter")
        check_can_read(chosen)  # refused now, before any model starts
        runner = EmbeddedArms(registry.test, {"base": "none", chosen.name: str(gguf)}, threads=threads)
        entry = read_test(
            chosen, registry.test, examples=sealed_examples, run_one=runner, trained_families=families,
            real_text=real_text.FAMILIES, work=work, log=lambda line: console.print(line, markup=False),
        )  # fmt: skip
        for row in entry.scores:
            console.print(
                f"{row['suite']}: n={row['n']} scored {row['scored']} cut {row['cut']} means {row['means']}",
                markup=False,
            )
        console.print(
            f"ships: {entry.verdict['ships']}; {'; '.join(entry.verdict['failures'])}", markup=False
        )


def _candidate_file(registry, candidate: str, trained_on: str | None) -> tuple[Path, tuple[str, ...]]:
    """The GGUF a candidate names, and the families it was trained on."""
    from optimizers.selftrain.rounds import CHECKOUT

    families = tuple(f for f in (trained_on or "").split(",") if f)
    path = Path(candidate)
    if path.suffix == ".gguf":
        return path, families
    if candidate == registry.first_adapter.arm:
        from rlmkit.local.adapter import SHIPPED_ADAPTER

        return SHIPPED_ADAPTER.with_suffix(".gguf"), families or registry.first_adapter.trained_families
    where = registry.round_of(candidate)  # a UserError naming the arms when it is none
    made = registry.made_arms(where, CHECKOUT)
    if candidate not in made:
        raise UserError(f"{candidate}'s adapter stage has not finished in {where.archive}")
    return made[candidate], families or registry.candidates(CHECKOUT)[candidate]


def sealed_examples(plan, seed: int) -> list[Any]:
    from programs.tasks import generate

    return generate(plan.suite, n=plan.n, length=plan.length, seed=seed)


class EmbeddedArms:
    """``run_one(arm, example)`` for the sealed test: each arm the embedded model with its own
    adapter on its own server, the suite's plain program, bounded by the plan's turns and tokens;
    the plan's wall time is the fault guard (``Outcome.guard_hit``)."""

    def __init__(self, plan, adapters: dict[str, str], *, threads: int = 1, lm_for=None):
        self.plan, self.adapters, self.threads = plan, adapters, threads
        self.lm_for = lm_for or self._embedded
        self._lms: dict[str, Any] = {}

    def _embedded(self, arm: str):
        from rlmkit.cli.common import lm_from_flag
        from rlmkit.local import LocalServerConfig

        config = LocalServerConfig(threads=self.threads, parallel=1)
        return lm_from_flag("local", adapter=self.adapters[arm], temperature=0, cache=False, config=config,
                            private=True)  # fmt: skip

    def __call__(self, arm: str, example: Any):
        if arm not in self._lms:
            self._lms[arm] = self.lm_for(arm)
        return run_bounded(self._lms[arm], example, self.plan)


def run_bounded(lm: Any, example: Any, plan) -> Any:
    """One run of the suite's plain program under the plan's bounds, as an ``Outcome``."""
    from optimizers.selftrain.interleaved import Outcome
    from programs.registry import build_program
    from programs.tasks import score
    from rlmkit.budget import DEFAULT_MAX_CALLS, Budget
    from rlmkit.errors import BudgetExceeded, RunError

    budget = Budget(max_calls=DEFAULT_MAX_CALLS, max_tokens=plan.max_tokens, max_seconds=plan.max_seconds)
    program = build_program("plain", example.suite, lm=lm, max_iterations=plan.iterations, budget=budget)
    started = time.monotonic()
    failure, value, trajectory = None, 0.0, None
    try:
        prediction = program(**example.inputs)
        trajectory = getattr(prediction, "trajectory", None)
        value = float(score(example, prediction))
    except BudgetExceeded as exc:
        if exc.kind == "seconds":  # the fault guard, not a bound: the run is done again, or cut
            return Outcome(guard_hit=True, seconds=time.monotonic() - started)
        failure, trajectory = f"budget_exceeded:{exc.kind}", exc.trajectory
    except RunError as exc:  # the turn bound, a sandbox fault: the run scores what it answered, 0
        failure, trajectory = type(exc).__name__, exc.trajectory
    usage = getattr(trajectory, "usage", None)
    return Outcome(
        score=value, failure=failure, seconds=time.monotonic() - started,
        turns=getattr(trajectory, "n_turns", 0) or 0,
        tokens=(usage.prompt_tokens + usage.completion_tokens) if usage else 0,
    )  # fmt: skip
