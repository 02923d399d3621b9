"""prime-rl export: rl.toml / sft.toml + dataset folder, validated against prime-rl's own schema
(JSON schema of its config classes at a pinned commit: optimizers/backends/prime_rl_schema.json)."""

from __future__ import annotations

import tomllib

import pytest

from optimizers.backends.base import DatasetKindError, SchemaMismatchError, TrainJob, get_backend
from optimizers.backends.prime_rl import check_prime_rl_toml, pinned_schema, prime_rl_version
from optimizers.backends.testing import read_jsonl, write_dataset
from optimizers.compile.schema import ChatMessage, DPORow, RewardSpec, RLRow, SFTRow

USER = ChatMessage(role="user", content="Sum the numbers in `context`.")
ANSWER = ChatMessage(role="assistant", content="```repl\nSUBMIT(answer=sum(context))\n```")


def rl_rows(n: int) -> list[RLRow]:
    spec = RewardSpec(scorer="tests.scorers:exact", suite="sum", knobs={"n": 5})
    return [
        RLRow(id=f"r{i}", task_id=f"t{i}", prompt=[USER], answer=str(i), example={"i": i}, reward=spec)
        for i in range(n)
    ]


def test_rl_export_writes_pinned_keys_and_launch_line(tmp_path):
    data = write_dataset(tmp_path / "data", {"train": rl_rows(3), "validation": rl_rows(1)})
    job = TrainJob(
        kind="rl",
        dataset=data,
        base_model="Qwen/Qwen3-0.6B",
        output_dir=tmp_path / "out",
        steps=40,
        batch_size=64,
        group_size=16,
        max_completion_tokens=512,
        max_turns=6,
        lora={"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]},
        options={"env_id": "my-env"},
    )
    result = get_backend("prime-rl").run(job)

    config = tomllib.loads(result.artifact.read_text())
    assert result.artifact.name == "rl.toml" and prime_rl_version() in result.artifact.read_text()
    assert config["orchestrator"]["batch_size"] == 64 and config["orchestrator"]["group_size"] == 16
    assert config["orchestrator"]["train"]["sampling"]["max_completion_tokens"] == 512
    assert config["orchestrator"]["train"]["source"] == [
        {"name": "my-env", "env": {"taskset": {"id": "my-env"}}}
    ]
    assert config["trainer"]["model"]["lora"] == {
        "rank": 8,
        "alpha": 16.0,
        "dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"],
    }
    assert config["max_steps"] == 40 and config["trainer"]["optim"] == {"type": "adamw", "lr": job.lr}
    assert "rollouts_per_example" not in result.artifact.read_text()
    records = read_jsonl(tmp_path / "out" / "prime-rl" / "data" / "train.jsonl")
    assert records[2]["answer"] == "2" and records[2]["info"]["reward"]["scorer"] == "tests.scorers:exact"
    assert result.command == f"uv run rl @ {result.artifact.resolve()}"


def test_sft_export_without_lora(tmp_path):
    row = SFTRow(id="s", task_id="t", prompt=[USER], completion=[ANSWER], messages=[USER, ANSWER])
    data = write_dataset(tmp_path / "data", {"train": [row]})
    job = TrainJob(
        kind="sft", dataset=data, base_model="Qwen/Qwen3-0.6B", output_dir=tmp_path / "o", lora=None
    )
    result = get_backend("prime-rl").run(job, dry_run=True)
    config = tomllib.loads(result.artifact.read_text())
    assert "lora" not in config["model"] and config["data"]["name"].endswith("prime-rl/data")
    (record,) = read_jsonl(tmp_path / "o" / "prime-rl" / "data" / "train.jsonl")
    assert record["completion"][0]["content"] == ANSWER.content


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda c: c["orchestrator"].update(rollouts_per_example=8), "orchestrator.rollouts_per_example"),
        (
            lambda c: c["orchestrator"]["train"].update(env=c["orchestrator"]["train"].pop("source")),
            "orchestrator.train.env",  # the pre-0.8 key: prime-rl no longer knows it
        ),
        (lambda c: c["trainer"]["model"]["lora"].update(rank=0), "trainer.model.lora.rank"),
        (lambda c: c["orchestrator"].update(batch_size=0), "orchestrator.batch_size"),
    ],
)
def test_schema_mismatch_names_the_key(tmp_path, edit, key):
    import tomli_w

    data = write_dataset(tmp_path / "data", {"train": rl_rows(1)})
    job = TrainJob(kind="rl", dataset=data, base_model="m", output_dir=tmp_path / "o", lora={"rank": 8})
    config = tomllib.loads(get_backend("prime-rl").prepare(job).artifact.read_text())
    edit(config)
    with pytest.raises(SchemaMismatchError) as info:
        check_prime_rl_toml("rl", tomli_w.dumps(config))
    assert info.value.key == key
    assert repr(key) in str(info.value)


def test_dpo_is_not_a_prime_rl_job(tmp_path):
    row = DPORow(
        id="d",
        task_id="t",
        prompt=[USER],
        chosen=[ANSWER],
        rejected=[ANSWER],
        score_chosen=1,
        score_rejected=0,
    )
    data = write_dataset(tmp_path / "data", {"train": [row]})
    with pytest.raises(DatasetKindError, match="cannot train kind 'dpo'"):
        get_backend("prime-rl").validate(
            TrainJob(kind="dpo", dataset=data, base_model="m", output_dir=tmp_path)
        )


def test_the_schema_is_prime_rls_own_at_a_recorded_commit(tmp_path):
    import re

    import tomli_w

    document = pinned_schema()
    assert re.fullmatch(r"[0-9a-f]{40}", document["commit"]) and document["describe"].startswith("v0.")
    assert {"rl", "sft"} <= set(document["schemas"])
    data = write_dataset(tmp_path / "data", {"train": rl_rows(1)})
    job = TrainJob(kind="rl", dataset=data, base_model="m", output_dir=tmp_path / "o", lora={"rank": 8})
    config = tomllib.loads(get_backend("prime-rl").prepare(job).artifact.read_text())
    config["trainer"]["model"]["lora"].pop("rank")  # upstream defaults the rank (a hand copy required it)
    check_prime_rl_toml("rl", tomli_w.dumps(config))
