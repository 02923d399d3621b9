"""trl-sft: two real LoRA steps on CPU with a tiny random Qwen3 built offline."""

from __future__ import annotations

import json

import pytest

from optimizers.backends.base import BaseModelNotFoundError, DatasetKindError, TrainJob, get_backend
from optimizers.backends.testing import build_tiny_qwen, tiny_lora_job, write_dataset
from optimizers.compile.schema import ChatMessage, RewardSpec, RLRow, SFTRow

SYSTEM = ChatMessage(role="system", content="You are a Recursive Language Model with a REPL.")


def sft_row(i: int) -> SFTRow:
    prompt = [SYSTEM, ChatMessage(role="user", content=f"context has {i} numbers; sum them")]
    completion = [ChatMessage(role="assistant", content=f"```repl\nSUBMIT(answer={i * 3})\n```")]
    return SFTRow(
        id=f"r{i}",
        task_id=f"t{i}",
        turn=0,
        prompt=prompt,
        completion=completion,
        messages=prompt + completion,
    )


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_qwen(tmp_path_factory.mktemp("model") / "tiny-qwen3")


@pytest.mark.parametrize("layout", ["prompt_completion", "messages"])
def test_two_lora_steps_save_an_adapter_that_loads_back(tmp_path, tiny_model, layout):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    data = write_dataset(
        tmp_path / "data", {"train": [sft_row(i) for i in range(6)], "validation": [sft_row(9)]}
    )
    job = tiny_lora_job("sft", data, tiny_model, tmp_path / "out", options={"format": layout})
    result = get_backend("trl-sft").run(job)

    assert result.status == "trained" and result.artifact_kind == "lora_adapter"
    assert result.metrics["steps"] == 2
    assert result.metrics["first_loss"] > 0
    history = json.loads((job.output_dir / "log_history.json").read_text())
    assert len([h for h in history if "loss" in h]) == 2
    adapter_config = json.loads((result.artifact / "adapter_config.json").read_text())
    assert adapter_config["r"] == 4 and adapter_config["lora_alpha"] == 8
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    loaded = PeftModel.from_pretrained(base, str(result.artifact))
    lora_weights = [p for n, p in loaded.named_parameters() if "lora_B" in n]
    # lora_B starts at zero; after two steps with lr 1e-2 some of it must have moved
    assert lora_weights and any(float(p.abs().sum()) > 0 for p in lora_weights)
    assert "accelerate launch" in result.command


def test_dry_run_writes_trl_records_without_training(tmp_path, tiny_model):
    data = write_dataset(tmp_path / "data", {"train": [sft_row(1), sft_row(2)]})
    job = TrainJob(kind="sft", dataset=data, base_model=str(tiny_model), output_dir=tmp_path / "out")
    result = get_backend("trl-sft").run(job, dry_run=True)
    assert result.status == "exported"
    records = [json.loads(line) for line in (result.artifact / "train.jsonl").read_text().splitlines()]
    assert records[0]["prompt"][0]["role"] == "system"
    assert records[1]["completion"] == [{"role": "assistant", "content": "```repl\nSUBMIT(answer=6)\n```"}]
    again = TrainJob.load(job.output_dir / "job.toml")
    assert again == job.model_copy(update={"dataset": data.resolve(), "output_dir": job.output_dir.resolve()})
    assert not (job.output_dir / "adapter").exists()


def test_rl_rows_are_refused_for_sft(tmp_path, tiny_model):
    row = RLRow(id="a", task_id="t", prompt=[SYSTEM], answer="1", reward=RewardSpec(scorer="m:f"))
    data = write_dataset(tmp_path / "data", {"train": [row]})
    job = TrainJob(kind="sft", dataset=data, base_model=str(tiny_model), output_dir=tmp_path / "out")
    with pytest.raises(DatasetKindError, match="'rl'.*needs sft"):
        get_backend("trl-sft").validate(job)
    with pytest.raises(DatasetKindError, match="cannot train kind 'rl'"):
        get_backend("trl-sft").validate(job.model_copy(update={"kind": "rl"}))


def test_base_model_missing_offline_is_named(tmp_path):
    data = write_dataset(tmp_path / "data", {"train": [sft_row(1)]})
    job = TrainJob(kind="sft", dataset=data, base_model="nobody/not-a-model-xyz", output_dir=tmp_path / "o")
    with pytest.raises(BaseModelNotFoundError, match="nobody/not-a-model-xyz"):
        get_backend("trl-sft").validate(job)


def _lora_weights(adapter) -> dict:
    from safetensors.torch import load_file

    return load_file(str(adapter / "adapter_model.safetensors"))


def test_a_stopped_run_goes_on_from_its_checkpoint_to_the_adapter_an_unbroken_run_makes(
    tmp_path, tiny_model, capsys, monkeypatch
):
    import shutil

    import torch
    from trl import SFTTrainer

    data = write_dataset(tmp_path / "data", {"train": [sft_row(i) for i in range(8)]})

    def job(out, **fields):
        # every checkpoint kept, so the test can stand in for a run stopped after step 2
        options = {"save_every": 2, "trainer": {"save_total_limit": 10}}
        return tiny_lora_job("sft", data, tiny_model, out, steps=4, batch_size=1, options=options, **fields)

    unbroken = get_backend("trl-sft").run(job(tmp_path / "unbroken"))
    stopped = job(tmp_path / "stopped")
    get_backend("trl-sft").run(stopped)
    shutil.rmtree(stopped.output_dir / "trainer" / "checkpoint-4")
    shutil.rmtree(stopped.output_dir / "adapter")
    capsys.readouterr()
    steps_taken = []
    one_step = SFTTrainer.training_step
    monkeypatch.setattr(
        SFTTrainer, "training_step", lambda self, *a, **k: steps_taken.append(1) or one_step(self, *a, **k)
    )

    resumed = get_backend("trl-sft").run(stopped)

    assert len(steps_taken) == 2  # steps 3 and 4 only: 1 and 2 came from the checkpoint

    assert "from checkpoint-2 of 4 steps" in capsys.readouterr().err
    assert resumed.metrics["steps"] == 4
    history = json.loads((stopped.output_dir / "log_history.json").read_text())
    assert [h["step"] for h in history if "loss" in h] == [1, 2, 3, 4]
    mine, theirs = _lora_weights(resumed.artifact), _lora_weights(unbroken.artifact)
    assert mine.keys() == theirs.keys()
    assert all(torch.allclose(mine[k], theirs[k], atol=1e-6) for k in mine)
    assert any(float(w.abs().sum()) > 0 for k, w in mine.items() if "lora_B" in k)


def test_a_folder_holding_another_jobs_checkpoint_is_refused(tmp_path, tiny_model):
    from rlmkit.errors import ConfigError

    data = write_dataset(tmp_path / "data", {"train": [sft_row(i) for i in range(4)]})
    first = tiny_lora_job("sft", data, tiny_model, tmp_path / "out", options={"save_every": 1})
    get_backend("trl-sft").run(first)
    with pytest.raises(ConfigError, match="checkpoint-2 of another job"):
        get_backend("trl-sft").run(first.model_copy(update={"lr": 1e-3}))
    with pytest.raises(ConfigError, match="save_every must be >= 0"):
        get_backend("trl-sft").run(first.model_copy(update={"options": {"save_every": -1}}))
