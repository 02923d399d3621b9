"""The RLM loop as a GRPO rollout: the policy being trained plays the root of a real ``rlmkit.RLM``.

The trainer's model is served on 127.0.0.1 as an OpenAI-compatible endpoint (the
``ScriptedServer`` with a responder that generates with the model), and an ordinary RLM runs
against it: its code runs in rlmkit's sandbox, its sub-calls go to a frozen sub-model, its
answer goes to the task's scorer. Every root call the server answers is recorded as token ids,
and the calls are stitched into one completion: the policy's own tokens (``env_mask`` 1, in
the loss) interleaved with what the environment appended in between - REPL output, the next
user turn - (``env_mask`` 0, out of the loss).

The frozen sub-model defaults to the base model itself with the LoRA adapter switched off, so
no second model is loaded; ``options.sub_lm`` (+ ``sub_api_base``) points sub-calls elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from optimizers.backends.base import TrainJob, load_object


@dataclass
class Call:
    prompt_text: str
    prompt_ids: list[int]
    completion_ids: list[int]


@dataclass
class Stitched:
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    prefix_breaks: int = 0  # calls whose prompt did not extend the previous one (history rewritten)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def stitch(tokenizer: Any, calls: list[Call], max_len: int) -> Stitched:
    """One completion from a run's root calls: model tokens (mask 1) and environment tokens (mask 0)."""
    first = calls[0]
    out = Stitched(first.prompt_ids, list(first.completion_ids), [1] * len(first.completion_ids))
    seen = first.prompt_text + tokenizer.decode(first.completion_ids, skip_special_tokens=False)
    for call in calls[1:]:
        cut = _common_prefix(seen, call.prompt_text)
        out.prefix_breaks += cut < len(seen)
        env_ids = tokenizer(call.prompt_text[cut:], add_special_tokens=False).input_ids
        out.completion_ids += env_ids + call.completion_ids
        out.env_mask += [0] * len(env_ids) + [1] * len(call.completion_ids)
        seen = call.prompt_text + tokenizer.decode(call.completion_ids, skip_special_tokens=False)
    room = max(1, max_len - len(out.prompt_ids))
    out.completion_ids, out.env_mask = out.completion_ids[:room], out.env_mask[:room]
    return out


@dataclass
class PolicyServer:
    """Generates with the trainer's model for root requests (recorded) and, unless a separate
    sub-model is configured, with the adapter disabled for sub-call requests (not recorded)."""

    trainer: Any
    max_new_tokens: int
    temperature: float = 1.0
    calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, body: dict) -> str:
        from rlmkit.testing.server import is_root_request

        root = is_root_request(body)
        with self._lock:  # one generate at a time: the model is not re-entrant
            call = self._generate(body["messages"], frozen=not root)
            if root:
                self.calls.append(call)
        return self.tokenizer.decode(call.completion_ids, skip_special_tokens=True)

    @property
    def tokenizer(self) -> Any:
        return self.trainer.processing_class

    def _generate(self, messages: list[dict], frozen: bool) -> Call:
        import torch

        messages = [{"role": m["role"], "content": _text(m.get("content"))} for m in messages]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        adapter_off = (
            model.disable_adapter()
            if frozen and hasattr(model, "disable_adapter")
            else contextlib.nullcontext()
        )
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), adapter_off:
                out = model.generate(
                    ids.to(model.device),
                    attention_mask=torch.ones_like(ids).to(model.device),
                    max_new_tokens=self.max_new_tokens,
                    do_sample=self.temperature > 0,
                    temperature=self.temperature or None,
                    pad_token_id=self.tokenizer.pad_token_id,
                    eos_token_id=self.tokenizer.eos_token_id,
                )
        finally:
            model.train(was_training)
        generated = out[0, ids.shape[1] :].tolist()
        if self.tokenizer.eos_token_id in generated:  # drop padding after the end of the turn
            generated = generated[: generated.index(self.tokenizer.eos_token_id) + 1]
        return Call(text, ids[0].tolist(), generated)


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def prompt_key(prompt: Any) -> str:
    """How a prompt handed to ``rollout_func`` is matched back to its dataset row."""
    return json.dumps(prompt, sort_keys=True)


class RLMRollout:
    """``rollout_func(prompts, trainer)`` for ``trl.GRPOTrainer``: one RLM run per prompt entry
    (TRL's sampler already repeats each prompt ``group_size`` times)."""

    def __init__(self, job: TrainJob, rows: list[Any]):
        self.job = job
        self.rows = {prompt_key([m.model_dump(exclude_none=True) for m in r.prompt]): r for r in rows}
        options = job.options
        self.inputs_fn = load_object(options["inputs_fn"]) if options.get("inputs_fn") else None
        self.example_fn = load_object(options["example_fn"]) if options.get("example_fn") else None
        self.scorers: dict[str, Any] = {}
        self.metrics: dict[str, list[float]] = {
            "rollout/turns": [],
            "rollout/env_tokens": [],
            "rollout/prefix_breaks": [],
            "rollout/failed": [],
        }

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from rlmkit.testing.server import ScriptedServer

        policy = PolicyServer(trainer, self.job.max_completion_tokens, float(trainer.args.temperature))
        result: dict[str, list[Any]] = {
            "prompt_ids": [],
            "completion_ids": [],
            "env_mask": [],
            "rlm_reward": [],
        }
        with ScriptedServer(policy.respond) as server:
            for prompt in prompts:
                policy.calls = []
                reward = self._play(self.rows[prompt_key(prompt)], server.url)
                if not policy.calls:  # the run failed before the policy spoke: an empty, zero-reward turn
                    eos = trainer.processing_class.eos_token_id
                    text = trainer.processing_class.apply_chat_template(
                        prompt, tokenize=False, add_generation_prompt=True
                    )
                    ids = trainer.processing_class(text, add_special_tokens=False).input_ids
                    policy.calls = [Call(text, ids, [eos])]
                stitched = stitch(trainer.processing_class, policy.calls, self.job.max_seq_len)
                result["prompt_ids"].append(stitched.prompt_ids)
                result["completion_ids"].append(stitched.completion_ids)
                result["env_mask"].append(stitched.env_mask)
                result["rlm_reward"].append(reward)
                self.metrics["rollout/turns"].append(float(len(policy.calls)))
                self.metrics["rollout/prefix_breaks"].append(float(stitched.prefix_breaks))
                self.metrics["rollout/env_tokens"].append(
                    float(len(stitched.env_mask) - sum(stitched.env_mask))
                )
        result["logprobs"] = (
            None  # no importance-sampling correction: rollouts come from the model being trained
        )
        return result

    def _play(self, row: Any, url: str) -> float:
        """Run the RLM on one row and score its prediction with the row's scorer."""
        import rlmkit
        from rlmkit.errors import RunError

        options = self.job.options
        policy_lm = rlmkit.LM("openai/policy", api_base=url, api_key="local", cache=False, num_retries=0)
        sub_lm = policy_lm
        if options.get("sub_lm"):
            sub_lm = rlmkit.LM(options["sub_lm"], api_base=options.get("sub_api_base"), cache=False)
        rlm = rlmkit.RLM(
            row.meta.get("signature") or options.get("signature", "context, question -> answer"),
            lm=policy_lm,
            sub_lm=sub_lm,
            protocol=row.meta.get("protocol") or options.get("protocol", "submit"),
            max_iterations=self.job.max_turns,
            sandbox=options.get("sandbox", "process"),
            cell_timeout=float(options.get("cell_timeout", 30.0)),
        )
        example = self.example_fn(row) if self.example_fn else RowExample.of(row)
        inputs = self.inputs_fn(row) if self.inputs_fn else dict(example.inputs)
        try:
            prediction = rlm(**inputs)
            self.metrics["rollout/failed"].append(0.0)
        except RunError as exc:
            # Still scored: every output None plus the partial trajectory, so a scorer may give
            # partial credit (most give 0); the group's other runs decide the advantage.
            import dspy

            self.metrics["rollout/failed"].append(1.0)
            empty = dict.fromkeys(rlm.signature.output_fields)
            prediction = dspy.Prediction(**empty, trajectory=exc.trajectory)
        scorer = self.scorers.setdefault(row.reward.scorer, load_object(row.reward.scorer))
        return float(scorer(example, prediction))


class RowExample(dict):
    """What a scorer gets when no ``example_fn`` is set: the row's example fields (as keys and
    attributes), ``gold`` = the parsed answer, and ``inputs``/``meta``/``knobs`` when present."""

    __getattr__ = dict.get

    @classmethod
    def of(cls, row: Any) -> RowExample:
        example = cls(row.example)
        example.setdefault("meta", {})
        example.setdefault("knobs", dict(row.reward.knobs))
        example["gold"] = json.loads(row.answer)
        inputs = example.get("inputs")
        # compiled rows describe inputs (name, size, preview) without their bodies; only real values pass through
        example["inputs"] = inputs if isinstance(inputs, dict) else {}
        return example


def rlm_reward(prompts: list[Any], completions: list[Any], rlm_reward: list[float], **_: Any) -> list[float]:
    """GRPO reward function: the score each RLM run already earned in the rollout."""
    return list(rlm_reward)
