"""RL data: prompts with verifiable answers and a reward spec, plus offline GRPO groups.

``RLRow``: one per example (task): the root's first prompt, the gold answer, what the
scorer needs, and which scorer/knobs give the reward. ``RLGroupRow``: every rollout of an
example with its reward and GRPO's group-normalised advantage
``(r - mean(group)) / (std(group) + eps)`` (std with Bessel's correction, as TRL computes it).
Only the root is trained; sub-calls stay with their frozen model.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections import defaultdict
from typing import Any

from optimizers.compile.filters import Filters, Metric, Scored
from optimizers.compile.render import Renderer, SystemPrompt, split_conversation
from optimizers.compile.result import Compilation, CompileResult
from optimizers.compile.schema import RewardSpec, RLGroupRow, RLRow
from optimizers.compile.sources import RunsLike
from optimizers.compile.turns import is_linear
from rlmkit.errors import UserError

ADVANTAGE_EPS = 1e-4  # TRL's GRPO epsilon
GOLD_KEYS = ("gold", "answer", "target")


def compile_rl(
    runs: RunsLike,
    *,
    scorer: str | None = None,
    metric: Metric | None = None,
    filters: Filters | None = None,
    min_group_size: int = 2,
    drop_zero_advantage: bool = False,
    scale_rewards: bool = True,
    protocol: str | None = None,
    repair: bool = True,
    system_prompt: SystemPrompt = None,
    tokenizer: Any = None,
    mixed_signatures: bool = False,
) -> CompileResult:
    """Compile runs into ``RLRow`` prompts (``result.rows``) and ``RLGroupRow`` rollouts
    (``result.extra_rows``).

    ``scorer``: "module:function" computing the reward (default: each run's ``task["scorer"]``).
    Rewards of the groups are the runs' scores (``metric(run)`` when a run has none).
    ``drop_zero_advantage`` drops groups whose rollouts all scored the same (no signal).
    ``scale_rewards=False`` gives plain ``r - mean`` advantages (Dr. GRPO).
    """
    if min_group_size < 1:
        raise ValueError("min_group_size must be >= 1")
    work = Compilation("rl", runs, filters or Filters.rollouts(), metric, tokenizer, mixed_signatures)
    missing = [
        s.run.meta.run_id for s in work.selected if not (scorer or (s.run.meta.task or {}).get("scorer"))
    ]
    if missing:
        raise UserError(
            f"compile_rl needs a reward scorer: pass scorer='module:function' or record task['scorer'] "
            f"in the runs ({len(missing)} run(s) have none, e.g. {missing[0]})"
        )
    renderer = Renderer(protocol, repair=repair, system_prompt=system_prompt)
    groups: dict[tuple[str, str], list[tuple[Scored, list[dict], list[dict]]]] = defaultdict(list)
    prompts: dict[str, tuple[Scored, list[dict]]] = {}
    for item in work.selected:
        if item.score is None:  # never a silent reward of 0: score the runs or pass a metric
            work.report.samples_dropped["no_score"] += 1
            continue
        if not is_linear(item.run):
            work.report.samples_dropped["history_rewritten"] += 1
            continue
        rendered = renderer.run(item.run)
        if rendered.dropped or not rendered.turns:
            work.report.samples_dropped[f"unrepairable:{rendered.dropped or 'no_turns'}"] += 1
            continue
        prompt, rollout = split_conversation(rendered)
        for turn in rendered.turns:
            work.report.fixes.update(turn.fixes)
        prompts.setdefault(item.task_id, (item, prompt))
        groups[(item.task_id, _digest(prompt))].append((item, prompt, rollout))

    rows = [_prompt_row(item, prompt, scorer, work) for item, prompt in prompts.values()]
    group_rows: list[RLGroupRow] = []
    for (task, prompt_hash), members in groups.items():
        group_rows += _group_rows(
            task, prompt_hash, members, work, min_group_size, drop_zero_advantage, scale_rewards
        )
    options = {
        "scorer": scorer,
        "min_group_size": min_group_size,
        "drop_zero_advantage": drop_zero_advantage,
        "scale_rewards": scale_rewards,
        "protocol": protocol,
        "repair": repair,
    }
    return work.finish([row for row in rows if row is not None], options, group_rows)


def _prompt_row(item: Scored, prompt: list[dict], scorer: str | None, work: Compilation) -> RLRow | None:
    task = dict(item.run.meta.task or {})
    gold_key = next((key for key in GOLD_KEYS if task.get(key) is not None), None)
    if gold_key is None:
        work.report.samples_dropped["no_gold"] += 1
        return None
    # the gold answer travels JSON-encoded in ``answer`` only: raw values of mixed types
    # (int in one row, str in another) would break a columnar reader of ``example``
    example = {key: value for key, value in task.items() if key not in ("knobs", "scorer", *GOLD_KEYS)}
    example["inputs"] = [
        var.model_dump(mode="json") for var in item.run.meta.inputs
    ]  # sizes/hashes, no bodies
    row = RLRow(
        id=f"{item.task_id}:prompt",
        task_id=item.task_id,
        run_id=item.run.meta.run_id,
        prompt=prompt,
        answer=json.dumps(task[gold_key], ensure_ascii=False, default=str),
        example=example,
        reward=RewardSpec(
            scorer=scorer or str(task["scorer"]),
            suite=_str_or_none(task.get("suite")),
            knobs=dict(task.get("knobs") or {}),
        ),
        meta={"signature": item.run.meta.signature, "protocol": item.run.meta.protocol},
    )
    work.tally(row, prompt, [])
    return row


def _group_rows(
    task: str, prompt_hash: str, members: list, work: Compilation, min_size: int, drop_zero: bool, scale: bool
) -> list[RLGroupRow]:
    if len(members) < min_size:
        work.report.samples_dropped["group_too_small"] += len(members)
        return []
    rewards = [float(item.score) for item, _, _ in members]
    advantages = group_advantages(rewards, scale=scale)
    if drop_zero and all(a == 0.0 for a in advantages):
        work.report.samples_dropped["zero_advantage_group"] += len(members)
        return []
    rows = []
    for (item, prompt, rollout), reward, advantage in zip(members, rewards, advantages):
        row = RLGroupRow(
            id=f"{item.run.meta.run_id}:rollout",
            task_id=task,
            run_id=item.run.meta.run_id,
            group_id=f"{task}:{prompt_hash}",
            prompt=prompt,
            completion=rollout,
            reward=reward,
            advantage=advantage,
            meta={"group_size": len(members), "status": item.run.status},
        )
        rows.append(row)
        work.tally(row, prompt, rollout)
    return rows


def group_advantages(rewards: list[float], *, scale: bool = True) -> list[float]:
    """GRPO's baseline: reward minus the group mean, divided by the group's std (+ eps) when ``scale``."""
    mean = sum(rewards) / len(rewards)
    centred = [r - mean for r in rewards]
    if all(abs(c) < 1e-12 for c in centred):
        return [0.0] * len(rewards)
    if not scale:
        return centred
    std = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
    return [c / (std + ADVANTAGE_EPS) for c in centred]


def _digest(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:10]


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
