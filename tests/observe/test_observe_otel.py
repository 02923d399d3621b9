"""OpenTelemetry instrumentation: GenAI attributes, spans nested like the run, one trace per call,
under the caller's span; checked with the SDK's in-memory exporter."""

from __future__ import annotations

import pytest

import rlmkit
from rlmkit.errors import MaxIterationsError
from tests.helpers.replies import repl
from tests.helpers.script import Script
from tests.observe.test_events import make_tree_rlm, sub_reply, tree_root

pytest.importorskip("opentelemetry.sdk", reason="the 'observe' extra (opentelemetry-sdk) is not installed")
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rlmkit.observe import otel


@pytest.fixture
def exporter():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stop = otel.instrument(tracer_provider=provider)
    yield exporter, provider
    stop()


def test_spans_nest_like_the_run_with_gen_ai_attributes(serve, exporter):
    spans_out, provider = exporter
    server, lm = serve(Script(tree_root, sub=sub_reply))
    with provider.get_tracer("app").start_as_current_span("handle request") as outer:
        pred = make_tree_rlm(lm)(context="abc")
    spans = spans_out.get_finished_spans()
    assert {span.context.trace_id for span in spans} == {outer.get_span_context().trace_id}
    by_id = {span.context.span_id: span for span in spans}

    def ancestors(span):
        names = []
        while span.parent is not None:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names

    chats = [span for span in spans if span.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == len(server.requests) == 7
    for span in chats:
        assert span.name == "chat openai/scripted" and span.attributes["gen_ai.provider.name"] == "openai"
        assert span.attributes["gen_ai.request.model"] == "openai/scripted"
        assert span.attributes["gen_ai.response.model"] == "scripted"
        assert (
            span.attributes["gen_ai.usage.input_tokens"] > 0
            and span.attributes["gen_ai.usage.output_tokens"] > 0
        )
        assert "gen_ai.input.messages" not in span.attributes  # content only when asked for
    [inner] = [
        span
        for span in chats
        if span.attributes["rlmkit.depth"] == 1 and span.attributes["rlmkit.role"] == "sub"
    ]
    assert ancestors(inner) == [
        "execute_tool llm_query",
        "cell",
        "turn 1",
        "invoke_agent rlm",
        "execute_tool rlm_query",
        "cell",
        "turn 2",
        "invoke_agent rlm",
        "handle request",
    ]
    [top] = [
        span for span in spans if span.name == "invoke_agent rlm" and span.attributes["rlmkit.depth"] == 0
    ]
    assert top.attributes["gen_ai.agent.id"] == pred.trajectory.meta.run_id
    assert top.attributes["gen_ai.usage.input_tokens"] == pred.trajectory.usage.prompt_tokens
    tool = next(span for span in spans if span.name == "execute_tool word_count")
    assert tool.attributes["gen_ai.tool.name"] == "word_count" and ancestors(tool)[:2] == ["cell", "turn 1"]


def test_a_failed_run_marks_its_span_as_an_error(serve, exporter):
    spans_out, _ = exporter
    server, lm = serve(Script([repl("print(1)")]))
    with pytest.raises(MaxIterationsError):
        rlmkit.RLM("context -> answer", lm=lm, max_iterations=1)(context="abc")
    [run] = [span for span in spans_out.get_finished_spans() if span.name == "invoke_agent rlm"]
    assert run.status.status_code.name == "ERROR" and run.attributes["error.type"] == "MaxIterationsError"
    assert run.attributes["rlmkit.status"] == "max_iterations"


def test_uninstrumented_runs_make_no_spans(serve):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)()  # on, then off again
    server, lm = serve(Script([repl("SUBMIT(answer='x')")]))
    rlmkit.RLM("context -> answer", lm=lm)(context="abc")
    assert exporter.get_finished_spans() == ()
