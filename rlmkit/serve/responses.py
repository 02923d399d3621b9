"""OpenAI's Responses API (``POST /v1/responses``): a request read onto the same mapping as a
chat completion, the call answered whole or streamed as the Responses events, and the responses
kept for ``previous_response_id``.

    input (a string, or message items)   -> messages, mapped as a chat request's (mapping.py)
    instructions                         -> a system message before them (so: context)
    text.format (json_object, json_schema) -> as response_format (json_schema: the output fields)
    extra_body inputs / budget / session -> as in chat completions

A stored response (``store``, true unless the request says false) of an RLM program runs in a
session opened for it, holding every input of the call but its question; a request naming it as
``previous_response_id`` runs in that session: the same REPL, its variables and loaded context.
The REPL's root turns are the response's reasoning items (``reasoning_text`` content), the
answer its message. Shapes are built and checked by the openai SDK's own types.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
import time
import typing
import uuid
from collections.abc import AsyncIterator
from typing import Any

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
from openai.types.responses.response_create_params import ResponseCreateParamsBase
from sse_starlette import ServerSentEvent

from rlmkit import events as ev
from rlmkit.serve import chunks
from rlmkit.serve.chat import Call
from rlmkit.serve.errors import APIError, bad_request, from_exception
from rlmkit.serve.mapping import ChatRequest, check_fields, content_of, parse_request
from rlmkit.trajectory import Usage

OPENAI_FIELDS = frozenset(ResponseCreateParamsBase.__annotations__) | {"stream"}
RLMKIT_FIELDS = frozenset({"inputs", "session", "budget"})
TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
SESSION_RESPONSE_ID = re.compile(r"^resp_([0-9a-f]{32})_[0-9a-f]{16}$")
MAX_STORED = 1000  # responses kept for GET and previous_response_id; the oldest go first


@dataclasses.dataclass
class ResponsesRequest:
    chat: ChatRequest  # the same fields a chat request maps onto the program's inputs
    previous_response_id: str | None = None
    store: bool = True
    instructions: str | None = None
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)


def parse(body: Any) -> ResponsesRequest:
    """Check a decoded body field by field (400 naming the field that is wrong)."""
    check_fields(body, OPENAI_FIELDS | RLMKIT_FIELDS)
    if body.get("tools"):
        raise bad_request("client-side tools are not supported: the RLM calls its own", param="tools")
    previous, store = body.get("previous_response_id"), body.get("store", True)
    if previous is not None and not isinstance(previous, str):
        raise bad_request("'previous_response_id' must be a response id", param="previous_response_id")
    if not isinstance(store, bool):
        raise bad_request("'store' must be true or false", param="store")
    instructions, metadata = body.get("instructions"), body.get("metadata") or {}
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request("'instructions' must be a string", param="instructions")
    if not isinstance(metadata, dict):
        raise bad_request("'metadata' must be an object of strings", param="metadata")
    messages = ([{"role": "system", "content": instructions}] if instructions else []) + _messages(
        body.get("input")
    )
    chat_body = {
        "model": body.get("model"),
        "messages": messages or [{"role": "user", "content": ""}],
        "stream": bool(body.get("stream")),
        **{name: body[name] for name in RLMKIT_FIELDS if name in body},
    }
    if (response_format := _format(body.get("text"))) is not None:
        chat_body["response_format"] = response_format
    chat = parse_request(chat_body)
    if not messages:
        if not chat.inputs:
            raise bad_request("'input' is required (or the program's inputs in 'inputs')", param="input")
        chat.messages = []
    if previous is not None and chat.session is not None:
        raise bad_request("give 'previous_response_id' or 'session', not both", param="session")
    return ResponsesRequest(chat, previous, store, instructions, metadata)


def _messages(value: Any) -> list[dict[str, Any]]:
    """``input`` as chat messages: a string is one user message; items are messages with text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise bad_request("'input' must be a string or a list of items", param="input")
    messages = []
    for i, item in enumerate(value):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "reasoning":
            continue  # an earlier response's own reasoning, handed back: the REPL has it already
        role = ROLES.get(item.get("role")) if kind == "message" else None
        if role is None:
            raise bad_request(
                f"input[{i}]: only message items (user, assistant, system) are supported", "input"
            )
        content = item.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") in TEXT_PARTS for p in content):
                raise bad_request(f"input[{i}]: only text content parts are supported", param="input")
            content = [{"type": "text", "text": p.get("text")} for p in content]
        elif not isinstance(content, str):
            raise bad_request(f"input[{i}]: content must be a string or a list of text parts", param="input")
        messages.append({"role": role, "content": content})
    return messages


def _format(text: Any) -> dict[str, Any] | None:
    """``text.format`` as chat's ``response_format`` (the Responses API names the schema flat)."""
    if text is None:
        return None
    found = text.get("format") if isinstance(text, dict) else None
    if found is None:
        return None
    if not isinstance(found, dict):
        raise bad_request("text.format must be an object", param="text.format")
    if found.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {"schema": found.get("schema")}}
    return {"type": found.get("type")}


# ------------------------------------------------------------------ stored responses
@dataclasses.dataclass
class Stored:
    body: dict[str, Any]  # the response as GET returns it
    session_id: str | None  # the session a follow-up continues (None: it kept no REPL)


class StoredResponses:
    """The responses kept (``store``), newest last; past ``limit`` the oldest is forgotten."""

    def __init__(self, limit: int = MAX_STORED):
        self.limit = limit
        self._kept: collections.OrderedDict[str, Stored] = collections.OrderedDict()
        self.deleted: collections.OrderedDict[str, None] = collections.OrderedDict()  # no follow-up

    def __len__(self) -> int:
        return len(self._kept)

    def put(self, response_id: str, stored: Stored) -> None:
        self._kept[response_id] = stored
        while len(self._kept) > self.limit:
            self._kept.popitem(last=False)

    def get(self, response_id: str, param: str | None = None) -> Stored:
        stored = self._kept.get(response_id)
        if stored is None:
            raise APIError(404, f"no response {response_id!r}", code="response_not_found", param=param)
        self._kept.move_to_end(response_id)
        return stored

    def delete(self, response_id: str) -> None:
        if self._kept.pop(response_id, None) is None:
            raise APIError(404, f"no response {response_id!r}", code="response_not_found")
        self.deleted[response_id] = None
        while len(self.deleted) > self.limit:
            self.deleted.popitem(last=False)


def response_id(session_id: str | None) -> str:
    """A new response's id. One that runs in a session carries the session's id, so a follow-up
    naming it finds the session where nothing kept the response: on another replica, after a
    restart with a sessions directory (and a router sends it to the replica holding the REPL)."""
    return f"resp_{session_id}_{uuid.uuid4().hex[:16]}" if session_id else f"resp_{uuid.uuid4().hex}"


def session_of(response_id: str) -> str | None:
    """The session id a response id carries (``response_id``'s), or None."""
    match = SESSION_RESPONSE_ID.match(response_id)
    return match.group(1) if match else None


# ------------------------------------------------------------------ the call
class ResponsesCall:
    """A prepared call (``chat.Call``) answered in the Responses API's shapes."""

    def __init__(self, call: Call, request: ResponsesRequest):
        self.call, self.request = call, request
        self.id = response_id(call.session.id if call.session is not None else None)
        self.created = int(time.time())
        self._sequence = 0

    def response(
        self, output: list[dict[str, Any]], status: str = "completed", error: dict | None = None
    ) -> Response:
        request, usage = self.request, self.call.record.usage
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
                "model": self.call.program.name,
                "status": status,
                "error": error,
                "incomplete_details": None,
                "instructions": request.instructions,
                "metadata": request.metadata,
                "output": output,
                "parallel_tool_calls": False,
                "previous_response_id": request.previous_response_id,
                "store": request.store,
                "text": {"format": text_format},
                "tool_choice": "none",
                "tools": [],
                "usage": usage_of(usage) if status != "in_progress" else None,
            }
        )

    async def answer(self) -> tuple[str, dict[str, Any]]:
        """The whole response: its JSON, and the body GET returns."""
        prediction, turns = await self.call.outcome()
        output = [output_item("reasoning", text) for text in turns]
        output.append(output_item("message", content_of(self.call.program, self.call.request, prediction)))
        body = self.response(output).model_dump(mode="json", exclude_unset=True)
        return json.dumps(body), body

    def _event(self, kind: type, **fields: Any) -> bytes:
        """One server-sent event of the SDK's type ``kind``, named by its ``type``, numbered."""
        event = kind.model_validate({"type": _type(kind), **fields, "sequence_number": self._sequence})
        self._sequence += 1
        return ServerSentEvent(data=chunks.dump(event), event=event.type, sep="\n").encode()

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
                elif (text := chunks.reasoning_of(item)) is not None:
                    if not output or chunks.starts_turn(item):
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


# the events of an item's text, by the item's type: (delta, done)
TEXT_EVENTS = {
    "reasoning": (ResponseReasoningTextDeltaEvent, ResponseReasoningTextDoneEvent),
    "message": (ResponseTextDeltaEvent, ResponseTextDoneEvent),
}


def _type(kind: type) -> str:
    """An event class's ``type`` (its one Literal value)."""
    (name,) = typing.get_args(kind.model_fields["type"].annotation)
    return name


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
    from rlmkit.serve.mapping import ChatRequest as Chat

    class _Record:
        usage, status = Usage(), 200

    class _Call:
        record, program, request = _Record(), type("P", (), {"name": "warm"})(), Chat(model="", messages=[])
        session = None

    call = ResponsesCall(_Call(), ResponsesRequest(_Call.request))  # type: ignore[arg-type]
    output: list[dict[str, Any]] = []
    call._opened(output, "reasoning") + call._delta(output, ".") + call._closed(output)
    call._opened(output, "message") + call._closed(output)
    call._event(ResponseCompletedEvent, response=call.response(output))
