"""What a run is, as data: the ``Tree`` a call tree shares, the frozen ``RunSpec`` of one run,
and the ``RunState`` that run fills in.

The loop (``run.py``) and the sub-calls (``subcalls.py``) read these and never the ``RLM``: a
child run's spec is derived from its parent's (``RunSpec.child``), and ``tree.run_tree`` runs it,
so imports point one way (``rlm -> tree -> run -> subcalls -> run_state``).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import dspy

from rlmkit.budget import Spending
from rlmkit.call_hooks import CallHooks, PlainCall
from rlmkit.guards import check_values
from rlmkit.model_choice import resolve_lm
from rlmkit.settings import RunSettings
from rlmkit.signature import OutputValidator, make_signature
from rlmkit.trajectory import CodeBlock, RunMeta, SubCall, Trajectory, TrajectoryLog


@dataclass
class Tree:
    """What a whole call tree shares: the loop, its Spending, the fan-out semaphore (how many batched
    sub-call items run at once), the clock and the log."""

    loop: asyncio.AbstractEventLoop
    spending: Spending  # of the root's Budget: children charge the same counters
    semaphore: asyncio.Semaphore
    log: TrajectoryLog | None = None
    t0: float = field(default_factory=time.monotonic)
    rollout_id: int | None = None  # every LM call of the tree is this sample (distinct cache entries)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


CHILD_SIGNATURE = "context, question -> answer"  # what every rlm_query child run answers


@dataclass(frozen=True)
class Children:
    """What a run's ``rlm_query`` children are made from (``RunSpec.child``)."""

    lm: Any  # a child's root model: the RLM's root model (never a set generate_action), or another
    sub_lm: Any  # a child's sub-model: the RLM's sub-model, else the child's root model
    settings: RunSettings  # the RLM's own knobs, before a root model's preset changed any


@dataclass(frozen=True)
class RunSpec:
    """Everything one run reads, fixed before it starts: ``RLM.run_spec`` builds the top-level
    one, ``child()`` each child's, and ``tree.run_tree`` runs them, once ``resolved()``."""

    signature: Any  # the dspy.Signature class
    instructions: str
    demos: tuple[Any, ...]
    settings: RunSettings
    validator: OutputValidator
    typed_subcalls: Mapping[str, Any]  # name -> subcalls.TypedSubcall
    tools: Mapping[str, Callable[..., Any]]
    # the models as given (a name, None: the configured default) until resolved(), which a run
    # does as it starts: one cache and one limiter per model for the whole run
    lm: Any
    sub_lm: Any
    children: Children
    depth: int = 0  # 0: a top-level call; a child run is one deeper than its parent
    use_preset: bool = True  # without a program of its own, a run takes its root model's (resolved())
    module: Any = None  # the dspy.Module DSPy callbacks are shown: the RLM; a child run, its predictor
    interpreter_factory: Any = None  # a DSPy interpreter factory the cells run in, unless a call names one
    verbose: bool = False  # each step logged on the ``rlmkit`` logger (dspy.RLM's verbose)
    log_dir: Path | None = None  # where a top-level run's tree streams its JSONL log

    def resolved(self) -> RunSpec:
        """This spec with its models resolved (a bad name or a missing key fails here) and, when
        it has no program of its own, the program its root model ships with (``program_for``)."""
        lm, sub_lm = resolve_lm(self.lm), resolve_lm(self.sub_lm)
        instructions, demos, settings = program_for(
            self.signature, self.instructions, self.demos, self.settings, lm, use_preset=self.use_preset
        )
        return replace(self, lm=lm, sub_lm=sub_lm, instructions=instructions, demos=demos, settings=settings)

    def child(self) -> RunSpec:
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
def _child_signature() -> tuple[Any, OutputValidator]:
    signature = make_signature(CHILD_SIGNATURE)
    return signature, OutputValidator(signature)


def program_for(
    signature: Any,
    instructions: str,
    demos: tuple[Any, ...],
    settings: RunSettings,
    lm: Any,
    *,
    use_preset: bool = True,
) -> tuple[str, tuple[Any, ...], RunSettings]:
    """Instructions, demos and settings of a run: the given ones, or, when there are neither
    instructions (other than the signature's) nor demos, the program its root model ships with
    (``lm.traits.preset``: the embedded model's tuned program). ``use_preset=False`` turns that off."""
    own = (instructions, demos, settings)
    preset = lm.traits.preset
    if not preset or not use_preset or demos or instructions != signature.instructions:
        return own
    fields = {*signature.input_fields, *signature.output_fields, "transcript"}
    preset_demos = tuple(dspy.Example(**d) for d in preset.get("demos", ()) if set(d) <= fields)
    defaults = RunSettings()
    knobs = {
        name: value
        for name, value in preset.get("knobs", {}).items()
        if getattr(settings, name) == getattr(defaults, name)  # a knob the user set wins
    }
    return preset.get("instructions") or instructions, preset_demos, settings.replace(**knobs)


class RunState:
    """One run in progress: its trajectory, and the code block sub-calls are recorded into."""

    def __init__(self, spec: RunSpec, tree: Tree, meta: RunMeta):
        self.spec = spec
        self.tree = tree
        self.depth = spec.depth
        self.trajectory = Trajectory(meta=meta)
        self.submitted: dict[str, Any] | None = None
        self.current_block: CodeBlock | None = None
        self.sandbox_ready: asyncio.Future | None = None  # set by run_loop: the worker's start
        # fills in the sha256 of big inputs (``describe_inputs``); run_loop runs it in a thread
        self.hash_inputs: Callable[[], None] | None = None
        self.start_logged: asyncio.Future | None = None  # set by run_loop: hashed, start record written
        self.hooks: CallHooks = PlainCall()  # its REPL's lease and what its caller adds (tree.run_tree)
        self._lock = threading.Lock()

    def record_subcall(self, node: SubCall) -> None:
        with self._lock:
            if self.current_block is not None:
                self.current_block.subcalls.append(node)
            self.trajectory.usage = self.trajectory.usage.add(node.usage)

    def submit(self, outputs: dict[str, Any]) -> None:
        """Validate outputs (ValueError goes back to the model) and keep them."""
        check_values(outputs)
        self.submitted = self.spec.validator.validate(outputs)
