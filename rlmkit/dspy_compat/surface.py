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
from rlmkit.errors import MaxIterationsError


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
        ``extract`` gives the outputs from its steps, as in dspy.RLM."""
        try:
            outputs, trajectory = await run
            return outputs, trajectory, final_reasoning(trajectory)
        except MaxIterationsError as exc:
            if self._extract_override is None or exc.trajectory is None:
                raise
            outputs = await predictors.extract_outputs(self._extract_override, exc.trajectory, self.validator)
            return outputs, exc.trajectory, predictors.EXTRACTED
