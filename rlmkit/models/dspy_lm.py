"""DSPy's models called as themselves: any ``dspy.BaseLM`` (``DummyLM``, a custom subclass,
a ``dspy.LM`` subclass) and any plain callable a DSPy program passes as ``sub_lm``.

``DSPyLM`` has the one method the run loop uses of a model, ``acomplete(messages)``, and
answers it with ``lm.acall(messages=...)``: the LM's own ``forward``/``aforward`` runs, with
its callbacks, history, usage tracking, cache and kwargs, exactly as under ``dspy.RLM``. Since
DSPy already records those calls, rlmkit's bridge leaves them alone (``observed_by_dspy``).

A plain ``dspy.LM`` (its class exactly ``dspy.LM``, no callbacks of its own) keeps rlmkit's
direct transport: ``DirectDSPyLM`` reads its settings into the shared ``rlmkit.LM`` for them and
keeps the ``dspy.LM`` as ``dspy_origin``, so the bridge reports each call where DSPy would have:
the LM's own ``history`` (``lm.inspect_history()``), the global history, callbacks (with the
``dspy.LM`` as their ``instance``) and the usage tracker. ``benchmarks/speed/dspy_lm_overhead.py``
measures both paths.

A reply written in DSPy's field format (``[[ ## reasoning ## ]]`` ... ``[[ ## code ## ]]``,
what ``DummyLM`` and DSPy-tuned models write for dspy.RLM's action step) is read as the
reasoning and a fenced code block, so the REPL protocol sees the code.
"""

from __future__ import annotations

import inspect
import re
import time
from typing import TYPE_CHECKING, Any

from rlmkit.models.contract import Completion, ModelTraits, settings_free_description
from rlmkit.trajectory import ChatMessage, Usage

if TYPE_CHECKING:
    from rlmkit.models.lm import LM

# Any stays where a value is one of dspy's own objects (a BaseLM, its replies): dspy ships no types.

FIELD = re.compile(r"^\[\[ ## (\w+) ## \]\]\s*$", re.MULTILINE)


class DSPyLM:
    """A DSPy LM (or a callable ``prompt -> text``) behind rlmkit's ``acomplete`` seam."""

    def __init__(self, lm: Any):
        self.lm = lm
        self.model = getattr(lm, "model", None) or f"callable/{getattr(lm, '__name__', type(lm).__name__)}"
        self.is_base_lm = _is_base_lm(lm)
        # The LM's own settings decide caps and stops, as under dspy.RLM; a BaseLM fires DSPy's
        # callbacks and writes its history itself. Its requests are its own: rlmkit sends none.
        self.traits = ModelTraits(observed_by_dspy=self.is_base_lm)

    def describe(self) -> dict[str, object]:
        return settings_free_description(self.model, "dspy")

    def __repr__(self) -> str:
        return f"DSPyLM({self.lm!r})"

    def __deepcopy__(self, memo: dict[int, object]) -> DSPyLM:
        return self

    async def acomplete(self, messages: list[ChatMessage], **_: object) -> Completion:
        """One call; rlmkit's per-call caps (max_tokens, stop) are not sent: the LM's own apply."""
        started = time.perf_counter()
        before = len(getattr(self.lm, "history", None) or [])
        if self.is_base_lm:
            response = await self.lm.acall(messages=messages)
        else:
            prompt = messages[-1]["content"] if len(messages) == 1 else None
            response = self.lm(prompt) if prompt is not None else self.lm(messages=messages)
            if inspect.isawaitable(response):
                response = await response
        text = reply_text(response)
        return Completion(
            text=from_fields(text),
            model=self.model,
            usage=self._usage(before),
            cached=False,
            duration_s=time.perf_counter() - started,
        )

    def _usage(self, before: int) -> Usage:
        history = getattr(self.lm, "history", None) or []
        entry = history[-1] if len(history) > before else {}
        usage = entry.get("usage") or {}
        return Usage(
            calls=1,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cost=float(entry.get("cost") or 0.0),
        )


def reply_text(response: object) -> str:
    """The text of what a DSPy LM returned, with dspy.RLM's errors for shapes it refuses."""
    if isinstance(response, str):
        return response
    text = getattr(response, "text", None) if not isinstance(response, list) else None
    if text is None:
        if not isinstance(response, list) or not response:
            raise TypeError(
                "Sub-LM must return dspy.LMResponse or a non-empty list of text outputs, "
                f"got {type(response).__name__}."
            )
        first = response[0]
        text = first.get("text") if isinstance(first, dict) else first
    if not isinstance(text, str):
        raise TypeError(f"Sub-LM response must contain text, got {type(text).__name__}.")
    return text


def from_fields(text: str) -> str:
    """``[[ ## reasoning ## ]] ... [[ ## code ## ]] ...`` as reasoning + a fenced block; other text as is."""
    marks = list(FIELD.finditer(text))
    fields = {
        m.group(1): text[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(text)].strip()
        for i, m in enumerate(marks)
    }
    if "code" not in fields:
        return text
    code = fields["code"]
    if "```" not in code:
        code = f"```repl\n{code}\n```"
    return f"{fields.get('reasoning', '')}\n\n{code}".strip()


def _is_base_lm(lm: object) -> bool:
    import dspy

    return isinstance(lm, dspy.BaseLM)


class DirectDSPyLM:
    """A plain ``dspy.LM`` on rlmkit's direct transport: the shared ``rlmkit.LM`` for its
    settings does the calls; the ``dspy.LM`` itself is what DSPy's observers are shown."""

    def __init__(self, origin: Any, direct: LM):
        self.dspy_origin, self.direct = origin, direct

    def __getattr__(self, name: str) -> Any:
        if name in ("dspy_origin", "direct"):  # not set yet (unpickling): no delegation loop
            raise AttributeError(name)
        return getattr(self.direct, name)  # model, traits, acomplete, describe, cache_dir ...

    def __deepcopy__(self, memo: dict[int, object]) -> DirectDSPyLM:
        return self

    def __getstate__(self) -> dict[str, object]:
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"DirectDSPyLM({self.dspy_origin!r})"


def dspy_origin(lm: object) -> Any | None:
    """The ``dspy.LM`` a model on the direct transport stands for, or None for any other model."""
    return lm.dspy_origin if isinstance(lm, DirectDSPyLM) else None


def wants_dspy_call(lm: object) -> bool:
    """True for what must be called as itself: a BaseLM other than a plain ``dspy.LM`` without
    callbacks of its own (their ``with_callbacks`` would be skipped on the direct transport),
    or a callable."""
    import dspy

    if isinstance(lm, dspy.BaseLM):
        return type(lm) is not dspy.LM or bool(getattr(lm, "callbacks", None))
    return callable(lm) and not isinstance(lm, str)
