"""``rlmkit compile sft|rl|dpo RUNS... --out DIR``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rlmkit.cli import app
from rlmkit.testing.synthetic_runs import make_run
from rlmkit.trajectory import TrajectoryLog

runner = CliRunner()


@pytest.fixture
def runs_dir(tmp_path):
    log = TrajectoryLog(tmp_path / "runs")
    for task in range(6):
        for k, score in enumerate([1.0, 0.0, 0.5]):
            log.write(make_run("final", task=f"ex{task}", score=score, variant=k, mistake="final_var_quoted"))
    return tmp_path / "runs"


def invoke(*args):
    return runner.invoke(app, ["compile", *map(str, args)])


@pytest.mark.parametrize(
    "kind, files",
    [
        ("sft", {"train.jsonl", "validation.jsonl"}),
        ("rl", {"train.jsonl", "validation.jsonl", "groups_train.jsonl", "groups_validation.jsonl"}),
        ("dpo", {"train.jsonl", "validation.jsonl"}),
    ],
)
def test_each_kind_writes_a_dataset_with_a_manifest(runs_dir, tmp_path, kind, files):
    out = tmp_path / kind
    result = invoke(
        kind, runs_dir, "--out", out, "--protocol", "submit", "--val-fraction", "0.34", "--seed", "7"
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["files"]) == files
    assert manifest["split"]["seed"] == 7 and manifest["options"]["protocol"] == "submit"
    assert manifest["report"]["fixes"]["final_var_quoted"] > 0
    assert f"wrote {out}" in result.output


def test_filter_options_reach_the_compile(runs_dir, tmp_path):
    result = invoke(
        "sft",
        runs_dir,
        "--out",
        tmp_path / "o",
        "--min-score",
        "0.9",
        "--per-task-cap",
        "1",
        "--mode",
        "conversation",
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["options"]["filters"]["min_score"] == 0.9
    assert sum(manifest["counts"].values()) == 6  # one conversation per task: only the 1.0 runs pass
    assert manifest["report"]["runs_dropped"] == {"min_score": 6, "zero_score": 6}


def test_mixed_signatures_fail_or_group(runs_dir, tmp_path):
    TrajectoryLog(runs_dir).write(make_run(task="other", signature="context -> summary: str"))
    failed = invoke("sft", runs_dir, "--out", tmp_path / "o")
    assert failed.exit_code == 2 and "different signatures" in failed.output
    grouped = invoke("sft", runs_dir, "--out", tmp_path / "g", "--group-signatures", "--min-turns", "1")
    assert grouped.exit_code == 0, grouped.output
    folders = sorted(p.name for p in (tmp_path / "g").iterdir())
    assert len(folders) == 2 and folders[0].startswith("context_str_question_str_answer_int-")


def test_nothing_passing_the_filters_is_an_error_naming_the_filter(runs_dir, tmp_path):
    result = invoke("sft", runs_dir, "--out", tmp_path / "o", "--min-turns", "9")
    assert result.exit_code == 2
    assert "no sft row survived the filters" in result.output and "removed by min_turns" in result.output


def test_token_counts_can_come_from_a_tokenizer_file(runs_dir, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # one token per word
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    result = invoke("sft", runs_dir, "--out", tmp_path / "o", "--tokenizer", tmp_path / "tokenizer.json")
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    words = 0
    for name in ("train.jsonl", "validation.jsonl"):
        for line in (tmp_path / "o" / name).read_text().splitlines():
            words += sum(len(m["content"].split()) for m in json.loads(line)["messages"])
    assert manifest["report"]["tokens"]["total"] == words
    assert manifest["report"]["tokens"]["estimate"] == "Tokenizer"
