"""``mlflow.dspy.autolog()`` for RLMs: one RLM call is one trace, spans nested
run -> turn -> model call / cell -> sub-call -> model call / child run -> ...

MLflow's DSPy callback opens the top-level ``RLM.forward`` span itself (``dspy.Module``
fires it); this adapter adds everything inside, with MLflow's tracing API, because that
callback has no interpreter hooks (cells and sub-calls would be missing). Needs the
optional extra: ``pip install -e '.[observe]'`` in a checkout (dspy-rlmkit is not on the package
index yet).
"""

from __future__ import annotations

from typing import Any

from rlmkit import events as ev
from rlmkit.observe.spans import SpanTree, error_of, inputs_of, outputs_of, span_name


def is_mlflow_callback(callback: Any) -> bool:
    cls = type(callback)
    return cls.__name__ == "MlflowCallback" and cls.__module__.startswith("mlflow.")


def mlflow_listener() -> ev.Listener:
    return MlflowSpans()


def _span_type(event: ev.Event) -> str:
    from mlflow.entities import SpanType

    kind = type(event)
    if kind is ev.RunStarted:
        return SpanType.AGENT
    if kind is ev.ModelRequest:
        return SpanType.CHAT_MODEL
    if kind in (ev.CellStarted, ev.SubcallStarted):
        return SpanType.TOOL
    return SpanType.CHAIN


class MlflowSpans(SpanTree):
    top_run_is_open = True

    def active(self) -> Any:
        import mlflow

        return mlflow.get_current_active_span()

    def open(self, event: ev.Event, parent: Any) -> Any:
        import mlflow

        attributes: dict[str, Any] = {"rlmkit.run_id": event.run_id, "rlmkit.depth": event.depth}
        if event.session_id:
            attributes["rlmkit.session_id"] = event.session_id
            if event.session_call is not None:
                attributes["rlmkit.session_call"] = event.session_call
        if type(event) is ev.ModelRequest:
            attributes["model"] = event.lm.model
            attributes["rlmkit.role"] = "root" if event.root else "sub"
        return mlflow.start_span_no_context(
            name=span_name(event),
            span_type=_span_type(event),
            parent_span=parent,
            inputs=inputs_of(event),
            attributes=attributes,
        )

    def close(self, span: Any, event: ev.Event) -> None:
        from mlflow.entities import SpanEvent, SpanStatusCode

        error = error_of(event)
        if error is not None:
            span.add_event(SpanEvent.from_exception(error))
        if type(event) is ev.ModelReply and event.completion is not None:
            from mlflow.tracing.constant import SpanAttributeKey, TokenUsageKey

            usage = event.completion.usage
            span.set_attribute(
                SpanAttributeKey.CHAT_USAGE,
                {
                    TokenUsageKey.INPUT_TOKENS: usage.prompt_tokens,
                    TokenUsageKey.OUTPUT_TOKENS: usage.completion_tokens,
                    TokenUsageKey.TOTAL_TOKENS: usage.total_tokens,
                },
            )
        span.end(
            outputs=outputs_of(event), status=SpanStatusCode.ERROR if error is not None else SpanStatusCode.OK
        )
