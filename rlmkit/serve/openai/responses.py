"""OpenAI's Responses API (``POST /v1/responses``): the call (read by ``responses_request.py``)
answered whole or streamed as the Responses events.

A stored response (``store``, true unless the request says false) of an RLM program runs in a
session opened for it, holding every input of the call but its question; a request naming it as
``previous_response_id`` runs in that session: the same REPL, its variables and loaded context.
The REPL's root turns are the response's reasoning items (``reasoning_text`` content), the
answer its message. Shapes are built and checked by the openai SDK's own types.
"""

from __future__ import annotations

import json
import time
import typing
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pydantic
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFailedEvent,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseReasoningTextDoneEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)
from sse_starlette import ServerSentEvent

from rlmkit import events as ev
from rlmkit.errors import RunCancelled
from rlmkit.serve import reasoning
from rlmkit.serve.errors import APIError, from_exception
from rlmkit.serve.openai.chat import Call
from rlmkit.serve.openai.chat_chunks import dump
from rlmkit.serve.openai.client_tools import function_call_item
from rlmkit.serve.openai.images import unread_note
from rlmkit.serve.openai.mapping import content_of
from rlmkit.serve.openai.responses_request import ResponsesRequest
from rlmkit.serve.openai.stored import response_id
from rlmkit.session import PendingToolCall
from rlmkit.session.runs import SessionRun
from rlmkit.trajectory import Usage


# ------------------------------------------------------------------ the call
class ResponsesCall:
    """A prepared call (``chat.Call``) answered in the Responses API's shapes."""

    def __init__(self, call: Call, request: ResponsesRequest):
        self.call, self.request = call, request
        self.id = response_id(call.session.id if call.session is not None else None)
        self.created = int(time.time())
        self._sequence = 0

    def response(
        self, output: list[dict[str, Any]], status: str = "completed", error: dict[str, Any] | None = None
    ) -> Response:
        request, usage, program = self.request, self.call.record.usage, self.call.program
        chat = request.chat
        text_format = (
            {"type": "json_schema", "name": "outputs", "schema": {"type": "object"}}
            if chat.schema_fields is not None
            else {"type": "json_object" if chat.json_output else "text"}
        )
        return Response.model_validate(
            {
                "id": self.id,
                "object": "response",
                "created_at": self.created,
                "completed_at": int(time.time()) if status == "completed" else None,
                "model": program.name,
                "status": status,
                "error": error,
                "incomplete_details": None,
                "instructions": request.instructions,
                "metadata": {**request.metadata, **unread_note(program, chat.images)},
                "output": output,
                "parallel_tool_calls": False,
                "previous_response_id": request.previous_response_id,
                "store": request.store,
                "text": {"format": text_format},
                "tool_choice": "auto" if request.tools else "none",
                "tools": request.tool_definitions,
                "background": request.background,
                "usage": usage_of(usage) if status != "in_progress" else None,
                # what held for this run: the root model's sampling, no truncation (a session
                # compacts its history, never the input), no caps of the API's own, no reasoning
                # settings (the REPL's turns are the reasoning), the one service tier
                **program.sampling,
                "top_logprobs": 0,
                "truncation": "disabled",
                "max_output_tokens": None,
                "max_tool_calls": None,
                "reasoning": {"effort": None, "summary": None},
                "service_tier": "default",
                "prompt_cache_key": request.prompt_cache_key,
                "safety_identifier": request.safety_identifier,
            }
        )

    async def answer(self) -> tuple[str, dict[str, Any]]:
        """The whole response: its JSON, and the body GET returns."""
        prediction, turns = await self.call.outcome()
        output = [output_item("reasoning", text) for text in turns]
        output.append(output_item("message", content_of(self.call.program, self.call.request, prediction)))
        body = self.response(output).model_dump(mode="json", exclude_unset=True)
        return json.dumps(body), body

    def outcome_body(self, run: SessionRun, outcome: object) -> dict[str, Any]:
        """The response of a started run (client tools, background) at ``outcome``: its answer;
        the tool call it waits on (a ``function_call`` item; the response is completed, as the
        Responses API has it); or the error it ended with (``cancelled``, or ``failed`` with the
        error). Its reasoning items and usage: what the run did since its previous response."""
        trajectory = run.trajectory
        told, self.call.record.usage = run.news()
        turns = reasoning.reasoning_turns(trajectory) if trajectory is not None else []
        output = [output_item("reasoning", text) for text in turns[told:]]
        if trajectory is not None:
            self.call.record.run_ids.append(trajectory.meta.run_id)
        status, error = "completed", None
        if isinstance(outcome, PendingToolCall):
            output.append(function_call_item(outcome))
        elif isinstance(outcome, RunCancelled):
            status = "cancelled"
        elif isinstance(outcome, BaseException):
            failure = from_exception(outcome)
            self.call.record.status = failure.status
            status, error = "failed", _response_error(failure)
        else:
            output.append(output_item("message", content_of(self.call.program, self.call.request, outcome)))
        return self.response(output, status, error).model_dump(mode="json", exclude_unset=True)

    def _event(self, kind: type[pydantic.BaseModel], **fields: Any) -> bytes:
        """One server-sent event of the SDK's type ``kind``, checked by it, numbered, and named by
        its ``type``, or by the Open Responses name where the spec names it otherwise."""
        sdk_name = _type(kind)
        event = kind.model_validate({"type": sdk_name, **fields, "sequence_number": self._sequence})
        self._sequence += 1
        name = SPEC_NAMES.get(sdk_name)
        if name is None:
            return ServerSentEvent(data=dump(event), event=sdk_name, sep="\n").encode()
        data = json.dumps({**event.model_dump(mode="json", exclude_unset=True), "type": name})
        return ServerSentEvent(data=data, event=name, sep="\n").encode()

    async def events(self, done: Any = None) -> AsyncIterator[bytes]:
        """The Responses stream: created, in progress, each root turn a reasoning item whose text
        grows as the turn's code runs, the answer a message, then completed (with the usage) or,
        should the run fail, failed (with its error). ``done(body)``: called with the completed
        response's body (to store it) before its event is sent."""
        created = self.response([], status="in_progress")
        yield self._event(ResponseCreatedEvent, response=created)
        yield self._event(ResponseInProgressEvent, response=created)
        output: list[dict[str, Any]] = []
        try:
            async for item in self.call.items():
                if not isinstance(item, ev.Event):  # the Prediction: the answer, after every turn
                    if output:
                        yield self._closed(output)
                    content = content_of(self.call.program, self.call.request, item)
                    yield (
                        self._opened(output, "message") + self._delta(output, content) + self._closed(output)
                    )
                elif (text := reasoning.reasoning_of(item)) is not None:
                    if not output or reasoning.starts_turn(item):
                        yield (self._closed(output) if output else b"") + self._opened(output, "reasoning")
                    yield self._delta(output, text)
        except Exception as exc:  # noqa: BLE001 - the stream ends with response.failed, as OpenAI's does
            error = from_exception(exc)
            self.call.record.status = error.status
            failed = self.response(output, status="failed", error=_response_error(error))
            yield self._event(ResponseFailedEvent, response=failed)
            return
        completed = self.response(output)
        if done is not None:
            done(completed.model_dump(mode="json", exclude_unset=True))
        yield self._event(ResponseCompletedEvent, response=completed)

    def _opened(self, output: list[dict[str, Any]], kind: str) -> bytes:
        """A new item at the end of ``output``, and its one content part, empty."""
        item = output_item(kind, "", status="in_progress")
        output.append(item)
        where = {"output_index": len(output) - 1}
        return self._event(ResponseOutputItemAddedEvent, item={**item, "content": []}, **where) + self._event(
            ResponseContentPartAddedEvent,
            item_id=item["id"],
            content_index=0,
            part=item["content"][0],
            **where,
        )

    def _delta(self, output: list[dict[str, Any]], text: str) -> bytes:
        item = output[-1]
        item["content"][0]["text"] += text
        delta, _ = TEXT_EVENTS[item["type"]]
        return self._event(
            delta, item_id=item["id"], output_index=len(output) - 1, content_index=0, delta=text,
            **_logprobs(item),
        )  # fmt: skip

    def _closed(self, output: list[dict[str, Any]]) -> bytes:
        """The last item's text, part and item done (sent once, as it closes)."""
        item, where = output[-1], {"output_index": len(output) - 1}
        if item["status"] == "completed":
            return b""
        item["status"] = "completed"
        part = item["content"][0]
        _, done = TEXT_EVENTS[item["type"]]
        return b"".join(
            (
                self._event(
                    done, item_id=item["id"], content_index=0, text=part["text"], **_logprobs(item), **where
                ),
                self._event(
                    ResponseContentPartDoneEvent, item_id=item["id"], content_index=0, part=part, **where
                ),
                self._event(ResponseOutputItemDoneEvent, item=item, **where),
            )
        )


# The Open Responses spec (2026-04-24) names the reasoning text's events response.reasoning.*;
# the openai SDK names the same events response.reasoning_text.*. Sent by the spec's names: the
# SDK's stream client passes an event it does not know through as it came (its final response
# comes from response.completed), and a client checking the spec knows no other names.
SPEC_NAMES = {
    "response.reasoning_text.delta": "response.reasoning.delta",
    "response.reasoning_text.done": "response.reasoning.done",
}

# the events of an item's text, by the item's type: (delta, done)
TEXT_EVENTS: dict[str, tuple[type[pydantic.BaseModel], type[pydantic.BaseModel]]] = {
    "reasoning": (ResponseReasoningTextDeltaEvent, ResponseReasoningTextDoneEvent),
    "message": (ResponseTextDeltaEvent, ResponseTextDoneEvent),
}


def _type(kind: type[pydantic.BaseModel]) -> str:
    """An event class's ``type`` (its one Literal value)."""
    (name,) = typing.get_args(kind.model_fields["type"].annotation)
    return str(name)


def _logprobs(item: dict[str, Any]) -> dict[str, Any]:
    return {"logprobs": []} if item["type"] == "message" else {}


def output_item(kind: str, text: str, status: str = "completed") -> dict[str, Any]:
    """A reasoning item (``reasoning_text`` content) or the assistant's message (``output_text``)."""
    if kind == "reasoning":
        return {
            "id": f"rs_{uuid.uuid4().hex}",
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": text}],
            "status": status,
        }
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def usage_of(usage: Usage) -> dict[str, Any]:
    """The whole call tree's usage in the Responses API's names; ``cost`` (dollars, where the
    model has a price) and ``rlm_calls`` (model calls) ride along, as in a chat completion."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
        "cost": usage.cost,
        "rlm_calls": usage.calls,
    }


def _response_error(error: APIError) -> dict[str, Any]:
    """A failed response's ``error``: OpenAI's codes are a closed list, so the server's own code
    (``budget_exceeded``, ``model_error``, ...) goes in ``type`` and the message says the rest."""
    code = "rate_limit_exceeded" if error.status == 429 else "server_error"
    return {"code": code, "message": error.message, "param": error.param, "type": error.code}


def warm() -> None:
    """Build the SDK types' validators now (pydantic builds one the first time a type is used,
    for the Response type about half a second): the app's start pays it, not its first call."""
    from rlmkit.serve.openai.mapping import ChatRequest as Chat

    class _Record:
        usage, status = Usage(), 200

    class _Call:
        program = type("P", (), {"name": "warm", "sampling": {}})()
        record, request = _Record(), Chat(model="", messages=[])
        session = None

    call = ResponsesCall(_Call(), ResponsesRequest(_Call.request))  # type: ignore[arg-type]
    output: list[dict[str, Any]] = []
    call._opened(output, "reasoning") + call._delta(output, ".") + call._closed(output)
    call._opened(output, "message") + call._closed(output)
    call._event(ResponseCompletedEvent, response=call.response(output))
