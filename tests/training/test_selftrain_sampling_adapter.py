"""A recipe's next round samples through an earlier round's adapter: named by its GGUF file or by
the earlier recipe's archive folder, which a fresh work folder unpacks; a bad name is refused
before any stage."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optimizers.selftrain import Recipe, StageStore, SuitePlan, sampling_adapter
from optimizers.selftrain.pipeline import SelfTrain
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


def test_a_sampling_adapter_that_is_not_there_is_refused_before_any_stage(tmp_path):
    recipe = tmp_path / "round2.toml"
    recipe.write_text(f'sample_adapter = "{tmp_path / "nowhere"}"\n[[train]]\nsuite = "needle"\n')
    result = CliRunner().invoke(app, ["self-train", "--recipe", str(recipe), "--out", str(tmp_path / "w")])
    assert result.exit_code != 0 and "give a GGUF LoRA file" in result.output
    assert not (tmp_path / "w").exists()
    (tmp_path / "half").mkdir()  # a folder without a finished adapter stage
    with pytest.raises(UserError, match="adapter stage finished"):
        sampling_adapter.check(str(tmp_path / "half"))


def test_the_second_reading_round_samples_through_the_first_rounds_archive():
    from optimizers.cli.self_train import read_recipe

    root = Path(__file__).resolve().parents[2]
    recipe = read_recipe(root / "benchmarks" / "training" / "reading_round2.toml")
    first = read_recipe(root / "benchmarks" / "training" / "reading_recipe.toml")
    assert recipe.sample_adapter == "benchmarks/results/reading_recipe"
    sampling_adapter.check(str(root / recipe.sample_adapter))  # the committed archive holds its adapter
    assert recipe.sample_seed != first.sample_seed  # examples the first round never drew
    assert {plan.suite for plan in recipe.train} >= {"source", "prose", "multihop"}
