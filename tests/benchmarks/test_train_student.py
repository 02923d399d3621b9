"""benchmarks/training/train_student.py on tiny inputs: a scripted teacher served over HTTP, the compile,
two LoRA steps on a tiny random Qwen, the evaluation arm, the cache that makes it resumable, and
the partial results file with its docs section. No student download."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from rlmkit.testing.server import ScriptedServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "training"))

from train_student import STAGES, Pipeline, Recipe, write_results  # noqa: E402
from train_student_report import section  # noqa: E402

# A teacher that solves the needle in two root turns (compile's defaults drop one-turn runs).
LOOK = (
    "```repl\nimport re\nkey = re.search(r'for (\\S+) mentioned', question).group(1)\n"
    "found = re.findall(r'magic numbers? for ' + re.escape(key) + r' is: (\\d+)', context)\nprint(found)\n```"
)
SUBMIT = "```repl\nSUBMIT(answer=found)\n```"


def teacher(body: dict) -> str:
    turns = sum(m["role"] == "assistant" for m in body["messages"])
    return LOOK if turns == 0 else SUBMIT


def tiny_recipe(**changes) -> Recipe:
    base = {"length": 2_000, "teacher_n": 3, "samples": 1, "test_n": 2, "workers": 1, "steps": 2}
    return Recipe(**{**base, **changes})


@pytest.fixture
def served_teacher():
    server = ScriptedServer(teacher).start()
    yield server
    server.stop()


def test_teacher_dataset_and_train_stages_run_once_and_resume(tmp_path, served_teacher):
    from optimizers.backends.testing import build_tiny_qwen

    tiny = build_tiny_qwen(tmp_path / "tiny-qwen")
    recipe = tiny_recipe(teacher_lm="openai/teacher", teacher_api_base=served_teacher.url)
    pipeline = Pipeline(recipe, tmp_path / "cache", log=lambda _: None, training={"base_model": str(tiny)})

    teacher_stage = pipeline.run_stage("teacher")
    assert teacher_stage["summary"]["n"] == 3 and teacher_stage["summary"]["mean"] == 1.0
    assert "rlmkit eval needle" in teacher_stage["command"]
    dataset = pipeline.run_stage("dataset")
    assert dataset["rows"]["train"] + dataset["rows"].get("validation", 0) >= 3
    trained = pipeline.run_stage("train")
    assert trained["first_loss"] > 0 and (tmp_path / "cache" / "train" / "adapter").is_dir()

    requests = len(served_teacher.requests)
    assert pipeline.run_stage("teacher") == teacher_stage  # kept: nothing runs again
    assert len(served_teacher.requests) == requests


def test_an_evaluation_arm_scores_held_out_examples_and_resumes(tmp_path, served_teacher):
    import rlmkit

    recipe = tiny_recipe()
    pipeline = Pipeline(recipe, tmp_path / "cache", log=lambda _: None)
    lm = rlmkit.LM("openai/student", api_base=served_teacher.url, api_key="x", cache=False)
    arm = pipeline.evaluate_with("before", lm, model="scripted")
    assert arm["n"] == 2 and arm["mean"] == 1.0
    assert all(re.fullmatch(r"needle-s1000-\d+", key) for key in arm["scores"])  # held-out seeds only

    requests = len(served_teacher.requests)
    again = pipeline.evaluate_with("before", lm, model="scripted")
    assert again["scores"] == arm["scores"] and len(served_teacher.requests) == requests


def test_a_partial_run_says_what_is_missing_and_renders_only_finished_stages(tmp_path):
    pipeline = Pipeline(tiny_recipe(), tmp_path / "cache", log=lambda _: None)
    student = {"name": "s", "file": "s.gguf", "packages": ["p"], "architecture": "qwen2", "size": 3}
    (tmp_path / "cache" / "stages" / "student.json").write_text(
        json.dumps(student | {"sha256": "ab", "wall_s": 1})
    )
    before = tmp_path / "cache" / "eval" / "before"
    before.mkdir(parents=True)
    (before / "results.jsonl").write_text('{"id": "a", "score": 0.0}\n{"id": "b", "sc')  # a torn last line

    command = "python benchmarks/training/train_student.py"
    meta = {"date": "2026-01-01 00:00 UTC", "commit": "abc1234", "command": command}
    data = write_results(pipeline, meta, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text()) == data
    assert data["partial"] and data["missing_stages"] == [s for s in STAGES if s != "student"]
    assert data["in_progress"]["before"] == {"finished_runs": 1, "of": 2, "scores": [0.0]}

    text = section(data)
    assert text.startswith("*Measured 2026-01-01 00:00 UTC; commit abc1234;")
    assert "Partial run" in text and "`before` in progress: 1 of 2 runs finished" in text
    assert "| student, untrained | — | not run yet | — |" in text and "Training:" not in text
