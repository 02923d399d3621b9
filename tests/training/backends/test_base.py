"""The backend contract: TrainJob validation and loading, dataset reading, registry, missing deps."""

from __future__ import annotations

import importlib.util

import pytest
from pydantic import ValidationError

from optimizers.backends.base import (
    BACKENDS,
    DatasetError,
    MissingDependencyError,
    TrainJob,
    TrainJobError,
    get_backend,
    read_rows,
)
from optimizers.backends.testing import write_dataset
from optimizers.compile.schema import ChatMessage, DPORow, SFTRow
from rlmkit.errors import ConfigError, UserError

USER = ChatMessage(role="user", content="q")
REPLY = ChatMessage(role="assistant", content="a")
SFT = SFTRow(id="s", task_id="t", prompt=[USER], completion=[REPLY], messages=[USER, REPLY])


def test_job_is_frozen_and_checked():
    job = TrainJob(kind="sft", dataset="d", base_model="m", output_dir="o")
    with pytest.raises(ValidationError):
        job.steps = 5
    assert job.lora.rank == 16 and job.lora.targets == ("all-linear",)
    with pytest.raises(TrainJobError, match="lr") as info:
        TrainJob.build(kind="sft", dataset="d", base_model="m", output_dir="o", lr=-1, group_size=1)
    assert "group_size" in str(info.value) and isinstance(info.value, UserError)
    with pytest.raises(TrainJobError, match="max_completion_tokens"):
        TrainJob.build(
            kind="rl", dataset="d", base_model="m", output_dir="o", max_seq_len=64, max_completion_tokens=64
        )
    with pytest.raises(TrainJobError, match="kind"):
        TrainJob.build(kind="ppo", dataset="d", base_model="m", output_dir="o")
    with pytest.raises(TrainJobError, match="stepz"):
        TrainJob.build(kind="sft", dataset="d", base_model="m", output_dir="o", stepz=3)


def test_toml_round_trip_and_relative_paths(tmp_path):
    (tmp_path / "job.toml").write_text(
        'kind = "rl"\ndataset = "data"\nbase_model = "m"\noutput_dir = "/abs/out"\ngroup_size = 4\n'
        '[lora]\nrank = 4\ntargets = ["q_proj"]\n[options]\nsub_lm = "openai/x"\n'
    )
    job = TrainJob.load(tmp_path / "job.toml", steps=7)
    assert job.dataset == tmp_path / "data" and str(job.output_dir) == "/abs/out"
    assert job.steps == 7 and job.lora.targets == ("q_proj",) and job.options == {"sub_lm": "openai/x"}
    (tmp_path / "again.toml").write_text(job.dump_toml())
    assert TrainJob.load(tmp_path / "again.toml") == job
    (tmp_path / "bad.toml").write_text("kind = \n")
    with pytest.raises(TrainJobError, match="not valid TOML"):
        TrainJob.load(tmp_path / "bad.toml")


def test_dataset_reading_rejects_mixed_and_empty_files(tmp_path):
    dpo = DPORow(
        id="d", task_id="t", prompt=[USER], chosen=[REPLY], rejected=[REPLY], score_chosen=1, score_rejected=0
    )
    path = write_dataset(tmp_path / "mixed", {"train": [SFT, dpo]}) / "train.jsonl"
    with pytest.raises(DatasetError, match="mixes sft and dpo"):
        read_rows(path)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="no rows"):
        read_rows(tmp_path / "empty.jsonl")
    (tmp_path / "usr.jsonl").write_text(SFT.model_dump_json().replace('"user"', '"usr"') + "\n")
    with pytest.raises(DatasetError, match="usr.jsonl:1"):
        read_rows(tmp_path / "usr.jsonl")
    (tmp_path / "nofolder").mkdir()
    with pytest.raises(DatasetError, match="no train.jsonl"):
        get_backend("openai-jsonl").validate(
            TrainJob(kind="sft", dataset=tmp_path / "nofolder", base_model="m", output_dir=tmp_path / "o")
        )


def test_registry_and_missing_dependency_names_the_extra(tmp_path, monkeypatch):
    expected = {"trl-sft", "trl-dpo", "trl-grpo", "prime-rl", "verifiers", "tinker", "openai-jsonl"}
    assert set(BACKENDS) == expected
    with pytest.raises(ConfigError, match="known: trl-sft"):
        get_backend("axolotl")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("trl", "peft") else real(name, *a)
    )
    backend = get_backend("trl-sft")
    assert [d.module for d in backend.missing_deps()] == ["trl", "peft"]
    job = TrainJob(
        kind="sft",
        dataset=write_dataset(tmp_path / "d", {"train": [SFT]}),
        base_model="m",
        output_dir=tmp_path / "o",
    )
    with pytest.raises(
        MissingDependencyError, match=r"trl, peft.*pip install -e '\.\[train\]' in a checkout"
    ) as info:
        backend.run(job)
    assert info.value.extras == ["train"]
