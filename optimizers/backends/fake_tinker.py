"""A fake ``tinker.ServiceClient`` that checks every call the Tinker backend makes.

It runs no model: it validates what a real Tinker service would reject (datum shapes that do
not line up, an unknown loss, an optimizer step without gradients, sampling before weights were
saved) and answers with plausible values, so the backend's loop is tested without an API key.

    fake = FakeServiceClient(tokenizer)
    TinkerBackend(service_client=fake).run(job)
    fake.calls  # [("create_lora_training_client", {...}), ("forward_backward", {...}), ...]
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LOSS_INPUTS = {
    "cross_entropy": ("target_tokens", "weights"),
    "importance_sampling": ("target_tokens", "logprobs", "advantages"),
    "ppo": ("target_tokens", "logprobs", "advantages"),
}


class FakeTinkerError(AssertionError):
    """A call a real Tinker service would have refused."""


@dataclass
class Done:
    """An already-finished future (Tinker calls return futures with ``.result()``)."""

    value: Any

    def result(self, timeout: float | None = None) -> Any:
        return self.value


def _ints(value: Any) -> list[Any]:
    return value.tolist() if hasattr(value, "tolist") else list(value)


@dataclass
class FakeForwardBackward:
    loss_fn_outputs: list[dict[str, list[float]]]
    metrics: dict[str, float]


@dataclass
class FakeSaved:
    path: str


class FakeSamplingClient:
    def __init__(self, owner: FakeServiceClient, name: str):
        self.owner, self.name = owner, name

    def sample(self, prompt: Any, num_samples: int, sampling_params: Any, **_: Any) -> Done:
        from tinker import types  # answers are the SDK's own response types

        tokens = _ints(prompt.to_ints())
        if not tokens or num_samples < 1:
            raise FakeTinkerError("sample needs a non-empty prompt and num_samples >= 1")
        max_tokens = getattr(sampling_params, "max_tokens", None) or 16
        self.owner.calls.append(
            ("sample", {"prompt_len": len(tokens), "num_samples": num_samples, "weights": self.name})
        )
        vocab = self.owner.vocab_size
        sequences = []
        for _ in range(num_samples):
            n = self.owner.rng.randint(1, max_tokens)
            out = [self.owner.rng.randrange(vocab) for _ in range(n)]
            logprobs = None if self.owner.omit_logprobs else [self._logprob() for _ in out]
            sequences.append(
                types.SampledSequence(
                    stop_reason="stop",
                    sequence_id=f"seq-{len(self.owner.calls)}-{len(sequences)}",
                    tokens_np=np.asarray(out, dtype=np.int32),
                    logprobs_np=None if logprobs is None else np.asarray(logprobs, dtype=np.float32),
                )
            )
        return Done(types.SampleResponse(sequences=sequences))

    def compute_logprobs(self, prompt: Any, prompt_logprobs_last_n: int | None = None) -> Done:
        """As the SDK: one entry per prompt token, None where nothing was scored (the first)."""
        tokens = _ints(prompt.to_ints())
        self.owner.calls.append(("compute_logprobs", {"prompt_len": len(tokens), "weights": self.name}))
        scored = len(tokens) - 1 if prompt_logprobs_last_n is None else prompt_logprobs_last_n
        return Done([None] * (len(tokens) - scored) + [self._logprob() for _ in range(scored)])

    def _logprob(self) -> float:
        return -self.owner.rng.random() * 3 - 1e-3


@dataclass
class FakeTrainingClient:
    owner: FakeServiceClient
    base_model: str
    rank: int
    pending_grads: int = 0
    steps: int = 0
    seen_datums: list[Any] = field(default_factory=list)

    def get_tokenizer(self) -> Any:
        return self.owner.tokenizer

    def forward_backward(self, data: list[Any], loss_fn: str, loss_fn_config: Any = None) -> Done:
        if loss_fn not in LOSS_INPUTS:
            raise FakeTinkerError(f"unknown loss_fn {loss_fn!r}")
        if not data:
            raise FakeTinkerError("forward_backward needs at least one datum")
        outputs = []
        loss, weight = 0.0, 0.0
        for n, datum in enumerate(data):
            length = datum.model_input.length
            inputs = datum.loss_fn_inputs
            missing = [key for key in LOSS_INPUTS[loss_fn] if key not in inputs]
            if missing:
                raise FakeTinkerError(f"datum {n}: {loss_fn} needs {missing}")
            for key in LOSS_INPUTS[loss_fn]:
                if len(_ints(inputs[key])) != length:
                    raise FakeTinkerError(
                        f"datum {n}: {key} has {len(_ints(inputs[key]))} values for {length} tokens"
                    )
            targets = _ints(inputs["target_tokens"])
            if any(not 0 <= t < self.owner.vocab_size for t in targets):
                raise FakeTinkerError(f"datum {n}: target token outside the vocabulary")
            logprobs = [math.log(1 / self.owner.vocab_size)] * length
            weights = _ints(inputs["weights"]) if "weights" in inputs else [1.0] * length
            loss -= sum(lp * w for lp, w in zip(logprobs, weights))
            weight += sum(weights)
            outputs.append({"logprobs": logprobs})
        self.pending_grads += 1
        self.seen_datums.extend(data)
        self.owner.calls.append(("forward_backward", {"loss_fn": loss_fn, "datums": len(data)}))
        return Done(FakeForwardBackward(outputs, {"loss:sum": loss, "weight:sum": weight}))

    def optim_step(self, adam_params: Any = None, **kwargs: Any) -> Done:
        adam_params = adam_params or kwargs.get("adam_params")
        if adam_params is None or not adam_params.learning_rate > 0:
            raise FakeTinkerError("optim_step needs AdamParams with a positive learning_rate")
        if not self.pending_grads:
            raise FakeTinkerError("optim_step without a forward_backward since the last step")
        self.pending_grads = 0
        self.steps += 1
        self.owner.calls.append(("optim_step", {"learning_rate": adam_params.learning_rate}))
        return Done({"metrics": {}})

    def save_weights_for_sampler(self, name: str, **_: Any) -> Done:
        self.owner.calls.append(("save_weights_for_sampler", {"name": name}))
        return Done(FakeSaved(f"tinker://fake/{self.base_model}/{name}"))

    def save_weights_and_get_sampling_client(self, name: str | None = None, **_: Any) -> Done:
        self.owner.calls.append(
            ("save_weights_and_get_sampling_client", {"name": name, "after_steps": self.steps})
        )
        return Done(FakeSamplingClient(self.owner, name or f"step-{self.steps}"))


class FakeServiceClient:
    """Stands in for ``tinker.ServiceClient()``; ``tokenizer`` is what ``get_tokenizer`` returns."""

    def __init__(self, tokenizer: Any, seed: int = 0, omit_logprobs: bool = False):
        self.tokenizer = tokenizer
        self.omit_logprobs = omit_logprobs  # the real SDK may answer a sample without logprobs
        self.vocab_size = len(tokenizer)
        self.rng = random.Random(seed)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.training_clients: list[FakeTrainingClient] = []

    def create_lora_training_client(self, base_model: str, rank: int = 32, **kwargs: Any) -> Done:
        if rank < 1:
            raise FakeTinkerError("rank must be >= 1")
        self.calls.append(("create_lora_training_client", {"base_model": base_model, "rank": rank, **kwargs}))
        client = FakeTrainingClient(self, base_model, rank)
        self.training_clients.append(client)
        return Done(client)

    def create_sampling_client(self, base_model: str, **_: Any) -> Done:
        self.calls.append(("create_sampling_client", {"base_model": base_model}))
        return Done(FakeSamplingClient(self, f"base:{base_model}"))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]
