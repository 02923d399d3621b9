"""rlmkit events -> DSPy's observability: callbacks, usage tracking, history, streamify.

Which listeners a call tree gets is decided once, when it starts, from the DSPy settings
in force there (``dspy.configure`` / ``dspy.context``) and the RLM's own ``callbacks``:

- every ``BaseCallback``: ``on_module_*`` for each root turn (the RLM's ``root`` predictor,
  like a ``dspy.Predict`` step) and each child run (its spec's ``module``: a ``dspy.Predict``
  of the child's QA signature, which its turns report as well), ``on_lm_*`` for every
  model call (root turns and sub-calls, batch items included), ``on_interpreter_startup_*``
  / ``execute_*`` / ``shutdown_*`` per sandbox and cell, ``on_interpreter_tool_call_*`` per
  sub-call or tool. MLflow's callback is served by ``observe.mlflow`` instead (it has no
  interpreter hooks, so cells and sub-calls would be lost).
- ``track_usage``: each model call's tokens go to DSPy's usage tracker, so
  ``pred.get_lm_usage()`` covers the whole tree, like ``pred.trajectory.usage``.
- history: each model call lands in ``dspy.inspect_history()`` (and the RLM's ``history``).
- ``dspy.streamify``: status messages for turns and cells (``observe.streaming``).

A session's call (``rlmkit.session``) is reported as a module call of the RLM, and every start
hook fired inside it gets ``inputs["callback_metadata"]`` (the key DSPy's ``Evaluate`` passes
its metadata to callbacks under): ``{"session_id", "session_call", "run_id", "depth"}``. An end
hook has the ``call_id`` of its start, as in DSPy.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

import dspy

from rlmkit import events as ev
from rlmkit.models.dspy_lm import dspy_origin
from rlmkit.observe.lm_view import LMView, safe_params

log = logging.getLogger("rlmkit")


def _dspy_saw(lm: Any) -> bool:
    """A DSPy LM called as itself (``models.dspy_lm``) fired DSPy's hooks already: not twice."""
    return lm.traits.observed_by_dspy


def dspy_listeners(start: ev.RunStarted) -> list[ev.Listener]:
    settings = dspy.settings
    found: list[ev.Listener] = []
    callbacks = [*(settings.get("callbacks") or []), *(getattr(start.rlm, "callbacks", None) or [])]
    if callbacks:
        from dspy.streaming.messages import StatusStreamingCallback

        from rlmkit.observe.mlflow import is_mlflow_callback, mlflow_listener

        # MLflow's callback and streamify's status callback get rlmkit's own adapters
        plain = [
            c for c in callbacks if not is_mlflow_callback(c) and not isinstance(c, StatusStreamingCallback)
        ]
        if plain:
            found.append(DspyCallbacks(plain))
        if any(is_mlflow_callback(c) for c in callbacks):
            found.append(mlflow_listener())
        if settings.get("send_stream") is not None and len(plain) < len(callbacks):
            from rlmkit.observe.streaming import streamify_listener

            if (sender := streamify_listener(settings.send_stream, callbacks)) is not None:
                found.append(sender)
    if settings.get("usage_tracker") is not None:
        found.append(UsageRecorder(settings.usage_tracker))
    if not settings.get("disable_history"):
        found.append(HistoryRecorder(settings))
    return found


class DspyCallbacks:
    """Fires DSPy ``BaseCallback`` hooks for rlmkit events (see the module docstring)."""

    def __init__(self, callbacks: list[Any]):
        self.callbacks = callbacks
        self.rlms: dict[str, Any] = {}  # run_id -> RLM, for the turn's predictor
        self.sandboxes: dict[str, Any] = {}  # run_id -> its sandbox, the tool calls' instance

    def _fire(self, hook: str, event: ev.Event, **kwargs: Any) -> None:
        if event.session_id and "inputs" in kwargs:  # a start hook inside a session's call
            kwargs["inputs"] = {**kwargs["inputs"], "callback_metadata": session_metadata(event)}
        for callback in self.callbacks:
            try:
                getattr(callback, hook)(call_id=event.span_id, **kwargs)
            except Exception as exc:  # noqa: BLE001 - like DSPy: a failing callback is logged, never raised
                log.warning("rlmkit: callback %r failed in %s: %s", callback, hook, exc)

    def __call__(self, event: ev.Event) -> None:
        kind = type(event)
        if kind is ev.RunStarted:
            self.rlms[event.run_id] = event.rlm
            # the top-level run's module hooks come from dspy.Module.__call__, except a session's
            # call, which does not go through it
            if event.depth > 0 or event.session_id:
                self._fire("on_module_start", event, instance=event.rlm, inputs=dict(event.inputs))
        elif kind is ev.RunFinished:
            self.rlms.pop(event.run_id, None)
            self.sandboxes.pop(event.run_id, None)
            if event.depth > 0 or event.session_id:
                outputs = dspy.Prediction(**event.trajectory.outputs) if event.error is None else None
                self._fire("on_module_end", event, outputs=outputs, exception=event.error)
        elif kind is ev.TurnStarted:
            rlm = self.rlms.get(event.run_id)
            self._fire(
                "on_module_start",
                event,
                instance=getattr(rlm, "root", rlm),
                inputs={
                    "turn": event.turn.index,
                    "new_messages": [m.model_dump() for m in event.turn.new_messages],
                },
            )
        elif kind is ev.TurnFinished:
            turn = event.turn
            self._fire(
                "on_module_end",
                event,
                exception=event.error,
                outputs=None
                if event.error
                else {"reply": turn.reply, "feedback": turn.feedback, "final": turn.final},
            )
        elif kind is ev.ModelRequest and not _dspy_saw(event.lm):
            self._fire(
                "on_lm_start",
                event,
                instance=dspy_origin(event.lm) or LMView(event.lm),
                inputs={"prompt": None, "messages": event.messages, "kwargs": {}},
            )
        elif kind is ev.ModelReply and not _dspy_saw(event.start.lm):
            outputs = [event.completion.text] if event.completion is not None else None
            self._fire("on_lm_end", event, outputs=outputs, exception=event.error)
        elif kind is ev.CellStarted:
            self._fire(
                "on_interpreter_execute_start",
                event,
                instance=event.sandbox,
                inputs={"code": event.block.code, "variables": None},
            )
        elif kind is ev.CellFinished:
            block = event.block
            outputs = {
                "stdout": block.stdout,
                "stderr": block.stderr,
                "error": block.error,
                "timed_out": block.timed_out,
            }
            self._fire("on_interpreter_execute_end", event, outputs=outputs, exception=event.error)
        elif kind is ev.SubcallStarted:
            node = event.node
            self._fire(
                "on_interpreter_tool_call_start",
                event,
                instance=self.sandboxes.get(event.run_id),
                inputs={
                    "tool_name": node.name,
                    "kwargs": {"prompt": node.prompt, "kind": node.kind, "batch": node.batch},
                },
            )
        elif kind is ev.SubcallFinished:
            node = event.node
            error = event.error or (RuntimeError(node.error) if node.error else None)
            self._fire(
                "on_interpreter_tool_call_end", event, outputs=None if error else node.reply, exception=error
            )
        elif kind is ev.SandboxStarting:
            self.sandboxes[event.run_id] = event.sandbox
            self._fire("on_interpreter_startup_start", event, instance=event.sandbox, inputs={})
        elif kind is ev.SandboxStarted:
            self._fire("on_interpreter_startup_end", event, outputs=None, exception=event.error)
        elif kind is ev.SandboxClosing:
            self._fire("on_interpreter_shutdown_start", event, instance=event.sandbox, inputs={})
        elif kind is ev.SandboxClosed:
            self._fire("on_interpreter_shutdown_end", event, outputs=None, exception=event.error)


def session_metadata(event: ev.Event) -> dict[str, Any]:
    """Which session and call an event belongs to (a child run's events: its root call's)."""
    return {
        "session_id": event.session_id,
        "session_call": event.session_call,
        "run_id": event.run_id,
        "depth": event.depth,
    }


def usage_entry(completion: Any) -> dict[str, Any]:
    """One call's usage in DSPy's shape (what ``get_lm_usage()`` sums per model)."""
    usage = completion.usage
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cost": usage.cost,
    }


class UsageRecorder:
    """Every model call of the tree into DSPy's usage tracker, under the model's name.

    Cache hits count too (with their stored tokens), as in ``trajectory.usage``."""

    def __init__(self, tracker: Any):
        self.tracker = tracker

    def __call__(self, event: ev.Event) -> None:
        if type(event) is ev.ModelReply and event.completion is not None and not _dspy_saw(event.start.lm):
            self.tracker.add_usage(event.start.lm.model, usage_entry(event.completion))


class HistoryRecorder:
    """Each model call as a DSPy history entry: ``dspy.inspect_history()`` prints it, and the
    calling modules' ``history`` (the RLM's among them) keeps it, as ``dspy.LM`` does.

    The settings that decide where it goes are read once, when the call tree starts."""

    def __init__(self, settings: Any):
        from dspy.clients.base_lm import GLOBAL_HISTORY, MAX_HISTORY_SIZE

        self.history, self.limit = GLOBAL_HISTORY, MAX_HISTORY_SIZE
        self.owners = list(settings.get("caller_modules") or []) if settings.get("max_history_size") else []
        self.owner_limit = settings.get("max_history_size") or 0
        self.params: dict[int, dict[str, Any]] = {}  # per LM, read once

    def _params(self, lm: Any) -> dict[str, Any]:
        params = self.params.get(id(lm))
        if params is None:
            params = self.params[id(lm)] = safe_params(lm)
        return params

    def __call__(self, event: ev.Event) -> None:
        if type(event) is not ev.ModelReply or event.completion is None or _dspy_saw(event.start.lm):
            return
        completion, request = event.completion, event.start
        lm = request.lm
        entry = {
            "prompt": None,
            "messages": request.messages,
            "kwargs": self._params(lm),
            "response": None,
            "outputs": [completion.text],
            "usage": usage_entry(completion),
            "cost": completion.usage.cost,
            "timestamp": datetime.datetime.fromtimestamp(event.time).isoformat(),
            "uuid": f"rlmkit-{event.run_id}-{event.span_id}",
            "model": lm.model,
            "response_model": completion.model,
            "model_type": "chat",
            "rlmkit": {
                "run_id": event.run_id,
                "session_id": event.session_id,
                "session_call": event.session_call,
                "depth": event.depth,
                "root": request.root,
            },  # fmt: skip
        }
        origin = dspy_origin(lm)  # a dspy.LM on the direct transport keeps its own history
        for history, limit in (
            (self.history, self.limit),
            *((o.history, self.owner_limit) for o in self.owners),
            *(((origin.history, self.owner_limit or self.limit),) if origin is not None else ()),
        ):
            if len(history) >= limit:
                del history[0]
            history.append(entry)


ev.instrument(dspy_listeners)  # imported by rlmkit.rlm: every RLM call tree consults DSPy's settings
