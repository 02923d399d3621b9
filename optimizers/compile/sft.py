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
from optimizers.compile.turn_filter import turn_problems
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
    mixed_signatures: bool = False,
) -> CompileResult:
    """Compile runs into SFT rows (``SFTRow``).

    ``runs``: JSONL files / folders / Trajectory objects of ONE signature. ``metric(run)``
    scores runs that carry no score. ``mode``: one sample per root turn, or one per run.
    ``subcalls``: add the sub-model's samples: llm_query calls (prompt -> reply), typed sub-calls
    (their whole logged request -> reply) and child RLM turns (``meta.role`` "subcall" / "child").
    ``protocol``: re-render every run into this protocol (default: each run's own, with its
    templated mistakes repaired unless ``repair=False``).
    ``system_prompt`` replaces the root system prompt (str or function of the run).
    """
    if mode not in ("turn", "conversation"):
        raise ValueError(f"mode must be 'turn' or 'conversation', got {mode!r}")
    work = Compilation("sft", runs, filters or Filters(), metric, tokenizer, mixed_signatures)
    builder = _Builder(work, Renderer(protocol, repair=repair, system_prompt=system_prompt))
    for item in work.selected:
        if mode == "turn":
            builder.turn_rows(item, item.run, role="root")
        else:
            builder.conversation_row(item)
        if subcalls:
            builder.subcall_rows(item)
    options = {
        "mode": mode,
        "subcalls": subcalls,
        "protocol": protocol,
        "repair": repair,
        "system_prompt": None if system_prompt is None else "custom",
    }
    return work.finish(builder.rows, options)


class _Builder:
    """Collects the rows of one compile, through the sample gate, tallying the report."""

    def __init__(self, work: Compilation, renderer: Renderer):
        self.work, self.renderer = work, renderer
        self.gate = SampleGate(work.filters, work.report)
        self.rows: list[SFTRow] = []
        self._cache: dict[int, tuple[dict, ChatMessage]] = {}  # id(dict) -> (dict kept alive, message)

    def add(
        self,
        item: Scored,
        run: Trajectory,
        suffix: str,
        turn: int | None,
        prompt: list[dict],
        reply: str,
        meta: dict,
    ) -> None:
        completion = [{"role": "assistant", "content": reply}]
        if not self.gate.admit(prompt, completion):
            return
        prompt_messages = [self._message(m) for m in prompt]
        completion_messages = [ChatMessage(**completion[0])]
        row = SFTRow(
            id=f"{run.meta.run_id}:{suffix}",
            task_id=item.task_id,
            run_id=run.meta.run_id,
            turn=turn,
            score=item.score,
            prompt=prompt_messages,
            completion=completion_messages,
            messages=prompt_messages + completion_messages,
            meta=meta,
        )
        self.rows.append(row)
        self.work.tally(row, prompt, completion)

    def _message(self, message: dict) -> ChatMessage:
        """One ChatMessage per rendered message: turn i's prompt reuses turn i-1's messages, so
        validating each once (instead of once per row) keeps a 10,000-run compile in seconds."""
        key = id(message)
        cached = self._cache.get(key)
        if cached is None or cached[0] is not message:
            cached = self._cache[key] = (message, ChatMessage(**message))
        return cached[1]

    def meta(self, run: Trajectory, role: str, fixes: list[str]) -> dict[str, Any]:
        suite = (run.meta.task or {}).get("suite")
        return {
            "role": role,  # root | child (a child RLM's root turn) | subcall
            "depth": run.meta.depth,
            "signature": run.meta.signature,
            "protocol": self.renderer.target(run),
            "source_protocol": run.meta.protocol,
            "model": run.meta.model,
            "suite": None if suite is None else str(suite),
            "fixes": list(fixes),
            "subcall": None,  # "kind:name" on sub-call rows; present on every row so columns match
        }

    def turn_rows(self, item: Scored, run: Trajectory, role: str) -> None:
        self._cache.clear()  # messages are shared within one run only
        rendered = self.renderer.run(run)
        problems = turn_problems(run.turns) if self.work.filters.per_turn else {}
        for turn in rendered.turns:
            if (problem := problems.get(turn.index)) is not None:
                self.work.report.samples_dropped[f"turn:{problem}"] += 1
                continue
            self.work.report.fixes.update(turn.fixes)
            meta = self.meta(run, role, turn.fixes)
            self.add(item, run, f"t{turn.index}", turn.index, turn.prompt, turn.reply, meta)
        dropped = self.work.report.samples_dropped
        if rendered.dropped:
            dropped[f"unrepairable:{rendered.dropped}"] += 1
            if rendered.dropped_turns > 1:
                dropped["after_unrepairable_turn"] += rendered.dropped_turns - 1

    def conversation_row(self, item: Scored) -> None:
        run, dropped = item.run, self.work.report.samples_dropped
        if not is_linear(run):
            dropped["history_rewritten"] += 1
            return
        rendered = self.renderer.run(run)
        if rendered.dropped or not rendered.turns:
            dropped[f"unrepairable:{rendered.dropped or 'no_turns'}"] += 1
            return
        last = rendered.turns[-1]
        fixes = [fix for turn in rendered.turns for fix in turn.fixes]
        self.work.report.fixes.update(fixes)
        self.add(item, run, "conv", None, last.prompt, last.reply, self.meta(run, "root", fixes))

    def subcall_rows(self, item: Scored) -> None:
        calls = list(item.run.iter_subcalls(recursive=True))
        repaired = {call.id[:-1] for call in calls if call.kind == "typed" and call.id.endswith("r")}
        for call in calls:
            if call.child is not None:  # a child RLM: its root turns train the same way as the root's
                self.turn_rows(item, call.child, role="child")
                continue
            # a typed reply that needed a repair round did not parse: its repair is the sample
            reason = "subcall_unparsed" if call.id in repaired else _subcall_problem(call)
            if reason:
                self.work.report.samples_dropped[reason] += 1
                continue
            meta = {
                **self.meta(item.run, "subcall", []),
                "depth": call.depth,
                "model": call.model,
                "protocol": None,
                "source_protocol": None,
                "subcall": f"{call.kind}:{call.name}",
            }
            prompt = _subcall_request(call)
            self.add(item, item.run, f"sub:{call.id}", None, prompt, call.reply, meta)


def _subcall_request(call: SubCall) -> list[dict]:
    """What the sub-model was sent: a typed call logs its whole request (system message, schema,
    inputs); llm_query sends its prompt as the one user message."""
    if call.messages:
        return [message.model_dump() for message in call.messages]
    return [{"role": "user", "content": call.prompt}]


def _subcall_problem(call: SubCall) -> str | None:
    if call.kind in ("tool", "mcp_tool"):  # a function the REPL called, not a model
        return "subcall_not_a_model_call"
    if call.kind == "typed" and not call.messages:  # logged before typed calls kept their request
        return "subcall_request_not_logged"
    if call.error or not call.reply.strip() or not call.prompt.strip():
        return "subcall_failed"
    texts = [call.reply, *(m["content"] for m in _subcall_request(call))]
    if any(TRUNCATION_MARK.search(text) for text in texts):
        return "subcall_truncated"
    return None
