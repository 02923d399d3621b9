"""The RLM side of a ``verifiers`` export: one real ``rlmkit.RLM`` run, driven one root turn at a time.

The RLM's root LM is a bridge: every prompt the RLM renders becomes one turn of the verifiers
agent, and the policy's reply (which verifiers samples and records with its tokens, as for
any environment) goes back to the RLM, which runs the code in rlmkit's sandbox and renders
the next prompt. When the RLM ends, the row's scorer grades its prediction. The loop is
written once, in rlmkit; this module only passes messages across. It imports no verifiers:
``verifiers_v1`` holds the verifiers 0.4 classes built on it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from optimizers.backends.options import RolloutOptions
from optimizers.backends.rlm_rollout import rollout_rlm, row_task
from rlmkit.loading import load
from rlmkit.models.contract import Completion, ModelTraits, settings_free_description

_DONE = object()


class BridgeLM:
    """A model (``rlmkit.models.contract.Model``) whose answers come from whoever reads
    ``requests`` (the verifiers turn loop); verifiers samples the policy, so no cap applies here."""

    model = "openai/verifiers-policy"
    traits = ModelTraits()

    def __init__(self) -> None:
        self.requests: asyncio.Queue = asyncio.Queue()
        self.replies: asyncio.Queue = asyncio.Queue()

    def describe(self) -> dict:
        return settings_free_description(self.model, "verifiers")

    async def acomplete(self, messages: list[dict], **_: Any) -> Completion:
        started = time.perf_counter()
        await self.requests.put(messages)
        text = await self.replies.get()
        return Completion.timed(text, self.model, started)


def row_of(info: Any) -> Any:
    """The canonical RL row a verifiers task carries in its ``info`` (``{"row": ...}``)."""
    from optimizers.compile.schema import RLRow

    data = json.loads(info) if isinstance(info, str) else info
    return RLRow.model_validate(data["row"])


class RLMSession:
    """One RLM run on ``row``, driven from the outside: ``next_prompt(reply)`` until it returns None."""

    def __init__(self, row: Any, options: dict[str, Any]):
        """``options``: the exported package's ``options.json``, the rollout options and ``max_turns``."""
        self.row = row
        self.options = RolloutOptions.part(options)
        self.bridge = BridgeLM()
        max_turns = int(options.get("max_turns", 10))
        self.rlm = rollout_rlm(row, self.options, max_turns, self.bridge, self.options.sub_model())
        self.example, inputs = row_task(row, self.options)
        self.task = asyncio.ensure_future(self._run(inputs))
        self.prediction: Any = None
        self.reward = 0.0

    async def _run(self, inputs: dict[str, Any]) -> None:
        import dspy

        from rlmkit.errors import RunError

        try:
            self.prediction = await self.rlm.acall(**inputs)
        except RunError as exc:  # scored like trl-grpo: outputs None, partial trajectory attached
            self.prediction = dspy.Prediction(
                **dict.fromkeys(self.rlm.signature.output_fields), trajectory=exc.trajectory
            )
        finally:
            await self.bridge.requests.put(_DONE)
        self.reward = float(load(self.row.reward.scorer)(self.example, self.prediction))

    async def next_prompt(self, reply: str | None) -> list[dict] | None:
        """Hand the policy's reply to the RLM; get its next prompt, or None once it has finished."""
        if reply is not None:
            await self.bridge.replies.put(reply)
        request = await self.bridge.requests.get()
        if request is _DONE:
            await self.task  # re-raises a scorer error instead of losing it
            return None
        return request
