"""trl-grpo: the RLM loop as GRPO's rollout, 2 real steps on CPU with a tiny random Qwen3."""

from __future__ import annotations

import json

import pytest

from optimizers.backends.base import TrainJob, get_backend
from optimizers.backends.rlm_rollout import Call, RLMRollout, stitch
from optimizers.backends.testing import build_tiny_qwen, tiny_lora_job, write_dataset
from optimizers.compile.schema import ChatMessage, RewardSpec, RLRow
from rlmkit.errors import ConfigError
from rlmkit.testing.server import ScriptedServer, is_root_request

SCORED: list[tuple[dict, object]] = []


def score(example, prediction) -> float:
    """The task scorer the rows name ("tests.training.backends.test_trl_grpo:score")."""
    SCORED.append((dict(example), prediction))
    if prediction.answer is None:  # a failed run: partial credit from its (random) trajectory, so the
        # group's rewards differ and GRPO has a non-zero advantage to learn from
        return (len(prediction.trajectory.model_dump_json()) % 97) / 97
    return float(prediction.answer == example.gold)


def numbers_input(row) -> dict:
    """Regenerates the RLM inputs from the row (what a task suite does for compiled rows)."""
    n = row.example["n"]
    return {"context": " ".join(str(i) for i in range(n)), "question": "What is the sum?"}


def rl_row(n: int) -> RLRow:
    prompt = [
        ChatMessage(role="system", content="REPL"),
        ChatMessage(role="user", content=f"sum of 0..{n - 1}"),
    ]
    return RLRow(
        id=f"r{n}",
        task_id=f"t{n}",
        prompt=prompt,
        answer=json.dumps(sum(range(n))),
        example={"n": n},
        reward=RewardSpec(scorer="tests.training.backends.test_trl_grpo:score"),
        meta={"signature": "context, question -> answer: int", "protocol": "submit"},
    )


def job_for(tmp_path, model, **update) -> TrainJob:
    data = update.pop("dataset", None) or write_dataset(tmp_path / "data", {"train": [rl_row(4), rl_row(5)]})
    fields = {
        "group_size": 2,
        "max_seq_len": 4000,
        "max_completion_tokens": 8,
        "max_turns": 2,
        "options": {
            "inputs_fn": "tests.training.backends.test_trl_grpo:numbers_input",
            "trainer": {"temperature": 1.0},
        },
    }
    fields.update(update)
    return tiny_lora_job("rl", data, model, tmp_path / "out", **fields)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_qwen(tmp_path_factory.mktemp("model") / "tiny-qwen3")


def test_two_grpo_steps_with_rlm_rollouts_save_a_loadable_adapter(tmp_path, tiny_model):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    result = get_backend("trl-grpo").run(job_for(tmp_path, tiny_model))
    assert result.status == "trained" and result.metrics["steps"] == 2
    # every rollout went through the RLM: at least one root turn; more than one means REPL feedback was
    # appended between turns (env_mask 0 tokens)
    assert result.metrics["rollout/turns"] >= 1
    history = json.loads((tmp_path / "out" / "log_history.json").read_text())
    # REPL feedback tokens were in the sequences but out of the loss: TRL counts only env_mask=1
    # tokens as completion length, and the policy writes at most 8 tokens per root call
    assert result.metrics["rollout/env_tokens"] > 0
    assert all(h["completions/max_length"] <= 8 * (2 + 1) for h in history if "completions/max_length" in h)
    assert [h["step"] for h in history if "reward" in h] == [1, 2]
    assert any(h.get("reward_std", 0) > 0 for h in history)  # rewards differed within a group
    loaded = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(str(tiny_model)), str(result.artifact)
    )
    lora_b = [p for name, p in loaded.named_parameters() if "lora_B" in name]
    assert lora_b and any(float(p.abs().sum()) > 0 for p in lora_b)  # starts at zero: the policy was updated


def test_rollout_scores_a_real_rlm_run_with_the_rows_scorer(tmp_path, tiny_model):
    SCORED.clear()
    job = job_for(tmp_path, tiny_model)
    rollout = RLMRollout(job, [rl_row(4)])

    def policy(body):
        assert is_root_request(body)  # no sub-calls in this script
        return "```repl\ntotal = sum(int(x) for x in context.split())\nSUBMIT(answer=total)\n```"

    with ScriptedServer(policy) as server:
        reward = rollout.run_and_score(rl_row(4), server.url)
    assert SCORED, "the scorer was not called"
    assert reward == 1.0, SCORED[-1][1].trajectory  # on failure, show what the RLM did
    example, prediction = SCORED[-1]
    assert example["gold"] == 6 and prediction.answer == 6


def test_stitch_masks_environment_tokens(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    first = [{"role": "user", "content": "count"}]
    text1 = tok.apply_chat_template(first, tokenize=False, add_generation_prompt=True)
    reply1 = tok("```repl\nprint(1)\n```", add_special_tokens=False).input_ids + [tok.eos_token_id]
    second = first + [
        {"role": "assistant", "content": "```repl\nprint(1)\n```"},
        {"role": "user", "content": "REPL output: 1"},
    ]
    text2 = tok.apply_chat_template(second, tokenize=False, add_generation_prompt=True)
    reply2 = tok("SUBMIT(answer=1)", add_special_tokens=False).input_ids + [tok.eos_token_id]
    calls = [Call(text1, tok(text1).input_ids, reply1), Call(text2, tok(text2).input_ids, reply2)]
    out = stitch(tok, calls, max_len=10_000)

    assert out.prompt_ids == tok(text1).input_ids and out.prefix_breaks == 0
    assert out.completion_ids[: len(reply1)] == reply1 and out.completion_ids[-len(reply2) :] == reply2
    env = [t for t, m in zip(out.completion_ids, out.env_mask) if m == 0]
    assert "REPL output: 1" in tok.decode(env) and sum(out.env_mask) == len(reply1) + len(reply2)
    assert tok.decode(out.prompt_ids + out.completion_ids, skip_special_tokens=False).startswith(text2)


def test_bad_rl_jobs(tmp_path, tiny_model):
    backend = get_backend("trl-grpo")
    with pytest.raises(ConfigError, match="multiple of group_size"):
        backend.validate(job_for(tmp_path, tiny_model, batch_size=3))
    with pytest.raises(ConfigError, match="options.inputs_fn"):  # compiled rows only describe their inputs
        backend.validate(job_for(tmp_path, tiny_model, options={}))
    with pytest.raises(ConfigError, match="sub_lm"):
        backend.validate(job_for(tmp_path, tiny_model, lora=None))
    bad = rl_row(3).model_copy(update={"reward": RewardSpec(scorer="tests.nowhere:score")})
    data = write_dataset(tmp_path / "bad", {"train": [bad]})
    with pytest.raises(ConfigError, match="tests.nowhere:score"):
        backend.validate(job_for(tmp_path, tiny_model, dataset=data))


def test_only_the_top_root_is_the_policy_a_child_rlm_asks_the_frozen_model(tmp_path, tiny_model):
    """Routing is by the model name the request carries: a child RLM's prompt names the REPL
    exactly like the root's, but its calls must not be trained (or stitched) as policy tokens."""
    from optimizers.backends.rlm_rollout import FROZEN_MODEL, POLICY_MODEL

    SCORED.clear()
    job = job_for(tmp_path, tiny_model)
    job.options["max_depth"] = 2  # rlm_query runs a child RLM
    rollout = RLMRollout(job, [rl_row(4)])
    models = []

    def respond(body):
        models.append(body["model"])
        if body["model"] == FROZEN_MODEL:  # the child RLM's root
            return "```repl\nSUBMIT(answer=str(sum(int(x) for x in context.split())))\n```"
        if not any(m["role"] == "assistant" for m in body["messages"]):
            return "```repl\nfound = rlm_query('What is the sum?', context)\nprint(found)\n```"
        return "```repl\nSUBMIT(answer=int(found))\n```"

    with ScriptedServer(respond) as server:
        reward = rollout.run_and_score(rl_row(4), server.url)
    assert models == [POLICY_MODEL, FROZEN_MODEL, POLICY_MODEL], SCORED[-1][1].trajectory.model_dump_json()[
        -3000:
    ]
    assert reward == 1.0, SCORED[-1][1].trajectory
