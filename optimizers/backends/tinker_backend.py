"""tinker: LoRA training on Thinking Machines' Tinker service (pinned against tinker 0.38).

The training loop runs here; the model runs on Tinker. Datums are built from canonical rows
with the tokenizer Tinker serves for the base model:
- SFT: ``model_input`` = prompt + completion tokens but the last, ``target_tokens`` = the same
  shifted by one, ``weights`` 0 on the prompt and 1 on the completion; loss ``cross_entropy``.
- RL: each step saves the weights for sampling and plays every prompt ``group_size`` times
  through a real ``rlmkit.RLM`` whose root samples from Tinker (``rlm_rollout.RLMPlayer``):
  code runs in rlmkit's sandbox, sub-calls go to the frozen base model (a Tinker sampling
  client of ``base_model``, or ``options.sub_lm``), and the row's scorer grades the prediction.
  Datums carry the sampler's ``logprobs`` and group-centred ``advantages`` on the policy's own
  tokens; REPL output tokens stay in the input with advantage 0 (loss ``importance_sampling``).
  Groups whose rewards are all equal carry no signal and are skipped.

Live runs need ``TINKER_API_KEY``; tests pass ``service_client=FakeServiceClient(tokenizer)``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, ClassVar

from optimizers.backends.base import (
    Backend,
    Dependency,
    TrainJob,
    TrainResult,
    canonical,
    write_splits,
)
from optimizers.backends.options import RolloutOptions
from rlmkit.errors import ConfigError


def _messages(messages: list[Any]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def _list(value: Any) -> list[Any]:
    return value.tolist() if hasattr(value, "tolist") else list(value)


def _result(future: Any) -> Any:
    return future.result() if hasattr(future, "result") else future


def prompt_tokens(tokenizer: Any, messages: list[Any]) -> list[int]:
    text = tokenizer.apply_chat_template(_messages(messages), tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False).input_ids


def sft_datum(tokenizer: Any, row: Any, max_len: int) -> Any:
    from tinker import types

    prompt = prompt_tokens(tokenizer, row.prompt)
    # The target is what the policy wrote after the generation prompt: each assistant message's
    # text and its end-of-turn token. (Re-rendering the conversation would add template extras,
    # e.g. Qwen3's empty <think> block, that the policy never produced.)
    completion: list[int] = []
    for message in row.completion:
        completion += tokenizer(message.content, add_special_tokens=False).input_ids + [
            tokenizer.eos_token_id
        ]
    tokens = (prompt + completion)[:max_len]
    weights = ([0.0] * len(prompt) + [1.0] * len(completion))[:max_len]
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights[1:]},
    )


def rl_datum(stitched: Any, advantage: float) -> Any:
    """A played RLM run as an importance-sampling datum: environment tokens get advantage 0."""
    from tinker import types

    tokens = stitched.prompt_ids + stitched.completion_ids
    n_prompt = len(stitched.prompt_ids) - 1  # targets start at the first completion token
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tokens[1:],
            "logprobs": [0.0] * n_prompt + stitched.logprobs,
            "advantages": [0.0] * n_prompt + [advantage * m for m in stitched.env_mask],
        },
    )


def tinker_generator(policy: Any, frozen: Any, params: Any) -> Any:
    """``rlm_rollout.Generate`` over Tinker sampling clients (policy weights / frozen base)."""
    from tinker import types

    def generate(ids: list[int], use_frozen: bool) -> tuple[list[int], list[float]]:
        sampler = frozen if use_frozen else policy
        sequence = _result(sampler.sample(types.ModelInput.from_ints(ids), 1, params)).sequences[0]
        tokens = _list(sequence.tokens)
        logprobs = sequence.logprobs
        if logprobs is None and tokens:
            # The SDK may answer without per-token logprobs; importance sampling needs the
            # sampler's own, so score the sampled tokens on the same weights.
            scored = _result(sampler.compute_logprobs(types.ModelInput.from_ints(ids + tokens), len(tokens)))
            logprobs = list(scored)[-len(tokens) :]
        return tokens, _list(logprobs or [])

    return generate


@dataclass(frozen=True)
class TinkerOptions(RolloutOptions):
    """Tinker's options: how an RL row becomes an RLM run (an SFT job takes none of them)."""


class TinkerBackend(Backend):
    name = "tinker"
    requires = (Dependency("tinker", "tinker"),)
    row_kinds: ClassVar = {"sft": ("sft",), "rl": ("rl",)}
    options_type = TinkerOptions

    def __init__(self, service_client: Any = None):
        self.service_client = service_client

    def check(self, job: TrainJob, splits: dict[str, list[Any]]) -> None:
        if job.lora is None:
            raise ConfigError("Tinker trains LoRA adapters only: set [lora]")
        if job.kind == "rl":
            if job.batch_size % job.group_size:
                raise ConfigError(
                    f"batch_size ({job.batch_size}) must be a multiple of group_size ({job.group_size})"
                )
            from optimizers.backends.rlm_rollout import check_playable

            check_playable(job, splits["train"])

    def prepare(self, job: TrainJob) -> TrainResult:
        validated = self.validate(job)
        folder = job.output_dir / "tinker"
        files = write_splits(folder, {"train": [canonical(row) for row in validated.splits["train"]]})
        return self.exported(validated, folder, files)

    def client(self) -> Any:
        if self.service_client is not None:
            return self.service_client
        if not os.environ.get("TINKER_API_KEY"):
            raise ConfigError("the tinker backend needs TINKER_API_KEY in the environment (or use dry_run)")
        import tinker

        return tinker.ServiceClient()

    def run(self, job: TrainJob, dry_run: bool = False) -> TrainResult:
        prepared = self.prepare(job)
        if dry_run:
            return prepared
        from optimizers.backends.base import read_rows

        rows = read_rows(prepared.files[0])
        service = self.client()
        training = _result(
            service.create_lora_training_client(base_model=job.base_model, rank=job.lora.rank, seed=job.seed)
        )
        tokenizer = training.get_tokenizer()
        history = (
            self._train_sft(job, training, tokenizer, rows)
            if job.kind == "sft"
            else self._train_rl(job, training, tokenizer, rows)
        )
        saved = _result(training.save_weights_for_sampler(name=f"rlmkit-{job.output_dir.name}"))
        (job.output_dir / "tinker" / "history.json").write_text(json.dumps(history))
        metrics: dict[str, float] = {"steps": float(len(history))}
        for key in ("loss", "reward"):
            values = [h[key] for h in history if key in h]
            if values:
                metrics[f"first_{key}"], metrics[f"last_{key}"] = values[0], values[-1]
        return TrainResult(
            backend=self.name,
            status="trained",
            artifact=None,
            artifact_kind="remote_checkpoint",
            metrics=metrics,
            files=prepared.files,
            message=f"sampler weights: {saved.path}",
        )

    def _step(self, job: TrainJob, training: Any, datums: list[Any], loss_fn: str) -> Any:
        from tinker import types

        backward = training.forward_backward(datums, loss_fn)
        step = training.optim_step(types.AdamParams(learning_rate=job.lr))
        out = _result(backward)
        _result(step)
        return out

    def _train_sft(
        self, job: TrainJob, training: Any, tokenizer: Any, rows: list[Any]
    ) -> list[dict[str, float]]:
        history = []
        for step in range(job.steps):
            batch = [rows[(step * job.batch_size + i) % len(rows)] for i in range(job.batch_size)]
            datums = [sft_datum(tokenizer, row, job.max_seq_len) for row in batch]
            out = self._step(job, training, datums, "cross_entropy")
            loss = -sum(
                sum(lp * w for lp, w in zip(_list(o["logprobs"]), _list(d.loss_fn_inputs["weights"])))
                for o, d in zip(out.loss_fn_outputs, datums)
            )
            total = sum(sum(_list(d.loss_fn_inputs["weights"])) for d in datums)
            history.append({"step": step + 1, "loss": loss / max(total, 1.0)})
        return history

    def _train_rl(
        self, job: TrainJob, training: Any, tokenizer: Any, rows: list[Any]
    ) -> list[dict[str, float]]:
        from tinker import types

        from optimizers.backends.rlm_rollout import PolicyServer, RLMPlayer
        from rlmkit.models.chat_server import ChatServer

        player = RLMPlayer(job)
        params = types.SamplingParams(
            max_tokens=job.max_completion_tokens, temperature=1.0, stop=[tokenizer.eos_token_id]
        )
        frozen = _result(self.client().create_sampling_client(base_model=job.base_model))
        prompts_per_step = job.batch_size // job.group_size
        history = []
        for step in range(job.steps):
            sampler = _result(training.save_weights_and_get_sampling_client(name=f"step-{step}"))
            policy = PolicyServer(tokenizer, tinker_generator(sampler, frozen, params))
            datums, rewards = [], []
            with ChatServer(policy.respond) as server:
                for i in range(prompts_per_step):
                    row = rows[(step * prompts_per_step + i) % len(rows)]
                    group = [player.play(row, policy, server.url) for _ in range(job.group_size)]
                    scores = [reward for _, reward in group]
                    rewards += scores
                    if max(scores) == min(scores):
                        continue  # no advantage anywhere in the group
                    mean = sum(scores) / len(scores)
                    datums += [rl_datum(stitched, reward - mean) for stitched, reward in group]
            if datums:
                self._step(job, training, datums, "importance_sampling")
            history.append(
                {
                    "step": step + 1,
                    "reward": sum(rewards) / len(rewards),
                    "datums": float(len(datums)),
                    **player.summary(),
                }
            )
        return history
