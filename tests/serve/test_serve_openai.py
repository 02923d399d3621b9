"""The official ``openai`` client against ``rlmkit serve``'s app on a real uvicorn server:
sync, async and streaming calls, typed inputs and outputs, usage, and errors in OpenAI's shape."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pydantic
import pytest

from tests.helpers.serve_programs import qa_rlm, served, typed_rlm

KEY = "test-serve-key"


@pytest.fixture(scope="module")
def qa_url():
    with served(qa_rlm(), api_key=KEY, max_body_bytes=4096) as url:
        yield url


@pytest.fixture(scope="module")
def typed_url():
    with served(typed_rlm(), name="adder") as url:
        yield url


def client(url: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0)


def test_models_lists_the_served_program(qa_url):
    models = client(qa_url).models.list()
    assert [m.id for m in models.data] == ["rlmkit"]
    assert client(qa_url).models.retrieve("rlmkit").owned_by == "rlmkit"


def test_a_sync_call_answers_from_the_last_user_message_over_the_earlier_conversation(qa_url):
    reply = client(qa_url).chat.completions.create(
        model="rlmkit",
        messages=[
            {"role": "system", "content": "a long document"},
            {"role": "user", "content": "how long?"},
        ],
    )
    context = "system: a long document"
    assert reply.choices[0].message.content == f"HOW LONG? ({len(context)} chars)"
    assert reply.choices[0].finish_reason == "stop"
    # the whole tree is counted: the root turn and the llm_query sub-call
    assert reply.usage.rlm_calls == 2 and reply.usage.total_tokens > 0 and reply.usage.cost == 0.0
    reasoning = reply.choices[0].message.reasoning_content
    assert (
        "[turn 1]" in reasoning and "llm_query" in reasoning and f"context chars: {len(context)}" in reasoning
    )


def test_content_parts_before_the_last_are_context(qa_url):
    reply = client(qa_url).chat.completions.create(
        model="rlmkit",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "0123456789"}, {"type": "text", "text": "q"}],
            }
        ],
    )
    assert reply.choices[0].message.content == "Q (10 chars)"


def test_an_async_client_runs_concurrent_calls_each_answered_for_itself(qa_url):
    async def main():
        async with openai.AsyncOpenAI(base_url=qa_url, api_key=KEY, max_retries=0) as aclient:
            calls = [
                aclient.chat.completions.create(
                    model="rlmkit", messages=[{"role": "user", "content": f"q{i}"}]
                )
                for i in range(6)
            ]
            return await asyncio.gather(*calls)

    replies = asyncio.run(main())
    assert [r.choices[0].message.content for r in replies] == [f"Q{i} (0 chars)" for i in range(6)]


def test_a_stream_sends_the_turns_as_reasoning_then_the_answer_then_usage(qa_url):
    stream = client(qa_url).chat.completions.create(
        model="rlmkit",
        messages=[{"role": "user", "content": "stream me"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "[turn 1]" in reasoning and "SUBMIT" in reasoning and "[output]" in reasoning
    assert content == "STREAM ME (0 chars)"
    first_content = next(i for i, c in enumerate(chunks) if c.choices and c.choices[0].delta.content)
    last_reasoning = max(
        i
        for i, c in enumerate(chunks)
        if c.choices and getattr(c.choices[0].delta, "reasoning_content", None)
    )
    assert last_reasoning < first_content  # the work shows before the answer
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.rlm_calls == 2


def test_a_stream_without_include_usage_has_no_usage_chunk(qa_url):
    chunks = list(
        client(qa_url).chat.completions.create(
            model="rlmkit", messages=[{"role": "user", "content": "x"}], stream=True
        )
    )
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_typed_inputs_through_extra_body_and_outputs_as_json(typed_url):
    reply = client(typed_url, "unused").chat.completions.create(
        model="adder",
        messages=[{"role": "user", "content": "add them"}],
        extra_body={"inputs": {"numbers": [1, 2, 3], "factor": "2"}},  # "2" fits int: pydantic's lax mode
    )
    assert json.loads(reply.choices[0].message.content) == {"total": 12, "label": "x2"}


def test_response_format_parses_into_the_clients_model(typed_url):
    class Result(pydantic.BaseModel):
        total: int
        label: str

    parsed = client(typed_url, "unused").chat.completions.parse(
        model="adder",
        messages=[{"role": "user", "content": "add"}],
        response_format=Result,
        extra_body={"inputs": {"numbers": [5], "factor": 3}},
    )
    assert parsed.choices[0].message.parsed == Result(total=15, label="x3")


def test_a_schema_that_is_not_the_output_fields_is_a_400(typed_url):
    class Other(pydantic.BaseModel):
        something: str

    with pytest.raises(openai.BadRequestError) as info:
        client(typed_url, "unused").chat.completions.parse(
            model="adder",
            messages=[{"role": "user", "content": "add"}],
            response_format=Other,
            extra_body={"inputs": {"numbers": [5], "factor": 3}},
        )
    assert info.value.body["code"] == "schema_mismatch" and info.value.body["param"] == "response_format"


def test_inputs_that_do_not_fit_the_signature_are_a_422(typed_url):
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client(typed_url, "unused").chat.completions.create(
            model="adder",
            messages=[{"role": "user", "content": "add"}],
            extra_body={"inputs": {"numbers": ["one"], "factor": 3}},
        )
    assert info.value.body["param"] == "inputs.numbers"
    with pytest.raises(openai.UnprocessableEntityError, match="not filled by the messages"):
        client(typed_url, "unused").chat.completions.create(
            model="adder",
            messages=[{"role": "user", "content": "add"}],
            extra_body={"inputs": {"numbers": [1]}},
        )


@pytest.mark.parametrize(
    ("change", "error", "code"),
    [
        ({"model": "gpt-4o"}, openai.NotFoundError, "model_not_found"),
        ({"extra_body": {"colour": "blue"}}, openai.BadRequestError, "unknown_field"),
        ({"n": 2}, openai.BadRequestError, "invalid_request"),
        ({"messages": []}, openai.BadRequestError, "invalid_request"),
    ],
)
def test_bad_requests_get_their_documented_status(qa_url, change, error, code):
    request = {"model": "rlmkit", "messages": [{"role": "user", "content": "q"}], **change}
    with pytest.raises(error) as info:
        client(qa_url).chat.completions.create(**request)
    assert info.value.body["code"] == code


def test_a_missing_or_wrong_key_is_a_401_and_never_echoed(qa_url):
    with pytest.raises(openai.AuthenticationError) as info:
        client(qa_url, "wrong-key").models.list()
    assert "wrong-key" not in json.dumps(info.value.body)
    assert httpx.get(f"{qa_url}/models").status_code == 401
    assert httpx.get(qa_url.removesuffix("/v1") + "/health").status_code == 200  # for the load balancer


def test_malformed_json_and_oversize_bodies_get_400_and_413(qa_url):
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    bad = httpx.post(f"{qa_url}/chat/completions", content=b'{"model": ', headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json"
    big = {"model": "rlmkit", "messages": [{"role": "user", "content": "x" * 5000}]}
    with pytest.raises(openai.APIStatusError) as info:
        client(qa_url).chat.completions.create(**big)
    assert info.value.status_code == 413 and info.value.body["code"] == "body_too_large"
    assert client(qa_url).models.list().data  # and the server goes on serving
