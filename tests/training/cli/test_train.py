"""``rlmkit train``: job files, flags, and typed errors through the real typer app."""

from __future__ import annotations

import tomllib

from typer.testing import CliRunner

from optimizers.backends.testing import write_dataset
from optimizers.compile.schema import ChatMessage, RewardSpec, RLRow
from rlmkit.cli import app

USER = ChatMessage(role="user", content="Sum the numbers.")


def rl_data(folder):
    row = RLRow(id="r", task_id="t", prompt=[USER], answer="6", reward=RewardSpec(scorer="m:f"))
    return write_dataset(folder, {"train": [row]})


def test_job_file_with_flag_overrides_prints_the_launch_line(tmp_path):
    rl_data(tmp_path / "data")
    (tmp_path / "job.toml").write_text(
        'kind = "rl"\ndataset = "data"\nbase_model = "Qwen/Qwen3-0.6B"\noutput_dir = "out"\nsteps = 10\n'
        '[lora]\nrank = 8\nalpha = 16\n[options]\nenv_id = "my-env"\n'
    )
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--backend",
            "prime-rl",
            str(tmp_path / "job.toml"),
            "--steps",
            "30",
            "-o",
            "num_train_gpus=2",
            "--lora-rank",
            "4",
        ],
    )
    assert result.exit_code == 0, result.output
    config_path = tmp_path / "out" / "prime-rl" / "rl.toml"
    assert f"uv run rl @ {config_path.resolve()}" in result.output.replace("\n", "")
    config = tomllib.loads(config_path.read_text())
    assert config["max_steps"] == 30  # the flag beat the file
    assert config["deployment"]["num_train_gpus"] == 2
    assert (
        config["trainer"]["model"]["lora"]["rank"] == 4 and config["trainer"]["model"]["lora"]["alpha"] == 16
    )
    assert config["orchestrator"]["train"]["source"][0]["name"] == "my-env"


def test_flags_only_and_typed_errors(tmp_path):
    data = rl_data(tmp_path / "data")

    def train(backend: str, kind: str = "rl", *extra: str):
        args = [
            "train",
            "-b",
            backend,
            "--kind",
            kind,
            "--dataset",
            str(data),
            "--base-model",
            "m",
            "--out",
            str(tmp_path / "o"),
            *extra,
        ]
        return CliRunner().invoke(app, args)

    ok = train("openai-jsonl")
    assert ok.exit_code == 0 and (tmp_path / "o" / "openai" / "train.jsonl").is_file()
    wrong_kind = train("openai-jsonl", "sft")
    assert wrong_kind.exit_code == 2 and "'rl'" in wrong_kind.output and "sft" in wrong_kind.output
    bad_field = train("prime-rl", "rl", "--steps", "0")
    assert bad_field.exit_code == 2 and "steps" in bad_field.output
    unknown = train("nope")
    assert unknown.exit_code == 2 and "trl-sft" in unknown.output
    missing_file = CliRunner().invoke(app, ["train", "-b", "prime-rl", str(tmp_path / "none.toml")])
    assert missing_file.exit_code == 2 and "not found" in missing_file.output


def test_list_names_every_backend():
    result = CliRunner().invoke(app, ["train", "--list"])
    assert result.exit_code == 0
    for name in ("trl-sft", "trl-grpo", "prime-rl", "verifiers", "tinker", "openai-jsonl"):
        assert name in result.output
