"""verifiers export (verifiers 0.4.x, v1 Taskset API): the package `rlmkit train --backend verifiers`
writes pip-installs into a clean venv and `vf-eval` evaluates it against a scripted server.

The venv holds only this checkout (dspy-rlmkit), verifiers 0.4.x and uv: scripts/test.sh builds
it (`.venvs/verifiers-v1`, or RLMKIT_VERIFIERS_PYTHON). verifiers runs its player's chat program
as a PEP 723 script through uv, which fetches that script's few dependencies from the package
index on first use. The rows are compiled from a real `programs.evaluate` run, so the export
replays generated tasks (`programs.tasks.replay`).
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from optimizers.backends.base import TrainJob, get_backend
from optimizers.backends.testing import write_dataset
from optimizers.backends.verifiers_env import install_command
from optimizers.compile.schema import ChatMessage, RewardSpec, RLRow
from rlmkit.errors import ConfigError
from rlmkit.testing.server import ScriptedServer, is_root_request

REPO = Path(__file__).resolve().parents[3]
VENV_PYTHON = Path(os.environ.get("RLMKIT_VERIFIERS_PYTHON") or REPO / ".venvs/verifiers-v1/bin/python")
REPLAY = {"example_fn": "programs.tasks.replay:example_of", "inputs_fn": "programs.tasks.replay:inputs_of"}

LOOK = """```repl
import re
key = re.search(r"for (\\S+) mentioned", question).group(1)
values = re.findall(r"special magic \\w+ for " + re.escape(key) + r" is: (\\S+?)\\.(?:\\s|$)", context)
print(len(values))
```"""


def policy(body: dict) -> str:
    """Looks, then answers: right on every task (the env's reward is the suite's own scorer)."""
    assert is_root_request(body)
    if not any(m["role"] == "assistant" for m in body["messages"]):
        return LOOK
    return "```repl\nSUBMIT(answer=values)\n```"


@pytest.fixture(scope="module")
def rl_dataset(tmp_path_factory):
    """RL rows compiled from a real two-example needle evaluation (what `rlmkit compile rl` makes)."""
    import rlmkit
    from optimizers.compile import compile_rl
    from programs.evaluate import evaluate
    from programs.registry import build_program
    from programs.tasks import generate

    folder = tmp_path_factory.mktemp("verifiers")
    examples = generate("needle", n=2, length=4000, seed=1)
    with ScriptedServer(policy) as server:
        lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="test", cache=False)
        result = evaluate(
            lambda: build_program("rlm", "needle", lm=lm, max_iterations=3),
            examples,
            out_dir=folder / "run",
            workers=2,
        )
    assert result.mean == 1.0
    compiled = compile_rl(folder / "run", min_group_size=1)
    compiled.write(folder / "rl", val_fraction=0.0)
    return folder / "rl"


def export(tmp_path, dataset, **options) -> Path:
    job = TrainJob(
        kind="rl",
        dataset=dataset,
        base_model="Qwen/Qwen3-8B",
        output_dir=tmp_path / "out",
        max_turns=4,
        options={"env_id": "needle-rlm", **REPLAY, **options},
    )
    return get_backend("verifiers").run(job).artifact


def test_export_writes_an_installable_package(tmp_path, rl_dataset):
    root = export(tmp_path, rl_dataset)
    assert root.name == "needle-rlm"
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["dspy-rlmkit", "verifiers>=0.4,<0.5"]  # never the foreign `rlmkit`
    options = json.loads((root / "needle_rlm" / "options.json").read_text())
    assert options == {**REPLAY, "max_turns": 4}
    rows = (root / "needle_rlm" / "data" / "train.jsonl").read_text().splitlines()
    assert len(rows) == 2 and json.loads(rows[0])["reward"]["scorer"] == "programs.tasks:score"
    # dspy-rlmkit is not on the package index: the install command brings this checkout along
    assert install_command(root) == f"pip install -e {REPO} {root}"
    readme = (root / "README.md").read_text()
    assert f"pip install -e {REPO} {root}" in readme and "not on the package index" in readme


def test_bad_env_id_and_scorer(tmp_path, rl_dataset):
    with pytest.raises(ConfigError, match="env_id"):
        export(tmp_path / "a", rl_dataset, env_id="Bad_Name")
    row = RLRow(
        id="r",
        task_id="t",
        prompt=[ChatMessage(role="user", content="q")],
        answer="1",
        reward=RewardSpec(scorer="tests.nowhere:f"),
    )
    job = TrainJob(
        kind="rl",
        dataset=write_dataset(tmp_path / "b", {"train": [row]}),
        base_model="m",
        output_dir=tmp_path / "o",
        options=REPLAY,
    )
    with pytest.raises(ConfigError, match="tests.nowhere:f"):
        get_backend("verifiers").validate(job)


def in_venv(*args: str, program: str = "python", **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}  # the venv alone
    env["PATH"] = (
        f"{VENV_PYTHON.parent}{os.pathsep}{env.get('PATH', '')}"  # its uv, for verifiers' chat program
    )
    # uv (the harness installs its chat program's packages with it) trusts the system's certificates,
    # as pip does, and not only the roots it bundles: an index behind the machine's own CA works too
    env.setdefault("UV_NATIVE_TLS", "1")
    done = subprocess.run(
        [str(VENV_PYTHON.with_name(program)), *args],
        cwd=kwargs.pop("cwd"),
        env={**env, **kwargs.pop("env", {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # a str message: pytest cuts a non-str one to a few hundred characters, the traceback's end included
    assert done.returncode == 0, f"{program} {args[:2]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


def test_package_installs_in_a_clean_venv_and_vf_eval_scores_it(tmp_path, rl_dataset):
    if not VENV_PYTHON.is_file():
        if os.environ.get("RLMKIT_VERIFIERS_PYTHON"):
            pytest.fail(f"RLMKIT_VERIFIERS_PYTHON={VENV_PYTHON} does not exist")
        pytest.skip("no verifiers 0.4 venv: run the suite with `bash scripts/test.sh`, which builds it")
    root = export(tmp_path, rl_dataset)
    # the install command the export prints (this checkout + the package), run offline against
    # what the venv holds: the package's declared dependencies must already be met
    pip, install, *targets = install_command(root).split()
    assert (pip, install) == ("pip", "install")
    in_venv("-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", *targets, cwd=tmp_path)
    try:
        found = in_venv(
            "-c",
            "import rlmkit, verifiers, needle_rlm; print(rlmkit.__file__, verifiers.__version__)",
            cwd=tmp_path,
        ).stdout.split()
        assert found[1].startswith("0.4.") and Path(found[0]).is_relative_to(REPO)
        with ScriptedServer(policy) as server:
            in_venv(
                "needle-rlm",
                "--env.id",
                "needle-rlm",
                "--model",
                "scripted",
                "--client.base-url",
                server.url,
                "--client.api-key-var",
                "SCRIPTED_KEY",
                "-n",
                "2",
                "-r",
                "1",
                "--no-push",
                "--no-rich",
                "-o",
                str(tmp_path / "vf"),
                program="vf-eval",
                cwd=tmp_path,
                env={"SCRIPTED_KEY": "test", "RLMKIT_CACHE_DIR": str(tmp_path / "cache")},
            )
            requests = len(server.requests)
    finally:
        in_venv("-m", "pip", "uninstall", "-q", "-y", "needle-rlm", cwd=tmp_path)
    episodes = [
        json.loads(line)
        for path in (tmp_path / "vf").rglob("traces.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    assert len(episodes) == 2 and all(e["ok"] for e in episodes), episodes
    traces = [trace for episode in episodes for trace in episode["traces"]]
    assert [t["rewards"]["rlm_score"]["score"] for t in traces] == [1.0, 1.0]  # the suite's scorer said so
    assert sorted(json.loads(t["info"]["rlm_answer"])[0] for t in traces) == sorted(
        json.loads(json.loads(line)["answer"])[0]
        for line in (rl_dataset / "train.jsonl").read_text().splitlines()
    )  # each task's own gold
    assert requests == 4  # two root turns per task: look, then SUBMIT
