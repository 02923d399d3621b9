"""Written datasets: canonical JSONL, split, manifest, validator, and what datasets + TRL make of them."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizers.compile import (
    DatasetValidationError,
    compile_dpo,
    compile_rl,
    compile_sft,
    split_rows,
    validate_dataset,
    validate_rows,
)
from optimizers.compile.split import validation_tasks
from rlmkit.testing.synthetic_runs import make_run
from rlmkit.trajectory import TrajectoryLog


def mixed_runs(n_tasks=10, per_task=4):
    """Runs over several tasks, protocols, scores and templated mistakes, like a real eval sweep."""
    protocols, scores = ["submit", "final", "answer"], [1.0, 0.0, 0.5, 1.0, 0.25]
    mistakes = [None, "final_var_quoted", "final_trailing_text", "both_final_forms"]
    runs = []
    for t in range(n_tasks):
        for k in range(per_task):
            protocol = protocols[(t + k) % 3]
            mistake = mistakes[k % 4] if protocol == "final" else None
            runs.append(
                make_run(
                    protocol,
                    task=f"ex{t}",
                    score=scores[(t + k) % 5],
                    variant=k,
                    n_turns=2 + k % 3,
                    answer=t,
                    mistake=mistake,
                    cost=0.01 * (k + 1),
                )
            )
    return runs


@pytest.fixture(scope="module")
def datasets_dir(tmp_path_factory) -> Path:
    """Every kind written once from the same logged runs (read back from JSONL, as the CLI does)."""
    root = tmp_path_factory.mktemp("compiled")
    log = TrajectoryLog(root / "runs")
    for run in mixed_runs():
        log.write(run)
    compile_sft(root / "runs", protocol="final").write(root / "sft_turn", seed=1, val_fraction=0.2)
    compile_sft(root / "runs", mode="conversation", subcalls=True).write(
        root / "sft_conv", seed=1, val_fraction=0.2
    )
    compile_rl(root / "runs", protocol="submit").write(root / "rl", seed=1, val_fraction=0.2)
    compile_dpo(root / "runs", protocol="submit").write(root / "dpo", seed=1, val_fraction=0.2)
    return root


KINDS = {"sft_turn": "sft", "sft_conv": "sft", "rl": "rl", "dpo": "dpo"}


# ------------------------------------------------------------------ files, split, manifest
@pytest.mark.parametrize("name", list(KINDS))
def test_manifest_records_sources_counts_and_hashes(datasets_dir, name):
    manifest = json.loads((datasets_dir / name / "manifest.json").read_text())
    assert manifest["kind"] == KINDS[name]
    assert len(manifest["sources"]) == 40 and all(len(s["sha256"]) == 64 for s in manifest["sources"])
    assert manifest["split"] == {"seed": 1, "val_fraction": 0.2, "by": "task_id", "tasks_in_both": 0}
    assert "filters" in manifest["options"]
    for file, info in manifest["files"].items():
        lines = (datasets_dir / name / file).read_text().splitlines()
        assert len(lines) == info["rows"] == manifest["counts"][file]
    assert validate_dataset(datasets_dir / name) == manifest["counts"]


def test_split_is_deterministic_per_seed_and_never_splits_a_task():
    rows = compile_sft(mixed_runs(n_tasks=30)).rows
    train, val = split_rows(rows, seed=3, val_fraction=0.2)
    assert not {r.task_id for r in train} & {r.task_id for r in val}
    assert len({r.task_id for r in val}) == 6
    again = split_rows(list(reversed(rows)), seed=3, val_fraction=0.2)[1]
    assert {r.id for r in again} == {r.id for r in val}  # input order does not matter
    other = split_rows(rows, seed=4, val_fraction=0.2)[1]
    assert {r.task_id for r in other} != {r.task_id for r in val}


@settings(max_examples=80, deadline=None)
@given(
    tasks=st.lists(st.text(min_size=1, max_size=8), min_size=0, max_size=40),
    seed=st.integers(0, 2**32),
    fraction=st.floats(0.0, 0.95),
)
def test_validation_tasks_property(tasks, seed, fraction):
    held_out = validation_tasks(tasks, seed=seed, val_fraction=fraction)
    unique = set(tasks)
    assert held_out <= unique and held_out == validation_tasks(
        list(reversed(tasks)), seed=seed, val_fraction=fraction
    )
    if len(unique) >= 2 and fraction > 0:
        assert 1 <= len(held_out) <= len(unique) - 1  # both sides always have a task
    else:
        assert not held_out


def test_writing_twice_gives_identical_bytes(tmp_path):
    runs = mixed_runs(n_tasks=4)
    first = compile_sft(runs).write(tmp_path / "a")
    second = compile_sft(runs).write(tmp_path / "b")
    assert first["files"] == second["files"] and first["sources"] == second["sources"]
    (source,) = first["sources"]  # objects, not files: recorded by count and a hash of their JSON
    assert source["runs"] == 16 and len(source["sha256"]) == 64
    assert (tmp_path / "a" / "train.jsonl").read_bytes() == (tmp_path / "b" / "train.jsonl").read_bytes()


def test_rl_prompts_and_groups_share_one_split(tmp_path):
    runs = [make_run(task=f"t{t}", score=s, variant=k) for t in range(12) for k, s in enumerate([1.0, 0.0])]
    for run in runs[:8]:  # four tasks without gold: groups but no prompt rows
        run.meta.task.pop("gold")
    manifest = compile_rl(runs).write(tmp_path, seed=5, val_fraction=0.25)
    assert set(manifest["files"]) == {
        "train.jsonl",
        "validation.jsonl",
        "groups_train.jsonl",
        "groups_validation.jsonl",
    }
    sides = {"train": set(), "validation": set()}
    for name in manifest["files"]:
        side = "validation" if "validation" in name else "train"
        sides[side] |= {json.loads(line)["task_id"] for line in (tmp_path / name).read_text().splitlines()}
    assert not sides["train"] & sides["validation"] and len(sides["validation"]) == 3


def test_no_empty_split_files_and_no_stale_ones(tmp_path):
    compile_sft(mixed_runs(n_tasks=5)).write(tmp_path, val_fraction=0.2)
    assert (tmp_path / "validation.jsonl").is_file()
    manifest = compile_sft(mixed_runs(n_tasks=1)).write(tmp_path, val_fraction=0.2)  # one task: all train
    assert set(manifest["files"]) == {"train.jsonl"} and not (tmp_path / "validation.jsonl").exists()
    assert validate_dataset(tmp_path) == {"train.jsonl": manifest["counts"]["train.jsonl"]}


def test_changed_files_fail_the_manifest_check(datasets_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(datasets_dir / "dpo", copy)
    with open(copy / "train.jsonl", "a") as fh:
        fh.write((copy / "validation.jsonl").read_text())
    with pytest.raises(DatasetValidationError) as info:
        validate_dataset(copy)
    text = str(info.value)
    assert "sha256 differs" in text and "in both train and validation" in text


# ------------------------------------------------------------------ validator
def good_sft_row() -> dict:
    return json.loads(compile_sft([make_run()]).rows[0].model_dump_json())


@pytest.mark.parametrize(
    "break_it, expected",
    [
        (
            lambda r: r["prompt"][1].update(role="usr"),
            "'prompt' message 1 has role 'usr'; did you mean 'user'?",
        ),
        (lambda r: r["messages"][0].update(role="System"), "did you mean 'system'?"),
        (
            lambda r: r.update(completion=[{"role": "user", "content": "hi"}]),
            "'completion' has no assistant message",
        ),
        (
            lambda r: r["completion"][0].update(
                tool_calls=[{"type": "function", "function": {"name": "f", "arguments": "{'a': 1}"}}]
            ),
            "'completion' message 0 tool call 0 arguments is not valid JSON",
        ),
        (lambda r: r.update(tools="[{bad"), "'tools' is not valid JSON"),
        (lambda r: r["prompt"][0].update(content=None), "content must be a string"),
        (lambda r: r.update(kind="sftt"), "unknown kind 'sftt'"),
        (
            lambda r: r.update(messages=r["messages"][:-1] + r["messages"][-1:] * 2),
            "messages: two assistant messages in a row",
        ),
        (lambda r: r["messages"].insert(2, dict(r["messages"][0])), "messages: system message at position 2"),
        (
            lambda r: r.update(messages=r["prompt"] + [{"role": "assistant", "content": "other"}]),
            "messages must equal prompt + completion",
        ),
    ],
)
def test_validator_rejects_what_trainers_accept_silently_and_names_the_row(break_it, expected):
    row = good_sft_row()
    break_it(row)
    with pytest.raises(DatasetValidationError) as info:
        validate_rows([good_sft_row(), row], source="train.jsonl")
    assert expected in str(info.value)
    assert f"train.jsonl row 2 (id {row['id']!r})" in str(info.value)


def test_validator_checks_each_kind():
    dpo = json.loads(
        compile_dpo([make_run(score=1.0, variant=1), make_run(score=0.0, variant=2)])
        .rows[0]
        .model_dump_json()
    )
    dpo["rejected"] = [{"role": "user", "content": "no answer"}]
    with pytest.raises(DatasetValidationError, match="'rejected' has no assistant message"):
        validate_rows([dpo])
    with pytest.raises(DatasetValidationError, match="not valid JSON"):
        validate_rows(['{"id": "x", "kind": "sft", '])
    with pytest.raises(DatasetValidationError, match="duplicate id"):
        row = good_sft_row()
        validate_rows([row, dict(row)])


# ------------------------------------------------------------------ datasets + TRL
def tiny_qwen3_tokenizer():
    """A byte-level tokenizer built offline, with TRL's shipped Qwen3 chat template."""
    import trl
    from tokenizers import Tokenizer, decoders, models
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {char: i for i, char in enumerate(sorted(ByteLevel.alphabet()))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(["<|im_start|>", "<|im_end|>", "<|endoftext|>"])
    core.add_tokens(["<think>", "</think>", "<tool_call>", "</tool_call>"])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    return tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_qwen3_tokenizer()


def load(folder: Path, prefix: str = ""):
    import datasets

    files = {split: str(folder / f"{prefix}{split}.jsonl") for split in ("train", "validation")}
    return datasets.load_dataset("json", data_files=files, cache_dir=str(folder / ".hf_cache"))


def assistant_mask(tokenizer, messages):
    from trl.chat_template_utils import get_training_chat_template

    template = get_training_chat_template(tokenizer)  # TRL's generation-tagged Qwen3 template
    out = tokenizer.apply_chat_template(
        messages, chat_template=template, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    return out["input_ids"], out["assistant_masks"]


@pytest.mark.parametrize("name", ["sft_turn", "sft_conv"])
def test_sft_loads_with_datasets_and_renders_with_a_nonempty_assistant_mask(datasets_dir, tokenizer, name):
    from trl.data_utils import apply_chat_template, is_conversational

    data = load(datasets_dir / name)
    manifest = json.loads((datasets_dir / name / "manifest.json").read_text())
    assert {split: len(data[split]) for split in data} == {
        "train": manifest["counts"]["train.jsonl"],
        "validation": manifest["counts"]["validation.jsonl"],
    }
    for row in list(data["train"])[:8] + list(data["validation"])[:2]:
        assert is_conversational(row)
        prompt_completion = apply_chat_template(
            {"prompt": row["prompt"], "completion": row["completion"]}, tokenizer
        )
        assert prompt_completion["prompt"].endswith("<|im_start|>assistant\n")
        assert row["completion"][0]["content"] in prompt_completion["completion"]
        ids, mask = assistant_mask(tokenizer, row["messages"])
        assert 0 < sum(mask) < len(ids)
        # the masked tokens decode to the assistant turns' text
        trained = tokenizer.decode([i for i, m in zip(ids, mask) if m])
        assert row["messages"][-1]["content"] in trained


def test_rl_prompts_and_groups_load_and_render(datasets_dir, tokenizer):
    from trl.data_utils import apply_chat_template, is_conversational

    prompts = load(datasets_dir / "rl")
    row = prompts["train"][0]
    assert is_conversational(row) and json.loads(row["answer"]) is not None
    assert apply_chat_template({"prompt": row["prompt"]}, tokenizer)["prompt"].endswith(
        "<|im_start|>assistant\n"
    )
    groups = load(datasets_dir / "rl", prefix="groups_")
    for row in list(groups["train"])[:6]:
        assert is_conversational(row)
        ids, mask = assistant_mask(tokenizer, row["prompt"] + row["completion"])
        # REPL feedback (user turns) is environment text: masked out, the replies are in
        assert 0 < sum(mask) < len(ids)
    advantages = [row["advantage"] for row in groups["train"]]
    assert any(a > 0 for a in advantages) and any(a < 0 for a in advantages)


def test_dpo_loads_and_renders_chosen_and_rejected(datasets_dir, tokenizer):
    from trl.data_utils import apply_chat_template, is_conversational

    data = load(datasets_dir / "dpo")
    for row in data["train"]:
        assert is_conversational(row)
        text = apply_chat_template({k: row[k] for k in ("prompt", "chosen", "rejected")}, tokenizer)
        assert text["chosen"] and text["rejected"] and text["chosen"] != text["rejected"]
        assert row["score_chosen"] > row["score_rejected"]
