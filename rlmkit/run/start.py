"""Starting a call tree's runs, from their specs alone.

    run_tree(spec, inputs)          a top-level call: a new Tree (budget, fan-out limit, clock, log)
      -> run_loop(state, ...)       loop.py: the one loop
           rlm_query(...)           subcalls.py -> start_child -> run_tree(spec.child(), ...)

The ``RLM`` builds the top-level ``RunSpec`` (``RLM.run_spec``) and calls ``run_tree``; a child
run's spec is derived from its parent's (``RunSpec.child``), so nothing here calls back into the
module.
"""

from __future__ import annotations

import asyncio
from typing import Any

import rlmkit
from rlmkit.errors import ConfigError, RunError
from rlmkit.models.contract import Model
from rlmkit.prompting import FUNCTION_DOCS
from rlmkit.run import mcp_tools
from rlmkit.run.call_tree import Tree
from rlmkit.run.client_tools import RunControl
from rlmkit.run.hooks import CallHooks, PlainCall
from rlmkit.run.inputs import RunInputs
from rlmkit.run.loop import run_loop
from rlmkit.run.spec import ModelChoice, RunSpec
from rlmkit.run.state import RunState
from rlmkit.sandbox.interpreter import is_factory, launcher, make_interpreter
from rlmkit.signature import signature_text
from rlmkit.trajectory import RunMeta, Trajectory, TrajectoryLog


async def run_tree(
    spec: RunSpec[ModelChoice],
    inputs: RunInputs,
    *,
    tree: Tree | None = None,
    parent_id: str | None = None,
    task: dict[str, Any] | None = None,
    rollout_id: int | None = None,
    interpreter: Any = None,
    hooks: CallHooks | None = None,
    control: RunControl | None = None,
) -> tuple[dict[str, Any], Trajectory]:
    """Run ``spec`` inside ``tree`` (a new tree for a top-level call); each ``rlm_query`` child runs
    from ``spec.child()`` in the same tree. ``interpreter``: a DSPy interpreter (or factory) for this
    call's cells, in place of ``spec.interpreter_factory``. ``hooks``: what the caller decides (where
    the REPL comes from, the budget, the task message's notes, the inputs' descriptions); a session
    call passes its own (``rlmkit.session.call.SessionCall``), else the call is a ``PlainCall``.
    ``control``: the caller's hold on a top-level call (``client_tools.RunControl``): the client's
    tools, which become REPL functions, and the request to stop between turns."""
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
        if control is not None and tree is None:
            _check_client_tools(control, reserved_names(resolved))
        state = _run_state(resolved, inputs, tree, parent_id, task, rollout_id, factory, hooks, control)
        if control is not None and tree is None:
            control.trajectory = state.trajectory  # what it has finished, readable while it runs
    except BaseException:
        if made is not None:
            made.shutdown()
        raise

    def start_child(child_inputs: dict[str, Any]) -> Any:
        child = spec.child()
        checked = RunInputs.check(child.signature, child_inputs, spec.children.settings.display)
        return run_tree(child, checked, tree=state.tree, parent_id=state.trajectory.meta.run_id)

    if tree is not None or not resolved.mcp_servers:
        outputs = await run_loop(state, inputs.variables, inputs.aliases, start_child)
        return outputs, state.trajectory
    # a top-level call with MCP servers: their tools are listed before the system prompt names
    # them, every run of the tree calls them over the same connections, closed when it ends
    try:
        taken = reserved_names(resolved) | set(control.tools if control is not None else ())
        connections, state.tree.mcp_tools = await mcp_tools.connect(resolved.mcp_servers, taken)
    except BaseException as exc:
        if made is not None:  # no sandbox was made to shut it down
            made.shutdown()
        if isinstance(exc, RunError):  # a server that cannot start: the run's failure, recorded
            exc.trajectory = state.trajectory
            state.trajectory.status, state.trajectory.error = "error", str(exc)
            state.trajectory.error_type = type(exc).__name__
        raise
    try:
        outputs = await run_loop(state, inputs.variables, inputs.aliases, start_child)
    finally:
        await mcp_tools.close_all(connections)
    return outputs, state.trajectory


def reserved_names(spec: RunSpec[Model]) -> set[str]:
    """Names an MCP tool may not take in the REPL: the inputs, the sub-calls, the tools, the
    finishers and the helpers the prelude defines."""
    own = {*spec.signature.input_fields, *spec.typed_subcalls, *spec.tools}
    return own | set(FUNCTION_DOCS) | {"SUBMIT", "FINAL", "FINAL_VAR"}


def _check_client_tools(control: RunControl, taken: set[str]) -> None:
    """A client tool may not shadow what the REPL already has: ``ConfigError`` before any request."""
    clash = sorted(set(control.tools) & taken)
    if clash:
        raise ConfigError(
            f"client tool {clash[0]!r} cannot be a REPL function: the name is one of the RLM's own "
            "(an input, a sub-call, a tool or a helper)"
        )


def _run_state(
    spec: RunSpec[Model],
    inputs: RunInputs,
    tree: Tree | None,
    parent_id: str | None,
    task: dict[str, Any] | None,
    rollout_id: int | None,
    factory: Any,
    hooks: CallHooks,
    control: RunControl | None = None,
) -> RunState:
    settings = spec.settings
    if tree is None:
        tree = Tree(
            spending=hooks.spending(settings.budget),
            loop=asyncio.get_running_loop(),
            semaphore=asyncio.Semaphore(settings.max_concurrency),
            log=TrajectoryLog(spec.log_dir) if spec.log_dir is not None else None,
            rollout_id=rollout_id,
            control=control,
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
        compaction=hooks.compaction,
    )
    state = RunState(spec, tree, meta, hooks, hash_inputs)
    hooks.meta = state.trajectory.meta.session  # what the caller learns later lands there
    return state


__all__ = ["run_tree"]
