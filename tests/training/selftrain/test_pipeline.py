"""The self-training recipe on tiny inputs: a scripted model served over HTTP stands in for the
embedded one, real `rlmkit eval`, `compile` and `train` subprocesses, two LoRA steps on a tiny
random Qwen, the adapter converted for llama.cpp, both arms measured and compared paired; then
the same run resumed from its work folder and from its archive alone, running nothing again."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from optimizers.backends.testing import write_tiny_gguf
from optimizers.selftrain import Recipe, StageStore, SuitePlan, paired_compare
from optimizers.selftrain.paired import COLUMNS, report_cells
from optimizers.selftrain.pipeline import SelfTrain, StageFailed
from rlmkit.errors import ConfigError, LocalModelError, UserError
from rlmkit.testing.server import ScriptedServer

# Solves the needle in two root turns (compile's defaults drop one-turn runs).
LOOK = (
    "```repl\nimport re\nkey = re.search(r'for (\\S+) mentioned', question).group(1)\n"
    "found = re.findall(r'magic numbers? for ' + re.escape(key) + r' is: (\\d+)', context)\nprint(found)\n```"
)
SUBMIT = "```repl\nSUBMIT(answer=found)\n```"


def solver(body: dict) -> str:
    return LOOK if not any(m["role"] == "assistant" for m in body["messages"]) else SUBMIT


class ScriptedRunner:
    """Runs each stage's real command, with the embedded model swapped for the scripted server
    (the adapter a command asks for is recorded: a scripted model cannot apply one)."""

    def __init__(self, url: str):
        self.url, self.commands, self.adapters = url, [], []

    def __call__(self, command: list[str]) -> int:
        command = list(command)
        self.commands.append(command)
        if "--adapter" in command:
            at = command.index("--adapter")
            self.adapters.append(command[at + 1])
            del command[at : at + 2]
        if "--local-threads" in command:  # the embedded model's own server: not for a scripted model
            at = command.index("--local-threads")
            del command[at : at + 2]
        if "--lm" in command:
            command[command.index("--lm") + 1 : command.index("--lm") + 2] = ["openai/scripted"]
            command += ["--api-base", self.url]
        return subprocess.run(command, capture_output=True).returncode


@pytest.fixture(scope="module")
def served():
    server = ScriptedServer(solver).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def finished(tmp_path_factory, served):
    """One whole tiny run (two LoRA steps are most of its time), shared by the tests that read it."""
    folder = tmp_path_factory.mktemp("selftrain")
    run, runner = tiny_run(folder, served.url)
    return folder, run, runner, run.run()


def tiny_recipe() -> Recipe:
    return Recipe(
        train=(SuitePlan(suite="needle", length=2_000, n=2),),
        samples=2,
        workers=2,
        max_steps=2,
        test_n=2,
        max_iterations=4,
        precision="fp32",
        min_score=0.5,
    )


def tiny_run(
    tmp_path, url: str, *, work: str = "work", recipe: Recipe | None = None
) -> tuple[SelfTrain, ScriptedRunner]:
    from optimizers.backends.testing import build_tiny_qwen

    model = tmp_path / "tiny-qwen"
    if not model.exists():
        build_tiny_qwen(model)
    base = tmp_path / "base.gguf"  # what the adapter is served on: the tiny model's layout (qwen3, 2 blocks)
    if not base.exists():
        write_tiny_gguf(base, "qwen3", blocks=2)
    runner = ScriptedRunner(url)
    store = StageStore(tmp_path / work, tmp_path / "archive")
    run = SelfTrain(
        recipe or tiny_recipe(), store, base, log=lambda _: None, runner=runner,
        train_from={"base_model": str(model)},
    )  # fmt: skip
    return run, runner


def test_every_stage_runs_once_measures_both_arms_paired_and_resumes(finished):
    tmp_path, run, runner, done = finished

    assert list(done) == [
        "sample-needle-2k", "dataset", "train", "adapter",
        "eval-base-needle-2k", "eval-adapter-needle-2k",
    ]  # fmt: skip
    sample = done["sample-needle-2k"]
    assert (
        sample["runs"] == 4
        and sample["success_rate"] == 1.0
        and sample["generator_seed"] == 0
        and sample["examples"] == 2
    )
    sft = done["dataset"]["sft"]
    assert "--min-score 0.5" in sft["command"] and "--min-score" not in done["dataset"]["dpo"]["command"]
    assert sft["counts"]["train.jsonl"] >= 1 and "dpo" in done["dataset"]
    # rows and examples per family, every row counted once; what each filter removed, by reason
    assert list(sft["per_family"]) == ["needle"] and sft["per_family"]["needle"]["rows"] == sft["rows"]
    assert sft["per_family"]["needle"]["examples"] == sft["examples"] <= 2
    assert sft["runs_read"] == 4 and isinstance(sft["turns_dropped"], dict)
    assert done["train"]["steps"] == 2 and done["train"]["precision"] == "fp32" and done["train"]["losses"]
    assert done["adapter"]["file"] == "adapter.gguf" and len(done["adapter"]["sha256"]) == 64
    # held-out seeds only, greedy, the base alone and with the adapter on the same examples
    base, adapter = done["eval-base-needle-2k"], done["eval-adapter-needle-2k"]
    assert base["generator_seed"] == 1000 and base["examples"] == 2
    assert sorted(r["id"] for r in base["rows"]) == sorted(r["id"] for r in adapter["rows"])
    assert sorted(runner.adapters) == sorted(["none", str(run.adapter_path())])  # the two arms side by side
    evals = [c for c in runner.commands if c[3] == "eval" and "--adapter" in c]
    assert all(c[c.index("--temperature") + 1] == "0" for c in evals)
    assert (
        "--adapter ADAPTER" in adapter["command"] and "--out OUT/eval-adapter-needle-2k" in adapter["command"]
    )
    assert str(tmp_path) not in adapter["command"]

    [compared] = run.comparison()
    assert compared["n"] == 2 and compared["gain"] == 0.0 and compared["trained_on"]

    ran = len(runner.commands)
    assert run.run() == done and len(runner.commands) == ran  # all kept: nothing runs again


def test_a_fresh_work_folder_resumes_from_the_archive_alone(finished, served):
    tmp_path, _, _, done = finished
    packed = {p.name for p in (tmp_path / "archive").iterdir()}
    assert {"train.tar.gz", "adapter.tar.gz", "dataset.json"} <= packed

    import tarfile

    with tarfile.open(tmp_path / "archive" / "train.tar.gz") as tar:
        names = tar.getnames()
    assert not any(n.endswith(".safetensors") for n in names)  # the float32 adapter stays behind
    assert any(n.endswith("log_history.json") for n in names)

    again, runner = tiny_run(tmp_path, served.url, work="elsewhere")
    assert again.run() == done and runner.commands == []
    assert (tmp_path / "elsewhere" / "adapter" / "adapter.gguf").is_file()  # unpacked for the eval stages


def test_a_finished_recipe_gains_held_out_suites_without_redoing_a_stage(finished, served, tmp_path):
    """Held-out suites only add measurements: a finished recipe given more of them runs those
    suites' two arms and nothing else; a change to what was trained is still refused."""
    import shutil

    finished_at, run, _, done = finished
    archive = tmp_path / "archive"
    shutil.copytree(finished_at / "archive", archive)
    wider = run.recipe.model_copy(update={"held_out": (SuitePlan(suite="aggregation", length=2_000, n=2),)})
    runner = ScriptedRunner(served.url)
    again = SelfTrain(wider, StageStore(tmp_path / "work", archive), run.base_gguf, log=lambda _: None,
                      runner=runner, train_from=run.train_from)  # fmt: skip
    # one arm alone first, as a second process would run it: the adapter it needs is unpacked
    alone = again.run(only=lambda name: name.startswith("eval-adapter-aggregation"))
    assert list(alone) == ["eval-adapter-aggregation-2k"]
    assert runner.adapters == [str(tmp_path / "work" / "adapter" / "adapter.gguf")]
    assert (tmp_path / "work" / "adapter" / "adapter.gguf").is_file()
    now = again.run()
    assert list(now) == [*done, "eval-base-aggregation-2k", "eval-adapter-aggregation-2k"]
    assert {name: now[name] for name in done} == done
    assert [c[3:5] for c in runner.commands] == [["eval", "aggregation"]] * 2  # the second arm only now
    assert [row["suite"] for row in again.comparison()] == ["needle-2k", "aggregation-2k"]
    retrained = wider.model_copy(update={"lr": 1e-3})
    with pytest.raises(UserError, match="holds the stages of another recipe"):
        SelfTrain(retrained, StageStore(tmp_path / "work", archive), run.base_gguf, runner=runner).run()


def test_a_confirmation_seed_measures_the_trained_suites_again_on_fresh_examples(finished, served, tmp_path):
    """A change decided after reading the first held-out runs is measured on examples no one has
    read: both arms of each trained suite on another generator seed, nothing else run again."""
    import shutil

    finished_at, run, _, done = finished
    archive = tmp_path / "archive"
    shutil.copytree(finished_at / "archive", archive)
    confirmed = run.recipe.model_copy(update={"confirm_seeds": (1100,)})
    runner = ScriptedRunner(served.url)
    again = SelfTrain(confirmed, StageStore(tmp_path / "work", archive), run.base_gguf, log=lambda _: None,
                      runner=runner, train_from=run.train_from)  # fmt: skip
    now = again.run()
    assert list(now) == [*done, "eval-base-needle-2k-s1100", "eval-adapter-needle-2k-s1100"]
    assert [c[c.index("--seed") + 1] for c in runner.commands] == ["1100", "1100"]
    fresh = now["eval-base-needle-2k-s1100"]
    assert fresh["generator_seed"] == 1100 and {r["id"] for r in fresh["rows"]} == {
        "needle-s1100-0000", "needle-s1100-0001",
    }  # fmt: skip
    rows = again.comparison()
    assert [(r["suite"], r["generator_seed"], r["trained_on"]) for r in rows] == [
        ("needle-2k", 1000, True), ("needle-2k-s1100", 1100, True),
    ]  # fmt: skip
    for seed in (999, 1000):  # a training seed, and the first draw's own seed
        with pytest.raises(ValueError, match=f"confirmation seed {seed}"):
            run.recipe.model_validate({**run.recipe.model_dump(), "confirm_seeds": (seed,)})


def test_the_room_for_training_is_checked_only_when_a_train_stage_is_to_run(finished, monkeypatch, tmp_path):
    """Measuring a finished recipe needs none of training's memory: only a train stage still to run
    is refused for want of room, and it is refused before any stage starts."""
    from typer.testing import CliRunner

    from optimizers.selftrain import checks
    from rlmkit.cli import app

    def no_room(gguf, work):
        raise UserError("no room for the dequantised weights")

    monkeypatch.setattr(checks, "check_room", no_room)
    _, run, _, _ = finished
    assert not run.will_run("train")  # finished: measuring more needs no room to train
    assert not tiny_run(tmp_path / "other", "http://127.0.0.1:9")[0].will_run(
        "train", lambda n: n.startswith("eval-")
    )
    # a recipe whose training finished (its records written by hand): measuring it checks no room
    from optimizers.cli.self_train import make_recipe

    trained = make_recipe(lm=str(run.base_gguf), train=(SuitePlan(suite="needle", length=2000, n=2),))
    store = StageStore(tmp_path / "trained")
    store.keep_recipe(trained.model_dump(mode="json"))
    for name in ("sample-needle-2k", "dataset", "train", "adapter"):
        store.run(name, lambda folder: {})
    again = [
        "needle:2000:2",
        "--lm",
        str(run.base_gguf),
        "--out",
        str(tmp_path / "trained"),
        "--stages",
        "train",
    ]
    assert CliRunner().invoke(app, ["self-train", *again]).exit_code == 0
    flags = ["needle:2000:2", "--lm", str(run.base_gguf), "--out", str(tmp_path / "new"), "--stages", "train"]
    fresh = CliRunner().invoke(app, ["self-train", *flags])
    assert fresh.exit_code != 0 and "no room" in fresh.output
    assert not (tmp_path / "new" / "recipe.json").exists()  # refused before the recipe was kept


def test_a_failed_stage_keeps_the_finished_ones(tmp_path, served):
    run, runner = tiny_run(tmp_path, served.url)
    run.runner = lambda command: 1 if command[3] == "compile" else runner(command)
    with pytest.raises(StageFailed, match="rlmkit compile sft .* exited with status 1; rerun to resume"):
        run.run()
    assert run.store.record("sample-needle-2k") is not None and run.store.record("dataset") is None


def test_an_arm_whose_model_never_answered_some_runs_is_not_finished(tmp_path):
    """Runs the model could not be reached for are not results: the evaluation stage stays
    unfinished (the next run resumes them), and a look at the unfinished arm leaves them out."""
    unreachable = "LMUnavailableError: could not reach http://127.0.0.1:1/v1"
    row = {"id": "needle-s1000-0000", "sample": 0, "program": "program", "status": "failed",
           "score": 0.0, "iterations": 1, "wall_s": 600.0, "prompt_tokens": 10, "completion_tokens": 0,
           "failure": "lm_error", "error": unreachable}  # fmt: skip
    answered = {**row, "id": "needle-s1000-0001", "status": "ok", "failure": None, "error": None}
    store = StageStore(tmp_path / "work")
    recipe = tiny_recipe()
    [measured, *_] = recipe.measurements()
    run = SelfTrain(recipe, store, tmp_path / "base.gguf", log=lambda _: None, runner=lambda command: 0)
    folder = store.folder(f"eval-base-{measured.label}")
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("\n".join(json.dumps(r) for r in (row, answered)) + "\n")
    with pytest.raises(StageFailed, match="could not be reached for 1 run"):
        store.run(f"eval-base-{measured.label}", lambda f: run.evaluate(measured, "base", f))
    assert store.record(f"eval-base-{measured.label}") is None
    rows, finished = run.arm_rows(measured.label, "base")
    assert [r["id"] for r in rows] == ["needle-s1000-0001"] and not finished


def test_paired_comparison_keeps_examples_together():
    base = {"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0}
    other = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "extra": 0.0}  # scored by one arm only: left out
    result = paired_compare(base, other)
    assert (result.n, result.gain, result.wins, result.losses) == (4, 0.5, 2, 0)
    assert 0.0 <= result.ci95[0] <= 0.5 <= result.ci95[1] <= 1.0
    assert paired_compare(base, other) == result  # seeded
    with pytest.raises(ValueError, match="share no scored example"):
        paired_compare({"a": 1.0}, {"b": 1.0})


def test_bad_input_is_refused_before_any_stage(tmp_path):
    from optimizers.cli.self_train import make_recipe, parse_plan
    from optimizers.selftrain.checks import check_architecture, check_backend

    with pytest.raises(UserError, match="unknown suite 'needel'"):
        parse_plan("needel", length=20_000, n=4)
    assert parse_plan("needle:50000:8", length=20_000, n=4) == SuitePlan(suite="needle", length=50_000, n=8)
    with pytest.raises(UserError, match="training seeds 0..1999 reach the held-out seeds"):
        make_recipe(train=(SuitePlan(suite="needle", n=2000),))
    with pytest.raises(ConfigError, match="transformers cannot dequantise"):
        check_architecture(write_tiny_gguf(tmp_path / "x.gguf", "rwkv6", blocks=1))
    assert check_architecture(write_tiny_gguf(tmp_path / "q.gguf", "qwen2", blocks=1)) == "qwen2"
    with pytest.raises(ConfigError, match="unknown training backend"):
        check_backend("no-such-backend")


def test_the_embedded_model_takes_an_adapter_by_argument_or_environment(tmp_path, monkeypatch):
    from rlmkit.local.adapter import ENV, resolve_adapter, served_alias

    monkeypatch.delenv(ENV, raising=False)
    assert resolve_adapter(None) is None and resolve_adapter("none") is None
    with pytest.raises(LocalModelError, match="does not exist"):
        resolve_adapter(tmp_path / "missing.gguf")
    (tmp_path / "peft.safetensors").write_bytes(b"not a gguf")
    with pytest.raises(LocalModelError, match="is not a GGUF file"):
        resolve_adapter(tmp_path / "peft.safetensors")
    one = write_tiny_gguf(tmp_path / "one.gguf", "qwen2", blocks=1)
    two = write_tiny_gguf(tmp_path / "two.gguf", "qwen2", blocks=2)
    monkeypatch.setenv(ENV, str(one))
    assert resolve_adapter() == one.resolve()
    monkeypatch.setenv(ENV, "none")
    assert resolve_adapter() is None
    # the served name (part of every cache key) differs per adapter and from the base
    names = {served_alias(None), served_alias(one), served_alias(two)}
    assert len(names) == 3


def test_a_shipped_adapter_is_the_default_only_while_its_file_matches_its_record(tmp_path, monkeypatch):
    import hashlib

    from rlmkit.local import adapter as adapters

    monkeypatch.delenv(adapters.ENV, raising=False)
    monkeypatch.setattr(adapters, "SHIPPED_ADAPTER", tmp_path / "shipped_adapter.json")
    adapters.shipped_adapter.cache_clear()
    assert adapters.resolve_adapter() is None  # no record: the base model alone
    file = write_tiny_gguf(tmp_path / "shipped_adapter.gguf", "qwen2", blocks=1)
    record = {"file": file.name, "sha256": hashlib.sha256(file.read_bytes()).hexdigest()}
    adapters.SHIPPED_ADAPTER.write_text(json.dumps(record))
    adapters.shipped_adapter.cache_clear()
    assert adapters.resolve_adapter() == file
    monkeypatch.setenv(adapters.ENV, "none")  # the switch for every process
    assert adapters.resolve_adapter() is None and adapters.resolve_adapter(None) is None
    monkeypatch.delenv(adapters.ENV)
    file.write_bytes(file.read_bytes() + b"\0")
    adapters.shipped_adapter.cache_clear()
    with pytest.raises(LocalModelError, match="missing or damaged"):
        adapters.resolve_adapter()
    adapters.shipped_adapter.cache_clear()


def test_an_eval_folder_knows_its_adapter_by_content_not_path(tmp_path, monkeypatch):
    """A run folder's identity holds the adapter's name and hash: a copy of the same adapter
    elsewhere (the work folder moved, an absolute path for a relative one) resumes its runs; a
    retrained adapter under the same name does not."""
    from programs.cli.eval import _adapter_config
    from programs.evaluate import config_hash
    from rlmkit.local.adapter import ENV

    monkeypatch.delenv(ENV, raising=False)
    for name in "abc":
        (tmp_path / name).mkdir()
    first = write_tiny_gguf(tmp_path / "a" / "adapter.gguf", "qwen2", blocks=1)
    moved = tmp_path / "b" / "adapter.gguf"
    moved.write_bytes(first.read_bytes())
    retrained = write_tiny_gguf(tmp_path / "c" / "adapter.gguf", "qwen2", blocks=2)
    ids = [config_hash(_adapter_config(str(path))) for path in (first, moved, retrained)]
    assert ids[0] == ids[1] != ids[2]
    assert _adapter_config("none") == {"adapter": "none"}
    monkeypatch.setenv(ENV, "none")
    assert _adapter_config(None) == {}  # no adapter: the folder's hash is what it always was
    with pytest.raises(LocalModelError, match="does not exist"):
        _adapter_config(str(tmp_path / "missing.gguf"))


def test_a_folder_filled_by_another_recipe_is_refused(tmp_path):
    store = StageStore(tmp_path / "work", tmp_path / "archive")
    store.keep_recipe(tiny_recipe().model_dump(mode="json"))
    store.keep_recipe(tiny_recipe().model_dump(mode="json"))  # the same recipe: resumes
    other = tiny_recipe().model_copy(update={"samples": 8})
    with pytest.raises(UserError, match="holds the stages of another recipe"):
        store.keep_recipe(other.model_dump(mode="json"))
    assert StageStore(tmp_path / "fresh", tmp_path / "archive").recipe()["samples"] == 2


def test_a_stopped_self_train_stops_the_stage_command_it_runs(tmp_path):
    """SIGTERM to a run stops its stage's command (an evaluation holding a model server) and
    waits for it, instead of leaving it running on, orphaned: the stage runs in a worker thread,
    which the signal never reaches."""
    import os
    import signal
    import subprocess
    import sys

    sleeper = "import os, time; print(os.getpid(), flush=True); time.sleep(300)"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from rlmkit.cli.common import exit_on_sigterm\n"
        "from optimizers.selftrain import Recipe, StageStore, SuitePlan\n"
        "from optimizers.selftrain.subprocesses import run_subprocess\n"
        "from optimizers.selftrain.pipeline import SelfTrain\n"
        "exit_on_sigterm()\n"
        "recipe = Recipe(train=(SuitePlan(suite='needle', length=2_000, n=1),))\n"
        f"store = StageStore(Path({str(tmp_path / 'work')!r}))\n"
        f"stage = lambda command: run_subprocess([sys.executable, '-c', {sleeper!r}])\n"
        "SelfTrain(recipe, store, Path('base.gguf'), log=lambda _: None, runner=stage).run()\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())  # the sampling stage's command is running
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=120) == 128 + signal.SIGTERM
    with pytest.raises(ProcessLookupError):  # stopped and waited for before the run exited
        os.kill(child, 0)


def test_suites_to_sample_may_be_added_until_the_dataset_stage_has_read_them(tmp_path):
    """A recipe may gain a suite to sample (its stage is new, no finished one changes), and lose
    or change one that never ran; a plan changed once its stage has a run, or a suite added once
    the dataset was compiled, is still refused."""
    store = StageStore(tmp_path / "work", tmp_path / "archive")

    def check(recipe: Recipe) -> None:  # runs no stage: only the recipe is compared and kept
        SelfTrain(recipe, store, tmp_path / "base.gguf", log=lambda _: None, runner=lambda _: 1).run(
            only=lambda name: False
        )

    first = tiny_recipe()
    check(first)
    added = SuitePlan(suite="aggregation", length=2_000, n=2)
    more = first.model_copy(update={"train": (*first.train, added)})
    check(more)
    assert [plan["suite"] for plan in store.recipe()["train"]] == ["needle", "aggregation"]
    changed = more.model_copy(update={"train": (SuitePlan(suite="needle", length=2_000, n=3), more.train[1])})
    store.folder("sample-needle-2k").mkdir(parents=True)
    row = {"id": "needle-s0-0000", "score": 0.0, "status": "ok"}
    (store.folder("sample-needle-2k") / "results.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(UserError, match="holds the stages of another recipe"):
        check(changed)  # its stage has a run: the plan that made it stays as it was
    with pytest.raises(ValueError, match="needle-2k planned twice"):
        Recipe(train=(*more.train, SuitePlan(suite="needle", length=2_500, n=4)))
    never = SuitePlan(suite="pairs", length=3_000, n=2)
    check(more.model_copy(update={"train": (*more.train, never)}))
    check(more)  # a plan that never ran a stage may leave again: no stage read it
    started = SuitePlan(suite="multihop", length=3_000, n=2)
    check(more.model_copy(update={"train": (*more.train, started)}))
    store.folder("sample-multihop-3k").mkdir(parents=True)
    (store.folder("sample-multihop-3k") / "results.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(UserError, match="holds the stages of another recipe"):
        check(more)  # once it has a run, it stays
    more = more.model_copy(update={"train": (*more.train, started)})
    (store.work / "stages").mkdir(parents=True, exist_ok=True)
    (store.work / "stages" / "dataset.json").write_text("{}")
    check(more)  # the same plans: resumes
    with pytest.raises(UserError, match="holds the stages of another recipe"):
        check(more.model_copy(update={"train": (*more.train, SuitePlan(suite="pairs", length=2_000, n=2))}))


def test_closed_sampling_finishes_with_the_runs_it_has_and_the_dataset_reads_only_those(tmp_path):
    """A suite sampled part way closes with its runs (a snapshot's, in a fresh folder), one never
    started closes empty, and the dataset stage compiles what there is."""
    store = StageStore(tmp_path / "work", tmp_path / "archive")
    recipe = tiny_recipe().model_copy(
        update={
            "train": (
                SuitePlan(suite="needle", length=2_000, n=2),
                SuitePlan(suite="pairs", length=2_000, n=2),
            )
        }
    )
    started = store.folder("sample-needle-2k")
    (started / "trajectories").mkdir(parents=True)
    (started / "trajectories" / "run.jsonl").write_text("{}\n")  # (its runs: only the path is read here)
    row = {"id": "needle-s0-0000", "score": 1.0, "status": "ok", "wall_s": 3.0}
    (started / "results.jsonl").write_text(json.dumps(row) + "\n" + json.dumps({**row, "sample": 1}) + "\n")
    store.snapshot("sample-needle-2k")
    commands = []
    fresh = StageStore(tmp_path / "fresh", tmp_path / "archive")  # a checkout holding the snapshot only
    run = SelfTrain(recipe, fresh, tmp_path / "base.gguf", log=lambda _: None, runner=commands.append)

    assert run.close_sampling() == ["sample-needle-2k", "sample-pairs-2k"]
    needle, pairs = fresh.record("sample-needle-2k"), fresh.record("sample-pairs-2k")
    assert needle["closed_early"] and (needle["runs"], needle["planned_runs"]) == (2, 4)
    assert needle["scored_above_0"] == 2 and pairs["runs"] == 0
    assert (tmp_path / "archive" / "sample-needle-2k.tar.gz").exists()
    assert not (tmp_path / "archive" / "sample-needle-2k.partial.tar.gz").exists()
    assert run.close_sampling() == [] and commands == []  # nothing sampled, nothing closed twice
    with pytest.raises(StageFailed):  # the scripted runner writes no dataset: only its command is read
        run.run(only=lambda name: name == "dataset")
    compile_sft = commands[0]
    assert str(fresh.folder("sample-needle-2k") / "trajectories") in compile_sft
    assert not any("sample-pairs-2k" in part for part in compile_sft)


def test_an_unfinished_stage_is_snapshotted_and_resumed_run_by_run(tmp_path, monkeypatch):
    store = StageStore(tmp_path / "work", tmp_path / "archive")
    folder = store.folder("eval-base-needle-2k")
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text('{"id": "a", "score": 1.0}\n')
    packed = store.snapshot("eval-base-needle-2k")
    assert packed.name == "eval-base-needle-2k.partial.tar.gz"
    first = packed.read_bytes()
    later = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: later)  # packed again an hour on, nothing moved
    assert store.snapshot("eval-base-needle-2k").read_bytes() == first  # so git sees no change
    monkeypatch.undo()

    seen = []

    def stage(folder):  # what an evaluation does: it finds the runs finished before and adds its own
        seen.append((folder / "results.jsonl").read_text())
        return {"rows": 2}

    again = StageStore(tmp_path / "fresh", tmp_path / "archive")
    assert again.run("eval-base-needle-2k", stage)["rows"] == 2
    assert seen == ['{"id": "a", "score": 1.0}\n']
    assert not (
        tmp_path / "archive" / "eval-base-needle-2k.partial.tar.gz"
    ).exists()  # the whole one replaced it
    assert again.snapshot("eval-base-needle-2k") is None  # finished: nothing to snapshot


def test_unfinished_arms_are_compared_on_the_examples_both_finished(tmp_path):
    run = SelfTrain(tiny_recipe(), StageStore(tmp_path / "work"), tmp_path / "base.gguf")
    row = {
        "status": "ok",
        "failure": None,
        "iterations": 2,
        "wall_s": 1.0,
        "prompt_tokens": 5,
        "completion_tokens": 1,
    }
    for arm, scores in (("base", {"x": 0.0, "y": 1.0}), ("adapter", {"x": 1.0})):
        folder = run.store.folder(f"eval-{arm}-needle-2k")
        folder.mkdir(parents=True)
        lines = [json.dumps(row | {"id": i, "score": v}) for i, v in scores.items()]
        (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    [compared] = run.comparison()
    assert (compared["n"], compared["gain"], compared["finished"]) == (1, 1.0, False)
    cells = report_cells(compared)
    assert cells[0] == "needle-2k (unfinished: runs so far)" and len(cells) == len(COLUMNS)


@pytest.mark.parametrize("python_has_data_filter", [True, False])
def test_an_archive_unpacks_only_plain_files_inside_the_work_folder(
    tmp_path, monkeypatch, python_has_data_filter
):
    """A packed stage unpacks into the work folder, on Pythons with tarfile's data filter (3.11.4+)
    and without it (Debian 12's 3.11.2); a name that climbs out of it is refused, nothing unpacked."""
    import io
    import tarfile

    if not python_has_data_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)

    def packed(name: str, members: dict[str, bytes]):
        path = tmp_path / name
        with tarfile.open(path, "w:gz") as tar:
            for arcname, data in members.items():
                info = tarfile.TarInfo(arcname)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    store = StageStore(tmp_path / "work")
    store._extract(packed("good.tar.gz", {"train/log_history.json": b"[]"}))
    assert (tmp_path / "work" / "train" / "log_history.json").read_text() == "[]"
    with pytest.raises(UserError, match="not a plain file inside the work folder"):
        store._extract(packed("bad.tar.gz", {"ok.txt": b"x", "../escaped.txt": b"x"}))
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "work" / "ok.txt").exists()


def test_dpo_after_sft_goes_on_from_the_sft_adapter_and_is_the_adapter_measured(tmp_path, served):
    """The scripted model answers every run right, so no run loses and ``compile dpo`` has no pair
    to write (the stage then fails rather than train nothing); the rows are written here in the
    compiled format, and the SFT and DPO stages train the tiny model for real."""
    from optimizers.backends.testing import write_dataset
    from optimizers.compile.schema import ChatMessage, DPORow, SFTRow

    recipe = tiny_recipe().model_copy(update={"dpo": True})
    run, runner = tiny_run(tmp_path, served.url, recipe=recipe)
    assert [name for name, _, _ in run.stages()][2:6] == ["train", "adapter-sft", "train-dpo", "adapter"]
    run.run(only=lambda name: name.startswith("sample"))
    with pytest.raises(StageFailed, match="compile dpo"):
        run.store.run("dataset", run.dataset)

    def dataset(folder):
        prompt = [ChatMessage(role="system", content="s"), ChatMessage(role="user", content="q")]
        read = [ChatMessage(role="assistant", content="```repl\nprint(context[:100])\n```")]
        guess = [ChatMessage(role="assistant", content="```repl\nSUBMIT(answer='1')\n```")]
        rows = [SFTRow(id=f"s{i}", task_id=f"t{i}", prompt=prompt, completion=read, messages=prompt + read)
                for i in range(2)]  # fmt: skip
        pairs = [DPORow(id=f"p{i}", task_id=f"t{i}", turn=0, prompt=prompt, chosen=read, rejected=guess,
                        score_chosen=1.0, score_rejected=0.0) for i in range(2)]  # fmt: skip
        write_dataset(folder / "sft", {"train": rows})
        write_dataset(folder / "dpo", {"train": pairs})
        return {}

    run.store.run("dataset", dataset)
    done = run.run(only=lambda name: name in ("train", "adapter-sft", "train-dpo", "adapter"))
    assert done["train-dpo"]["rows"] == 2 and done["train-dpo"]["steps"] == 2
    assert done["train"]["resumed_at_step"] == done["train-dpo"]["resumed_at_step"] == 0
    job = (run.store.folder("train-dpo") / "self-train-job.toml").read_text()
    assert "init_adapter" in job and str(run.store.folder("train") / "adapter") in job
    assert "trl-dpo" in done["train-dpo"]["command"]
    assert done["adapter"]["from"] == "train-dpo" and done["adapter-sft"]["from"] == "train"
    # two adapters, both served as they were trained: the SFT one is measured as it was before DPO
    assert done["adapter-sft"]["sha256"] != done["adapter"]["sha256"]
    history = json.loads((run.store.folder("train-dpo") / "log_history.json").read_text())
    assert any("rewards/chosen" in entry for entry in history)
    assert done["train-dpo"]["init_adapter"] == "train"

    # a fresh work folder has only the archive, which keeps the SFT adapter as GGUF: DPO goes on
    # from those weights read back (as they were served) rather than asking for SFT again
    fresh, _ = tiny_run(tmp_path, served.url, work="fresh", recipe=recipe)
    assert not (fresh.store.output("train") / "adapter" / "adapter_model.safetensors").exists()
    again = fresh.train_dpo(tmp_path / "dpo-again")
    assert again["init_adapter"] == "adapter-sft" and again["steps"] == 2
    job = (tmp_path / "dpo-again" / "self-train-job.toml").read_text()
    assert str(tmp_path / "dpo-again" / "sft-adapter") in job


def test_dpo_refuses_to_start_without_the_sft_adapters_weights(tmp_path, served):
    recipe = tiny_recipe().model_copy(update={"dpo": True})
    run, _ = tiny_run(tmp_path, served.url, recipe=recipe)
    run.store.run("train", lambda folder: (folder / "adapter").mkdir() or {})
    with pytest.raises(StageFailed, match="rerun the train stage"):
        run.train_dpo(tmp_path / "dpo")


def test_a_recipe_file_names_everything_and_is_checked_before_any_stage(tmp_path):
    from typer.testing import CliRunner

    from optimizers.cli.self_train import read_recipe
    from rlmkit.cli import app

    training = Path(__file__).resolve().parents[3] / "benchmarks" / "training"
    shipped = read_recipe(training / "reading_recipe.toml")
    assert shipped.per_turn and shipped.dpo and shipped.max_seconds
    # a suite's own hint overrides the recipe's, in the command that samples it
    hinted = {plan.label: plan for plan in shipped.train if shipped.hinted(plan)}
    assert "needle-20k" in hinted and "aggregation-20k" not in hinted
    from optimizers.selftrain import StageStore as Store
    from optimizers.selftrain.pipeline import SelfTrain as Pipeline

    command = Pipeline(shipped, Store(tmp_path / "s"), tmp_path / "m.gguf").eval_command(
        shipped.train[0], tmp_path
    )
    assert command[command.index("--max-seconds") + 1] == str(shipped.max_seconds)  # sampled under a budget
    # its replies are cached for this stage alone: a resumed stage replays its own, never another's
    assert command[command.index("--lm-cache") + 1] == str(tmp_path / "s" / "lm-cache" / tmp_path.name)
    failing = Pipeline(shipped, Store(tmp_path / "s"), tmp_path / "m.gguf", runner=lambda command: 1)
    for plan in shipped.train:
        with pytest.raises(StageFailed) as failed:  # the runner fails at once: its command is in the error
            failing.sample(plan, tmp_path / plan.label)
        assert ("--hint" in str(failed.value)) is (plan.label in hinted)
        assert f"--local-threads {shipped.sample_threads}" in str(failed.value)
    assert {plan.suite for plan in shipped.train} >= {"prose", "source", "needle", "multi_needle"}
    assert len({plan.length for plan in shipped.train if plan.suite == "prose"}) >= 2
    bad = tmp_path / "bad.toml"
    bad.write_text('[[train]]\nsuite = "needel"\n')
    result = CliRunner().invoke(app, ["self-train", "--recipe", str(bad), "--out", str(tmp_path / "w")])
    assert result.exit_code != 0 and "unknown suite 'needel'" in result.output
    bad.write_text('[[train]]\nsuite = "source"\nlength = 40000\n')
    result = CliRunner().invoke(app, ["self-train", "--recipe", str(bad), "--out", str(tmp_path / "w")])
    assert result.exit_code != 0 and "source-40k" in result.output and "too small" in result.output
    bad.write_text('dpo = "yes please"\n[[train]]\nsuite = "needle"\n')
    result = CliRunner().invoke(app, ["self-train", "--recipe", str(bad), "--out", str(tmp_path / "w")])
    assert result.exit_code != 0 and "dpo" in result.output
    flags = ["--recipe", str(bad), "--out", str(tmp_path / "w")]
    both = CliRunner().invoke(app, ["self-train", "needle", *flags])
    assert both.exit_code != 0 and "not both" in both.output
    assert not (tmp_path / "w").exists()  # refused before any stage


def test_stages_name_one_stage_or_the_start_of_several():
    from optimizers.cli.self_train import stage_filter

    names = [
        "sample-needle-2k",
        "sample-prose-50k",
        "dataset",
        "train",
        "adapter-sft",
        "train-dpo",
        "adapter",
    ]
    chosen = stage_filter("train", names)
    assert [n for n in names if chosen(n)] == ["train"]  # SFT alone: train-dpo is its own stage
    chosen = stage_filter("sample, train-dpo,adapter", names)
    assert [n for n in names if chosen(n)] == ["sample-needle-2k", "sample-prose-50k", "train-dpo", "adapter"]
    assert all(stage_filter(None, names)(n) for n in names)
    with pytest.raises(UserError, match="'eval' names no stage of this recipe"):
        stage_filter("eval", names)
