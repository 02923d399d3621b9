"""From an OpenAI chat request to the program's inputs, and from its outputs back to a message.

The mapping (docs/guide/serving.md says the same):

- ``extra_body={"inputs": {...}}`` gives input fields by name, typed as the signature says
  (checked here: a value that does not fit is a 422 before anything runs).
- The last user message is the *question field*: ``question`` when the signature has one, else
  the last text (``str``) input field not given in ``inputs``.
- The conversation before it (system, user and assistant messages, as ``role: text`` blocks),
  plus every text part of the last user message but its last, is the *context field*:
  ``context`` when the signature has one, else the first other text field left. With no
  context field left, that text is put before the question.
- A field still missing is a 422 naming it. In a session, the fields the session holds (the
  context it was opened with) are not filled from the messages; the question always is.

The answer is the message's ``content``: a single ``str`` output as it is, anything else (or any
request with ``response_format`` ``json_object`` / ``json_schema``) as a JSON object of the
output fields. A ``json_schema`` whose properties are not the output fields is a 400.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any

import pydantic
from openai.types.chat.completion_create_params import CompletionCreateParamsBase
from pydantic_core import to_jsonable_python

from rlmkit.serve.errors import APIError, bad_request
from rlmkit.serve.openai.client_tools import check_tool_choice, parse_tools
from rlmkit.serve.openai.images import image_field, image_url, image_value
from rlmkit.serve.program import Program
from rlmkit.serve.session_choice import SessionAsk, read_ask
from rlmkit.serve.tool_results import ToolResults
from rlmkit.session import ClientTool

# The fields a client may send: OpenAI's own (from the SDK's types, so a new one is known as
# soon as the SDK is), and ours, sent in extra_body.
OPENAI_FIELDS = frozenset(CompletionCreateParamsBase.__annotations__) | {"stream"}
RLMKIT_FIELDS = frozenset({"inputs", "session", "budget"})
BUDGET_FIELDS = ("max_calls", "max_tokens", "max_cost", "max_seconds")
EMPTY: Mapping[str, str] = {}


@dataclass
class ChatRequest:
    """What the server reads from a chat completion request."""

    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    include_usage: bool = False
    inputs: dict[str, Any] = field(default_factory=dict)
    ask: SessionAsk = SessionAsk()  # the session it names (``session_choice.read_ask``)
    images: list[str] = field(default_factory=list)  # the URLs of the messages' image parts
    budget: dict[str, float] = field(default_factory=dict)
    json_output: bool = False
    schema_fields: set[str] | None = None
    tools: tuple[ClientTool, ...] = ()  # the client's function tools: REPL functions of the run

    @property
    def tool_results(self) -> ToolResults | None:
        """The client's results of a paused run's tool calls (those of one of this server's sessions)."""
        results = self.ask.tool_results
        return results if results is not None and results.session_id is not None else None


def check_fields(body: Any, known: frozenset[str]) -> None:
    """A body is a JSON object of ``known`` fields (400 naming the first that is not)."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    unknown = sorted(set(body) - known)
    if unknown:
        raise bad_request(f"unknown field(s) {unknown}", param=unknown[0], code="unknown_field")


def parse_request(body: Any, headers: Mapping[str, str] = EMPTY) -> ChatRequest:
    """Check a decoded JSON body field by field (400 naming the field that is wrong); ``headers``:
    the request's, which may name its session."""
    check_fields(body, OPENAI_FIELDS | RLMKIT_FIELDS)
    model, messages = body.get("model"), body.get("messages")
    if not isinstance(model, str) or not model:
        raise bad_request("'model' must be a non-empty string", param="model")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise bad_request("'messages' must be a non-empty list of message objects", param="messages")
    if body.get("n") not in (None, 1):
        raise bad_request("only n=1 is supported: a run gives one answer", param="n")
    if body.get("functions"):
        raise bad_request("'functions' is the old form of 'tools': send function tools", param="functions")
    tools = parse_tools(body.get("tools"))
    check_tool_choice(body.get("tool_choice"), tools)
    inputs = body.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise bad_request("'inputs' must be an object of input fields", param="inputs")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise bad_request("'stream_options' must be an object", param="stream_options")
    request = ChatRequest(
        model=model,
        messages=messages,
        stream=bool(body.get("stream")),
        include_usage=bool(stream_options.get("include_usage")),
        inputs=inputs,
        ask=read_ask(body, headers),
        tools=tools,
        images=_images(messages),
        budget=_budget(body.get("budget")),
    )
    _response_format(request, body.get("response_format"))
    return request


def _budget(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict) or set(value) - set(BUDGET_FIELDS):
        raise bad_request(f"'budget' takes {list(BUDGET_FIELDS)}", param="budget")
    for name, limit in value.items():
        if isinstance(limit, bool) or not isinstance(limit, int | float) or limit <= 0:
            raise bad_request(f"budget.{name} must be a positive number", param=f"budget.{name}")
    return dict(value)


def _response_format(request: ChatRequest, value: Any) -> None:
    if value is None:
        return
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return
    if kind == "json_object":
        request.json_output = True
        return
    if kind == "json_schema":
        schema = (value.get("json_schema") or {}).get("schema") or {}
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            raise bad_request("response_format.json_schema.schema needs 'properties'", "response_format")
        request.json_output, request.schema_fields = True, set(properties)
        return
    raise bad_request("response_format.type must be text, json_object or json_schema", "response_format")


# ------------------------------------------------------------------ messages -> inputs
def _text(message: dict[str, Any], where: str, images: list[str] | None = None) -> list[str]:
    """A message's text parts (a string content is one part); its image parts' URLs are added to
    ``images`` (images.py)."""
    content = message.get("content")
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        parts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "image_url":
                url = image_url(part, where)
                if images is not None:
                    images.append(url)
                continue
            text = part.get("text") if kind == "text" else None
            if not isinstance(text, str):
                raise bad_request(f"{where}: content parts are text and image_url parts", param="messages")
            parts.append(text)
        return parts
    raise bad_request(f"{where}: content must be a string or a list of parts", param="messages")


def _images(messages: list[dict[str, Any]]) -> list[str]:
    """Every image part's URL, checked as the request is read (a bad one is a 400 at once)."""
    found: list[str] = []
    for i, message in enumerate(messages):
        if isinstance(message.get("content"), list):
            _text(message, f"messages[{i}]", found)
    return found


def map_inputs(program: Program, request: ChatRequest, held: Set[str] = frozenset()) -> dict[str, Any]:
    """The inputs of one call: ``inputs`` given, then the question and context fields from the
    messages. ``held``: fields a session already holds (never filled from the messages)."""
    given = check_inputs(program, request.inputs)
    last = max((i for i, m in enumerate(request.messages) if m.get("role") == "user"), default=None)
    if last is None:
        if not given:
            raise bad_request("the messages hold no user message", param="messages")
        return given
    parts = _text(request.messages[last], f"messages[{last}]")
    earlier = [
        f"{m.get('role', 'user')}: {text}"
        for i, m in enumerate(request.messages[:last])
        for text in [("\n".join(_text(m, f"messages[{i}]")))]
        if text
    ]
    context = "\n\n".join(earlier + parts[:-1])
    question = parts[-1] if parts else ""
    free = _free_text_fields(program, given)
    question_field = question_field_of(program, given)
    if question_field is not None:  # a session's question is each request's own; its context stays
        rest = [name for name in free if name != question_field and name not in held]
        context_field = "context" if "context" in rest else (rest[0] if rest else None)
        if context_field is not None:
            given[context_field] = context
        elif context:
            question = f"{context}\n\n{question}"
        given[question_field] = question
    if request.images and (name := image_field(program)) is not None and name not in given:
        given[name] = image_value(program, name, request.images)
    missing = [name for name in program.inputs if name not in given and name not in held]
    if missing:
        raise APIError(
            422,
            f"input(s) {missing} are not filled by the messages: give them in extra_body 'inputs'",
            code="missing_inputs",
            param="inputs",
        )
    return given


def _free_text_fields(program: Program, given: dict[str, Any]) -> list[str]:
    """The text fields ``inputs`` left: a message is text, so it fills only those."""
    return [name for name, field in program.inputs.items() if name not in given and field.annotation is str]


def question_field_of(program: Program, given: dict[str, Any]) -> str | None:
    """The field the last user message fills, when ``given`` are the inputs named in the request."""
    free = _free_text_fields(program, given)
    return "question" if "question" in free else (free[-1] if free else None)


def check_inputs(program: Program, inputs: dict[str, Any]) -> dict[str, Any]:
    """Named inputs, each validated against its field's type (422 on the first that does not fit)."""
    unknown = sorted(set(inputs) - set(program.inputs))
    if unknown:
        raise APIError(
            422,
            f"unknown input(s) {unknown}; the signature takes {list(program.inputs)}",
            code="invalid_inputs",
            param="inputs",
        )
    checked = {}
    for name, value in inputs.items():
        annotation = program.inputs[name].annotation
        try:
            checked[name] = _adapter(annotation).validate_python(value)
        except (pydantic.ValidationError, pydantic.PydanticSchemaGenerationError) as exc:
            if isinstance(exc, pydantic.PydanticSchemaGenerationError):
                checked[name] = value  # a type pydantic cannot check (e.g. dspy.History): passed as is
                continue
            raise APIError(
                422,
                f"input {name!r} does not fit its type {getattr(annotation, '__name__', annotation)}: "
                f"{exc.errors()[0]['msg']}",
                code="invalid_inputs",
                param=f"inputs.{name}",
            ) from exc
    return checked


def _adapter(annotation: Any) -> pydantic.TypeAdapter[Any]:
    """Built once per field type: building one costs far more than validating with it."""
    try:
        return _cached_adapter(annotation)
    except TypeError:  # an unhashable annotation: built each time
        return pydantic.TypeAdapter(annotation)


@functools.lru_cache(maxsize=256)
def _cached_adapter(annotation: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(annotation)


# ------------------------------------------------------------------ outputs -> content
def check_schema(program: Program, request: ChatRequest) -> None:
    if request.schema_fields is not None and request.schema_fields != set(program.outputs):
        raise bad_request(
            f"response_format's schema has properties {sorted(request.schema_fields)}; this program "
            f"answers {sorted(program.outputs)}",
            param="response_format",
            code="schema_mismatch",
        )


def content_of(program: Program, request: ChatRequest, prediction: Any) -> str:
    outputs = {name: prediction.get(name) for name in program.outputs}
    if not request.json_output and len(outputs) == 1:
        (value,) = outputs.values()
        return value if isinstance(value, str) else json.dumps(to_jsonable_python(value))
    return json.dumps(to_jsonable_python(outputs))
