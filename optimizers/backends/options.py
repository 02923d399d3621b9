"""Typed backend options: what a job's ``[options]`` table may hold, one flat dataclass per backend.

A ``TrainJob`` is backend-independent, so its ``options`` stay a plain table; each backend reads
it once through its own options class (``Backend.options_type``), TRL style: every field has a
default and ``metadata={"help": ...}``, checks live in ``__post_init__``, and a key the backend
does not know is an error that names the ones it does. The shared parts are mixins:
``ModelFileOptions`` (loading the base model), ``RolloutOptions`` (an RLM run per RL row).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from rlmkit.errors import ConfigError


def option(default: Any, help: str) -> Any:  # noqa: A002 - TRL's name for it
    """A field with its default and the help text that says what it does (TRL's ``metadata``)."""
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class BackendOptions:
    """The options every backend takes: none. Subclasses add fields."""

    @classmethod
    def parse(cls, backend: str, raw: Mapping[str, Any]) -> Self:
        """The options in ``raw`` (a job's ``options``) for ``backend``: a key it does not know fails."""
        unknown = sorted(set(raw) - cls.names())
        if unknown:
            valid = ", ".join(sorted(cls.names())) or "none"
            named = ", ".join(unknown)
            raise ConfigError(f"backend {backend!r} has no option {named} (its options: {valid})")
        return cls.part(raw)

    @classmethod
    def part(cls, raw: Mapping[str, Any]) -> Self:
        """This class's share of ``raw``, type-checked (a shared helper reads its part of a table
        that the backend has checked whole with ``parse``)."""
        hints = typing.get_type_hints(cls)
        values = {name: value for name, value in raw.items() if name in hints and name in cls.names()}
        for name, value in values.items():
            if not _fits(value, hints[name]):
                raise ConfigError(f"options.{name} must be {_shown(hints[name])}, not {value!r}")
        return cls(**values)

    @classmethod
    def names(cls) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}

    def explicit(self) -> dict[str, Any]:
        """The options that differ from their defaults (what an exported package needs written)."""
        defaults = type(self)()
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(defaults, f.name)
        }


def _fits(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arm) for arm in typing.get_args(hint))
    if origin is Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, origin or hint)


def _shown(hint: Any) -> str:
    if typing.get_origin(hint) is Literal:
        return " or ".join(repr(v) for v in typing.get_args(hint))
    return re.sub(r"typing\.|builtins\.", "", str(hint).replace("<class '", "").replace("'>", ""))


@dataclass(frozen=True)
class ModelFileOptions(BackendOptions):
    """How a backend that loads the base model on this machine reads it."""

    gguf_file: str | None = option(None, "a GGUF file in the base model's folder to load (dequantized)")
    chat_template: str | None = option(None, "a .jinja chat template file, for a tokenizer without one")


@dataclass(frozen=True)
class TRLOptions(ModelFileOptions):
    """What every TRL backend takes."""

    trainer: dict[str, Any] = option({}, "any other field of the TRL config, passed through as is")
    precision: Literal["auto", "bf16", "fp32"] = option(
        "auto", "bf16 autocast or fp32; auto: bf16 on a GPU or a CPU with native bf16, else fp32"
    )
    init_adapter: str | None = option(
        None,
        "a peft LoRA adapter folder to go on training (DPO after SFT: the SFT adapter, which a copy of "
        "also serves as DPO's reference); its own rank and targets replace the job's lora",
    )
    save_every: int = option(
        0,
        "steps between checkpoints in output_dir/trainer (the latest kept); the same job run again "
        "resumes from it. 0: the adapter is saved once, at the end",
    )

    def __post_init__(self) -> None:
        if self.save_every < 0:
            raise ConfigError("options.save_every must be >= 0 (0: no checkpoints)")


@dataclass(frozen=True)
class RolloutOptions(BackendOptions):
    """How an RL row becomes an RLM run (``optimizers.backends.rlm_rollout``)."""

    inputs_fn: str | None = option(None, "'module:function' of a row -> the RLM's inputs")
    example_fn: str | None = option(None, "'module:function' of a row -> what the scorer takes")
    sub_lm: str | None = option(None, "the model sub-calls go to (default: the frozen base model)")
    sub_api_base: str | None = option(None, "the OpenAI-compatible server of sub_lm")
    signature: str = option("context, question -> answer", "the RLM's signature, for rows that name none")
    protocol: str = option("submit", "how a turn ends, for rows that name none")
    max_depth: int = option(1, "2 or more: rlm_query runs child RLMs (part of the environment)")
    sandbox: str = option("process", "where the RLM's code runs")
    cell_timeout: float = option(30.0, "seconds one REPL cell may run")

    def __post_init__(self) -> None:
        if self.max_depth < 1 or self.cell_timeout <= 0:
            raise ConfigError("options.max_depth must be >= 1 and options.cell_timeout > 0")

    def sub_model(self) -> Any | None:
        """The LM sub-calls go to when ``sub_lm`` names one; None: the backend's frozen model."""
        if not self.sub_lm:
            return None
        from rlmkit.models.lm import LM

        return LM(self.sub_lm, api_base=self.sub_api_base, cache=False)


@dataclass(frozen=True)
class VerifiersOptions(RolloutOptions):
    """The verifiers export: an environment package that plays RLM rollouts."""

    env_id: str = option("rlmkit-rlm", "the environment's id: lowercase letters, digits and dashes")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not re.fullmatch(r"[a-z][a-z0-9-]*", self.env_id):
            raise ConfigError(f"options.env_id {self.env_id!r} must be lowercase letters, digits and dashes")


__all__ = [
    "BackendOptions",
    "ModelFileOptions",
    "RolloutOptions",
    "TRLOptions",
    "VerifiersOptions",
    "option",
]
