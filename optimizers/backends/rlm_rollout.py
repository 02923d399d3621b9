"""The RLM loop as a GRPO rollout: the policy being trained plays the root of a real ``rlmkit.RLM``.

The trainer's model is served on 127.0.0.1 as an OpenAI-compatible endpoint (a
``rlmkit.models.chat_server.ChatServer`` whose responder generates with the model), and an ordinary RLM runs
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from optimizers.backends.base import TrainJob
from optimizers.backends.options import RolloutOptions
from rlmkit.loading import load


@dataclass
class Call:
    prompt_text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None = None  # the sampler's, one per completion token, when it reports them


@dataclass
class Stitched:
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float] = field(default_factory=list)  # sampler logprobs; 0.0 on environment tokens
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
    out.logprobs = list(first.logprobs or [0.0] * len(first.completion_ids))
    seen = first.prompt_text + tokenizer.decode(first.completion_ids, skip_special_tokens=False)
    for call in calls[1:]:
        cut = _common_prefix(seen, call.prompt_text)
        out.prefix_breaks += cut < len(seen)
        env_ids = tokenizer(call.prompt_text[cut:], add_special_tokens=False).input_ids
        out.completion_ids += env_ids + call.completion_ids
        out.env_mask += [0] * len(env_ids) + [1] * len(call.completion_ids)
        out.logprobs += [0.0] * len(env_ids) + list(call.logprobs or [0.0] * len(call.completion_ids))
        seen = call.prompt_text + tokenizer.decode(call.completion_ids, skip_special_tokens=False)
    room = max(1, max_len - len(out.prompt_ids))
    out.completion_ids, out.env_mask, out.logprobs = (
        out.completion_ids[:room],
        out.env_mask[:room],
        out.logprobs[:room],
    )
    return out


POLICY_MODEL = "rlmkit-policy"  # the model name a rollout's root LM sends: answered by the policy, recorded
FROZEN_MODEL = "rlmkit-frozen"  # sub-calls and child RLMs: answered with the adapter off, not recorded

Generate = Callable[[list[int], bool], tuple[list[int], "list[float] | None"]]
"""(prompt token ids, frozen) -> (completion token ids ending in end-of-turn, their logprobs or None)."""


@dataclass
class PolicyServer:
    """Answers the RLM's OpenAI-style requests with ``generate``: requests for ``POLICY_MODEL`` with
    the policy (recorded as token ids), any other model (sub-calls, child RLMs) with the frozen model."""

    tokenizer: Any
    generate: Generate
    calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, body: dict) -> str:
        # the model name is the marker: the rollout's root LM asks for POLICY_MODEL, its sub-calls
        # and child RLMs for FROZEN_MODEL (a system prompt's words say nothing about who is asking)
        root = body.get("model") == POLICY_MODEL
        messages = [{"role": m["role"], "content": _text(m.get("content"))} for m in body["messages"]]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer(text, add_special_tokens=False).input_ids
        with self._lock:  # one generation at a time: a model is not re-entrant
            completion, logprobs = self.generate(ids, not root)
        if root:
            self.calls.append(Call(text, ids, completion, logprobs))
        return self.tokenizer.decode(completion, skip_special_tokens=True)


def hf_generator(trainer: Any, max_new_tokens: int, temperature: float) -> Generate:
    """Sample from the model a TRL trainer is training; ``frozen`` switches its LoRA adapter off."""

    def generate(ids: list[int], frozen: bool) -> tuple[list[int], None]:
        import torch

        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        adapter_off = (
            model.disable_adapter()
            if frozen and hasattr(model, "disable_adapter")
            else contextlib.nullcontext()
        )
        prompt = torch.tensor([ids], device=model.device)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), adapter_off:
                out = model.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    max_new_tokens=max_new_tokens,
                    do_sample=temperature > 0,
                    temperature=temperature or None,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
        finally:
            model.train(was_training)
        generated = out[0, len(ids) :].tolist()
        if tokenizer.eos_token_id in generated:  # drop padding after the end of the turn
            generated = generated[: generated.index(tokenizer.eos_token_id) + 1]
        return generated, None

    return generate


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def prompt_key(prompt: Any) -> str:
    """How a prompt handed to ``rollout_func`` is matched back to its dataset row."""
    return json.dumps(prompt, sort_keys=True)


def check_playable(job: TrainJob, rows: list[Any]) -> None:
    """Fail before training when rows cannot become RLM runs: compiled rows describe their
    inputs (name, size, preview) instead of carrying them, so a task must regenerate them."""
    from rlmkit.errors import ConfigError

    options = RolloutOptions.part(job.options)
    for spec in (options.inputs_fn, options.example_fn):
        if spec:
            load(spec)
    if not (options.inputs_fn or options.example_fn):
        for row in rows:
            if not isinstance(row.example.get("inputs"), dict):
                raise ConfigError(
                    f"row {row.id} carries no RLM inputs (compiled rows only describe them): set "
                    "options.inputs_fn = 'module:function' (row -> inputs dict)"
                )
    for spec in {row.reward.scorer for row in rows}:
        load(spec)  # a scorer that does not import fails now, not after the first rollout


class RLMPlayer:
    """Plays canonical RL rows with a real ``rlmkit.RLM`` whose root is a ``PolicyServer``.

    Engine-agnostic: TRL (``RLMRollout``) and Tinker give it their own ``generate``.
    """

    def __init__(self, job: TrainJob):
        self.job = job
        self.scorers: dict[str, Any] = {}
        self.metrics: dict[str, list[float]] = {
            "rollout/turns": [],
            "rollout/env_tokens": [],
            "rollout/prefix_breaks": [],
            "rollout/failed": [],
        }

    def play(self, row: Any, policy: PolicyServer, url: str) -> tuple[Stitched, float]:
        """One RLM run on ``row`` through ``policy`` (served at ``url``): its tokens and reward."""
        policy.calls = []
        reward = self.run_and_score(row, url)
        if not policy.calls:  # the run failed before the policy spoke: an empty, zero-advantage turn
            messages = [{"role": m.role, "content": m.content} for m in row.prompt]
            text = policy.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            ids = policy.tokenizer(text, add_special_tokens=False).input_ids
            policy.calls = [Call(text, ids, [policy.tokenizer.eos_token_id])]
        stitched = stitch(policy.tokenizer, policy.calls, self.job.max_seq_len)
        self.metrics["rollout/turns"].append(float(len(policy.calls)))
        self.metrics["rollout/prefix_breaks"].append(float(stitched.prefix_breaks))
        self.metrics["rollout/env_tokens"].append(float(len(stitched.env_mask) - sum(stitched.env_mask)))
        return stitched, reward

    def summary(self) -> dict[str, float]:
        return {key: sum(values) / len(values) for key, values in self.metrics.items() if values}

    def run_and_score(self, row: Any, url: str) -> float:
        """Run the RLM on one row and score its prediction with the row's scorer."""
        import rlmkit
        from rlmkit.errors import RunError

        options = RolloutOptions.part(self.job.options)
        policy_lm = rlmkit.LM(
            f"openai/{POLICY_MODEL}", api_base=url, api_key="local", cache=False, num_retries=0
        )
        # sub-calls go to the frozen model: by default the same server, told apart by the model name
        sub_lm = options.sub_model() or rlmkit.LM(
            f"openai/{FROZEN_MODEL}", api_base=url, api_key="local", cache=False, num_retries=0
        )
        rlm = rollout_rlm(row, options, self.job.max_turns, policy_lm, sub_lm)
        example, inputs = row_task(row, options)
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
        scorer = self.scorers.setdefault(row.reward.scorer, load(row.reward.scorer))
        return float(scorer(example, prediction))


class RLMRollout(RLMPlayer):
    """``rollout_func(prompts, trainer)`` for ``trl.GRPOTrainer``: one RLM run per prompt entry
    (TRL's sampler already repeats each prompt ``group_size`` times)."""

    def __init__(self, job: TrainJob, rows: list[Any]):
        super().__init__(job)
        self.rows = {prompt_key([m.model_dump(exclude_none=True) for m in r.prompt]): r for r in rows}

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from rlmkit.models.chat_server import ChatServer

        generate = hf_generator(trainer, self.job.max_completion_tokens, float(trainer.args.temperature))
        policy = PolicyServer(trainer.processing_class, generate)
        result: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "env_mask": [], "rlm_reward": []}
        with ChatServer(policy.respond) as server:
            for prompt in prompts:
                stitched, reward = self.play(self.rows[prompt_key(prompt)], policy, server.url)
                result["prompt_ids"].append(stitched.prompt_ids)
                result["completion_ids"].append(stitched.completion_ids)
                result["env_mask"].append(stitched.env_mask)
                result["rlm_reward"].append(reward)
        result["logprobs"] = (
            None  # no importance-sampling correction: rollouts come from the model being trained
        )
        return result


def rollout_rlm(row: Any, options: RolloutOptions, max_turns: int, lm: Any, sub_lm: Any) -> Any:
    """The RLM that plays ``row``: the row's signature and protocol, the job's limits. Only the
    top-level root is the policy: a child run (``rlm_query``) is part of the environment, so its
    root calls go to the frozen sub-model too (``RLM.child_lm``), when there is one."""
    import rlmkit

    rlm = rlmkit.RLM(
        row.meta.get("signature") or options.signature,
        lm=lm,
        sub_lm=sub_lm,
        protocol=row.meta.get("protocol") or options.protocol,
        max_iterations=int(max_turns),
        max_depth=options.max_depth,  # 2+: rlm_query runs child runs (frozen, see above)
        sandbox=options.sandbox,
        cell_timeout=float(options.cell_timeout),
    )
    rlm.child_lm = sub_lm
    return rlm


def row_task(row: Any, options: RolloutOptions) -> tuple[Any, dict[str, Any]]:
    """(what the scorer gets, what the RLM gets) for ``row``: ``options.example_fn`` /
    ``options.inputs_fn`` (``module:function`` of the row) when set, else the row's own fields."""
    example = load(options.example_fn)(row) if options.example_fn else RowExample.of(row)
    inputs = load(options.inputs_fn)(row) if options.inputs_fn else dict(example.inputs)
    return example, inputs


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
        # compiled rows describe inputs (name, size, preview) without their bodies;
        # only real values pass through
        example["inputs"] = inputs if isinstance(inputs, dict) else {}
        return example


def rlm_reward(prompts: list[Any], completions: list[Any], rlm_reward: list[float], **_: Any) -> list[float]:
    """GRPO reward function: the score each RLM run already earned in the rollout."""
    return list(rlm_reward)
