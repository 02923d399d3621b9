"""What one run reads, fixed before it starts: the frozen ``RunSpec``.

``RLM.run_spec`` builds a top-level call's, ``RunSpec.child`` each ``rlm_query`` child run's, and
``start.run_tree`` runs them. The loop and the sub-calls read a spec and never the ``RLM``, so
imports point one way (``rlm -> run.start -> run.loop -> run.subcalls -> run.state -> run.spec``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Generic, TypeAlias, TypeVar, cast

import dspy

from rlmkit.model_choice import resolve_lm
from rlmkit.models.contract import Model
from rlmkit.run.typed_subcalls import TypedSubcall
from rlmkit.settings import RunSettings
from rlmkit.signature import OutputValidator, make_signature

CHILD_SIGNATURE = "context, question -> answer"  # what every rlm_query child run answers

# A model as a caller names it: a Model, a dspy LM, a callable, a model string, or None (the
# configured default); ``resolve_lm`` turns any of them into a Model or says why it cannot.
ModelChoice: TypeAlias = object
M = TypeVar("M")  # a spec's models: as given (ModelChoice) until resolved(), then Model


@dataclass(frozen=True)
class Children:
    """What a run's ``rlm_query`` children are made from (``RunSpec.child``)."""

    lm: ModelChoice  # a child's root model: the RLM's root model (never a set generate_action), or another
    sub_lm: ModelChoice  # a child's sub-model: the RLM's sub-model, else the child's root model
    settings: RunSettings  # the RLM's own knobs, before a root model's preset changed any


@dataclass(frozen=True)
class RunSpec(Generic[M]):
    """Everything one run reads, fixed before it starts: ``RLM.run_spec`` builds the top-level
    one, ``child()`` each child's, and ``start.run_tree`` runs them, once ``resolved()``."""

    signature: type[dspy.Signature]
    instructions: str
    demos: tuple[dspy.Example, ...]
    settings: RunSettings
    validator: OutputValidator
    typed_subcalls: Mapping[str, TypedSubcall]
    tools: Mapping[str, Callable[..., object]]
    # the models as given (a name, None: the configured default) until resolved(), which a run
    # does as it starts: one cache and one limiter per model for the whole run
    lm: M
    sub_lm: M
    children: Children
    depth: int = 0  # 0: a top-level call; a child run is one deeper than its parent
    use_preset: bool = True  # without a program of its own, a run takes its root model's (resolved())
    module: dspy.Module | None = (
        None  # the module DSPy callbacks are shown: the RLM; a child run, its predictor
    )
    interpreter_factory: Callable[[], object] | None = (
        None  # a DSPy interpreter factory the cells run in, unless a call names one
    )
    verbose: bool = False  # each step logged on the ``rlmkit`` logger (dspy.RLM's verbose)
    mcp_servers: tuple[
        object, ...
    ] = ()  # MCP servers (mcp_tools.check_servers) whose tools a top-level call's tree gets (mcp_tools.py)
    log_dir: Path | None = None  # where a top-level run's tree streams its JSONL log
    is_resolved: bool = False  # resolved() made it: resolving it again is a no-op

    def resolved(self) -> RunSpec[Model]:
        """This spec with its models resolved (a bad name or a missing key fails here) and, when
        it has no program of its own, the program its root model ships with (``with_preset``).
        Once: a session resolves its call's spec to shape the task message, and the run it
        hands the spec to takes it as it is."""
        if self.is_resolved:  # its models are resolved already: only the type says otherwise
            return cast("RunSpec[Model]", self)
        lm, sub_lm = resolve_lm(self.lm), resolve_lm(self.sub_lm)
        instructions, demos, settings = with_preset(
            self.signature, self.instructions, self.demos, self.settings, lm, use_preset=self.use_preset
        )
        models_swapped = cast("RunSpec[Model]", self)  # replace() keeps a type argument; lm and sub_lm change
        return replace(
            models_swapped,
            lm=lm,
            sub_lm=sub_lm,
            instructions=instructions,
            demos=demos,
            settings=settings,
            is_resolved=True,
        )

    def child(self) -> RunSpec[ModelChoice]:
        """The spec of one ``rlm_query`` child run, one level down: a plain QA signature, the
        children's models, the same knobs (its own protocol object), sub-calls, tools, interpreter
        factory, verbosity and log folder."""
        plan = self.children
        signature, validator = _child_signature()
        settings = plan.settings.for_child()
        return RunSpec(
            signature=signature,
            instructions=signature.instructions,
            demos=(),
            settings=settings,
            validator=validator,
            typed_subcalls=self.typed_subcalls,
            tools=self.tools,
            lm=plan.lm,
            sub_lm=plan.sub_lm,
            children=Children(plan.lm, plan.sub_lm, settings),  # its own children run on its models
            depth=self.depth + 1,
            use_preset=self.use_preset,
            module=dspy.Predict(signature),
            interpreter_factory=self.interpreter_factory,
            verbose=self.verbose,
            log_dir=self.log_dir,
        )


@functools.cache
def _child_signature() -> tuple[type[dspy.Signature], OutputValidator]:
    signature = make_signature(CHILD_SIGNATURE)
    return signature, OutputValidator(signature)


def with_preset(
    signature: type[dspy.Signature],
    instructions: str,
    demos: tuple[dspy.Example, ...],
    settings: RunSettings,
    lm: Model,
    *,
    use_preset: bool = True,
) -> tuple[str, tuple[dspy.Example, ...], RunSettings]:
    """Instructions, demos and settings of a run: the given ones, or, when there are neither
    instructions (other than the signature's) nor demos, the program its root model ships with
    (``lm.traits.preset``: the embedded model's tuned program). ``use_preset=False`` turns that off."""
    own = (instructions, demos, settings)
    preset = lm.traits.preset
    if not preset or not use_preset or demos or instructions != signature.instructions:
        return own
    fields = {*signature.input_fields, *signature.output_fields, "transcript"}
    preset_demos = tuple(dspy.Example(**d) for d in preset.get("demos", []) if set(d) <= fields)
    defaults = RunSettings()
    knobs = {
        name: value
        for name, value in preset.get("knobs", {}).items()
        if getattr(settings, name) == getattr(defaults, name)  # a knob the user set wins
    }
    return preset.get("instructions") or instructions, preset_demos, settings.replace(**knobs)


__all__ = ["CHILD_SIGNATURE", "Children", "RunSpec", "with_preset"]
