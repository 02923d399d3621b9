"""OpenTelemetry spans for RLM runs, with the GenAI semantic conventions.

    from rlmkit.observe import otel
    uninstrument = otel.instrument()          # the global TracerProvider, or tracer_provider=...

Spans nest like the run: ``invoke_agent rlm`` (a run) -> ``turn N`` -> ``chat MODEL`` (the root
model call) and ``cell`` -> ``execute_tool NAME`` (a sub-call) -> ``chat MODEL`` / a child
``invoke_agent rlm``. Model calls carry ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` /
``output_tokens`` and ``gen_ai.response.finish_reasons``; message text only with
``capture_content=True`` (prompts hold user data). A run started inside another span (a
request handler's, an agent's) nests under it. Needs ``opentelemetry-api`` (the SDK to
export): ``pip install -e '.[observe]'`` in a checkout (dspy-rlmkit is not on the package
index yet).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rlmkit import events as ev
from rlmkit.observe.lm_view import safe_params
from rlmkit.observe.spans import SpanTree, error_of, span_name


def instrument(tracer_provider: Any = None, *, capture_content: bool = False) -> Callable[[], None]:
    """Trace every RLM run from now on; returns a function that stops it."""
    from opentelemetry import trace

    import rlmkit

    tracer = trace.get_tracer("rlmkit", rlmkit.__version__, tracer_provider=tracer_provider)
    return ev.instrument(lambda start: OtelSpans(tracer, capture_content))


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


class OtelSpans(SpanTree):
    def __init__(self, tracer: Any, capture_content: bool):
        super().__init__()
        self.tracer, self.capture_content = tracer, capture_content

    def active(self) -> Any:
        from opentelemetry import trace

        span = trace.get_current_span()
        return span if span.get_span_context().is_valid else None

    def open(self, event: ev.Event, parent: Any) -> Any:
        from opentelemetry import trace

        kind, name, attributes = trace.SpanKind.INTERNAL, span_name(event), {"rlmkit.depth": event.depth}
        if event.session_id:
            attributes["rlmkit.session_id"] = event.session_id  # a session's calls share it
            attributes["gen_ai.conversation.id"] = event.session_id
            if event.session_call is not None:
                attributes["rlmkit.session_call"] = event.session_call
        if type(event) is ev.RunStarted:
            meta = event.meta
            name = "invoke_agent rlm"
            attributes.update(
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": "rlm",
                    "gen_ai.agent.id": meta.run_id,
                    "gen_ai.request.model": meta.model,
                    "rlmkit.signature": meta.signature,
                }
            )
        elif type(event) is ev.ModelRequest:
            kind, model = trace.SpanKind.CLIENT, event.lm.model
            params = safe_params(event.lm)
            attributes.update(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": _provider(model),
                    "gen_ai.system": _provider(model),
                    "gen_ai.request.model": model,
                    "rlmkit.role": "root" if event.root else "sub",
                }
            )
            for key in ("temperature", "max_tokens", "top_p"):
                if isinstance(params.get(key), (int, float)):
                    attributes[f"gen_ai.request.{key}"] = params[key]
            if self.capture_content:
                attributes["gen_ai.input.messages"] = json.dumps(event.messages)
        elif type(event) is ev.SubcallStarted:
            node = event.node
            name = f"execute_tool {node.name}"
            attributes.update(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": node.name,
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.id": node.id,
                    "rlmkit.subcall.kind": node.kind,
                }
            )
            if node.batch is not None:
                attributes["rlmkit.subcall.batch"] = node.batch
        elif type(event) is ev.TurnStarted:
            attributes["rlmkit.turn.index"] = event.turn.index
        elif type(event) is ev.CellStarted and self.capture_content:
            attributes["rlmkit.cell.code"] = event.block.code
        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes)

    def close(self, span: Any, event: ev.Event) -> None:
        from opentelemetry.trace import Status, StatusCode

        if type(event) is ev.ModelReply and event.completion is not None:
            completion = event.completion
            span.set_attributes(
                {
                    "gen_ai.response.model": completion.model,
                    "gen_ai.usage.input_tokens": completion.usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": completion.usage.completion_tokens,
                    "rlmkit.cached": completion.cached,
                }
            )
            if completion.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [completion.finish_reason])
            if self.capture_content:
                span.set_attribute(
                    "gen_ai.output.messages", json.dumps([{"role": "assistant", "content": completion.text}])
                )
        elif type(event) is ev.CellFinished:
            block = event.block
            span.set_attributes(
                {"rlmkit.cell.timed_out": block.timed_out, "rlmkit.cell.raised": block.error is not None}
            )
        elif type(event) is ev.RunFinished:
            traj = event.trajectory
            span.set_attributes(
                {
                    "rlmkit.status": traj.status,
                    "rlmkit.turns": len(traj.turns),
                    "gen_ai.usage.input_tokens": traj.usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": traj.usage.completion_tokens,
                }
            )
        error = error_of(event)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
            span.set_attribute("error.type", type(error).__name__)
        span.end()
