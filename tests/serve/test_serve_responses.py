"""``POST /v1/responses`` with the openai SDK's ``responses.create`` and ``responses.stream`` and
with ``litellm.responses``, against a real uvicorn server: the REPL's turns as reasoning items,
``previous_response_id`` continuing the same REPL, typed inputs and outputs, and errors."""

from __future__ import annotations

import json

import httpx
import litellm
import openai
import pydantic
import pytest

from tests.helpers.serve_programs import counting_rlm, looping_rlm, qa_rlm, served, typed_rlm

KEY = "responses-key"


@pytest.fixture(scope="module")
def qa_url():
    with served(qa_rlm(), api_key=KEY) as url:
        yield url


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)


@pytest.mark.parametrize("store", [True, False])
def test_a_response_has_the_turns_as_reasoning_items_the_answer_and_the_whole_trees_usage(qa_url, store):
    response = client(qa_url).responses.create(
        model="rlmkit",
        input=[
            {"role": "system", "content": "a long document"},
            {"role": "user", "content": [{"type": "input_text", "text": "how long?"}]},
        ],
        store=store,
    )
    context = "system: a long document"
    assert response.output_text == f"HOW LONG? ({len(context)} chars)" and response.status == "completed"
    reasoning, message = response.output
    assert reasoning.type == "reasoning" and message.type == "message" and message.role == "assistant"
    (part,) = reasoning.content
    assert (
        "[turn 1]" in part.text and "llm_query" in part.text and f"context chars: {len(context)}" in part.text
    )
    # the root turn and its llm_query sub-call
    assert response.usage.rlm_calls == 2 and response.usage.total_tokens > 0 and response.usage.cost == 0.0
    assert response.usage.input_tokens + response.usage.output_tokens == response.usage.total_tokens
    if store:
        assert client(qa_url).responses.retrieve(response.id).output_text == response.output_text
    else:
        with pytest.raises(openai.NotFoundError):
            client(qa_url).responses.retrieve(response.id)


def test_previous_response_id_continues_the_same_repl_plain_and_streamed():
    with served(counting_rlm(), api_key=KEY) as url:
        api = client(url)
        first = api.responses.create(
            model="rlmkit", input="first", extra_body={"inputs": {"context": "0123456789"}}
        )
        assert first.output_text == "first: call 1, context 10 chars"
        second = api.responses.create(model="rlmkit", input="second", previous_response_id=first.id)
        assert second.output_text == "second: call 2, context 10 chars"
        assert second.previous_response_id == first.id
        with api.responses.stream(model="rlmkit", input="third", previous_response_id=second.id) as stream:
            third = stream.get_final_response()
        assert third.output_text == "third: call 3, context 10 chars"
        # a response of its own opens a REPL of its own; instructions are a system message: context
        other = api.responses.create(model="rlmkit", input="other", instructions="abc")
        assert other.output_text == "other: call 1, context 11 chars"  # "system: abc"
        api.responses.delete(third.id)
        with pytest.raises(openai.NotFoundError) as info:
            api.responses.create(model="rlmkit", input="fourth", previous_response_id=third.id)
        assert info.value.body["param"] == "previous_response_id"


def test_a_stream_sends_the_responses_events_in_order(qa_url):
    events = list(client(qa_url).responses.create(model="rlmkit", input="stream me", stream=True))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning.delta")
    assert "[turn 1]" in reasoning and "SUBMIT" in reasoning and "[output]" in reasoning
    answer = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert answer == "STREAM ME (0 chars)"
    last_reasoning = max(i for i, kind in enumerate(kinds) if kind == "response.reasoning.delta")
    assert last_reasoning < kinds.index("response.output_text.delta")  # the work shows before the answer
    completed = events[-1].response
    assert completed.output_text == answer and completed.usage.rlm_calls == 2
    assert [item.type for item in completed.output] == ["reasoning", "message"]
    # each item is opened and closed, at its index
    added = [e.output_index for e in events if e.type == "response.output_item.added"]
    done = [e.output_index for e in events if e.type == "response.output_item.done"]
    assert added == done == [0, 1]


def test_typed_inputs_and_outputs_parse_into_the_clients_model():
    class Result(pydantic.BaseModel):
        total: int
        label: str

    with served(typed_rlm(), name="adder") as url:
        api = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        plain = api.responses.create(
            model="adder", input="add them", extra_body={"inputs": {"numbers": [1, 2, 3], "factor": "2"}}
        )
        assert json.loads(plain.output_text) == {"total": 12, "label": "x2"}
        parsed = api.responses.parse(
            model="adder",
            input="add",
            text_format=Result,
            extra_body={"inputs": {"numbers": [5], "factor": 3}},
        )
        assert parsed.output_parsed == Result(total=15, label="x3")
        with pytest.raises(openai.UnprocessableEntityError) as info:
            api.responses.create(
                model="adder", input="add", extra_body={"inputs": {"numbers": ["one"], "factor": 3}}
            )
        assert info.value.body["param"] == "inputs.numbers"


TOOL = {"type": "function", "name": "f", "parameters": {"type": "no-such-type"}}  # not a JSON schema
TOOL_OUTPUT = {"type": "function_call_output", "call_id": "c", "output": "x"}
IMAGE = {"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}


@pytest.mark.parametrize(
    ("change", "error", "code", "param"),
    [
        ({"model": "gpt-4o"}, openai.NotFoundError, "model_not_found", "model"),
        (
            {"previous_response_id": "resp_x"},
            openai.NotFoundError,
            "response_not_found",
            "previous_response_id",
        ),
        ({"extra_body": {"colour": "blue"}}, openai.BadRequestError, "unknown_field", "colour"),
        ({"tools": [{**TOOL, "parameters": {"type": "nope"}}]}, openai.BadRequestError, None, "tools"),
        ({"tools": [{"type": "web_search"}]}, openai.BadRequestError, None, "tools"),
        ({"input": [TOOL_OUTPUT]}, openai.BadRequestError, None, "input"),
        ({"input": [IMAGE]}, openai.BadRequestError, None, "input"),
        ({"store": "yes"}, openai.BadRequestError, None, "store"),
    ],
)
def test_bad_requests_get_openais_error_shapes(qa_url, change, error, code, param):
    request = {"model": "rlmkit", "input": "q", **change}
    with pytest.raises(error) as info:
        client(qa_url).responses.create(**request)
    assert info.value.body["param"] == param and (code is None or info.value.body["code"] == code)
    assert set(info.value.body) == {"message", "type", "param", "code"}


def test_a_missing_key_is_a_401_and_malformed_json_a_400(qa_url):
    assert httpx.post(f"{qa_url}/responses", json={"model": "rlmkit", "input": "q"}).status_code == 401
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    bad = httpx.post(f"{qa_url}/responses", content=b'{"model": ', headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json"


def test_a_run_that_fails_mid_stream_ends_with_response_failed():
    with served(looping_rlm()) as url:
        events = list(client(url).responses.create(model="rlmkit", input="q", stream=True))
    assert events[-1].type == "response.failed"
    failed = events[-1].response
    assert failed.status == "failed" and "without an answer" in failed.error.message
    assert any(e.type == "response.reasoning.delta" for e in events)


def test_a_repl_ended_to_make_room_is_a_404_naming_previous_response_id():
    with served(counting_rlm(), max_sessions=1) as url:
        api = client(url)
        first = api.responses.create(model="rlmkit", input="first", extra_body={"inputs": {"context": "ab"}})
        second = api.responses.create(  # takes the room
            model="rlmkit", input="second", extra_body={"inputs": {"context": "abc"}}
        )
        assert second.output_text == "second: call 1, context 3 chars"
        with pytest.raises(openai.NotFoundError) as info:
            api.responses.create(model="rlmkit", input="again", previous_response_id=first.id)
        assert (
            info.value.body["param"] == "previous_response_id" and "has ended" in info.value.body["message"]
        )
        again = api.responses.create(model="rlmkit", input="again", previous_response_id=second.id)
        assert again.output_text == "again: call 2, context 3 chars"


def test_litellm_responses_with_an_api_base(qa_url):
    response = litellm.responses(
        model="openai/rlmkit", input="from litellm", api_base=qa_url, api_key=KEY, store=False
    )
    assert response.output[-1].content[0].text == "FROM LITELLM (0 chars)"
    assert response.usage.total_tokens > 0


def test_litellm_responses_continue_a_previous_response():
    with served(counting_rlm(), api_key=KEY) as url:
        first = litellm.responses(
            model="openai/rlmkit", input="first", instructions="0123", api_base=url, api_key=KEY
        )
        second = litellm.responses(
            model="openai/rlmkit", input="second", previous_response_id=first.id, api_base=url, api_key=KEY
        )
    assert second.output[-1].content[0].text == "second: call 2, context 12 chars"  # "system: 0123"


def test_access_log_and_metrics_of_responses_hold_no_prompt_text(caplog):
    import logging

    secret = "the-secret-responses-question"
    with caplog.at_level(logging.INFO, logger="rlmkit.serve.access"), served(qa_rlm(), api_key=KEY) as url:
        first = client(url).responses.create(model="rlmkit", input=secret, instructions=secret)
        list(
            client(url).responses.create(
                model="rlmkit", input=secret, previous_response_id=first.id, stream=True
            )
        )
        metrics = httpx.get(
            url.removesuffix("/v1") + "/metrics", headers={"Authorization": f"Bearer {KEY}"}
        ).text
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "rlmkit.serve.access"]
    calls = [line for line in lines if line["path"] == "/v1/responses"]
    assert len(calls) == 2 and all(line["status"] == 200 and line["calls"] == 2 for line in calls)
    assert calls[0]["session_id"] == calls[1]["session_id"] is not None  # one REPL for both
    assert 'route="/v1/responses"' in metrics
    for text in (caplog.text, metrics):
        assert secret not in text and secret.upper() not in text
