"""The client's function tools as REPL functions over HTTP: a call pauses the run and goes back to
the client (a ``function_call`` item, or ``tool_calls`` in chat); the client's result resumes the
same live REPL. Driven by the openai SDK and by the OpenAI Agents SDK, against a real server."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

import rlmkit
from rlmkit.testing import FunctionLM, is_root_request
from tests.helpers.replies import repl
from tests.helpers.serve_programs import served

KEY = "tools-key"

WEATHER = {
    "type": "function",
    "name": "weather",
    "description": "Today's temperature in a city, in degrees Celsius.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
ADD = {
    "type": "function",
    "name": "add",
    "description": "Add two integers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}


def two_tools_model(messages: list[dict[str, Any]]) -> str:
    """Turn 1 sets a variable and calls weather; turn 2 calls add with both; then the answer."""
    if not is_root_request({"messages": messages}):
        return "sub"
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if turn == 0:
        return repl("secret = 'kept-' + question[:4]", "temp = weather(city='Paris')", "print(temp)")
    return repl(
        "total = add(a=int(temp), b=len(secret))",
        "SUBMIT(answer=f'{secret}: {temp} + {len(secret)} = {total}')",
    )


def tools_rlm() -> rlmkit.RLM:
    return rlmkit.RLM("context, question -> answer", lm=FunctionLM(two_tools_model))


@pytest.fixture(scope="module")
def url():
    with served(tools_rlm(), api_key=KEY) as base:
        yield base


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key=KEY, max_retries=0)


def function_calls(response: Any) -> list[Any]:
    return [item for item in response.output if item.type == "function_call"]


def test_a_responses_round_trip_pauses_twice_and_resumes_one_repl(url):
    api = client(url)
    first = api.responses.create(model="rlmkit", input="what now?", tools=[WEATHER, ADD])
    assert first.status == "completed"
    [call] = function_calls(first)
    assert (call.name, json.loads(call.arguments), call.status) == ("weather", {"city": "Paris"}, "completed")
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "21"}
    second = api.responses.create(
        model="rlmkit", input=[result], tools=[WEATHER, ADD], previous_response_id=first.id
    )
    [call2] = function_calls(second)
    assert (call2.name, json.loads(call2.arguments)) == ("add", {"a": 21, "b": 9})  # len('kept-what')
    assert call2.call_id != call.call_id
    result2 = {"type": "function_call_output", "call_id": call2.call_id, "output": "30"}
    done = api.responses.create(
        model="rlmkit", input=[result2], tools=[WEATHER, ADD], previous_response_id=second.id
    )
    assert done.status == "completed" and not function_calls(done)
    assert done.output_text == "kept-what: 21 + 9 = 30"  # `secret`, set before the first call, lived on


def test_the_call_id_alone_finds_the_waiting_run_when_the_client_resends_the_conversation(url):
    """Agent runtimes send the whole conversation again, with no previous_response_id."""
    api = client(url)
    asked = [{"role": "user", "content": "again?"}]
    first = api.responses.create(model="rlmkit", input=asked, tools=[WEATHER, ADD])
    [call] = function_calls(first)
    echoed = [item.model_dump(exclude_none=True) for item in first.output]
    outputs = [{"type": "function_call_output", "call_id": call.call_id, "output": "5"}]
    second = api.responses.create(model="rlmkit", input=asked + echoed + outputs, tools=[WEATHER, ADD])
    [call2] = function_calls(second)
    assert json.loads(call2.arguments) == {"a": 5, "b": len("kept-agai")}


def test_bad_tools_and_unknown_tool_calls_are_told_before_anything_runs(url):
    api = client(url)
    with pytest.raises(openai.BadRequestError, match="only function tools"):
        api.responses.create(model="rlmkit", input="q", tools=[{"type": "web_search"}])
    with pytest.raises(openai.BadRequestError, match="Python identifier"):
        api.responses.create(model="rlmkit", input="q", tools=[{**WEATHER, "name": "not-a-name"}])
    stale = {"type": "function_call_output", "call_id": "call_" + "0" * 32 + "_" + "0" * 12, "output": "1"}
    with pytest.raises(openai.NotFoundError):
        api.responses.create(model="rlmkit", input=[stale], tools=[WEATHER, ADD])


def chat_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}
        for tool in (WEATHER, ADD)
    ]


def test_a_chat_round_trip_returns_tool_calls_and_tool_messages_resume_the_repl(url):
    api = client(url)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "chat?"}]
    for output in ("12", "19"):
        reply = api.chat.completions.create(model="rlmkit", messages=messages, tools=chat_tools())
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        [tool_call] = choice.message.tool_calls
        messages += [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": tool_call.id, "content": output},
        ]
    assert json.loads(tool_call.function.arguments) == {"a": 12, "b": len("kept-chat")}
    final = api.chat.completions.create(model="rlmkit", messages=messages, tools=chat_tools())
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == "kept-chat: 12 + 9 = 19"


# ------------------------------------------------------------ the OpenAI Agents SDK
def agent_model(messages: list[dict[str, Any]]) -> str:
    """The RLM's code calls both of the agent's tools, then answers from their results."""
    if not is_root_request({"messages": messages}):
        return "sub"
    return repl(
        "temp = get_temperature(city='Oslo')",
        "doubled = multiply(a=int(temp), b=2)",
        "SUBMIT(answer=f'Oslo is {temp} C; twice that is {doubled}')",
    )


@pytest.mark.parametrize("api_kind", ["responses", "chat"])
def test_an_agents_sdk_agent_whose_model_is_the_rlm_completes_with_its_own_tools(api_kind):
    agents = pytest.importorskip("agents")
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)  # nothing leaves 127.0.0.1
    called: list[tuple[str, Any]] = []

    @agents.function_tool
    def get_temperature(city: str) -> str:
        """Today's temperature in a city, in degrees Celsius."""
        called.append(("get_temperature", city))
        return "7"

    @agents.function_tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        called.append(("multiply", (a, b)))
        return a * b

    program = rlmkit.RLM("context, question -> answer", lm=FunctionLM(agent_model))
    with served(program, api_key=KEY) as base:
        api = AsyncOpenAI(base_url=base, api_key=KEY, max_retries=0)
        model = (
            agents.OpenAIResponsesModel("rlmkit", api)
            if api_kind == "responses"
            else agents.OpenAIChatCompletionsModel("rlmkit", api)
        )
        agent = agents.Agent(
            name="weather",
            instructions="Answer with the tools.",
            model=model,
            tools=[get_temperature, multiply],
        )
        result = agents.Runner.run_sync(agent, "How warm is Oslo, doubled?")
    assert called == [("get_temperature", "Oslo"), ("multiply", (7, 2))]
    assert result.final_output == "Oslo is 7 C; twice that is 14"
