"""verifiers 0.4 (v1 Taskset API) side of the ``verifiers`` export.

``RLMTaskset`` yields one task per canonical RL row (its prompt is the RLM's first root
prompt, as compiled). ``RLMEnv.run`` is the exchange: the player agent answers, each reply
goes to a real ``rlmkit.RLM`` (``verifiers_runtime.RLMSession``), and whatever the RLM
appends before its next root call - REPL output, the answer-now request - becomes the next
user turn. When the RLM finishes, the row's scorer grades its prediction (reward
``rlm_score``). The generated package subclasses both with its data folder and options.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import verifiers.v1 as vf

from optimizers.backends.base import read_rows
from optimizers.backends.verifiers_runtime import RLMSession, row_of


class RLMTaskData(vf.TaskData):
    info: dict
    """``{"row": <canonical RL row>}``: everything the RLM and the scorer need."""


class RLMTask(vf.Task[RLMTaskData, vf.State, vf.TaskConfig]):
    pass


class RLMTaskset(vf.Taskset[RLMTask, vf.TasksetConfig]):
    DATA: ClassVar[Path | None] = None  # set by the generated package (its data/ folder)

    def load(self) -> Iterator[RLMTask]:
        if self.DATA is None:
            raise ValueError(
                "RLMTaskset.DATA is not set: use the package `rlmkit train --backend verifiers` writes"
            )
        for row in read_rows(self.DATA / "train.jsonl"):
            messages = [{"role": m.role, "content": m.content} for m in row.prompt if m.role != "system"]
            system = next((m.content for m in row.prompt if m.role == "system"), None)
            data = RLMTaskData(
                id=row.id,
                name=row.task_id,
                prompt=messages,
                system_prompt=system,
                info={"row": row.model_dump(mode="json")},
            )
            yield RLMTask(data, self.config.task)


class RLMEnvConfig(vf.EnvConfig):
    # The player only relays chat turns (the RLM's code runs in rlmkit's sandbox, in the env's
    # process): verifiers' plain chat harness, as a local subprocess - no remote sandbox, no tunnel.
    player: vf.AgentConfig = vf.AgentConfig.model_validate(
        {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}
    )


def new_user_text(previous: list[dict], request: list[dict]) -> str:
    """What the RLM appended after the policy's last reply (usually one user message)."""
    tail = request[len(previous) + 1 :] if len(request) > len(previous) else request[-1:]
    return "\n\n".join(str(m.get("content", "")) for m in tail if m.get("role") != "assistant")


class RLMEnv(vf.Env[RLMEnvConfig]):
    OPTIONS: ClassVar[dict[str, Any]] = {}  # set by the generated package (options.json)

    async def run(self, task: RLMTask, agents: Any) -> None:
        session = RLMSession(row_of(task.data.info), dict(self.OPTIONS))
        request = await session.next_prompt(None)  # the RLM's first prompt: the task prompt itself
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            while request is not None and not segment.terminated:
                previous = request
                request = await session.next_prompt(segment.last_reply)
                if request is not None:
                    segment = await interaction.turn(new_user_text(previous, request))
            if request is not None:  # the agent stopped first: end the RLM run too
                session.task.cancel()
            # scored before the exchange closes: closing finishes the rollout (its reward included)
            interaction.trace.record_reward("rlm_score", session.reward, 1.0)
            interaction.trace.info["rlm_answer"] = json.dumps(
                getattr(session.prediction, "answer", None), default=str
            )
