"""``rlmkit.RLM``: a Recursive Language Model as a typed, composable ``dspy.Module``.

    rlm = rlmkit.RLM("context, question -> answer: int", lm=lm)
    pred = rlm(context=big_text, question="How many ...?")
    pred.answer, pred.trajectory

The root instructions and demos live on one ``dspy.Predict`` (``named_predictors()`` ->
``[("root", ...)]``), so DSPy optimizers tune them like any other program; ``save``/``load``
round-trip them together with the RLM's knobs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import dspy

from rlmkit.budget import Budget
from rlmkit.dspy_compat import keywords, names, predictors
from rlmkit.dspy_compat import verbose as _verbose  # noqa: F401 - registers the verbose=True listener
from rlmkit.dspy_compat.surface import DSPyRLMSurface
from rlmkit.dspy_compat.tools import host_function, normalize_tools
from rlmkit.model_choice import resolve_lm
from rlmkit.observe import dspy_bridge  # noqa: F401 - registers DSPy callbacks, usage and history
from rlmkit.observe.streaming import stream_run
from rlmkit.prompting import Display
from rlmkit.protocols import Protocol
from rlmkit.run import mcp_tools
from rlmkit.run.entry import CallOptions, call_sync
from rlmkit.run.inputs import RunInputs
from rlmkit.run.spec import Children, ModelChoice, RunSpec
from rlmkit.run.start import run_tree
from rlmkit.run.typed_subcalls import make_typed_subcalls
from rlmkit.sandbox.base import SandboxLimits
from rlmkit.settings import DEFAULT_MAX_LLM_CALLS, KNOBS, SUBCALL_MAX_TOKENS, TURN_MAX_TOKENS, RunSettings
from rlmkit.signature import OutputValidator, make_signature
from rlmkit.trajectory import Trajectory


class RLM(DSPyRLMSurface, dspy.Module):
    """A Recursive Language Model over a dspy signature: the inputs live as variables in a
    sandboxed Python REPL, the root model writes code there and calls sub-models as functions.

    Calling it (``rlm(**inputs)``, or ``await rlm.acall(**inputs)``) returns a
    ``dspy.Prediction`` with the signature's outputs, validated, and ``trajectory``. Every
    keyword is checked when the RLM is built, before any model call; each knob can be read and
    set afterwards as an attribute (``rlm.max_iterations = 5``).

    Args:
        signature: A dspy signature, as a string (``"context, question -> answer: int"``) or a
            ``dspy.Signature`` class. Its input fields become REPL variables; its output fields
            are what the run must submit.
        lm: The root model: an ``rlmkit.LM``, a ``dspy.LM`` or other ``dspy.BaseLM``, a
            litellm model string, or any object implementing ``rlmkit.Model``. None: the model
            configured when the RLM is called (``dspy.configure``, ``rlmkit.configure``,
            ``$RLMKIT_MODEL``, a provider key in the environment, else the embedded model).
        sub_lm: The model behind ``llm_query`` and typed sub-calls (same forms as ``lm``).
            None: the root model.
        subcalls: ``{name: dspy.Signature or callable}``: each becomes a REPL function; a
            signature is a typed sub-call (validated outputs), a callable a host tool.
        max_iterations: Root turns before the model is asked once to answer (default 20);
            past that, ``MaxIterationsError``.
        max_depth: How deep ``rlm_query`` recurses: 1 makes it a plain sub-call, 2 or more
            starts a child RLM one level down.
        budget: A ``rlmkit.Budget`` (calls, tokens, cost, seconds) shared by the whole call
            tree. None: a cap of 500 model calls; ``Budget()`` for no cap at all.
        protocol: How a run ends: ``"submit"`` (``SUBMIT(field=...)``), ``"final"``
            (``FINAL(...)`` / ``FINAL_VAR(name)``), ``"answer"`` (the rlms answer dict), or a
            ``Protocol`` object.
        sandbox: Where code runs: ``"process"`` (a confined worker process), ``"monty"``, or
            ``"inline"`` (this process, for debugging only).
        cell_timeout: Seconds of code time one cell may run (None: no limit); a timed-out
            cell is interrupted and its worker restarted.
        max_concurrency: Items of batched sub-calls that run at once, across the whole tree.
        limits: ``SandboxLimits`` for the worker (memory, processes, files, disk, network).
        display: ``Display``: how much of the inputs, outputs and sub-call reading the model
            is shown, and how much of them the trajectory keeps.
        log_dir: A folder each run is streamed to as JSONL while it runs (``TrajectoryLog``).
        instructions: The root's task instructions (default: the signature's docstring).
        max_tokens: Output cap of one root turn (a smaller cap set on the model wins).
        sub_max_tokens: Output cap of one sub-call.
        blocks_per_turn: Code blocks run per root turn (None: all); 1 also stops the reply at
            its first block's closing fence, so the model reads real output before going on.
        hold_unread_answers: Hold back an answer given in a turn whose code also printed
            output, until the model has read that output and answers again.
        use_preset: Run the program the root model ships with (``Model.traits.preset``) when
            this RLM has no instructions or demos of its own.
        max_iters: dspy.RLM's name for ``max_iterations`` (give one of the two).
        max_llm_calls: Sub-model calls one call may make; past it the REPL code gets a
            ``RuntimeError`` it can handle (dspy.RLM's cap). None: only the budget caps them.
        max_output_chars: dspy.RLM's name for ``display.max_output_chars``: REPL output shown
            to the model per turn.
        verbose: Log each step of a run on the ``rlmkit`` logger (INFO), as dspy.RLM does.
        tools: dspy.RLM's tools: plain callables or ``dspy.Tool``s, sync or async, each a REPL
            function under its name.
        interpreter_factory: dspy.RLM's hook: a zero-argument callable returning a DSPy
            ``CodeInterpreter`` that runs the code instead of an rlmkit sandbox.
        mcp_servers: MCP servers whose tools become REPL functions, each a URL (streamable
            HTTP), a command as a list of strings or an ``mcp.StdioServerParameters`` (stdio), or
            an ``MCPServer`` (in process). Arguments are checked against each tool's input schema
            in the REPL; every call is in the trajectory (``kind="mcp_tool"``) and the budget.

    Attributes:
        child_lm: The root model of child runs (``rlm_query`` at ``max_depth`` 2 or more), set
            after building (same forms as ``lm``). None: the root model. Their sub-calls go to
            ``sub_lm`` when there is one, else to this model.

    Raises:
        SignatureError: The signature cannot be parsed or has no output fields.
        ValueError: A field, sub-call or tool name that the REPL reserves or that two of them
            share (dspy.RLM's errors).
        UserError: A knob out of range; its subclass ConfigError for an unknown protocol or
            sandbox, or for one knob given under both its names with different values.
        LMConfigError: A model that cannot be routed, or whose key is missing.
    """

    def __init__(
        self,
        signature: str | type[dspy.Signature],
        *,
        lm: Any = None,
        sub_lm: Any = None,
        subcalls: dict[str, Any] | None = None,
        max_iterations: int | None = None,
        max_depth: int = 1,
        budget: Budget | None = None,
        protocol: str | Protocol = "submit",
        sandbox: str = "process",
        cell_timeout: float | None = 60.0,
        max_concurrency: int = 16,
        limits: SandboxLimits | None = None,
        display: Display | None = None,
        log_dir: str | Path | None = None,
        instructions: str | None = None,
        max_tokens: int | None = TURN_MAX_TOKENS,
        sub_max_tokens: int | None = SUBCALL_MAX_TOKENS,
        blocks_per_turn: int | None = None,
        hold_unread_answers: bool = False,
        use_preset: bool = True,
        # dspy.RLM's keywords, with dspy's meaning (rlmkit/dspy_compat/)
        max_iters: int | None = None,
        max_llm_calls: int | None = DEFAULT_MAX_LLM_CALLS,
        max_output_chars: int | None = None,
        verbose: bool = False,
        tools: list[Any] | None = None,
        interpreter_factory: Any = None,
        mcp_servers: list[Any] | None = None,
    ):
        super().__init__()
        self.signature = make_signature(signature)
        user_tools = normalize_tools(tools)
        subcalls = dict(subcalls or {})
        if both := sorted(set(subcalls) & set(user_tools)):
            raise ValueError(f"{both} given both as tools and as subcalls: name each once")
        names.check_field_names(
            self.signature.input_fields, self.signature.output_fields, {*user_tools, *subcalls}
        )
        self.verbose = verbose
        self.interpreter_factory = keywords.interpreter_factory(interpreter_factory)
        self.settings = RunSettings(
            max_iterations=keywords.max_iterations(max_iterations, max_iters),
            max_llm_calls=max_llm_calls,
            max_depth=max_depth,
            cell_timeout=cell_timeout,
            max_concurrency=max_concurrency,
            max_tokens=max_tokens,
            sub_max_tokens=sub_max_tokens,
            blocks_per_turn=blocks_per_turn,
            hold_unread_answers=hold_unread_answers,
            sandbox=sandbox,
            protocol=protocol,
            limits=limits or SandboxLimits(),
            display=keywords.display(display, max_output_chars),
            **({} if budget is None else {"budget": budget}),  # none given: the settings' default cap
        )
        self.use_preset = use_preset  # the root model's shipped program when this RLM has none
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.subcalls = {**subcalls, **{name: host_function(tool) for name, tool in user_tools.items()}}
        self.typed_subcalls, self.tools = make_typed_subcalls(self.subcalls)
        self.validator = OutputValidator(self.signature)
        self.mcp_servers = mcp_tools.check_servers(mcp_servers)
        # Models given (by name, dspy.LM or LM) are resolved once here, so a bad name or a
        # missing key fails now; None follows whatever is configured when the RLM is called.
        self._lm_spec = resolve_lm(lm) if lm is not None else None
        self._sub_lm_spec = resolve_lm(sub_lm) if sub_lm is not None else None
        self._sub_lm_given = sub_lm  # what ``rlm.sub_lm`` shows: the caller's own object, as dspy.RLM
        # the root model of child runs (rlm_query at max_depth 2 or more); None: the root model.
        # A rollout sets the sub-model here: only its top-level root is the policy being trained.
        self.child_lm: Any = None
        root_sig = self.signature.with_instructions(
            instructions if instructions is not None else self.signature.instructions
        )
        self.root = dspy.Predict(root_sig)  # holds the optimizable instructions and demos

    # -- knobs: each one is a field of the frozen settings, read and set by name ----------------
    def __getattr__(self, name: str) -> Any:
        settings = self.__dict__.get("settings")  # absent while copying or unpickling
        if settings is not None and name in KNOBS:
            return getattr(settings, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in KNOBS and "settings" in self.__dict__:
            self.settings = self.settings.replace(**{name: value})  # checked like the constructor
        else:
            super().__setattr__(name, value)

    @property
    def sandbox_name(self) -> str:
        return self.settings.sandbox

    @sandbox_name.setter
    def sandbox_name(self, name: str) -> None:
        self.sandbox = name

    # -- what optimizers tune ------------------------------------------------------------
    @property
    def instructions(self) -> str:
        return self.root.signature.instructions

    @instructions.setter
    def instructions(self, text: str) -> None:
        self.root.signature = self.root.signature.with_instructions(text)

    @property
    def demos(self) -> list[Any]:
        return list(self.root.demos)

    # -- models --------------------------------------------------------------------------
    @property
    def lm(self) -> Any:
        """The root model (None spec: the configured default, resolved now)."""
        if self._action_override is not None:
            return predictors.ActionLM(self._action_override, self.settings.max_iterations)
        return resolve_lm(self._lm_spec)

    @property
    def sub_lm(self) -> Any:
        """The sub-model as given (``None``: sub-calls go to the root model), the very object
        passed, as dspy.RLM keeps it. ``resolved_sub_lm()`` is the model sub-calls use."""
        return self._sub_lm_given

    def resolved_sub_lm(self) -> Any:
        """The model sub-calls go to: the sub-model, else the root model (resolved now)."""
        return resolve_lm(self._sub_lm_spec) if self._sub_lm_spec is not None else self.lm

    # -- calling -------------------------------------------------------------------------
    def forward(self, interpreter: Any = None, /, **inputs: Any) -> dspy.Prediction:
        """Sync calls run on one long-lived event loop, shared by every RLM in the process, so
        connection pools (one per loop) are reused instead of leaked per call. Ctrl-C stops the
        call (its worker is closed) and raises KeyboardInterrupt here."""
        return call_sync(self.aforward, interpreter, **inputs)

    def stream(self, **inputs: Any) -> AsyncIterator[Any]:
        """``async for item in rlm.stream(**inputs)``: the run's ``rlmkit.events`` as they
        happen, then the ``dspy.Prediction`` (a failed run raises its error after its events)."""
        return stream_run(self, inputs)

    async def aforward(self, interpreter: Any = None, /, **inputs: Any) -> dspy.Prediction:
        """The one entry point (``__call__`` and ``acall`` come here). ``_task={...}`` (optional)
        is stored in ``trajectory.meta.task``: evaluation uses it for suite, example id and gold.
        ``_rollout_id=k`` (default: the enclosing ``rlmkit.models.lm_cache.rollout(k)``) makes every LM call
        of the run sample k, so K samples of one task are K distinct runs, not K cache hits.
        ``interpreter`` (positional, as in DSPy) or ``interpreter_factory=``: a DSPy interpreter
        for this call's cells (``sandbox/interpreter.py``)."""
        keywords.refuse_interpreter_keyword(inputs, self.signature.input_fields)
        options = CallOptions.pop(inputs)
        factory = keywords.interpreter_factory(inputs.pop("interpreter_factory", None))
        factory = interpreter if interpreter is not None else factory
        checked = self.check_inputs(inputs)  # before the models are resolved: a mistake fails first
        run = run_tree(
            self.run_spec(), checked, task=options.task, rollout_id=options.rollout_id, interpreter=factory
        )
        return await self.prediction(run, inputs)

    async def prediction(
        self, run: Awaitable[tuple[dict[str, Any], Trajectory]], inputs: dict[str, Any]
    ) -> dspy.Prediction:
        """The one way out of a call, a plain one or a session's: the ``dspy.Prediction`` of
        ``run`` (the outputs, ``trajectory`` and ``final_reasoning``; past its iterations a set
        ``extract`` answers), recorded in the DSPy trace like a ``Predict`` call on ``inputs``."""
        outputs, trajectory, reasoning = await self.run_or_extract(run)
        _record_dspy_trace(self.root, inputs, outputs)
        return dspy.Prediction(**outputs, trajectory=trajectory, final_reasoning=reasoning)

    def check_inputs(self, inputs: dict[str, Any]) -> RunInputs:
        """``inputs`` as a run takes them, checked before any model call (``MissingInputError``)."""
        return RunInputs.check(self.signature, inputs, self.settings.display)

    def run_spec(self) -> RunSpec[ModelChoice]:
        """What a top-level call of this RLM runs: its program, its models (resolved as the run
        starts), its knobs, and what its ``rlm_query`` children are made from (``RunSpec.child``)."""

        def root_model() -> Any:  # a set generate_action answers in place of the root model
            action = self._action_override
            return self._lm_spec if action is None else predictors.ActionLM(action, self.max_iterations)

        # sub-calls go to the sub-model, else to the root model (a generate_action of their own)
        sub_lm = self._sub_lm_spec if self._sub_lm_spec is not None else root_model()
        child_lm = self.child_lm if self.child_lm is not None else self._lm_spec
        child_sub_lm = self._sub_lm_spec if self._sub_lm_spec is not None else child_lm
        return RunSpec(
            signature=self.signature,
            instructions=self.instructions,
            demos=tuple(self.demos),
            settings=self.settings,
            validator=self.validator,
            typed_subcalls=self.typed_subcalls,
            tools=self.tools,
            lm=root_model(),
            sub_lm=sub_lm,
            children=Children(child_lm, child_sub_lm, self.settings),
            use_preset=self.use_preset,
            module=self,
            interpreter_factory=self.interpreter_factory,
            mcp_servers=self.mcp_servers,
            verbose=self.verbose,
            log_dir=self.log_dir,
        )

    def session(self, **inputs: Any) -> Any:
        """``with rlm.session(context=big) as s: s(question=...)``: many calls over inputs that
        cross into one live REPL once; the model's variables persist between calls. Options
        (``history_calls``, ``history_chars``, ``window_tokens``, ``compact_at``, ``budget``,
        ``idle_timeout``, ``path``) are
        ``rlmkit.Session``'s keywords."""
        from rlmkit.session import Session

        return Session(self, **inputs)

    # -- persistence -----------------------------------------------------------------------
    def dump_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {**super().dump_state(*args, **kwargs), "rlm": self.settings.to_state()}

    def load_state(self, state: dict[str, Any], *args: Any, **kwargs: Any) -> RLM:
        if "generate_action" in state and "root" not in state:  # a program saved from dspy.RLM
            state = {**state, "root": predictors.root_state_from_dspy(state, self.signature)}
            state = {k: v for k, v in state.items() if k not in ("generate_action", "extract")}
        if state.get("rlm"):  # knobs an older file lacks keep their current values
            self.settings = self.settings.from_state(state["rlm"])
        super().load_state({k: v for k, v in state.items() if k != "rlm"}, *args, **kwargs)
        return self


def _record_dspy_trace(predictor: dspy.Predict, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
    """Let DSPy's optimizers (BootstrapFewShot & co.) see this call like a Predict call.

    Long inputs are cut, so demos bootstrapped from a 10 MB context stay small."""
    trace = dspy.settings.trace
    if trace is None or dspy.settings.max_trace_size <= 0:
        return
    if len(trace) >= dspy.settings.max_trace_size:  # bounded as DSPy bounds it: a service runs all day
        del trace[: len(trace) - dspy.settings.max_trace_size + 1]
    short = {
        k: (v if not isinstance(v, str) or len(v) <= 2_000 else v[:1_000] + " ... " + v[-1_000:])
        for k, v in inputs.items()
        if not isinstance(v, Path)
    }
    trace.append((predictor, short, dspy.Prediction(**outputs)))
