"""``mlflow.dspy.autolog()`` on an RLM: one trace, spans nested run -> turn -> cell -> sub-call -> child run,
stored in a real local MLflow tracking store (SQLite in a temporary directory)."""

from __future__ import annotations

import pytest

from tests.helpers.script import Script
from tests.observe.test_events import make_tree_rlm, sub_reply, tree_root

mlflow = pytest.importorskip("mlflow", reason="the 'observe' extra (mlflow-skinny) is not installed")


@pytest.fixture
def tracking(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false"
    )  # the trace is stored when the call returns
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    mlflow.set_experiment("rlmkit")
    mlflow.dspy.autolog()
    yield
    mlflow.dspy.autolog(disable=True)
    mlflow.set_tracking_uri(previous)


def test_one_rlm_call_is_one_trace_with_nested_spans(serve, tracking):
    server, lm = serve(Script(tree_root, sub=sub_reply))
    pred = make_tree_rlm(lm)(context="abc")
    assert pred.answer == "cleaf"
    traces = mlflow.search_traces(return_type="list")
    assert len(traces) == 1
    spans = traces[0].data.spans
    by_id = {span.span_id: span for span in spans}

    def ancestors(span):
        names = []
        while span.parent_id is not None:
            span = by_id[span.parent_id]
            names.append(span.name)
        return names

    [top] = [span for span in spans if span.parent_id is None]
    assert top.name == "RLM.forward" and top.outputs["answer"] == "cleaf"
    assert sum(span.span_type == "CHAT_MODEL" for span in spans) == len(server.requests) == 7
    inner = next(
        span
        for span in spans
        if span.name.startswith("chat ") and span.inputs["messages"][-1]["content"] == "inner"
    )
    assert ancestors(inner) == [
        "llm_query",
        "cell",
        "turn 1",
        "RLM run (depth 1)",
        "rlm_query",
        "cell",
        "turn 2",
        "RLM.forward",
    ]
    typed = next(span for span in spans if span.name == "classify")
    assert typed.span_type == "TOOL" and ancestors(typed) == ["cell", "turn 1", "RLM.forward"]
    root_call = next(
        span
        for span in spans
        if span.span_type == "CHAT_MODEL"
        and span.parent_id
        and by_id[span.parent_id].name == "turn 1"
        and by_id[by_id[span.parent_id].parent_id] is top
    )
    assert root_call.attributes["mlflow.chat.tokenUsage"]["input_tokens"] > 0
    assert all(span.status.status_code == "OK" for span in spans)
