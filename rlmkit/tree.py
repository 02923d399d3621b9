"""A call tree's runs, from their specs alone.

    run_tree(spec, inputs)          a top-level call: a new Tree (budget, fan-out limit, clock, log)
      -> run_loop(state, ...)       run.py: the one loop
           rlm_query(...)           subcalls.py -> start_child -> run_tree(spec.child(), ...)

The ``RLM`` builds the top-level ``RunSpec`` (``RLM.run_spec``) and calls ``run_tree``; a child
run's spec is derived from its parent's (``RunSpec.child``), so nothing here calls back into the
module.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import rlmkit
from rlmkit.call_hooks import CallHooks, PlainCall
from rlmkit.errors import MissingInputError
from rlmkit.inputs import load_input
from rlmkit.prompting import Display
from rlmkit.run import run_loop
from rlmkit.run_state import RunSpec, RunState, Tree
from rlmkit.sandbox.interpreter import is_factory, launcher, make_interpreter
from rlmkit.signature import signature_text
from rlmkit.trajectory import RunMeta, Trajectory, TrajectoryLog


@dataclass(frozen=True)
class RunInputs:
    """A run's inputs, checked against its signature before any model call: ``values`` as given,
    ``variables`` as the REPL gets them, ``aliases`` (``context`` names the first long input)."""

    values: dict[str, Any]
    variables: dict[str, Any]
    aliases: dict[str, str]

    @classmethod
    def check(cls, signature: Any, inputs: dict[str, Any], display: Display) -> RunInputs:
        missing = [name for name in signature.input_fields if name not in inputs]
        if missing:  # the wording is dspy.RLM's: DSPy users match on it
            raise MissingInputError(
                f"Missing required inputs: {missing} (signature {signature_text(signature)!r})"
            )
        unknown = sorted(name for name in inputs if name not in signature.input_fields)
        if unknown:
            raise MissingInputError(
                f"Unexpected inputs not declared in the signature: {unknown} "
                f"(the signature takes {list(signature.input_fields)})"
            )
        variables = {name: load_input(name, inputs[name]) for name in signature.input_fields}
        aliases: dict[str, str] = {}
        if "context" not in variables:
            long_inputs = [n for n, v in variables.items() if _size(v) > display.full_input_chars]
            if long_inputs:
                aliases["context"] = long_inputs[0]
        return cls(dict(inputs), variables, aliases)


async def run_tree(
    spec: RunSpec,
    inputs: RunInputs,
    *,
    tree: Tree | None = None,
    parent_id: str | None = None,
    task: dict[str, Any] | None = None,
    rollout_id: int | None = None,
    interpreter: Any = None,
    hooks: CallHooks | None = None,
) -> tuple[dict[str, Any], Trajectory]:
    """Run ``spec`` inside ``tree`` (a new tree for a top-level call); each ``rlm_query`` child runs
    from ``spec.child()`` in the same tree. ``interpreter``: a DSPy interpreter (or factory) for this
    call's cells, in place of ``spec.interpreter_factory``. ``hooks``: what the caller decides (where
    the REPL comes from, the budget, the task message's notes, the inputs' descriptions); a session
    call passes its own (``rlmkit.session.call.SessionCall``), else the call is a ``PlainCall``."""
    factory = interpreter or spec.interpreter_factory
    # a factory's interpreter is made (and checked) first, as dspy.RLM does; if the run fails
    # before its sandbox exists, it is shut down here, else the sandbox shuts it down
    made = None
    if hooks is None:  # a session lends its own live REPL and adds its history instead
        made = make_interpreter(factory) if is_factory(factory) else None
        launch = (
            None if factory is None else launcher(made or factory, spec.signature, owned=made is not None)
        )
        hooks = PlainCall(launch)
    try:
        resolved = spec.resolved()  # models resolved once, here
        state = _run_state(resolved, inputs, tree, parent_id, task, rollout_id, factory, hooks)
    except BaseException:
        if made is not None:
            made.shutdown()
        raise

    def start_child(child_inputs: dict[str, Any]) -> Any:
        child = spec.child()
        checked = RunInputs.check(child.signature, child_inputs, spec.children.settings.display)
        return run_tree(child, checked, tree=state.tree, parent_id=state.trajectory.meta.run_id)

    outputs = await run_loop(state, inputs.variables, inputs.aliases, start_child)
    return outputs, state.trajectory


def _run_state(
    spec: RunSpec,
    inputs: RunInputs,
    tree: Tree | None,
    parent_id: str | None,
    task: dict[str, Any] | None,
    rollout_id: int | None,
    factory: Any,
    hooks: CallHooks,
) -> RunState:
    settings = spec.settings
    if tree is None:
        tree = Tree(
            spending=hooks.spending(settings.budget),
            loop=asyncio.get_running_loop(),
            semaphore=asyncio.Semaphore(settings.max_concurrency),
            log=TrajectoryLog(spec.log_dir) if spec.log_dir is not None else None,
            rollout_id=rollout_id,
        )
    # big text's sha256: off the critical path (a session hashes each input once)
    described, hash_inputs = hooks.describe_inputs(inputs.variables)
    meta = RunMeta(
        parent_id=parent_id,
        depth=spec.depth,
        signature=signature_text(spec.signature),
        instructions=spec.instructions,
        protocol=settings.protocol.name,
        sandbox=settings.sandbox
        if factory is None
        else f"interpreter:{getattr(factory, '__name__', type(factory).__name__)}",
        model=spec.lm.model,
        sub_model=spec.sub_lm.model,
        task=task or {},
        limits={**tree.spending.budget.limits(), **settings.record()},
        inputs=described,
        rlmkit_version=rlmkit.__version__,
        session=hooks.meta,
    )
    state = RunState(spec, tree, meta)
    state.hash_inputs = hash_inputs
    state.hooks = hooks
    hooks.meta = state.trajectory.meta.session  # what the caller learns later lands there
    return state


def _size(value: Any) -> int:
    return len(value) if hasattr(value, "__len__") else 0


__all__ = ["RunInputs", "run_tree"]
