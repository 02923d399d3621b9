"""verifiers export: an environment package that plays rlmkit's RLM loop, evaluated against a
scripted OpenAI-compatible server on 127.0.0.1 by verifiers itself.

verifiers' classic API (< 0.4) and the system's datasets/trl versions conflict, so the
evaluation runs in a separate interpreter: RLMKIT_VERIFIERS_CLASSIC_PYTHON, or /tmp/vf01
(python -m venv --system-site-packages /tmp/vf01 && /tmp/vf01/bin/pip install verifiers==0.1.14).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from optimizers.backends.base import TrainJob, get_backend
from optimizers.backends.testing import write_dataset
from optimizers.compile.schema import ChatMessage, RewardSpec, RLRow, SFTRow
from rlmkit.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
CLASSIC_PYTHON = os.environ.get("RLMKIT_VERIFIERS_CLASSIC_PYTHON", "/tmp/vf01/bin/python")


def score(example, prediction) -> float:
    return float(prediction.answer == example.gold)


def numbers_input(row) -> dict:
    return {"context": " ".join(str(i) for i in range(row.example["n"])), "question": "What is the sum?"}


def rl_row(n: int, scorer: str = "tests.test_backend_verifiers:score") -> RLRow:
    return RLRow(
        id=f"r{n}",
        task_id=f"t{n}",
        prompt=[ChatMessage(role="user", content=f"sum of 0..{n - 1}")],
        answer=json.dumps(sum(range(n))),
        example={"n": n},
        reward=RewardSpec(scorer=scorer),
        meta={"signature": "context, question -> answer: int", "protocol": "submit"},
    )


def export(tmp_path, **options):
    data = write_dataset(tmp_path / "data", {"train": [rl_row(4), rl_row(5)], "validation": [rl_row(3)]})
    job = TrainJob(
        kind="rl",
        dataset=data,
        base_model="Qwen/Qwen3-8B",
        output_dir=tmp_path / "out",
        max_turns=4,
        options={"env_id": "sum-rlm", "inputs_fn": "tests.test_backend_verifiers:numbers_input", **options},
    )
    return get_backend("verifiers").run(job)


def test_export_writes_an_installable_package(tmp_path):
    import tomllib

    result = export(tmp_path)
    root = result.artifact
    assert result.artifact_kind == "env_package" and root.name == "sum-rlm"
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["name"] == "sum-rlm" and "verifiers>=0.1.11,<0.4" in project["dependencies"]
    options = json.loads((root / "sum_rlm" / "options.json").read_text())
    assert options == {"inputs_fn": "tests.test_backend_verifiers:numbers_input", "max_turns": 4}
    rows = [json.loads(line) for line in (root / "sum_rlm" / "data" / "train.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["r4", "r5"]
    assert "vf-eval sum-rlm" in result.command


def run_script(python: str, script: str, *args: object) -> dict:
    """Run ``script`` under another interpreter; it prints one line ``RESULT<json>``."""
    done = subprocess.run(
        [python, "-c", script, *map(str, args)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT")), None)
    assert line, done.stderr[-3000:]
    return json.loads(line[len("RESULT") :])


def test_bad_env_id_and_scorer(tmp_path):
    with pytest.raises(ConfigError, match="env_id"):
        export(tmp_path / "a", env_id="Bad_Name")
    data = write_dataset(tmp_path / "b", {"train": [rl_row(2, scorer="tests.nowhere:f")]})
    job = TrainJob(
        kind="rl",
        dataset=data,
        base_model="m",
        output_dir=tmp_path / "o",
        options={"inputs_fn": "tests.test_backend_verifiers:numbers_input"},
    )
    with pytest.raises(ConfigError, match="tests.nowhere:f"):
        get_backend("verifiers").validate(job)


EVALUATE = """
import json, os, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["SCRIPTED_KEY"] = "test"
import verifiers as vf
from rlmkit.testing.server import ScriptedServer, is_root_request
import sum_rlm

def policy(body):
    assert is_root_request(body)
    if len(body["messages"]) <= 2:  # first turn: look at the data
        return "```repl\\nnums = [int(x) for x in context.split()]\\nprint(len(nums))\\n```"
    return "```repl\\nSUBMIT(answer=sum(nums))\\n```"

with ScriptedServer(policy) as server:
    env = sum_rlm.load_environment()
    client = vf.ClientConfig(api_base_url=server.url, api_key_var="SCRIPTED_KEY")
    out = env.evaluate_sync(client, "scripted", num_examples=2, rollouts_per_example=1)
    rows = [{"reward": o["reward"], "turns": len(o["trajectory"]) if o.get("trajectory") else None,
             "completion": len(o["completion"])} for o in out["outputs"]]
    print("RESULT" + json.dumps({"rows": rows, "requests": len(server.requests), "version": vf.__version__}))
"""


def test_classic_environment_evaluates_against_a_scripted_server(tmp_path):
    if not Path(CLASSIC_PYTHON).is_file():
        pytest.skip(
            f"no interpreter with verifiers {'>=0.1.11,<0.4'} at {CLASSIC_PYTHON} (see module docstring)"
        )
    root = export(tmp_path).artifact
    result = run_script(CLASSIC_PYTHON, EVALUATE, root, REPO)
    assert result["version"].startswith(("0.1.", "0.2.", "0.3."))
    assert [r["reward"] for r in result["rows"]] == [1.0, 1.0]  # the scorer saw the RLM's typed answers
    assert result["requests"] == 4  # two root turns per rollout: look, then SUBMIT
    assert all(r["completion"] == 3 for r in result["rows"])  # reply, REPL output, reply
    sys.stdout.write(json.dumps(result) + "\n")


V1_PYTHON = os.environ.get("RLMKIT_VERIFIERS_V1_PYTHON", "/tmp/vf04/bin/python")
V1_CHECK = """
import json, os, sys, tomllib
sys.path[:0] = [sys.argv[1], sys.argv[2]]
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from verifiers.v1.configs.taskset import TasksetConfig
from verifiers.v1.utils.loaders import environment_class, load_taskset
from prime_rl.configs.rl import RLConfig
from prime_rl.configs.sft import SFTConfig
sft = SFTConfig.model_validate(tomllib.loads(open(sys.argv[4]).read()))
tasks = list(load_taskset(TasksetConfig(id="sum-rlm")))
config = RLConfig.model_validate(tomllib.loads(open(sys.argv[3]).read()))
print("RESULT" + json.dumps({
    "env": environment_class("sum-rlm").__mro__[1].__name__,
    "prompts": [t.data.prompt[0].content for t in tasks],
    "group_size": config.orchestrator.group_size,
    "source_env": type(config.orchestrator.train.source[0].env).__name__,
    "sft_lora_rank": sft.model.lora.rank,
}))
"""


def test_v1_taskset_loads_and_prime_rl_accepts_the_rl_config(tmp_path):
    """verifiers 0.4's own loaders find the package's Taskset and Env, and prime-rl 0.8.0's real
    schema (prime-rl-configs, which imports the taskset named in the config) accepts rl.toml."""
    if not Path(V1_PYTHON).is_file():
        pytest.skip(f"no interpreter with verifiers 0.4 + prime-rl-configs at {V1_PYTHON}")
    root = export(tmp_path).artifact
    job = TrainJob(
        kind="rl",
        dataset=tmp_path / "data",
        base_model="Qwen/Qwen3-0.6B",
        output_dir=tmp_path / "out",
        group_size=4,
        lora={"rank": 8},
        options={"env_id": "sum-rlm"},
    )
    rl_toml = get_backend("prime-rl").run(job).artifact
    sft_data = write_dataset(
        tmp_path / "sft",
        {
            "train": [
                SFTRow(
                    id="s",
                    task_id="t",
                    prompt=[ChatMessage(role="user", content="q")],
                    completion=[ChatMessage(role="assistant", content="a")],
                    messages=[
                        ChatMessage(role="user", content="q"),
                        ChatMessage(role="assistant", content="a"),
                    ],
                )
            ]
        },
    )
    sft_job = job.model_copy(update={"kind": "sft", "dataset": sft_data, "output_dir": tmp_path / "sft-out"})
    sft_toml = get_backend("prime-rl").run(sft_job).artifact
    result = run_script(V1_PYTHON, V1_CHECK, root, REPO, rl_toml, sft_toml)
    assert result["env"] == "RLMEnv" and result["prompts"] == ["sum of 0..3", "sum of 0..4"]
    assert result["group_size"] == 4 and result["source_env"] == "RLMEnvConfig"
    assert result["sft_lora_rank"] == 8
