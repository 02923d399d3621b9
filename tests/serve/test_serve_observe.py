"""A served call is observed as an in-process call is: DSPy callbacks configured for the process
see its model calls, cells and sub-calls, and OpenTelemetry gets its spans."""

from __future__ import annotations

from collections import Counter

import dspy
import openai
from dspy.utils.callback import BaseCallback

from tests.helpers.serve_programs import qa_rlm, served


class Recorder(BaseCallback):
    def __init__(self):
        self.calls: list[str] = []

    def __getattribute__(self, name):
        if name.startswith("on_"):
            return lambda call_id, **kw: self.calls.append(name)
        return super().__getattribute__(name)


def test_process_wide_dspy_callbacks_see_a_served_call():
    recorder = Recorder()
    dspy.configure(callbacks=[recorder])  # the server's thread reads the process's configuration
    try:
        with served(qa_rlm()) as url:
            openai.OpenAI(base_url=url, api_key="x").chat.completions.create(
                model="rlmkit", messages=[{"role": "user", "content": "observed"}]
            )
    finally:
        dspy.configure(callbacks=[])
    count = Counter(recorder.calls)
    assert count["on_lm_start"] == count["on_lm_end"] == 2  # the root turn and its llm_query
    assert count["on_interpreter_execute_start"] == count["on_interpreter_execute_end"] == 1
    assert count["on_module_start"] == count["on_module_end"] >= 1


def test_opentelemetry_spans_of_a_served_call_nest_like_the_run():
    import pytest

    pytest.importorskip(
        "opentelemetry.sdk", reason="the 'observe' extra (opentelemetry-sdk) is not installed"
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rlmkit.observe import otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stop = otel.instrument(tracer_provider=provider)
    try:
        with served(qa_rlm()) as url:
            openai.OpenAI(base_url=url, api_key="x").chat.completions.create(
                model="rlmkit", messages=[{"role": "user", "content": "traced"}]
            )
    finally:
        stop()
    spans = exporter.get_finished_spans()
    names = Counter(span.name.split()[0] for span in spans)
    assert names["invoke_agent"] == 1 and names["chat"] == 2 and names["execute_tool"] == 1
    assert len({span.context.trace_id for span in spans}) == 1  # one trace per call
