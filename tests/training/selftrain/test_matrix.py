"""The held-out matrix and the gate that decides whether an adapter ships."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from optimizers.selftrain.gate import verdict
from optimizers.selftrain.matrix import Arm, Matrix, MatrixRun
from optimizers.selftrain.recipe import SuitePlan
from optimizers.selftrain.stages import StageStore
from rlmkit.errors import UserError

ARMS = (
    Arm(name="base"),
    Arm(name="prompt", moves="read", hold_unread_answers=True),
    Arm(name="adapter", adapter="a.gguf"),
)


class FakeEval:
    """Stands in for ``rlmkit eval``: writes each example's row, scored by ``scores[arm][suite]``."""

    def __init__(self, scores):
        self.scores, self.commands = scores, []

    def __call__(self, command: list[str]) -> int:
        self.commands.append(command)
        value = lambda flag: command[command.index(flag) + 1]  # noqa: E731
        arm = {"none": "prompt" if value("--moves") == "read" else "base"}.get(value("--adapter"), "adapter")
        suite, n, out = value("eval"), int(value("--n")), Path(value("--out"))
        out.mkdir(parents=True, exist_ok=True)
        scores = self.scores[arm][suite]
        with (out / "results.jsonl").open("a") as f:
            for i in range(n):
                row = {"id": f"{suite}-{i}", "score": scores[i % len(scores)],
                       "status": "ok", "failure": None, "iterations": 2, "wall_s": 1.0,
                       "prompt_tokens": 10, "completion_tokens": 5}  # fmt: skip
                f.write(json.dumps(row) + "\n")
        return 0


def matrix(n_real=30, n_synthetic=20):
    suites = (SuitePlan(suite="prose", length=60_000, n=n_real), SuitePlan(suite="needle", n=n_synthetic))
    return Matrix(suites=suites, arms=ARMS)


def run_matrix(tmp_path, scores, **kw):
    fake = FakeEval(scores)
    store = StageStore(tmp_path / "work", tmp_path / "archive")
    run = MatrixRun(
        matrix(**kw), store, runner=fake, log=lambda _: None, code=lambda: "abc1234", machine=lambda: "cpu A"
    )
    run.run()
    return run, fake


WINS = {
    "base": {"prose": [0.0, 0.0, 1.0], "needle": [0.0, 1.0]},
    "prompt": {"prose": [0.0, 1.0, 1.0], "needle": [0.0, 1.0]},
    "adapter": {"prose": [1.0, 1.0, 1.0], "needle": [1.0, 1.0]},
}


def judge(run, **kw):
    labels = [plan.label for plan in run.matrix.suites]
    return verdict(run.table(), labels, candidate="adapter", prompt_arms=["prompt"],
                   trained_families=["needle"], real_text=["prose"], **kw)  # fmt: skip


def test_every_arm_runs_every_suite_once_with_its_own_flags_and_resumes(tmp_path):
    run, fake = run_matrix(tmp_path, WINS)
    assert len(fake.commands) == 6
    prompt = next(c for c in fake.commands if "read" in c)
    assert "--hold-unread-answers" in prompt and prompt[prompt.index("--adapter") + 1] == "none"
    assert all(
        c[c.index("--seed") + 1] == "1000" and c[c.index("--temperature") + 1] == "0" for c in fake.commands
    )
    # each stage caches its replies apart: a base arm never replays another arm's or an older run's
    caches = {c[c.index("--lm-cache") + 1] for c in fake.commands}
    assert len(caches) == 6 and all(Path(cache).parent == tmp_path / "work" / "lm-cache" for cache in caches)
    again = MatrixRun(run.matrix, run.store, runner=fake, log=lambda _: None)
    again.run()
    assert len(fake.commands) == 6  # finished stages are kept
    records = [run.store.record(f"eval-{arm.name}-needle-20k") for arm in ARMS]
    assert {(record["commit"], record["machine"]) for record in records} == {("abc1234", "cpu A")}


def test_an_arm_that_finishes_a_suite_early_starts_the_next_before_a_slow_arm_is_done(tmp_path):
    fake = FakeEval(WINS)
    later_started = threading.Event()

    def runner(command: list[str]) -> int:
        # the base's first suite waits until another arm has reached the second suite; were each
        # suite a barrier, that could never happen and the wait would time out
        if command[command.index("--adapter") + 1] == "none" and "count" in command and "prose" in command:
            assert later_started.wait(timeout=30), "no arm started the next suite while the base was busy"
        elif "needle" in command:
            later_started.set()
        return fake(command)

    store = StageStore(tmp_path / "work", tmp_path / "archive")
    MatrixRun(matrix(), store, runner=runner, log=lambda _: None).run()
    assert len(fake.commands) == 6 and all(store.record(f"eval-{a.name}-needle-20k") for a in ARMS)


def test_suites_named_first_run_first_and_the_rest_keep_the_matrix_order(tmp_path):
    fake = FakeEval(WINS)
    all_started = threading.Barrier(len(ARMS), timeout=30)

    def runner(command: list[str]) -> int:
        status = fake(command)
        if "needle" in command:  # no needle stage ends before every one has started
            all_started.wait()
        return status

    store = StageStore(tmp_path / "work", tmp_path / "archive")
    MatrixRun(matrix(), store, runner=runner, log=lambda _: None).run(first=["needle"])
    suites = [command[command.index("eval") + 1] for command in fake.commands]
    assert suites == ["needle"] * 3 + ["prose"] * 3


def test_the_table_pairs_each_arm_with_the_base(tmp_path):
    run, _ = run_matrix(tmp_path, WINS)
    prose = next(row for row in run.table() if row["family"] == "prose")
    assert prose["n"] == 30 and prose["finished"]
    assert prose["means"]["adapter"] == 1.0 and prose["versus_base"]["adapter"]["wins"] == 20


def test_the_table_counts_right_runs_apart_from_partial_credit(tmp_path):
    # the base earns partial credit everywhere, the adapter answers a third right and nothing else
    partial = {"prose": [0.4, 0.3, 0.2], "needle": [0.4, 0.3]}
    scores = {"base": partial, "prompt": partial, "adapter": {"prose": [1.0, 0.0, 0.0], "needle": [0.0]}}
    run, _ = run_matrix(tmp_path, scores)
    prose = next(row for row in run.table() if row["family"] == "prose")
    assert prose["means"]["base"] == pytest.approx(0.3) and prose["right"]["base"] == 0
    assert prose["means"]["adapter"] == pytest.approx(1 / 3) and prose["right"]["adapter"] == 10


def test_an_adapter_that_wins_everywhere_ships(tmp_path):
    run, _ = run_matrix(tmp_path, WINS)
    assert judge(run).ships


def test_an_adapter_that_loses_a_suite_or_only_matches_the_prompt_does_not_ship(tmp_path):
    scores = {**WINS, "adapter": {"prose": [0.0, 0.0, 1.0], "needle": [0.0, 0.0]}}
    run, _ = run_matrix(tmp_path, scores)
    result = judge(run)
    assert not result.ships and result.measured
    assert any("needle-20k: 0.00 is more than 0.05 below" in f for f in result.failures)
    assert any("no real-text suite gains" in f for f in result.failures)
    assert any("not above the prompt-only arm 'prompt'" in f for f in result.failures)


def test_a_partial_matrix_never_ships_but_can_already_fail(tmp_path):
    run, _ = run_matrix(tmp_path, WINS, n_real=10)  # real text below its n of 30
    result = judge(run)
    assert not result.ships and not result.measured and result.missing == ["prose-60k"]


def test_a_matrix_folder_refuses_another_set_of_arms(tmp_path):
    run, fake = run_matrix(tmp_path, WINS)
    other = matrix().model_copy(update={"arms": ARMS[:2]})
    with pytest.raises(UserError, match="arms may only grow"):
        MatrixRun(other, run.store, runner=fake).run()
    changed = matrix().model_copy(
        update={"arms": (ARMS[0], ARMS[1].model_copy(update={"moves": "count"}), ARMS[2])}
    )
    with pytest.raises(UserError, match="arms may only grow"):
        MatrixRun(changed, run.store, runner=fake).run()
    other = matrix().model_copy(update={"iterations": 8})
    with pytest.raises(UserError, match="another recipe"):
        MatrixRun(other, run.store, runner=fake).run()


def test_a_new_candidate_joins_the_matrix_without_running_the_others_again(tmp_path):
    run, fake = run_matrix(tmp_path, WINS)
    ran = len(fake.commands)
    fake.scores["adapter"] = WINS["adapter"]  # the fake scores any adapter alike
    grown = matrix().model_copy(update={"arms": (*ARMS, Arm(name="dpo", adapter="b.gguf"))})
    again = MatrixRun(grown, run.store, runner=fake, log=lambda _: None)
    again.run()
    added = fake.commands[ran:]
    assert len(added) == 2 and all(c[c.index("--adapter") + 1] == "b.gguf" for c in added)
    assert {row["suite"]: set(row["versus_base"]) for row in again.table()}["prose-60k"] == {
        "prompt",
        "adapter",
        "dpo",
    }


def test_a_recipe_samples_with_hints_and_compiles_per_turn_and_an_older_folder_still_resumes(tmp_path):
    from optimizers.selftrain import Recipe
    from optimizers.selftrain.pipeline import SelfTrain

    commands = []
    plan = SuitePlan(suite="prose", length=60_000, n=2)
    recipe = Recipe(train=(plan,), hint=True, per_turn=True)
    run = SelfTrain(recipe, StageStore(tmp_path / "w"), tmp_path / "m.gguf", log=lambda _: None,
                    runner=lambda c: commands.append(c) or 0)  # fmt: skip
    run.store.run("sample-prose-60k", lambda folder: run.sample(plan, folder))
    assert "--hint" in commands[-1]
    with pytest.raises(FileNotFoundError):  # the fake runner writes no manifest; the command is what counts
        run.dataset(tmp_path / "dataset")
    assert "--per-turn" in commands[-1] and commands[-1][3:5] == ["compile", "sft"]
    older = Recipe(train=(plan,)).model_dump(mode="json")
    for name in ("hint", "per_turn"):
        older.pop(name)  # a recipe kept before these fields existed
    store = StageStore(tmp_path / "old")
    store.keep_recipe(older)
    SelfTrain(Recipe(train=(plan,)), store, tmp_path / "m.gguf", log=lambda _: None, runner=lambda c: 0).run(
        only=lambda name: False
    )


def test_only_finished_suites_can_hold_an_adapter_back():
    def row(suite, family, finished, base, adapter, low):
        compared = {"n": 5, "base_mean": base, "other_mean": adapter, "gain": adapter - base,
                    "ci95": [low, adapter - base + 0.1], "wins": 0, "losses": 0}  # fmt: skip
        return {"suite": suite, "family": family, "finished": finished, "n": 5 if not finished else 30,
                "means": {"base": base, "prompt": base, "adapter": adapter},
                "versus_base": {"adapter": compared, "prompt": {**compared, "other_mean": base}}}  # fmt: skip

    judge = lambda table: verdict(  # noqa: E731
        table, ["prose-60k", "needle-20k"], candidate="adapter", prompt_arms=["prompt"],
        trained_families=["needle"], real_text=["prose"])  # fmt: skip
    early = judge([row("prose-60k", "prose", False, 0.5, 0.1, -0.5)])  # five runs in, far below
    assert not early.ships and not early.held_back and early.failures == []
    late = judge([row("prose-60k", "prose", True, 0.5, 0.1, -0.5)])
    assert late.held_back and not late.measured and late.missing == ["needle-20k"]
    assert any("prose-60k: 0.10 is more than 0.05 below" in f for f in late.failures)


def test_an_added_arm_that_has_run_only_some_examples_does_not_narrow_the_others_rows(tmp_path):
    run, _ = run_matrix(tmp_path, WINS)
    grown = matrix().model_copy(update={"arms": (*ARMS, Arm(name="dpo", adapter="b.gguf"))})
    folder = run.store.folder("eval-dpo-prose-60k")  # stopped after one example
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text(json.dumps({"id": "prose-0", "score": 1.0}) + "\n")
    later = MatrixRun(grown, run.store, runner=lambda command: 1, log=lambda _: None)
    together = {row["suite"]: row for row in later.table(ARMS)}
    assert together["prose-60k"]["n"] == 30 and together["prose-60k"]["finished"]
    beside = {row["suite"]: row for row in later.table((*ARMS[:2], grown.arms[-1]))}
    assert list(beside) == ["prose-60k"] and beside["prose-60k"]["n"] == 1
    assert not beside["prose-60k"]["finished"] and set(beside["prose-60k"]["versus_base"]) == {
        "prompt",
        "dpo",
    }


def test_a_fresh_checkout_shows_an_unfinished_arms_runs_from_its_committed_snapshot(tmp_path):
    run, _ = run_matrix(tmp_path, WINS)
    grown = matrix().model_copy(update={"arms": (*ARMS, Arm(name="dpo", adapter="b.gguf"))})
    folder = run.store.folder("eval-dpo-prose-60k")  # stopped after two examples, then snapshotted
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text(
        "".join(json.dumps({"id": f"prose-{i}", "score": 1.0, "status": "ok"}) + "\n" for i in range(2))
    )
    assert run.store.snapshot("eval-dpo-prose-60k") is not None
    fresh = StageStore(tmp_path / "fresh", tmp_path / "archive")  # a checkout holding the archive only
    later = MatrixRun(grown, fresh, runner=lambda command: 1, log=lambda _: None)
    [prose] = later.table((*ARMS[:2], grown.arms[-1]))
    assert (prose["suite"], prose["n"], prose["finished"]) == ("prose-60k", 2, False)
    assert later.replayed(grown.arms[-1], grown.suites[0]) == (0, 2)


def test_a_stage_counts_the_runs_that_replayed_cached_replies(tmp_path):
    from rlmkit.trajectory import RunMeta, Trajectory, TrajectoryLog, Usage

    run, _ = run_matrix(tmp_path, WINS)
    arm, plan = ARMS[0], run.matrix.suites[1]
    folder = run.store.folder(run.stage_name(arm, plan))
    log, rows = TrajectoryLog(folder / "trajectories"), []
    for i, cached in enumerate((0, 2, 0)):  # the second run's first two calls were replayed
        meta = RunMeta(signature="context -> answer", protocol="submit", sandbox="process")
        log.write(Trajectory(meta=meta, status="ok", usage=Usage(calls=3, cached_calls=cached)))
        rows.append({"id": f"needle-{i}", "score": 1.0, "status": "ok", "run_id": meta.run_id})
    (folder / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert run.replayed(arm, plan) == (1, 3)
    assert run.replayed(ARMS[1], plan) == (0, 20)  # rows with no trajectories replayed nothing
