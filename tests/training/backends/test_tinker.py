"""tinker: the training loop against a fake service client that checks every call."""

from __future__ import annotations

import pytest

from optimizers.backends.base import DatasetKindError, MissingDependencyError, TrainJob, get_backend
from optimizers.backends.fake_tinker import FakeServiceClient, FakeTinkerError
from optimizers.backends.testing import build_tiny_qwen, write_dataset
from optimizers.backends.tinker_backend import TinkerBackend, sft_datum
from optimizers.compile.schema import ChatMessage, DPORow, RewardSpec, RLRow, SFTRow
from rlmkit.errors import ConfigError

USER = ChatMessage(role="user", content="count the errors")


def sft_row(i: int) -> SFTRow:
    completion = [ChatMessage(role="assistant", content=f"```repl\nSUBMIT(answer={i})\n```")]
    return SFTRow(
        id=f"s{i}", task_id=f"t{i}", prompt=[USER], completion=completion, messages=[USER, *completion]
    )


def varied_score(example, prediction) -> float:
    """The fake sampler writes random tokens, so every RLM run fails; score the partial
    trajectory so rewards differ within a group (what GRPO needs to learn anything)."""
    assert prediction.answer is None and prediction.trajectory.turns
    return (len(prediction.trajectory.model_dump_json()) % 97) / 97


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(build_tiny_qwen(tmp_path_factory.mktemp("m") / "tiny")))


def test_sft_datum_weights_only_the_completion(tokenizer):
    datum = sft_datum(tokenizer, sft_row(7), max_len=512)
    targets = datum.loss_fn_inputs["target_tokens"].tolist()
    weights = datum.loss_fn_inputs["weights"].tolist()
    assert len(targets) == len(weights) == datum.model_input.length
    learned = tokenizer.decode([t for t, w in zip(targets, weights) if w == 1.0])
    assert learned == "```repl\nSUBMIT(answer=7)\n```<|im_end|>"
    assert "count the errors" not in learned


def test_sft_loop_calls_forward_backward_then_optim_step(tmp_path, tokenizer):
    data = write_dataset(tmp_path / "d", {"train": [sft_row(i) for i in range(3)]})
    job = TrainJob(
        kind="sft",
        dataset=data,
        base_model="Qwen/Qwen3-8B",
        output_dir=tmp_path / "o",
        steps=3,
        batch_size=2,
        lr=2e-4,
        lora={"rank": 8},
    )
    fake = FakeServiceClient(tokenizer)
    result = get_backend("tinker", service_client=fake).run(job)
    assert fake.names() == ["create_lora_training_client"] + ["forward_backward", "optim_step"] * 3 + [
        "save_weights_for_sampler"
    ]
    assert fake.calls[0][1]["rank"] == 8 and fake.calls[0][1]["base_model"] == "Qwen/Qwen3-8B"
    assert {c[1]["learning_rate"] for c in fake.calls if c[0] == "optim_step"} == {2e-4}
    assert result.status == "trained" and result.metrics["steps"] == 3 and result.metrics["first_loss"] > 0
    assert "tinker://fake/" in result.message


@pytest.mark.parametrize("omit_logprobs", [False, True], ids=["sampled-logprobs", "logprobs-none"])
def test_rl_plays_the_rlm_loop_through_tinker_sampling(tmp_path, tokenizer, omit_logprobs):
    rows = [
        RLRow(
            id=f"r{i}",
            task_id=f"t{i}",
            prompt=[USER],
            answer="3",
            example={"inputs": {"context": "1 2"}},
            reward=RewardSpec(scorer="tests.training.backends.test_tinker:varied_score"),
            meta={"signature": "context -> answer: int", "protocol": "submit"},
        )
        for i in range(2)
    ]
    data = write_dataset(tmp_path / "d", {"train": rows})
    job = TrainJob(
        kind="rl",
        dataset=data,
        base_model="Qwen/Qwen3-8B",
        output_dir=tmp_path / "o",
        steps=2,
        batch_size=2,
        group_size=2,
        max_completion_tokens=12,
        max_turns=2,
    )
    fake = FakeServiceClient(tokenizer, seed=1, omit_logprobs=omit_logprobs)
    result = TinkerBackend(service_client=fake).run(job)
    # a sample answered without logprobs is scored on the same weights, never trained on zeros
    assert ("compute_logprobs" in fake.names()) == omit_logprobs
    names = fake.names()
    assert names.count("create_sampling_client") == 1  # the frozen base model, for sub-calls
    assert names.count("save_weights_and_get_sampling_client") == 2 and names.count("optim_step") == 2
    # sampling for step 2 uses the weights after step 1's optimizer step
    assert [c[1]["after_steps"] for c in fake.calls if c[0] == "save_weights_and_get_sampling_client"] == [
        0,
        1,
    ]
    # 4 RLM runs, each at least 2 root turns (max_turns=2), each turn one sample call on the policy weights
    assert len([c for c in fake.calls if c[0] == "sample" and c[1]["weights"].startswith("step-")]) >= 8
    datums = fake.training_clients[0].seen_datums
    assert len(datums) == 4
    per_sample = [max(d.loss_fn_inputs["advantages"].tolist(), key=abs) for d in datums]
    assert any(per_sample)
    for start in range(0, len(per_sample), 2):  # group-centred advantages sum to zero per group
        assert abs(sum(per_sample[start : start + 2])) < 1e-4
    # REPL feedback sits between the policy's turns with advantage 0 and logprob 0
    advantages = datums[0].loss_fn_inputs["advantages"].tolist()
    logprobs = datums[0].loss_fn_inputs["logprobs"].tolist()
    trained = [i for i, a in enumerate(advantages) if a != 0.0]
    gap = [i for i in range(trained[0], trained[-1]) if advantages[i] == 0.0]
    assert gap and all(logprobs[i] == 0.0 for i in gap)
    assert all(logprobs[i] < 0 for i in trained)
    assert result.metrics["steps"] == 2 and result.metrics["first_reward"] > 0


def test_fake_refuses_misaligned_datums(tokenizer):
    from tinker import types

    fake = FakeServiceClient(tokenizer)
    client = fake.create_lora_training_client("m", 4).result()
    bad = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={"target_tokens": [2, 3], "weights": [1.0, 1.0]},
    )
    with pytest.raises(FakeTinkerError, match="target_tokens has 2 values for 3 tokens"):
        client.forward_backward([bad], "cross_entropy")
    with pytest.raises(FakeTinkerError, match="without a forward_backward"):
        client.optim_step(types.AdamParams(learning_rate=1e-4))


def test_bad_tinker_jobs(tmp_path, monkeypatch):
    data = write_dataset(tmp_path / "d", {"train": [sft_row(1)]})
    job = TrainJob(kind="sft", dataset=data, base_model="m", output_dir=tmp_path / "o")
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="TINKER_API_KEY"):
        get_backend("tinker").run(job)
    with pytest.raises(ConfigError, match="LoRA"):
        get_backend("tinker").validate(job.model_copy(update={"lora": None}))
    dpo = DPORow(
        id="d",
        task_id="t",
        prompt=[USER],
        chosen=sft_row(1).completion,
        rejected=sft_row(2).completion,
        score_chosen=1,
        score_rejected=0,
    )
    with pytest.raises(DatasetKindError):
        get_backend("tinker").validate(
            job.model_copy(update={"kind": "dpo", "dataset": write_dataset(tmp_path / "p", {"train": [dpo]})})
        )
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tinker" else real(name, *a)
    )
    with pytest.raises(MissingDependencyError, match=r"pip install -e '\.\[tinker\]'"):
        get_backend("tinker").validate(job)
