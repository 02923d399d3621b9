"""The shape tracers share: each start event opens a span under its parent's, each end closes it.

A tracer adapter (MLflow, OpenTelemetry) says how to open and close one span; the parent of
a tree's first span is whatever the tracer has active where the run started (e.g. the
``RLM.forward`` span of ``mlflow.dspy.autolog()``)."""

from __future__ import annotations

from typing import Any

from rlmkit import events as ev


def span_name(event: ev.Event) -> str:
    """The name a span gets: what happened, in the words of the README."""
    kind = type(event)
    if kind is ev.RunStarted:
        return f"RLM run (depth {event.depth})" if event.depth else "RLM run"
    if kind is ev.TurnStarted:
        return f"turn {event.turn.index + 1}"
    if kind is ev.ModelRequest:
        return f"chat {event.lm.model}"
    if kind is ev.CellStarted:
        return "cell"
    if kind is ev.SubcallStarted:
        return event.node.name
    if kind is ev.SandboxStarting:
        return "sandbox start"
    if kind is ev.SandboxClosing:
        return "sandbox close"
    return kind.__name__


class SpanTree:
    """Listener base: ``open(event, parent)`` returns a tracer span; ``close(span, event)`` ends it."""

    top_run_is_open = False  # True: the tracer already has a span for the top-level run (MLflow)

    def __init__(self) -> None:
        self.spans: dict[str, Any] = {}
        self.outer: Any = None  # the tracer's active span where the tree started

    def __call__(self, event: ev.Event) -> None:
        if event.starts:
            if event.parent_id is None:
                self.outer = self.active()
                if self.top_run_is_open and type(event) is ev.RunStarted:
                    self.spans[event.span_id] = self.outer
                    return
            parent = self.spans.get(event.parent_id) if event.parent_id else self.outer
            self.spans[event.span_id] = self.open(event, parent)
        else:
            span = self.spans.pop(event.span_id, None)
            if span is not None and not (self.top_run_is_open and event.parent_id is None):
                self.close(span, event)

    def active(self) -> Any:
        return None

    def open(self, event: ev.Event, parent: Any) -> Any:
        raise NotImplementedError

    def close(self, span: Any, event: ev.Event) -> None:
        raise NotImplementedError


def outputs_of(event: ev.Event) -> Any:
    """What an end event reports as the span's output."""
    kind = type(event)
    if kind is ev.RunFinished:
        return event.trajectory.outputs if event.error is None else None
    if kind is ev.TurnFinished:
        return {"reply": event.turn.reply, "final": event.turn.final}
    if kind is ev.ModelReply:
        return event.completion.text if event.completion is not None else None
    if kind is ev.CellFinished:
        block = event.block
        return {"stdout": block.stdout, "stderr": block.stderr, "error": block.error}
    if kind is ev.SubcallFinished:
        return event.node.reply
    return None


def inputs_of(event: ev.Event) -> Any:
    kind = type(event)
    if kind is ev.RunStarted:
        return {name: info.model_dump() for name, info in ((i.name, i) for i in event.meta.inputs)}
    if kind is ev.TurnStarted:
        return {"turn": event.turn.index, "new_messages": [m.model_dump() for m in event.turn.new_messages]}
    if kind is ev.ModelRequest:
        return {"messages": event.messages}
    if kind is ev.CellStarted:
        return {"code": event.block.code}
    if kind is ev.SubcallStarted:
        return {"prompt": event.node.prompt, "kind": event.node.kind, "batch": event.node.batch}
    return {}


def error_of(event: ev.Event) -> BaseException | None:
    error = getattr(event, "error", None)
    if error is None and type(event) is ev.SubcallFinished and event.node.error:
        return RuntimeError(event.node.error)
    return error
