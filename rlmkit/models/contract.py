"""What a model must provide to be called by a run: the one contract every model implements.

A run calls its models through ``acomplete(messages)`` and reads what it may assume about them
from one frozen record, ``traits``: how many tokens a reply may take, which stop strings always
apply, the program the model ships with, how much text one call reads well, its context window, whether DSPy
already records its calls, and whether rlmkit itself sends its requests over the network.
``rlmkit.LM``, the DSPy wrappers (``models.dspy_lm``), dspy.RLM's action predictor and the
verifiers bridge all implement it, so no caller probes a model's attributes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, runtime_checkable

from rlmkit.trajectory import ChatMessage, Usage


@dataclass
class Completion:
    """One model answer. ``usage.cost`` is in dollars (0.0 for models with no known price)."""

    text: str
    model: str
    usage: Usage
    cached: bool
    duration_s: float
    finish_reason: str | None = None

    @classmethod
    def timed(cls, text: str, model: str, started: float) -> Completion:
        """A fresh answer of one call whose tokens nobody counted (a predictor, a bridge),
        timed from ``started`` (``time.perf_counter()``)."""
        return cls(text, model, Usage(calls=1), False, time.perf_counter() - started)


class Preset(TypedDict, total=False):
    """A program tuned for a model (``local/tuned_program.json``): what a run without its own uses."""

    instructions: str
    demos: list[dict[str, str]]  # each an example's fields, inputs and outputs, as text
    knobs: dict[str, object]  # RunSettings fields
    provenance: dict[str, object]  # the command, seeds, date and scores that chose it


@dataclass(frozen=True)
class ModelTraits:
    """What a run may assume about a model, read once instead of probed per attribute."""

    max_tokens: int | None = field(
        default=None, metadata={"help": "the model's own cap on a reply; the run's cap never exceeds it"}
    )
    stop: tuple[str, ...] = field(
        default=(), metadata={"help": "stop strings sent with every call, before the run's own"}
    )
    preset: Preset | None = field(
        default=None,
        metadata={"help": "a program tuned for this model (instructions, demos, knobs, provenance)"},
    )
    input_chars: int | None = field(
        default=None, metadata={"help": "how much text one call reads well; prompts size chunks to it"}
    )
    window_tokens: int | None = field(
        default=None,
        metadata={
            "help": "the context window in tokens, when known; a session's task message stays a share of it"
        },
    )
    observed_by_dspy: bool = field(
        default=False, metadata={"help": "DSPy's callbacks and history see each call already: not twice"}
    )
    reaches_network: bool = field(
        default=False,
        metadata={"help": "rlmkit sends the requests over the network (so blocking model requests applies)"},
    )

    def __post_init__(self) -> None:
        for name in ("max_tokens", "input_chars", "window_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}")


def settings_free_description(model: str, transport: str) -> dict[str, object]:
    """``describe()`` of a model whose settings are not rlmkit's to show (its own decide)."""
    return {"model": model, "params": {}, "transport": transport, "cache": None}


@runtime_checkable
class Model(Protocol):
    """A chat model a run can call: a name, its traits, one async call, a loggable description."""

    @property
    def model(self) -> str:
        """The model's name, as trajectories record it."""
        ...

    @property
    def traits(self) -> ModelTraits: ...

    async def acomplete(self, messages: list[ChatMessage], **options: Any) -> Completion:
        """One reply to ``messages``; ``options`` are ``rollout_id``, ``max_tokens`` and ``stop``,
        which a model whose own settings decide may ignore."""
        ...

    def describe(self) -> dict[str, object]:
        """What this model is, safe to log (never a key): model, params, transport, cache."""
        ...


__all__ = ["Completion", "Model", "ModelTraits", "Preset", "settings_free_description"]
