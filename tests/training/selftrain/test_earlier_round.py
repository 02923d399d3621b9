"""A recipe's next round takes from an earlier one: it samples through the earlier adapter (named
by its GGUF file or by the earlier recipe's archive folder, which a fresh work folder unpacks), and
its dataset compiles the earlier round's runs beside its own; bad names are refused before any
stage."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optimizers.selftrain import Recipe, StageStore, SuitePlan, earlier_round
from optimizers.selftrain.pipeline import SelfTrain, StageFailed
from rlmkit.cli import app
from rlmkit.errors import UserError

ADAPTER_BYTES = b"GGUF earlier round's adapter"


def earlier_archive(tmp_path: Path) -> Path:
    """An earlier recipe's archive whose adapter stage finished (its work folder since deleted)."""
    archive = tmp_path / "earlier-archive"
    store = StageStore(tmp_path / "earlier-work", archive)

    def adapter(folder: Path) -> dict:
        (folder / "adapter.gguf").write_bytes(ADAPTER_BYTES)
        return {"note": "converted"}

    store.run("adapter", adapter)
    return archive


def sampled_command(recipe: Recipe, work: Path) -> tuple[list[str], dict]:
    commands: list[list[str]] = []

    def runner(command: list[str]) -> int:
        commands.append(command)
        return 0

    run = SelfTrain(recipe, StageStore(work), work / "base.gguf", log=lambda _: None, runner=runner)
    record = run.sample(recipe.train[0], work / "sample-needle-2k")
    return commands[0], record


@pytest.mark.parametrize("named_by", ["archive", "file"])
def test_sampling_goes_through_the_earlier_rounds_adapter(tmp_path, named_by):
    archive = earlier_archive(tmp_path)
    gguf = tmp_path / "earlier-work" / "adapter" / "adapter.gguf"
    spec = str(archive) if named_by == "archive" else str(gguf)
    recipe = Recipe(train=(SuitePlan(suite="needle", length=2_000, n=2),), sample_adapter=spec)

    command, record = sampled_command(recipe, tmp_path / "round2")

    served = Path(command[command.index("--adapter") + 1])
    assert served.read_bytes() == ADAPTER_BYTES
    if named_by == "archive":  # unpacked from the archive into this round's own work folder
        assert served.is_relative_to(tmp_path / "round2")
    assert "--temperature" in command  # sampled, not measured greedily
    assert record["sample_adapter"] == spec
    assert record["sample_adapter_sha256"] == hashlib.sha256(ADAPTER_BYTES).hexdigest()


def test_without_an_earlier_adapter_the_base_is_sampled(tmp_path):
    command, record = sampled_command(Recipe(train=(SuitePlan(suite="needle", length=2_000, n=2),)), tmp_path)
    assert "--adapter" not in command and "sample_adapter" not in record


def test_a_earlier_round_that_is_not_there_is_refused_before_any_stage(tmp_path):
    recipe = tmp_path / "round2.toml"
    recipe.write_text(f'sample_adapter = "{tmp_path / "nowhere"}"\n[[train]]\nsuite = "needle"\n')
    result = CliRunner().invoke(app, ["self-train", "--recipe", str(recipe), "--out", str(tmp_path / "w")])
    assert result.exit_code != 0 and "give a GGUF LoRA file" in result.output
    assert not (tmp_path / "w").exists()
    (tmp_path / "half").mkdir()  # a folder without a finished adapter stage
    with pytest.raises(UserError, match="adapter stage finished"):
        earlier_round.check_adapter(str(tmp_path / "half"))
    recipe.write_text(f'runs_from = ["{tmp_path / "half"}"]\n[[train]]\nsuite = "needle"\n')
    result = CliRunner().invoke(app, ["self-train", "--recipe", str(recipe), "--out", str(tmp_path / "w")])
    assert result.exit_code != 0 and "holds recipe.json" in result.output
    assert not (tmp_path / "w").exists()


def test_the_second_reading_round_samples_through_the_first_rounds_archive():
    from optimizers.cli.self_train import read_recipe

    root = Path(__file__).resolve().parents[3]
    recipe = read_recipe(root / "benchmarks" / "training" / "reading_round2.toml")
    first = read_recipe(root / "benchmarks" / "training" / "reading_recipe.toml")
    assert recipe.sample_adapter == "benchmarks/results/reading_recipe"
    assert recipe.runs_from == ("benchmarks/results/reading_recipe",)  # its rows kept, judged alike
    assert set(earlier_round.families(str(root / recipe.runs_from[0]))) >= {"needle", "multi_needle"}
    earlier_round.check_adapter(str(root / recipe.sample_adapter))  # the committed archive holds its adapter
    assert recipe.sample_seed != first.sample_seed  # examples the first round never drew
    assert {plan.suite for plan in recipe.train} >= {"source", "prose", "multihop"}


def test_the_third_reading_round_trains_on_code_and_leaves_out_the_families_no_arm_answers():
    from optimizers.cli.self_train import read_recipe

    root = Path(__file__).resolve().parents[3]
    recipe = read_recipe(root / "benchmarks" / "training" / "reading_round3.toml")
    recipe = recipe.model_copy(update={"runs_from": tuple(str(root / spec) for spec in recipe.runs_from)})
    for spec in recipe.runs_from:
        earlier_round.check_runs(spec)  # the committed archives sampled the families it takes
    assert earlier_round.trained_families(recipe) == ["source", "codeqa", "prose", "needle"]
    earlier_round.check_adapter(str(root / recipe.sample_adapter))


def sampled(folder: Path) -> dict:
    """A sampling stage with one run's trajectories."""
    (folder / "trajectories").mkdir()
    (folder / "trajectories" / "run.jsonl").write_text("{}\n")  # only the path is read here
    return {"runs": 1}


def first_round(tmp_path: Path, pairs_closed_empty: bool) -> Path:
    """The archive of a finished first round that sampled multihop and pairs (pairs closed before
    any run, or with runs like multihop's)."""
    archive = tmp_path / "round1-archive"
    first = Recipe(
        train=(SuitePlan(suite="multihop", length=2_000, n=2), SuitePlan(suite="pairs", length=2_000, n=2))
    )
    store = StageStore(tmp_path / "round1-work", archive)
    SelfTrain(first, store, tmp_path / "base.gguf", log=lambda _: None, runner=lambda _: 1).run(
        only=lambda name: False
    )  # keeps its recipe record only

    store.run("sample-multihop-2k", sampled)
    empty = {"runs": 0, "closed_early": True}
    store.run("sample-pairs-2k", (lambda folder: empty) if pairs_closed_empty else sampled)
    return archive


def test_the_dataset_compiles_the_earlier_rounds_runs_beside_its_own(tmp_path):
    """The earlier round's finished sampling stages (one closed empty has no runs) are unpacked from
    its archive and compiled with this round's; their families count as trained on; the field may
    change until the dataset stage has run."""
    archive = first_round(tmp_path, pairs_closed_empty=True)
    spec = str(archive)
    assert earlier_round.families(spec) == ["multihop", "pairs"]

    own = SuitePlan(suite="needle", length=2_000, n=2)
    second = Recipe(train=(own,))
    work = StageStore(tmp_path / "round2-work")
    commands: list[list[str]] = []
    SelfTrain(second, work, tmp_path / "base.gguf", log=lambda _: None, runner=lambda _: 1).run(
        only=lambda name: False
    )
    later = second.model_copy(update={"runs_from": (spec,)})  # added before the dataset ran: kept
    run = SelfTrain(later, work, tmp_path / "base.gguf", log=lambda _: None, runner=commands.append)
    work.run("sample-needle-2k", sampled)
    assert earlier_round.trained_families(later) == ["needle", "multihop", "pairs"]
    with pytest.raises(StageFailed):  # the scripted runner writes no dataset: only its command is read
        run.run(only=lambda name: name == "dataset")
    compile_sft = commands[0]
    assert str(work.folder("sample-needle-2k") / "trajectories") in compile_sft
    unpacked = [part for part in compile_sft if "sample-multihop-2k" in part]
    assert unpacked and Path(unpacked[0]).is_relative_to(work.work)  # from the archive, into this round
    assert not any("sample-pairs-2k" in part for part in compile_sft)
    (work.work / "stages" / "dataset.json").write_text("{}")  # compiled: what it read is fixed now
    with pytest.raises(UserError, match="holds the stages of another recipe"):
        SelfTrain(second, work, tmp_path / "base.gguf", log=lambda _: None, runner=lambda _: 1).run(
            only=lambda name: False
        )


def test_a_second_rounds_adapters_are_arms_beside_a_base_of_their_own(tmp_path):
    """Once its adapter stages finish, a later round's adapters join the matrix after the first
    round's, with their own base arm beside them; the gate judges them on every family either
    round sampled."""
    from optimizers.backends.testing import write_tiny_gguf
    from optimizers.selftrain.rounds import Registry

    first_archive, second_archive = tmp_path / "r1-archive", tmp_path / "r2-archive"
    first = Recipe(train=(SuitePlan(suite="needle", n=2),))
    second = Recipe(train=(SuitePlan(suite="source", length=50_000, n=2),), runs_from=("r1-archive",))
    stores = []
    for recipe, archive, work in ((first, first_archive, "reading"), (second, second_archive, "round2")):
        store = StageStore(tmp_path / ".selftrain" / work, archive)
        store.keep_recipe(recipe.model_dump(mode="json"))
        store.run(f"sample-{recipe.train[0].label}", lambda folder: {"runs": 4})
        stores.append(store)
    rounds = Registry.model_validate(
        {
            "results": "r.json",
            "matrix": {"max_seconds": 240, "suites": [{"suite": "needle", "n": 20}]},
            "first_arms": [{"name": "base"}, {"name": "prompt", "moves": "read"}],
            "first_adapter": {"arm": "adapter", "sha256": "ab" * 32, "trained_families": ["needle"]},
            "rounds": [
                {"name": "reading", "recipe": "a.toml", "archive": "r1-archive", "arm": "reading",
                 "base": "base_again"},
                {"name": "round2", "recipe": "b.toml", "archive": "r2-archive", "arm": "round2",
                 "base": "base_round2"},
            ],
            "test": {"suites": [{"suite": "needle", "n": 2}]},
        }
    )  # fmt: skip

    def made(blocks):
        return lambda folder: write_tiny_gguf(folder / "adapter.gguf", "qwen2", blocks=blocks) and {}

    def arms():
        return [arm.name for arm in rounds.matrix_plan(Path("s.gguf"), tmp_path).arms]

    assert arms() == ["base", "prompt", "adapter"]
    stores[0].run("adapter", made(1))
    stores[1].run("adapter-sft", made(2))
    assert arms() == ["base", "prompt", "adapter", "reading", "base_again", "round2_sft", "base_round2"]
    # a round's runs_from names the earlier archive relative to the checkout
    assert rounds.candidates(tmp_path)["round2_sft"] == ("source", "needle")
    assert rounds.first_arm("base") and not rounds.first_arm("base_round2")


def test_an_earlier_rounds_runs_can_be_taken_for_some_families_only(tmp_path):
    """``ARCHIVE:family`` compiles that family's runs alone, and only it counts as trained on."""
    archive = first_round(tmp_path, pairs_closed_empty=False)
    spec = f"{archive}:pairs"

    assert earlier_round.families(spec) == ["pairs"]
    assert [name for name, _ in earlier_round.sampled_stages(spec)] == ["sample-pairs-2k"]
    folders = earlier_round.runs(spec, tmp_path / "round2-work")
    assert [folder.parent.name for folder in folders] == ["sample-pairs-2k"]
    second = Recipe(train=(SuitePlan(suite="needle", length=2_000, n=2),), runs_from=(spec,))
    assert earlier_round.trained_families(second) == ["needle", "pairs"]  # multihop is not trained on
    assert earlier_round.families(str(archive)) == ["multihop", "pairs"]  # the whole archive, as before

    with pytest.raises(UserError, match="needle never sampled there"):
        earlier_round.check_runs(f"{archive}:pairs,needle")


def test_an_earlier_rounds_continued_runs_come_with_its_sampled_ones(tmp_path):
    """A round whose failed runs were continued (``branch_samples``) passes on both stages of a
    family: a continuation is that round's sampled run as much as the run it continued."""
    archive = first_round(tmp_path, pairs_closed_empty=False)
    StageStore(tmp_path / "round1-work", archive).run("branch-pairs-2k", sampled)

    stages = [name for name, _ in earlier_round.sampled_stages(str(archive))]
    assert stages == ["sample-multihop-2k", "sample-pairs-2k", "branch-pairs-2k"]
    assert [name for name, _ in earlier_round.sampled_stages(f"{archive}:multihop")] == ["sample-multihop-2k"]
    folders = earlier_round.runs(f"{archive}:pairs", tmp_path / "round2-work")
    assert [folder.parent.name for folder in folders] == ["sample-pairs-2k", "branch-pairs-2k"]
