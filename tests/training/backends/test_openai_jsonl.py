"""openai-jsonl: canonical rows -> OpenAI SFT / DPO / RFT lines, every line schema-checked."""

from __future__ import annotations

import json

import pytest

from optimizers.backends.base import (
    DatasetError,
    DatasetKindError,
    SchemaMismatchError,
    TrainJob,
    get_backend,
)
from optimizers.backends.openai_jsonl import check_line
from optimizers.backends.testing import read_jsonl, write_dataset
from optimizers.compile.schema import ChatMessage, DPORow, RewardSpec, RLRow, SFTRow

USER = ChatMessage(role="user", content="How many lines mention 'error'?")
TOOLS = json.dumps(
    [{"name": "llm_query", "description": "ask a sub-model", "parameters": {"type": "object"}}]
)


def dpo_row() -> DPORow:
    return DPORow(
        id="d",
        task_id="t",
        prompt=[USER],
        chosen=[ChatMessage(role="assistant", content="3")],
        rejected=[ChatMessage(role="assistant", content="7")],
        score_chosen=1.0,
        score_rejected=0.0,
    )


def job_for(tmp_path, kind, rows):
    data = write_dataset(tmp_path / "data", {"train": rows})
    return TrainJob(kind=kind, dataset=data, base_model="gpt-4.1-mini", output_dir=tmp_path / "out")


def test_sft_with_tool_calls_gets_ids_linking_calls_and_results(tmp_path):
    call = {"function": {"name": "llm_query", "arguments": json.dumps({"prompt": "count"})}}
    prompt = [USER]
    completion = [
        ChatMessage(role="assistant", content="", tool_calls=[call]),
        ChatMessage(role="tool", content="3"),  # canonical rows carry no call id
        ChatMessage(role="assistant", content="3"),
    ]
    # SFTRow requires assistant-only completions, so the tool turn sits in the prompt here
    row = SFTRow(
        id="a",
        task_id="t",
        prompt=prompt + completion[:2],
        completion=completion[2:],
        messages=prompt + completion,
        tools=TOOLS,
    )
    result = get_backend("openai-jsonl").run(job_for(tmp_path, "sft", [row]))
    (line,) = read_jsonl(result.artifact / "train.jsonl")
    call_id = line["messages"][1]["tool_calls"][0]["id"]
    assert line["messages"][2] == {"role": "tool", "content": "3", "tool_call_id": call_id}
    assert line["tools"][0] == {"type": "function", "function": json.loads(TOOLS)[0]}


def test_dpo_and_rft_lines(tmp_path):
    dpo = dpo_row()
    result = get_backend("openai-jsonl").run(job_for(tmp_path / "dpo", "dpo", [dpo]))
    (line,) = read_jsonl(result.artifact / "train.jsonl")
    assert line["preferred_output"][0]["content"] == "3"
    assert line["non_preferred_output"][0]["content"] == "7"
    assert line["input"]["messages"][0]["role"] == "user"

    rl = RLRow(
        id="r",
        task_id="t9",
        prompt=[USER],
        answer=json.dumps({"count": 3}),
        example={"question": "q"},
        reward=RewardSpec(scorer="pkg.mod:score"),
    )
    result = get_backend("openai-jsonl").run(job_for(tmp_path / "rl", "rl", [rl]))
    (line,) = read_jsonl(result.artifact / "train.jsonl")
    assert line["reference_answer"] == {"count": 3} and line["task_id"] == "t9" and line["question"] == "q"
    grader = json.loads((result.artifact / "grader.json").read_text())
    assert grader["reference"] == "{{item.reference_answer}}"
    assert "pkg.mod:score" in result.message


def test_schema_check_names_the_offending_key():
    with pytest.raises(SchemaMismatchError) as info:
        check_line(
            "sft", {"messages": [{"role": "user", "content": "x"}, {"role": "usr", "content": "y"}]}, "l1"
        )
    assert info.value.key == "messages.1.role"
    with pytest.raises(SchemaMismatchError, match="assistant message"):
        check_line(
            "sft", {"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]}, "l"
        )
    bad_args = {
        "role": "assistant",
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}],
    }
    with pytest.raises(SchemaMismatchError, match="JSON object"):
        check_line("sft", {"messages": [{"role": "user", "content": "x"}, bad_args]}, "l")


def test_bad_datasets_are_refused(tmp_path):
    dpo = dpo_row()
    with pytest.raises(DatasetKindError):
        get_backend("openai-jsonl").validate(job_for(tmp_path / "a", "sft", [dpo]))
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "train.jsonl").write_text('{"kind": "sft", "id": "x", "task_id": "t", "prompt": []}\n')
    job = TrainJob(kind="sft", dataset=folder, base_model="m", output_dir=tmp_path / "o")
    with pytest.raises(DatasetError, match="train.jsonl:1: invalid sft row"):
        get_backend("openai-jsonl").validate(job)
    with pytest.raises(DatasetError, match="not found"):
        get_backend("openai-jsonl").validate(job.model_copy(update={"dataset": tmp_path / "nope"}))
