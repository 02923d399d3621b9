"""trl-dpo: two real DPO steps with a LoRA on a tiny random Qwen3 built offline, on the rows
``compile dpo`` writes; the wrong row kind is refused before any model loads."""

from __future__ import annotations

import json

import pytest

from optimizers.backends.base import DatasetKindError, TrainJob, get_backend
from optimizers.backends.testing import build_tiny_qwen, tiny_lora_job, write_dataset
from optimizers.compile.schema import ChatMessage, DPORow, SFTRow
from rlmkit.errors import ConfigError

SYSTEM = ChatMessage(role="system", content="You are a Recursive Language Model with a REPL.")


def dpo_row(i: int) -> DPORow:
    prompt = [SYSTEM, ChatMessage(role="user", content=f"context has {i} numbers; sum them")]
    return DPORow(
        id=f"p{i}",
        task_id=f"t{i}",
        turn=0,
        prompt=prompt,
        chosen=[ChatMessage(role="assistant", content="```repl\nprint(sum(map(int, context.split())))\n```")],
        rejected=[ChatMessage(role="assistant", content=f"```repl\nSUBMIT(answer={i})\n```")],
        score_chosen=1.0,
        score_rejected=0.0,
    )


def job_for(tmp_path, data, model) -> TrainJob:
    return tiny_lora_job("dpo", data, model, tmp_path / "out", options={"precision": "fp32"})


def test_two_dpo_steps_save_an_adapter_and_log_the_preference_metrics(tmp_path):
    model = build_tiny_qwen(tmp_path / "tiny-qwen3")
    data = write_dataset(tmp_path / "data", {"train": [dpo_row(i) for i in range(4)]})
    result = get_backend("trl-dpo").run(job_for(tmp_path, data, model))

    assert result.status == "trained" and result.artifact_kind == "lora_adapter"
    assert result.metrics["steps"] == 2 and result.metrics["first_loss"] > 0
    assert (result.artifact / "adapter_config.json").is_file()
    history = json.loads((tmp_path / "out" / "log_history.json").read_text())
    assert any("rewards/chosen" in entry for entry in history)  # DPO's own metrics, not SFT's


def test_sft_rows_are_refused_before_any_model_loads(tmp_path):
    prompt = [SYSTEM, ChatMessage(role="user", content="q")]
    completion = [ChatMessage(role="assistant", content="a")]
    row = SFTRow(id="s", task_id="t", prompt=prompt, completion=completion, messages=prompt + completion)
    data = write_dataset(tmp_path / "data", {"train": [row]})
    job = job_for(tmp_path, data, tmp_path / "no-model-needed").model_copy(update={"kind": "sft"})
    with pytest.raises(DatasetKindError, match="cannot train kind 'sft'"):
        get_backend("trl-dpo").run(job)


def sft_pair_row(i: int) -> SFTRow:
    prompt = [SYSTEM, ChatMessage(role="user", content=f"context has {i} numbers; sum them")]
    completion = [ChatMessage(role="assistant", content=f"```repl\nSUBMIT(answer={i})\n```")]
    messages = prompt + completion
    return SFTRow(id=f"s{i}", task_id=f"t{i}", prompt=prompt, completion=completion, messages=messages)


def test_dpo_goes_on_from_an_sft_adapter_and_measures_against_it(tmp_path):
    """DPO after SFT: the SFT adapter is trained on, and its copy is the reference, so the first
    step's policy equals the reference (rewards 0, loss log 2) though the SFT adapter moved far
    from the base."""
    import math

    from safetensors.torch import load_file

    model = build_tiny_qwen(tmp_path / "tiny-qwen3")
    sft_data = write_dataset(tmp_path / "sft-data", {"train": [sft_pair_row(i) for i in range(4)]})
    sft = get_backend("trl-sft").run(
        tiny_lora_job("sft", sft_data, model, tmp_path / "sft", lr=0.1, options={"precision": "fp32"})
    )
    data = write_dataset(tmp_path / "data", {"train": [dpo_row(i) for i in range(4)]})
    job = tiny_lora_job(
        "dpo", data, model, tmp_path / "out", options={"precision": "fp32", "init_adapter": str(sft.artifact)}
    )
    result = get_backend("trl-dpo").run(job)

    history = json.loads((tmp_path / "out" / "log_history.json").read_text())
    first = next(entry for entry in history if "rewards/chosen" in entry)
    assert first["rewards/chosen"] == pytest.approx(0.0, abs=1e-6)
    assert result.metrics["first_loss"] == pytest.approx(math.log(2), abs=1e-4)
    before = load_file(str(sft.artifact / "adapter_model.safetensors"))
    after = load_file(str(result.artifact / "adapter_model.safetensors"))
    assert before.keys() == after.keys()  # the same adapter, gone on with
    assert any(not before[k].equal(after[k]) for k in before)
    no_lora = job.model_copy(update={"lora": None})
    with pytest.raises(ConfigError, match="init_adapter goes on training a LoRA"):
        get_backend("trl-dpo").run(no_lora)
