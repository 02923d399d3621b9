"""The environment a ``verifiers`` export installs: rlmkit's RLM loop and the task's scorer.

Classic API (verifiers >= 0.1.11, < 0.4): ``load_environment()`` returns a ``vf.MultiTurnEnv``
in which a real ``rlmkit.RLM`` runs beside each rollout. Its root LM is a bridge: every
prompt the RLM renders becomes the prompt of one verifiers turn, and the policy's reply
(which verifiers samples and records with its tokens, as for any environment) goes back to
the RLM, which runs the code in rlmkit's sandbox and renders the next prompt. When the RLM
ends, the rollout ends and the rubric's reward is the row's scorer on the RLM's prediction.
The loop is written once, in rlmkit; this module only passes messages across.

Data: the canonical RL rows of the export's dataset folder (``RLMKIT_DATASET`` overrides).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import rlmkit
from optimizers.backends.base import load_object, read_rows
from optimizers.backends.rlm_rollout import RowExample
from rlmkit.lm import LM, Completion
from rlmkit.trajectory import Usage

_DONE = object()


class BridgeLM(LM):
    """An rlmkit LM whose answers come from whoever reads ``requests`` (the verifiers turn loop)."""

    def __init__(self) -> None:
        # an OpenAI-style name with a local api_base passes the LM checks; no request is ever sent there
        super().__init__(
            "openai/verifiers-policy", api_base="http://127.0.0.1:9/v1", api_key="unused", cache=False
        )
        self.requests: asyncio.Queue = asyncio.Queue()
        self.replies: asyncio.Queue = asyncio.Queue()

    async def acomplete(self, messages: list[dict], **_: Any) -> Completion:
        started = time.perf_counter()
        await self.requests.put(messages)
        text = await self.replies.get()
        return Completion(
            text=text,
            model=self.model,
            usage=Usage(calls=1),
            cached=False,
            duration_s=time.perf_counter() - started,
        )


def rows_as_dataset(path: str | Path) -> list[dict[str, Any]]:
    """Canonical RL rows -> verifiers dataset records (prompt, answer, info with the whole row)."""
    folder = Path(path)
    file = folder / "train.jsonl" if folder.is_dir() else folder
    return [
        {
            "prompt": [{"role": m.role, "content": m.content} for m in row.prompt],
            "answer": row.answer,
            "info": json.dumps({"row": row.model_dump(mode="json"), "task_id": row.task_id}),
        }
        for row in read_rows(file)
    ]


def _row(info: Any) -> Any:
    from optimizers.compile.schema import RLRow

    data = json.loads(info) if isinstance(info, str) else info
    return RLRow.model_validate(data["row"])


class RLMSession:
    """One RLM run, driven one root turn at a time from the outside."""

    def __init__(self, row: Any, options: dict[str, Any]):
        self.row, self.options = row, options
        self.bridge = BridgeLM()
        sub = options.get("sub_lm")
        self.rlm = rlmkit.RLM(
            row.meta.get("signature") or options.get("signature", "context, question -> answer"),
            lm=self.bridge,
            sub_lm=rlmkit.LM(sub, api_base=options.get("sub_api_base"), cache=False) if sub else None,
            protocol=row.meta.get("protocol") or options.get("protocol", "submit"),
            max_iterations=int(options.get("max_turns", 10)),
            sandbox=options.get("sandbox", "process"),
        )
        inputs_fn = options.get("inputs_fn")
        self.example = RowExample.of(row)
        inputs = load_object(inputs_fn)(row) if inputs_fn else dict(self.example.inputs)
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
        self.reward = float(load_object(self.row.reward.scorer)(self.example, self.prediction))

    async def next_prompt(self, reply: str | None) -> list[dict] | None:
        """Hand the policy's reply to the RLM; get its next prompt, or None once it has finished."""
        if reply is not None:
            await self.bridge.replies.put(reply)
        request = await self.bridge.requests.get()
        if request is _DONE:
            await self.task  # re-raises a scorer error instead of losing it
            return None
        return request


def has_v1_taskset_api() -> bool:
    """verifiers >= 0.4 ships the v1 Taskset API (0.1-0.3 have an older, different ``verifiers.v1``)."""
    try:
        from importlib.metadata import version

        major, minor = (int(part) for part in version("verifiers").split(".")[:2])
    except (ImportError, ValueError):
        return False
    return (major, minor) >= (0, 4)


def load_environment(dataset: str | None = None, **options: Any) -> Any:
    """Classic verifiers entry point: a MultiTurnEnv that plays rlmkit's RLM loop."""
    import verifiers as vf
    from datasets import Dataset

    path = os.environ.get("RLMKIT_DATASET") or dataset
    if not path:
        raise ValueError("no dataset: pass dataset=... or set RLMKIT_DATASET")
    options.setdefault("max_turns", int(os.environ.get("RLMKIT_MAX_TURNS", "10")))
    records = rows_as_dataset(path)

    class RLMEnv(vf.MultiTurnEnv):
        async def setup_state(self, state: Any) -> None:
            state["rlm"] = RLMSession(_row(state["info"]), options)

        async def get_prompt_messages(self, state: Any) -> Any:
            session: RLMSession = state["rlm"]
            reply = None
            if state["trajectory"]:
                reply = _content(state["trajectory"][-1]["completion"])
            prompt = await session.next_prompt(reply)
            if prompt is None:
                state["final_env_response"] = []
                state["rlm_reward"] = session.reward
                return state["trajectory"][-1]["prompt"] if state["trajectory"] else state["prompt"]
            return prompt

        async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
            return []  # never called: get_prompt_messages takes the RLM's prompts as they are

        async def render_completion(self, state: Any) -> None:
            if not state["trajectory"]:
                state["completion"] = []
                return
            first, last = state["trajectory"][0], state["trajectory"][-1]
            state["completion"] = list(last["prompt"])[len(first["prompt"]) :] + list(last["completion"])

    def rlm_score(state: Any, **_: Any) -> float:
        return float(state.get("rlm_reward", 0.0))

    return RLMEnv(
        dataset=Dataset.from_list(records),
        eval_dataset=Dataset.from_list(records),
        rubric=vf.Rubric(funcs=[rlm_score]),
        max_turns=int(options["max_turns"]) + 2,  # the RLM decides when to stop; this is a backstop
    )


def _content(messages: Any) -> str:
    """The text of a verifiers completion (pydantic messages or dicts)."""
    last = messages[-1] if messages else None
    content = getattr(last, "content", None) if not isinstance(last, dict) else last.get("content")
    return content if isinstance(content, str) else ""
