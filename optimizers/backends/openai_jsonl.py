"""openai-jsonl: export canonical rows in OpenAI's fine-tuning formats, each line schema-checked.

- SFT rows -> supervised: ``{"messages": [...], "tools": [...]}``
- DPO rows -> preference:  ``{"input": {"messages": [...]}, "preferred_output": [...],
  "non_preferred_output": [...]}``
- RL rows  -> reinforcement (RFT): ``{"messages": [...], "reference_answer": ..., ...}``; the grader
  reads ``item.reference_answer``. A ``grader.json`` with an exact-match grader is written as a
  starting point; the task's own scorer is named in it for whoever ports it to a Python grader.

The pydantic models below pin the documented shape so a broken line fails here, with its
line number, instead of hours later in the provider's validation queue.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from optimizers.backends.base import Backend, SchemaMismatchError, TrainJob, TrainResult, write_splits


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionCall(_Strict):
    name: str
    arguments: str  # a JSON object, as a string

    @model_validator(mode="after")
    def _json_object(self) -> FunctionCall:
        if not isinstance(json.loads(self.arguments), dict):
            raise ValueError("function arguments must encode a JSON object")  # noqa: TRY004 - pydantic wants ValueError
        return self


class ToolCall(_Strict):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    weight: Literal[0, 1] | None = None  # assistant turns only: 0 = do not learn this turn

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id")
        if self.content is None and not self.tool_calls:
            raise ValueError(f"a {self.role} message needs content or tool_calls")
        return self


class Tool(_Strict):
    type: Literal["function"] = "function"
    function: dict[str, Any]


class SupervisedLine(_Strict):
    messages: list[Message] = Field(min_length=2)
    tools: list[Tool] | None = None
    parallel_tool_calls: bool | None = None

    @model_validator(mode="after")
    def _has_target(self) -> SupervisedLine:
        if not any(m.role == "assistant" for m in self.messages):
            raise ValueError("needs at least one assistant message to learn from")
        return self


class PreferenceInput(_Strict):
    messages: list[Message] = Field(min_length=1)
    tools: list[Tool] | None = None


class PreferenceLine(_Strict):
    input: PreferenceInput
    preferred_output: list[Message] = Field(min_length=1, max_length=1)
    non_preferred_output: list[Message] = Field(min_length=1, max_length=1)

    @model_validator(mode="after")
    def _assistant_outputs(self) -> PreferenceLine:
        for output in (self.preferred_output[0], self.non_preferred_output[0]):
            if output.role != "assistant":
                raise ValueError("preferred and non-preferred outputs must be assistant messages")
        return self


class ReinforcementLine(BaseModel):
    model_config = ConfigDict(extra="allow")  # extra top-level fields are what the grader reads

    messages: list[Message] = Field(min_length=1)
    reference_answer: Any

    @model_validator(mode="after")
    def _ends_with_user(self) -> ReinforcementLine:
        if self.messages[-1].role != "user":
            raise ValueError("the last prompt message must come from the user")
        return self


LINE_MODELS: dict[str, type[BaseModel]] = {
    "sft": SupervisedLine,
    "dpo": PreferenceLine,
    "rl": ReinforcementLine,
}


def _message(message: Any, call_ids: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = []
        for n, call in enumerate(message.tool_calls):
            call_id = call.get("id") or f"call_{len(call_ids)}_{n}"
            call_ids.append(call_id)
            out["tool_calls"].append({"id": call_id, "type": "function", "function": call["function"]})
    if message.role == "tool":
        # Canonical tool messages answer the earliest unanswered call (the order the RLM made them).
        out["tool_call_id"] = call_ids.pop(0) if call_ids else "call_unknown"
    return out


def _messages(messages: list[Any]) -> list[dict[str, Any]]:
    call_ids: list[str] = []
    return [_message(m, call_ids) for m in messages]


def _tools(tools: str | None) -> list[dict[str, Any]] | None:
    if not tools:
        return None
    return [t if "function" in t else {"type": "function", "function": t} for t in json.loads(tools)]


def openai_line(row: Any) -> dict[str, Any]:
    """One canonical row -> one OpenAI fine-tuning line (not yet checked)."""
    if row.kind == "sft":
        line: dict[str, Any] = {"messages": _messages(row.messages)}
        if row.tools:
            line["tools"] = _tools(row.tools)
        return line
    if row.kind == "dpo":
        return {
            "input": {"messages": _messages(row.prompt)},
            "preferred_output": _messages(row.chosen[-1:]),
            "non_preferred_output": _messages(row.rejected[-1:]),
        }
    return {
        "messages": _messages(row.prompt),
        "reference_answer": json.loads(row.answer),
        "task_id": row.task_id,
        **{k: v for k, v in row.example.items() if k not in ("messages", "reference_answer")},
    }


def check_line(kind: str, line: dict[str, Any], where: str) -> None:
    try:
        LINE_MODELS[kind].model_validate(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(map(str, first["loc"])) or "line"
        raise SchemaMismatchError(f"{where}: OpenAI {kind} format, {key}: {first['msg']}", key=key) from exc


class OpenAIJSONLBackend(Backend):
    name = "openai-jsonl"
    row_kinds: ClassVar = {"sft": ("sft",), "dpo": ("dpo",), "rl": ("rl",)}

    def prepare(self, job: TrainJob) -> TrainResult:
        validated = self.validate(job)
        folder = job.output_dir / "openai"
        records = {split: [openai_line(row) for row in rows] for split, rows in validated.splits.items()}
        for split, lines in records.items():
            for number, line in enumerate(lines, start=1):
                check_line(
                    job.kind, line, f"{split} line {number} (row {validated.splits[split][number - 1].id})"
                )
        files = write_splits(folder, records)
        note = ""
        if job.kind == "rl":
            files.append(self._write_grader(folder))
            scorer = validated.splits["train"][0].reward.scorer
            note = f"; grader.json checks exact answers, port {scorer} to a python grader for partial credit"
        return self.exported(
            validated,
            folder,
            files,
            message=f"upload {folder}/train.jsonl with purpose 'fine-tune' and create a fine-tuning job "
            f"({ {'sft': 'supervised', 'dpo': 'dpo', 'rl': 'reinforcement'}[job.kind] } method)" + note,
        )

    @staticmethod
    def _write_grader(folder: Path) -> Path:
        grader = {
            "type": "string_check",
            "name": "exact_answer",
            "operation": "eq",
            "input": "{{sample.output_text}}",
            "reference": "{{item.reference_answer}}",
        }
        path = folder / "grader.json"
        path.write_text(json.dumps(grader, indent=2))
        return path

    def run(self, job: TrainJob, dry_run: bool = False) -> TrainResult:
        return self.prepare(job)  # an export: nothing runs here
