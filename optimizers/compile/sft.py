"""SFT by rejection sampling: the good runs, as per-turn samples or whole conversations.

This is how RLM-Qwen3-8B was made: keep runs that scored above zero and went past one
turn, make each root turn a sample (the messages exactly as the root saw them, its reply
as the target), drop samples past ~100,000 characters, and fix FINAL/FINAL_VAR mistakes.
"""

from __future__ import annotations

from typing import Any, Literal

from optimizers.compile.filters import Filters, Metric, SampleGate, Scored
from optimizers.compile.render import Renderer, SystemPrompt
from optimizers.compile.result import Compilation, CompileResult
from optimizers.compile.schema import ChatMessage, SFTRow
from optimizers.compile.sources import RunsLike
from optimizers.compile.turns import TRUNCATION_MARK, is_linear
from rlmkit.trajectory import SubCall, Trajectory

Mode = Literal["turn", "conversation"]


def compile_sft(
    runs: RunsLike,
    *,
    metric: Metric | None = None,
    filters: Filters | None = None,
    mode: Mode = "turn",
    subcalls: bool = False,
    protocol: str | None = None,
    repair: bool = True,
    system_prompt: SystemPrompt = None,
    tokenizer: Any = None,
) -> CompileResult:
    """Compile runs into SFT rows (``SFTRow``).

    ``runs``: JSONL files / folders / Trajectory objects of ONE signature. ``metric(run)``
    scores runs that carry no score. ``mode``: one sample per root turn, or one per run.
    ``subcalls``: add the sub-calls (llm_query / typed prompt -> reply) and child RLM turns,
    to train the sub-model. ``protocol``: re-render every run into this protocol (default:
    each run's own, with its templated mistakes repaired unless ``repair=False``).
    ``system_prompt`` replaces the root system prompt (str or function of the run).
    """
    if mode not in ("turn", "conversation"):
        raise ValueError(f"mode must be 'turn' or 'conversation', got {mode!r}")
    work = Compilation("sft", runs, filters or Filters(), metric, tokenizer)
    renderer = Renderer(protocol, repair=repair, system_prompt=system_prompt)
    gate = SampleGate(work.filters, work.report)
    rows: list[SFTRow] = []
    for item in work.selected:
        emit = _turn_rows if mode == "turn" else _conversation_row
        emit(item, item.run, renderer, gate, work, rows, role="root")
        if subcalls:
            _subcall_rows(item, renderer, gate, work, rows)
    options = {
        "mode": mode,
        "subcalls": subcalls,
        "protocol": protocol,
        "repair": repair,
        "system_prompt": None if system_prompt is None else "custom",
    }
    return work.finish(rows, options)


def _add(
    work: Compilation,
    gate: SampleGate,
    rows: list[SFTRow],
    item: Scored,
    run: Trajectory,
    row_id: str,
    turn: int | None,
    prompt: list[dict],
    completion: list[dict],
    meta: dict,
) -> None:
    if not gate.admit(prompt, completion):
        return
    row = SFTRow(
        id=row_id,
        task_id=item.task_id,
        run_id=run.meta.run_id,
        turn=turn,
        score=item.score,
        prompt=[ChatMessage(**m) for m in prompt],
        completion=[ChatMessage(**m) for m in completion],
        messages=[ChatMessage(**m) for m in prompt + completion],
        meta=meta,
    )
    rows.append(row)
    work.tally(row, prompt, completion)


def _meta(run: Trajectory, renderer: Renderer, role: str, fixes: list[str]) -> dict[str, Any]:
    task = run.meta.task or {}
    return {
        "role": role,  # root | child (a child RLM's root turn) | subcall
        "depth": run.meta.depth,
        "signature": run.meta.signature,
        "protocol": renderer.target(run),
        "source_protocol": run.meta.protocol,
        "model": run.meta.model,
        "suite": None if task.get("suite") is None else str(task["suite"]),
        "fixes": list(fixes),
        "subcall": None,  # "kind:name" on sub-call rows; present on every row so columns match
    }


def _turn_rows(
    item: Scored,
    run: Trajectory,
    renderer: Renderer,
    gate: SampleGate,
    work: Compilation,
    rows: list[SFTRow],
    role: str,
) -> None:
    rendered = renderer.run(run)
    for turn in rendered.turns:
        work.report.fixes.update(turn.fixes)
        _add(
            work,
            gate,
            rows,
            item,
            run,
            f"{run.meta.run_id}:t{turn.index}",
            turn.index,
            turn.prompt,
            [{"role": "assistant", "content": turn.reply}],
            _meta(run, renderer, role, turn.fixes),
        )
    if rendered.dropped:
        work.report.samples_dropped[f"unrepairable:{rendered.dropped}"] += 1
        if rendered.dropped_turns > 1:
            work.report.samples_dropped["after_unrepairable_turn"] += rendered.dropped_turns - 1


def _conversation_row(
    item: Scored,
    run: Trajectory,
    renderer: Renderer,
    gate: SampleGate,
    work: Compilation,
    rows: list[SFTRow],
    role: str,
) -> None:
    if not is_linear(run):
        work.report.samples_dropped["history_rewritten"] += 1
        return
    rendered = renderer.run(run)
    if rendered.dropped or not rendered.turns:
        work.report.samples_dropped[f"unrepairable:{rendered.dropped or 'no_turns'}"] += 1
        return
    last = rendered.turns[-1]
    fixes = [fix for turn in rendered.turns for fix in turn.fixes]
    work.report.fixes.update(fixes)
    _add(
        work,
        gate,
        rows,
        item,
        run,
        f"{run.meta.run_id}:conv",
        None,
        last.prompt,
        [{"role": "assistant", "content": last.reply}],
        _meta(run, renderer, role, fixes),
    )


def _subcall_rows(
    item: Scored, renderer: Renderer, gate: SampleGate, work: Compilation, rows: list[SFTRow]
) -> None:
    for call in item.run.iter_subcalls(recursive=True):
        if call.child is not None:  # a child RLM: its root turns train the same way as the root's
            _turn_rows(item, call.child, renderer, gate, work, rows, role="child")
            continue
        reason = _subcall_problem(call)
        if reason:
            work.report.samples_dropped[reason] += 1
            continue
        meta = {
            "role": "subcall",
            "depth": call.depth,
            "signature": item.run.meta.signature,
            "protocol": None,
            "source_protocol": None,
            "model": call.model,
            "suite": None,
            "fixes": [],
            "subcall": f"{call.kind}:{call.name}",
        }
        _add(
            work,
            gate,
            rows,
            item,
            item.run,
            f"{item.run.meta.run_id}:sub:{call.id}",
            None,
            [{"role": "user", "content": call.prompt}],
            [{"role": "assistant", "content": call.reply}],
            meta,
        )


def _subcall_problem(call: SubCall) -> str | None:
    if call.error or not call.reply.strip() or not call.prompt.strip():
        return "subcall_failed"
    if TRUNCATION_MARK.search(call.prompt) or TRUNCATION_MARK.search(call.reply):
        return "subcall_truncated"
    return None
