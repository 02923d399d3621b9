"""The held-out matrix: the embedded model's arms on every suite, real text included, side by side.

    nice -n 5 python benchmarks/training/reading_matrix.py            # run or resume, then report
    python benchmarks/training/reading_matrix.py --report-only        # the results file from the archive
    python benchmarks/training/reading_matrix.py --suites prose,source  # only these suites now
    python benchmarks/training/reading_matrix.py --arms reading_sft     # only this arm now
    python benchmarks/training/reading_matrix.py --report-only --ship reading  # serve it if it passes

Arms (all greedy, held-out generator seed 1000, each on its own 1-thread server, side by side):
``base`` is the embedded model with today's prompt, ``prompt`` the same model with the reading
moves and answers held until their output is read (``--moves read --hold-unread-answers``: what
the model is told changes, not its weights), ``adapter`` the shipped LoRA adapter with today's
prompt; ``reading_sft`` and ``reading``, once the reading recipe
(``benchmarks/training/reading_recipe.toml``) has made them, its SFT adapter and its final one
(DPO on from SFT), with today's prompt; and beside them ``base_again``, the base with today's
prompt once more, run with the reading adapters on their machine: the base they are compared with
and judged against (greedy outputs follow the CPU, and the first base ran in earlier checkouts on
machines it did not record). Each later round of the recipe (``ROUNDS``) adds its adapters the
same way, with a base arm of its own beside them. An arm added later runs after the suites the
others finished. Work
goes to ``.selftrain/matrix``; each
finished stage is packed into ``benchmarks/results/reading_matrix/`` (committed), and unfinished
ones are snapshotted there run by run, so a later checkout resumes them.
``benchmarks/results/reading_matrix.json`` holds the table, every arm's per-example scores, and
the gate's verdict on each adapter (``optimizers/selftrain/gate.py``, committed before the
measurement it judges).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _bootstrap import RESULTS, ROOT

import provenance
from reading_matrix_conditions import CODE_BEFORE_RECORDS, CONDITIONS, RESUMED_FROM
from reading_matrix_shipping import hold_back_shipped, left_to_run, measured_in, serving_arm

WORK = ROOT / ".selftrain" / "matrix"
ARCHIVE = RESULTS / "reading_matrix"
RESULTS = RESULTS / "reading_matrix.json"
# Real text first (50,000-100,000 characters, n=30 each), then every synthetic suite (n=20).
SUITES = [
    ("prose", 60_000, 30),
    ("source", 60_000, 30),
    *(
        (name, 20_000, 20)
        for name in ("needle", "multi_needle", "aggregation", "pairs", "multihop", "codeqa", "shared_context")
    ),
]
# The adapter arms the gate judges, with the families each was trained on (its training rules read
# them): the shipped one, then each round's once its adapter stage has finished (an arm after the
# others, so the stages measured before it are kept).
SHIPPED_FAMILIES = ("needle",)


@dataclass(frozen=True)
class Round:
    """A self-training recipe whose adapters become arms, each once its stage has finished, in the
    order they are made: SFT's (measured while DPO trains on from it), then the final one (after
    DPO). ``base`` is the base arm run beside them from their first suite on: their comparison is
    with a base run on the same machine, under the same load, not with the first base arm."""

    name: str  # its work folder's name, and the yield report's --round
    recipe: str  # the recipe file, relative to the checkout
    work: Path
    archive: Path
    arms: tuple[tuple[str, str], ...]  # (arm, the recipe's stage that makes its adapter)
    base: str

    def store_and_recipe(self):
        """The round's store and recipe, as committed (its recipe file's record)."""
        from optimizers.selftrain.recipe import Recipe
        from optimizers.selftrain.stages import StageStore

        recipe = Recipe.model_validate(json.loads((self.archive / "recipe.json").read_text()))
        return StageStore(self.work, self.archive), recipe


def round_named(name: str, recipe: str, archive: str, arm: str, base: str) -> Round:
    """A round whose work folder is ``.selftrain/NAME``, archive ``benchmarks/results/ARCHIVE``,
    and adapter arms ``ARM_sft`` (after SFT) and ``ARM`` (the final one)."""
    arms = ((f"{arm}_sft", "adapter-sft"), (arm, "adapter"))
    return Round(
        name,
        f"benchmarks/training/{recipe}",
        ROOT / ".selftrain" / name,
        ARCHIVE.parent / archive,
        arms,
        base,
    )


ROUNDS = (
    round_named("reading", "reading_recipe.toml", "reading_recipe", "reading", base="base_again"),
    round_named("round2", "reading_round2.toml", "reading_round2", "round2", base="base_round2"),
    round_named("round3", "reading_round3.toml", "reading_round3", "round3", base="base_round3"),
)
# Each run's wall-time budget, every arm alike. Without one, a run that hands 50,000 characters to
# llm_query spends about 20 minutes on that one sub-call here (three 1-thread servers on two
# cores read about 10 tokens a second); with it, such a run stops and scores 0. Time budgets depend
# on the machine's load: this is the condition these figures were measured under, stated with them.
MAX_SECONDS = 240


def round_arms() -> dict[str, Round]:
    """Every round's adapter arm, made or not, and its round."""
    return {arm: where for where in ROUNDS for arm, _ in where.arms}


def made_arms(where: Round) -> list[tuple[str, Path]]:
    """The round's adapter arms whose stage has finished, and where each one's GGUF is."""
    store, _ = where.store_and_recipe()
    return [(arm, store.output(stage) / "adapter.gguf") for arm, stage in where.arms if store.record(stage)]


def candidates() -> dict[str, tuple[str, ...]]:
    """Each adapter arm the gate judges, and the families it was trained on."""
    from optimizers.selftrain import earlier_round

    judged: dict[str, tuple[str, ...]] = {"adapter": SHIPPED_FAMILIES}
    for where in ROUNDS:
        trained = tuple(earlier_round.trained_families(where.store_and_recipe()[1]))
        judged |= {arm: trained for arm, _ in made_arms(where)}
    return judged


def matrix():
    from optimizers.selftrain.matrix import Arm, Matrix
    from optimizers.selftrain.recipe import SuitePlan
    from rlmkit.local.adapter import SHIPPED_ADAPTER

    arms = [
        Arm(name="base"),
        Arm(name="prompt", moves="read", hold_unread_answers=True),
        Arm(name="adapter", adapter=str(SHIPPED_ADAPTER.with_suffix(".gguf"))),
    ]
    for where in ROUNDS:
        later = [Arm(name=arm, adapter=str(gguf)) for arm, gguf in made_arms(where)]
        if later:  # after its first adapter arm, the order the folder first met them in: arms only grow
            later.insert(1, Arm(name=where.base))
        arms += later
    return Matrix(
        suites=tuple(SuitePlan(suite=s, length=length, n=n) for s, length, n in SUITES),
        arms=tuple(arms),
        max_seconds=MAX_SECONDS,
    )


def collect() -> dict[str, Any]:
    from optimizers.selftrain.eval_rows import read_rows
    from optimizers.selftrain.gate import GateRule, verdict
    from optimizers.selftrain.matrix import MatrixRun
    from optimizers.selftrain.stages import StageStore
    from programs.tasks import real_text

    store = StageStore(WORK, ARCHIVE)
    run = MatrixRun(matrix(), store, runner=lambda command: 1)
    by_name = {arm.name: arm for arm in run.matrix.arms}
    first = tuple(arm for arm in run.matrix.arms if first_arm(arm.name))
    added_arms = run.matrix.arms[len(first) :]
    rounds = round_arms()
    later = [arm for arm in added_arms if arm.name in rounds]
    ran_code = {}
    for plan in run.matrix.suites:
        code = stage_code(store, run, plan, first) or CODE_BEFORE_RECORDS.get(plan.label, "")
        added = [f"{arm.name} {c}" for arm in added_arms if (c := stage_code(store, run, plan, (arm,)))]
        if code or added:
            ran_code[plan.label] = " ".join(
                [code or "not recorded"] + ([f"({'; '.join(added)})"] if added else [])
            )
    stages = [run.stage_name(arm, plan) for plan in run.matrix.suites for arm in run.matrix.arms]
    unfinished = [name for name in stages if store.record(name) is None]
    # a committed snapshot of an unfinished stage counts too: unpacked first, as a resumed run would
    in_progress = {name: len(rows) for name in unfinished if (rows := read_rows(store.restore(name)))}
    for name in in_progress:  # committed with the results: the next run resumes these runs
        store.snapshot(name)
    counted = {
        run.stage_name(arm, plan): run.replayed(arm, plan)
        for plan in run.matrix.suites
        for arm in run.matrix.arms
    }
    replayed = {name: f"{count} of {total}" for name, (count, total) in counted.items() if count}
    # the arms measured together in one table; each round's adapter arm in its own, beside the
    # base its round ran again on its machine and the prompt arm, so its unfinished suites do not
    # narrow the others' rows; the gate judges it there. Against the first base too (other runs,
    # other machines), and each base against the first: how far a rerun of one arm moves.
    table = run.table(first)
    beside = {arm.name: rounds[arm.name].base for arm in later}
    tables = {arm.name: run.table((by_name[beside[arm.name]], first[1], arm)) for arm in later}
    first_base_tables = {arm.name: run.table((*first[:2], arm)) for arm in later}
    bases = [by_name[name] for name in dict.fromkeys(beside.values())]
    rule, judged = GateRule(), candidates()
    labels = [plan.label for plan in run.matrix.suites]
    return {
        "matrix": json.loads(run.matrix.model_dump_json()),
        "partial": bool(unfinished),
        "unfinished_stages": unfinished,
        "in_progress": in_progress,
        # arms after the ones the matrix was first measured with ran after them, not beside them
        "arms_added_later": [arm.name for arm in added_arms],
        "conditions": [
            "Each stage is one `rlmkit eval` process per arm; the code it ran is the checkout when it "
            "started: " + "; ".join(f"{label} {code}" for label, code in ran_code.items()) + ".",
            *CONDITIONS,
            *machines(store, stages),
            *(
                [
                    "Runs in which some model replies came from the LM cache, not the model: a run "
                    "started again after a stop replays its own earlier turns, but before stages "
                    "cached apart a run could also replay replies an earlier measurement of the same "
                    "model and prompt had cached (another day, perhaps another machine): "
                    + "; ".join(f"{name} {runs}" for name, runs in replayed.items())
                    + ". Stages now cache their replies apart, so a stage started since replays "
                    "only its own."
                ]
                if replayed
                else []
            ),
        ],
        "replayed_runs": replayed,
        "table": table,
        "added_tables": tables,
        "added_beside": beside,
        "added_tables_first_base": first_base_tables,
        "bases_compared": {base.name: run.table((first[0], base)) for base in bases},
        "gate": {
            "rule": rule.model_dump(),
            "trained_families": {name: list(families) for name, families in judged.items()},
            **{
                name: verdict(
                    tables.get(name, table),
                    labels,
                    candidate=name,
                    prompt_arms=["prompt"],
                    trained_families=families,
                    real_text=real_text.FAMILIES,
                ).model_dump()
                for name, families in judged.items()
            },
            # a prompt replaces today's default by the same gate, less the rules about training
            "prompt": verdict(
                table,
                labels,
                candidate="prompt",
                prompt_arms=[],
                trained_families=(),
                real_text=real_text.FAMILIES,
            ).model_dump(),
        },
    }


def first_arm(name: str) -> bool:
    """Whether arm ``name`` is one of the matrix's first arms (base, prompt, the shipped adapter),
    measured before any round's adapters and the base run again beside them."""
    return name not in round_arms() and name not in {where.base for where in ROUNDS}


def stage_code(store, run, plan, arms) -> str:
    """The checkouts ``arms``' stages of suite ``plan`` ran, as their records name them ("" when
    none does), and where a stage was resumed from a checkout before the one it records."""
    names = [run.stage_name(arm, plan) for arm in arms]
    codes = {(store.record(name) or {}).get("commit") for name in names} - {None}
    if not codes:
        return ""
    first_arms = all(first_arm(arm.name) for arm in arms)
    resumed = f" ({RESUMED_FROM[plan.label]})" if first_arms and plan.label in RESUMED_FROM else ""
    return ", ".join(sorted(codes)) + resumed


def machines(store, stages: list[str]) -> list[str]:
    """Which machine ran which stages, where the stages recorded it (greedy outputs follow the
    CPU's vector units, so arms compare only where they ran on the same kind of CPU)."""
    by_machine: dict[str, list[str]] = {}
    for name in stages:
        if (record := store.record(name)) is not None and record.get("machine"):
            by_machine.setdefault(record["machine"], []).append(name.removeprefix("eval-"))
    if not by_machine:
        return []
    return [
        "Machines, where a stage recorded its own: "
        + "; ".join(f"{machine}: {', '.join(names)}" for machine, names in by_machine.items())
        + ". Earlier stages did not record it."
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--report-only", action="store_true", help="only rewrite the results file")
    parser.add_argument(
        "--suites", help="only these suites (comma-separated families) in this run, in this order"
    )
    parser.add_argument("--arms", help="only these arms (comma-separated names) in this run")
    parser.add_argument(
        "--ship", metavar="ARM", help="then ship this adapter arm if it passes the gate (reading)"
    )
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()[0]
    if not args.report_only:
        from optimizers.selftrain.matrix import MatrixRun
        from optimizers.selftrain.stages import StageStore
        from optimizers.selftrain.subprocesses import run_subprocess
        from rlmkit.cli.common import exit_on_sigterm

        exit_on_sigterm()  # a stopped matrix stops its evaluations and their servers too
        store = StageStore(WORK, ARCHIVE)
        run = MatrixRun(matrix(), store, runner=run_subprocess, code=code_commit, machine=provenance.machine)
        first = args.suites.split(",") if args.suites else ()
        run.run(only=left_to_run(selected(run.matrix, args.arms, args.suites)), first=first)
    argv = ["--report-only"] if args.report_only else []
    data = {**provenance.record(__file__, argv, load_at_start), **collect()}
    if hold_back_shipped(data):
        print("the shipped adapter fails its gate: the embedded model now serves the base by default")
    if args.ship:
        print(f"shipped {ship(data, args.ship)}")
    RESULTS.write_text(json.dumps(data | {"serves": serving_arm()}, indent=1, default=str) + "\n")
    print(f"wrote {RESULTS}")


def selected(matrix, arms: str | None, suites: str | None):
    """Which stages (``eval-ARM-SUITE-LENGTH``) this run measures: the named arms and suites, or
    all. A name that is not the matrix's is refused before any model starts."""
    names = {"arm": [arm.name for arm in matrix.arms], "suite": [plan.suite for plan in matrix.suites]}
    wanted = {"arm": arms.split(",") if arms else None, "suite": suites.split(",") if suites else None}
    for kind, chosen in wanted.items():
        if unknown := set(chosen or ()) - set(names[kind]):
            known = ", ".join(names[kind])
            raise SystemExit(f"no {kind} {', '.join(sorted(unknown))} in the matrix: {known}")
    stages = {
        f"eval-{arm}-{plan.label}"
        for arm in wanted["arm"] or names["arm"]
        for plan in matrix.suites
        if wanted["suite"] is None or plan.suite in wanted["suite"]
    }
    return stages.__contains__


def ship(data: dict[str, Any], arm: str) -> Path:
    """Serve a round's adapter by default: refused unless the gate, on the whole
    matrix, lets it through. Its record says what it was taught and what the gate measured."""
    from optimizers.selftrain.shipping import trained_record
    from rlmkit.local.adapter import install_shipped

    rounds = round_arms()
    if arm not in rounds:
        raise SystemExit(f"only the rounds' adapters ({', '.join(rounds)}) ship from here, not {arm!r}")
    verdict = data["gate"].get(arm)
    if verdict is None or not verdict["ships"]:
        why = "; ".join((verdict or {}).get("failures") or []) or "the matrix is not whole for it"
        raise SystemExit(f"the {arm!r} adapter does not ship: {why}")
    where = rounds[arm]
    store, recipe = where.store_and_recipe()
    stage = dict(where.arms)[arm]
    measured = [
        {"suite": row["suite"], "n": row["n"], **row["versus_base"][arm]}
        for row in data["added_tables"][arm]  # the table the gate judged it on
    ]
    record = trained_record(store, recipe, stage) | {
        "arm": arm,
        "recipe": where.recipe,
        "gate": {"by": "optimizers/selftrain/gate.py", **verdict},
        "measured": measured,
        "results": measured_in(data),
    }
    return install_shipped(store.output(stage) / "adapter.gguf", record)


def code_commit() -> str:
    """The checkout's commit, ``+changes`` when code differs from it (results and docs, which the
    matrix itself rewrites as it goes, are not code)."""
    return provenance.commit(ignoring=("benchmarks/results", "docs"))


if __name__ == "__main__":
    main()
