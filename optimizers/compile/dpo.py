"""Preference pairs: for each example, the best run against the worst, by score; and for each
run continued from a turn (``rlmkit eval --branch-from``), the best of it and its continuations
against the worst.

Best = highest score, ties broken by lower cost (dollars, then tokens); worst = lowest
score, ties broken by higher cost. ``mode="conversation"``: the whole rollouts after the
shared first prompt. ``mode="turn"``: the first turn where the two runs saw the same
messages but replied differently (after it their prompts differ, so it is the one turn
where a preference is well defined).
"""

from __future__ import annotations

from typing import Any, Literal

from optimizers.compile.filters import Filters, Metric, SampleGate, Scored, unearned
from optimizers.compile.render import RenderedRun, Renderer, SystemPrompt, split_conversation
from optimizers.compile.result import Compilation, CompileResult
from optimizers.compile.schema import DPORow
from optimizers.compile.sources import RunsLike
from optimizers.compile.turns import is_linear, run_cost


def compile_dpo(
    runs: RunsLike,
    *,
    metric: Metric | None = None,
    filters: Filters | None = None,
    mode: Literal["turn", "conversation"] = "turn",
    min_margin: float = 0.0,
    protocol: str | None = None,
    repair: bool = True,
    system_prompt: SystemPrompt = None,
    tokenizer: Any = None,
    mixed_signatures: bool = False,
) -> CompileResult:
    """Compile runs into ``DPORow`` pairs, one per example whose best and worst runs differ by
    more than ``min_margin``."""
    if mode not in ("turn", "conversation"):
        raise ValueError(f"mode must be 'turn' or 'conversation', got {mode!r}")
    work = Compilation("dpo", runs, filters or Filters.rollouts(), metric, tokenizer, mixed_signatures)
    renderer = Renderer(protocol, repair=repair, system_prompt=system_prompt)
    gate = SampleGate(work.filters, work.report)
    groups = _groups(work)
    # A score not earned by finding the answer (a dump holding the gold, a guess) ranks as 0: such
    # a run is never the chosen ending, and against a run that read it is the rejected one.
    ratio = Filters().max_answer_ratio
    ranked = {
        id(item): 0.0 if unearned(item.run, ratio) else item.score
        for _, items in groups.values()
        for item in items
    }
    rows: list[DPORow] = []
    for key, (task, items) in groups.items():
        if len(items) < 2:
            work.report.samples_dropped["single_run"] += 1
            continue
        best = min(items, key=lambda s: (-ranked[id(s)], run_cost(s.run), s.run.meta.run_id))
        worst = min(
            items, key=lambda s: (ranked[id(s)], tuple(-c for c in run_cost(s.run)), s.run.meta.run_id)
        )
        if ranked[id(best)] - ranked[id(worst)] <= min_margin:
            work.report.samples_dropped["no_score_gap"] += 1
            continue
        pair = _pair(best, worst, renderer, mode, work)
        if pair is None:
            continue
        turn, prompt, chosen, rejected = pair
        if not gate.admit(prompt, chosen, rejected):
            continue
        row = DPORow(
            id=f"{key}:pair",
            task_id=task,
            run_id=best.run.meta.run_id,
            turn=turn,
            prompt=prompt,
            chosen=chosen,
            rejected=rejected,
            score_chosen=ranked[id(best)],
            score_rejected=ranked[id(worst)],
            meta={
                "rejected_run_id": worst.run.meta.run_id,
                "rejected_unearned": unearned(worst.run, ratio),
                "candidates": len(items),
                "mode": mode,
                "protocol": renderer.target(best.run),
            },
        )
        rows.append(row)
        work.tally(row, prompt, chosen + rejected)
    return work.finish(rows, {"mode": mode, "min_margin": min_margin, "protocol": protocol, "repair": repair})


def _groups(work: Compilation) -> dict[str, tuple[str, list[Scored]]]:
    """The runs each pair is drawn from, by key: an example's own runs, under its task id; and each
    continued run (``rlmkit eval --branch-from``) with its continuations, under
    ``TASK:branch:RUN_ID``, where all of them share the prefix before the continued turn. A
    continued run is in both groups; a continuation only in its origin's."""
    groups: dict[str, tuple[str, list[Scored]]] = {}
    scored = [item for item in work.selected if item.score is not None]
    if unscored := len(work.selected) - len(scored):
        work.report.samples_dropped["no_score"] += unscored
    branched = {(item.run.meta.task or {}).get("branch", {}).get("of") for item in scored} - {None}
    for item in scored:
        branch = (item.run.meta.task or {}).get("branch")
        keys = [f"{item.task_id}:branch:{branch['of']}"] if branch else [item.task_id]
        if item.run.meta.run_id in branched:
            keys.append(f"{item.task_id}:branch:{item.run.meta.run_id}")
        for key in keys:
            groups.setdefault(key, (item.task_id, []))[1].append(item)
    return groups


def _pair(best: Scored, worst: Scored, renderer: Renderer, mode: str, work: Compilation):
    rendered: list[RenderedRun] = []
    for item in (best, worst):
        if mode == "conversation" and not is_linear(item.run):
            work.report.samples_dropped["history_rewritten"] += 1
            return None
        run = renderer.run(item.run)
        if mode == "conversation" and (run.dropped or not run.turns):
            work.report.samples_dropped[f"unrepairable:{run.dropped or 'no_turns'}"] += 1
            return None
        rendered.append(run)
    for run in rendered:
        for turn in run.turns:
            work.report.fixes.update(turn.fixes)
    good, bad = rendered
    if mode == "conversation":
        (prompt, chosen), (other_prompt, rejected) = split_conversation(good), split_conversation(bad)
        if prompt != other_prompt:
            work.report.samples_dropped["prompts_differ"] += 1
            return None
        return None, prompt, chosen, rejected
    for a, b in zip(good.turns, bad.turns):
        if a.prompt != b.prompt:
            work.report.samples_dropped["prompts_differ"] += 1
            return None
        if a.reply != b.reply:
            return (
                a.index,
                a.prompt,
                [{"role": "assistant", "content": a.reply}],
                [{"role": "assistant", "content": b.reply}],
            )
    reason = (
        "no_divergent_turn"
        if not (good.dropped or bad.dropped)
        else f"unrepairable:{good.dropped or bad.dropped}"
    )
    work.report.samples_dropped[reason] += 1
    return None
