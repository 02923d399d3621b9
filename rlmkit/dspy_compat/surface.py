"""What an ``rlmkit.RLM`` shows a DSPy program that expects ``dspy.RLM``'s attributes:
``max_iters``, ``generate_action``, ``extract`` (see ``predictors.py``), and the extract
fallback when a set ``extract`` is to answer once the iterations run out. A mixin, so these
stay here and ``rlm.py`` keeps rlmkit's own shape."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import dspy

from rlmkit.dspy_compat import predictors
from rlmkit.dspy_compat.steps import final_reasoning
from rlmkit.errors import BudgetExceeded, MaxIterationsError, RunError


class DSPyRLMSurface:
    _action_override: Any = None  # a set generate_action: runs each step in place of the root model
    _extract_override: Any = None  # a set extract: answers when the iterations run out

    @property
    def max_iters(self) -> int:
        """dspy.RLM's name for ``max_iterations``."""
        return self.settings.max_iterations

    @max_iters.setter
    def max_iters(self, value: int) -> None:
        self.max_iterations = value

    @property
    def generate_action(self) -> Any:
        if self._action_override is not None:
            return self._action_override
        factory = self.interpreter_factory
        return dspy.Predict(predictors.action_signature(self.signature, self.instructions, factory))

    @generate_action.setter
    def generate_action(self, predictor: Any) -> None:
        self._action_override = predictor

    @property
    def extract(self) -> Any:
        if self._extract_override is not None:
            return self._extract_override
        return dspy.Predict(predictors.extract_signature(self.signature, self.instructions))

    @extract.setter
    def extract(self, predictor: Any) -> None:
        self._extract_override = predictor

    async def run_or_extract(self, run: Awaitable[tuple[dict[str, Any], Any]]) -> tuple[dict, Any, str]:
        """``(outputs, trajectory, final_reasoning)`` of ``run``; past its iterations, a set
        ``extract`` gives the outputs from its steps, as in dspy.RLM.

        A run that ran out (of its budget, its deadline or its iterations) while a DSPy optimizer
        traces the program (``optimizer_tracing()``: GEPA capturing traces, BootstrapFewShot's
        teacher) is a prediction, not an error: every output is ``None`` and
        the trajectory so far rides on it (its ``status`` and ``error`` say what ran out). The
        optimizer's metric scores it as a failure; GEPA reflects on it with the metric's feedback
        instead of dropping the example, and BootstrapFewShot, whose metric fails it, takes no
        demo from it. Outside an optimizer the error is raised, trajectory attached."""
        try:
            outputs, trajectory = await run
            return outputs, trajectory, final_reasoning(trajectory)
        except MaxIterationsError as exc:
            steps, extract = exc.trajectory, self._extract_override
            if extract is not None and steps is not None:
                outputs = await predictors.extract_outputs(extract, steps, self.validator)
                return outputs, steps, predictors.EXTRACTED
            if not optimizer_tracing() or exc.trajectory is None:
                raise
            return self._ran_out(exc)
        except BudgetExceeded as exc:
            if not optimizer_tracing() or exc.trajectory is None:
                raise
            return self._ran_out(exc)

    def _ran_out(self, exc: RunError) -> tuple[dict, Any, str]:
        return dict.fromkeys(self.signature.output_fields), exc.trajectory, f"{type(exc).__name__}: {exc}"


def optimizer_tracing() -> bool:
    """A DSPy optimizer is recording this call's trace. DSPy's optimizers run a program under
    ``dspy.context(trace=[])``, a trace list of their own; any other call sees the default list
    of DSPy's global settings (every ``dspy.context`` copies that same list in)."""
    import importlib

    trace = dspy.settings.trace
    if trace is None:
        return False
    settings_module = importlib.import_module("dspy.dsp.utils.settings")
    default = getattr(settings_module, "main_thread_config", {}).get("trace")
    return trace is not default
