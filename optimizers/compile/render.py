"""Turn a trajectory into chat messages, with its protocol repaired or re-rendered.

A run of protocol A becomes training data for protocol B by changing three things:
the system prompt's "how to finish" paragraph, the one-time "answer now" user message,
and how the final reply ends (``repair.repair_reply``). The finish paragraph is found by
matching the source protocol's ``finish_prompt`` template (from ``rlmkit.protocols``)
and re-filled with the same fields in the target's template. A system prompt that does
not match (a customised protocol) needs ``system_prompt=`` (a string or a function of
the trajectory); otherwise the run is dropped as ``system_prompt_not_recognised``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from optimizers.compile.repair import PROTOCOLS, Unrepairable, repair_reply
from optimizers.compile.turns import output_fields
from rlmkit.prompting import finish_move
from rlmkit.protocols import get_protocol
from rlmkit.trajectory import Trajectory

SystemPrompt = str | Callable[[Trajectory], str] | None


@dataclass
class RenderedTurn:
    index: int
    prompt: list[dict[str, str]]  # the messages the model saw, re-rendered
    reply: str  # the target, repaired
    fixes: list[str] = field(default_factory=list)


@dataclass
class RenderedRun:
    turns: list[RenderedTurn]
    dropped: str | None = None  # reason the turn after the last rendered one could not be rendered
    dropped_turns: int = 0  # turns lost to ``dropped`` (that turn and every later one)


class Renderer:
    """Renders runs for one target protocol (``None``: keep each run's own protocol)."""

    def __init__(
        self, protocol: str | None = None, *, repair: bool = True, system_prompt: SystemPrompt = None
    ):
        if protocol is not None and protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; choose one of {list(PROTOCOLS)}")
        self.protocol = protocol
        self.repair = repair
        self.system_prompt = system_prompt
        self._templates = _protocol_texts()

    def target(self, trajectory: Trajectory) -> str:
        return self.protocol or trajectory.meta.protocol

    def run(self, trajectory: Trajectory) -> RenderedRun:
        source, target = trajectory.meta.protocol, self.target(trajectory)
        fields = output_fields(trajectory)
        rendered: list[RenderedTurn] = []
        history: list[dict[str, str]] = []
        for position, turn in enumerate(trajectory.turns):
            try:
                new = [
                    self._message(m.role, m.content, trajectory, source, target) for m in turn.new_messages
                ]
                reply, fixes = turn.reply, []
                if self.repair or source != target:
                    result = repair_reply(
                        turn.reply,
                        source=source,
                        target=target,
                        fields=fields,
                        final=turn.final,
                        outputs=trajectory.outputs,
                    )
                    reply, fixes = result.reply, result.fixes
            except Unrepairable as exc:
                return RenderedRun(rendered, exc.reason, len(trajectory.turns) - position)
            history = turn.prompt(history, new)
            rendered.append(RenderedTurn(turn.index, history, reply, fixes))
            history = history + [{"role": "assistant", "content": reply}]
        return RenderedRun(rendered)

    def _message(
        self, role: str, content: str, trajectory: Trajectory, source: str, target: str
    ) -> dict[str, str]:
        if source == target and self.system_prompt is None:
            return {"role": role, "content": content}
        if role == "system":
            content = self._system(content, trajectory, source, target)
        elif role == "user" and source != target:
            src, dst = self._templates.get(source), self._templates.get(target)
            if src and dst and src.answer_now in content:
                content = content.replace(src.answer_now, dst.answer_now)
        return {"role": role, "content": content}

    def _system(self, content: str, trajectory: Trajectory, source: str, target: str) -> str:
        if self.system_prompt is not None:
            return self.system_prompt(trajectory) if callable(self.system_prompt) else self.system_prompt
        src, dst = self._templates.get(source), self._templates.get(target)
        if src is None or dst is None:
            raise Unrepairable("system_prompt_not_recognised")
        match = src.pattern.search(content)
        if match is None:
            raise Unrepairable("system_prompt_not_recognised")
        # the target protocol renders its own finish text (each shows its fields its own way),
        # and its own form of the worked moves' finishing move
        fields = output_fields(trajectory)
        finish = get_protocol(target).render_finish(fields)
        content = content[: match.start()] + finish + content[match.end() :]
        move, target_move = (finish_move(get_protocol(name), fields) for name in (source, target))
        return content.replace(f"`{move}`", f"`{target_move}`")


@dataclass
class _ProtocolText:
    finish: str  # the finish_prompt template
    pattern: re.Pattern  # matches the rendered template, capturing {fields} / {first}
    answer_now: str


def _protocol_texts() -> dict[str, _ProtocolText]:
    """Each protocol's finish template and answer-now text, from ``rlmkit.protocols``."""
    from rlmkit.protocols import PROTOCOLS as REGISTRY

    texts = {}
    for name in REGISTRY:
        protocol = get_protocol(name)
        texts[name] = _ProtocolText(
            protocol.finish_prompt, _template_pattern(protocol.finish_prompt), protocol.answer_now
        )
    return texts


def _template_pattern(template: str) -> re.Pattern:
    """A regex matching ``template.format(...)``: literals exact, each field a named lazy group."""
    parts, seen = [], set()
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is not None:
            parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.*?)")
            seen.add(name)
    return re.compile("".join(parts), re.DOTALL)


def split_conversation(rendered: RenderedRun) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(the first prompt, everything after it) of a fully rendered linear run.

    The rest alternates assistant replies and the REPL feedback (user messages) the model got,
    ending with the final reply: a multi-turn rollout whose user messages are environment text.
    """
    last = rendered.turns[-1]
    whole = last.prompt + [{"role": "assistant", "content": last.reply}]
    first = rendered.turns[0].prompt
    return first, whole[len(first) :]
