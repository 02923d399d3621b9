"""The held-out matrix: the embedded model's arms on every suite, real text included, side by side.

    nice -n 5 python benchmarks/training/reading_matrix.py            # run or resume, then report
    python benchmarks/training/reading_matrix.py --report-only        # the results file from the archive
    python benchmarks/training/reading_matrix.py --suites prose,source  # only these suites now
    python benchmarks/training/reading_matrix.py --arms reading_sft     # only this arm now
    python benchmarks/training/reading_matrix.py --report-only --condition 'beside a test run'

Arms (all greedy, held-out generator seed 1000, each on its own 1-thread server, side by side):
``base`` is the embedded model with today's prompt, ``prompt`` the same model with the reading
moves and answers held until their output is read (``--moves read --hold-unread-answers``: what
the model is told changes, not its weights), ``adapter`` the shipped LoRA adapter with today's
prompt; ``reading_sft`` and ``reading``, once the reading recipe
(``benchmarks/training/reading_recipe.toml``) has made them, its SFT adapter and its final one
(DPO on from SFT), with today's prompt; and beside them ``base_again``, the base with today's
prompt once more, run with the reading adapters on their machine: the base they are compared with
and judged against (greedy outputs follow the CPU, and the first base ran in earlier checkouts on
machines it did not record). Each later round (``optimizers/selftrain/rounds.toml``) adds its adapters the
same way, with a base arm of its own beside them. An arm added later runs after the suites the
others finished. Work
goes to ``.selftrain/matrix``; each
finished stage is packed into ``benchmarks/results/reading_matrix/`` (committed), and unfinished
ones are snapshotted there run by run, so a later checkout resumes them.
``benchmarks/results/reading_matrix.json`` holds the table, every arm's per-example scores, and
the gate's verdict on each adapter (``optimizers/selftrain/gate.py``, committed before the
measurement it judges); ``rlmkit self-train ship ARM`` and ``hold-back ARM`` apply a verdict.
Its ``load_history`` says how the runs were made beyond the matrix's own settings.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from _bootstrap import RESULTS, ROOT

import provenance

WORK = ROOT / ".selftrain"  # each round's work folder is WORK/NAME, the matrix's WORK/matrix
ARCHIVE = RESULTS / "reading_matrix"
RESULTS = RESULTS / "reading_matrix.json"


def registry():
    """The rounds, the arms and the matrix's suites (``optimizers/selftrain/rounds.toml``)."""
    from optimizers.selftrain.rounds import read_registry

    return read_registry()


def matrix():
    from rlmkit.local.adapter import SHIPPED_ADAPTER

    return registry().matrix_plan(SHIPPED_ADAPTER.with_suffix(".gguf"), ROOT, WORK)


def earlier(data: dict[str, Any] | None, field: str, empty):
    """A field of the results file as it stands: its load history and the code of stages that ran
    before stage records named it are kept in the results file, not rewritten from code."""
    return (data or {}).get(field, empty)


def collect(before: dict[str, Any] | None = None) -> dict[str, Any]:
    """The results file, from the archive; ``before`` is the file as it stands (its load history)."""
    from optimizers.selftrain.eval_rows import read_rows
    from optimizers.selftrain.matrix import MatrixRun
    from optimizers.selftrain.release import judge
    from optimizers.selftrain.stages import StageStore
    from programs.tasks import real_text

    rounds_registry = registry()
    history = earlier(before, "load_history", [])
    code_before_records = earlier(before, "code_before_records", {})
    resumed_from = earlier(before, "resumed_from", {})
    store = StageStore(WORK / "matrix", ARCHIVE)
    run = MatrixRun(matrix(), store, runner=lambda command: 1)
    by_name = {arm.name: arm for arm in run.matrix.arms}
    first = tuple(arm for arm in run.matrix.arms if rounds_registry.first_arm(arm.name))
    added_arms = run.matrix.arms[len(first) :]
    rounds = {arm: where for where in rounds_registry.rounds for arm in where.arms}
    later = [arm for arm in added_arms if arm.name in rounds]
    ran_code = {}
    for plan in run.matrix.suites:
        resumed = resumed_from.get(plan.label)
        code = stage_code(store, run, plan, first, resumed) or code_before_records.get(plan.label, "")
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
            *history,
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
        # how this pass's runs were made beyond the matrix's own settings, kept with its figures:
        # a line is added when a pass runs under conditions the ones before did not (--condition)
        "load_history": history,
        "code_before_records": code_before_records,
        "resumed_from": resumed_from,
        "replayed_runs": replayed,
        "table": table,
        "added_tables": tables,
        "added_beside": beside,
        "added_tables_first_base": first_base_tables,
        "bases_compared": {base.name: run.table((first[0], base)) for base in bases},
        "gate": judge(
            rounds_registry,
            table,
            tables,
            real_text=real_text.FAMILIES,
            candidates=rounds_registry.candidates(ROOT, WORK),
        ),
    }


def stage_code(store, run, plan, arms, resumed: str | None = None) -> str:
    """The checkouts ``arms``' stages of suite ``plan`` ran, as their records name them ("" when
    none does), and ``resumed``: where they were resumed from a checkout before the one recorded."""
    names = [run.stage_name(arm, plan) for arm in arms]
    codes = {(store.record(name) or {}).get("commit") for name in names} - {None}
    if not codes:
        return ""
    return ", ".join(sorted(codes)) + (f" ({resumed})" if resumed else "")


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
        "--condition",
        action="append",
        default=[],
        help="a line of load history for this pass (how its runs were made beyond the matrix's own "
        "settings), kept in the results file with its figures (repeatable)",
    )
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()[0]
    before = json.loads(RESULTS.read_text()) if RESULTS.exists() else None
    if not args.report_only:
        from optimizers.selftrain.matrix import MatrixRun
        from optimizers.selftrain.stages import StageStore
        from optimizers.selftrain.subprocesses import run_subprocess
        from rlmkit.cli.common import exit_on_sigterm

        exit_on_sigterm()  # a stopped matrix stops its evaluations and their servers too
        store = StageStore(WORK / "matrix", ARCHIVE)
        run = MatrixRun(matrix(), store, runner=run_subprocess, code=code_commit, machine=provenance.machine)
        first = args.suites.split(",") if args.suites else ()
        run.run(only=left_to_run(selected(run.matrix, args.arms, args.suites)), first=first)
    if args.condition:
        before = {**(before or {}), "load_history": [*earlier(before, "load_history", []), *args.condition]}
    argv = ["--report-only"] if args.report_only else []
    data = {**provenance.record(__file__, argv, load_at_start), **collect(before)}
    RESULTS.write_text(json.dumps(data | {"serves": serves()}, indent=1, default=str) + "\n")
    print(f"wrote {RESULTS}")
    print("the gate's verdicts are in it: `rlmkit self-train ship ARM` or `hold-back ARM` applies one")


def serves() -> str | None:
    """The arm whose adapter the embedded model serves by default, if one does."""
    from optimizers.selftrain.release import serving_arm
    from rlmkit.local.adapter import shipped_record

    return serving_arm(registry(), shipped_record())


def left_to_run(only):
    """``only``, less the first adapter arm's stages once its adapter no longer ships (the file
    they would read is another adapter now)."""
    from optimizers.selftrain.release import shipped_arm
    from rlmkit.local.adapter import shipped_record

    first = registry().first_adapter.arm
    if shipped_arm(registry(), shipped_record()) == first:
        return only
    print(f"the adapter the `{first}` arm measured no longer ships: its unfinished stages are left")
    return lambda name: only(name) and not name.startswith(f"eval-{first}-")


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


def code_commit() -> str:
    """The checkout's commit, ``+changes`` when code differs from it (results and docs, which the
    matrix itself rewrites as it goes, are not code)."""
    return provenance.commit(ignoring=("benchmarks/results", "docs"))


if __name__ == "__main__":
    main()
