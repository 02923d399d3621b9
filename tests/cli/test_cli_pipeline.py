"""eval -> compile -> validate -> train through the CLI, with default flags: ``rlmkit eval --samples 4``
against a scripted server, ``rlmkit compile sft|rl|dpo`` on the eval run folder as it is (no
``--scorer``: evaluation records it), and ``rlmkit train --backend trl-sft`` on a tiny model."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest
from typer.testing import CliRunner

from rlmkit.cli import app
from rlmkit.testing.server import ScriptedServer, is_root_request

runner = CliRunner()

LOOK = """```repl
import re
key = re.search(r"for (\\S+) mentioned", question).group(1)
values = re.findall(r"special magic \\w+ for " + re.escape(key) + r" is: (\\S+?)\\.(?:\\s|$)", context)
print(len(values))
```"""
RIGHT = "```repl\nSUBMIT(answer=values)\n```"
WRONG = '```repl\nSUBMIT(answer=["wrong"])\n```'


class TwoTurnPolicy:
    """Looks, then answers: per task, every other answer is wrong, so each task's samples score
    1.0 and 0.0 alike whatever order the workers run them in (if each sample is really run)."""

    def __init__(self):
        self.answers: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        if not is_root_request(body):  # the --baseline comparison: one plain call, never compiled
            return "wrong"
        messages = body["messages"]
        if not any(m["role"] == "assistant" for m in messages):
            return LOOK
        task = messages[1]["content"]
        with self.lock:
            self.answers[task] += 1
            return RIGHT if self.answers[task] % 2 else WRONG


@pytest.fixture
def eval_run(tmp_path, monkeypatch):
    monkeypatch.setenv("RLMKIT_CACHE_DIR", str(tmp_path / "cache"))  # the cache is on: samples must miss it
    out = tmp_path / "run"
    with ScriptedServer(TwoTurnPolicy()) as server:
        args = [
            "eval",
            "needle",
            "--n",
            "3",
            "--length",
            "8000",
            "--seed",
            "5",
            "--lm",
            "openai/scripted",
            "--api-base",
            server.url,
            "--out",
            str(out),
            "--max-iterations",
            "3",
            "--workers",
            "3",
            "--samples",
            "4",
            "--temperature",
            "1.0",
            "--baseline",  # its runs land in the same folder; compile must leave them out
            "--window-tokens",  # a scripted model has no window in litellm's map
            "1000",
        ]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        # every sample ran both turns (none came from the cache), and the baseline once per sample
        assert len(server.requests) == 3 * 4 * 2 + 3 * 4
        again = runner.invoke(app, args)
        assert again.exit_code == 0 and "24 finished run(s) kept" in " ".join(again.output.split())
        assert len(server.requests) == 36  # resumed: nothing ran twice
    return out


def compile_(kind: str, run, out):
    result = runner.invoke(app, ["compile", kind, str(run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "unreadable" not in result.output  # results.jsonl is not read as trajectories
    return json.loads((out / "manifest.json").read_text())


def test_eval_samples_compile_and_train_with_default_flags(eval_run, tmp_path):
    from optimizers.backends.testing import build_tiny_qwen, read_jsonl
    from optimizers.compile.validate import validate_dataset

    rows = [r for r in read_jsonl(eval_run / "results.jsonl") if r["program"] == "program"]
    assert sorted((r["id"], r["sample"]) for r in rows) == [
        (f"needle-s5-{i:04d}", k) for i in range(3) for k in range(4)
    ]
    assert sorted(r["score"] for r in rows) == [0.0] * 6 + [1.0] * 6

    sft, rl, dpo = (tmp_path / kind for kind in ("sft", "rl", "dpo"))
    manifests = {
        kind: compile_(kind, eval_run, folder) for kind, folder in (("sft", sft), ("rl", rl), ("dpo", dpo))
    }
    for folder in (sft, rl, dpo):
        validate_dataset(folder)
    # SFT keeps the 6 right runs, one sample per root turn; a task's right runs are alike (deduped)
    assert sum(manifests["sft"]["counts"].values()) == 3 * 2
    rl_rows = read_jsonl(rl / "train.jsonl") + read_jsonl(rl / "validation.jsonl")
    assert {r["reward"]["scorer"] for r in rl_rows} == {"programs.tasks:score"}
    groups = read_jsonl(rl / "groups_train.jsonl") + read_jsonl(rl / "groups_validation.jsonl")
    assert len(groups) == 12 and {g["meta"]["group_size"] for g in groups} == {4}
    pairs = read_jsonl(dpo / "train.jsonl") + read_jsonl(dpo / "validation.jsonl")
    assert pairs and all(p["chosen"] != p["rejected"] for p in pairs)

    model = build_tiny_qwen(tmp_path / "tiny-qwen3")
    job = tmp_path / "job.toml"
    job.write_text(
        f'kind = "sft"\ndataset = "{sft}"\nbase_model = "{model}"\noutput_dir = "{tmp_path / "out"}"\n'
        "steps = 1\nbatch_size = 2\nmax_seq_len = 4096\nmax_completion_tokens = 256\n"
        "[lora]\nrank = 4\nalpha = 8\n"
    )
    trained = runner.invoke(app, ["train", str(job), "--backend", "trl-sft"])
    assert trained.exit_code == 0, trained.output
    assert "trained" in trained.output and (tmp_path / "out" / "adapter" / "adapter_config.json").is_file()
