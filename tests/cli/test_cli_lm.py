"""``rlmkit lm check`` and ``rlmkit local pull``, run through the real typer app."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rlmkit.cli import app
from rlmkit.local import EMBEDDED_MODEL
from rlmkit.testing.server import ScriptedServer

runner = CliRunner()


@pytest.fixture
def no_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_lm_check_against_an_openai_compatible_server(no_keys):
    with ScriptedServer(lambda body: "ready") as server:
        result = runner.invoke(app, ["lm", "check", "openai/scripted", "--api-base", server.url])
    assert result.exit_code == 0, result.output
    for expected in ("openai/scripted", server.url, "latency", "tokens", "$0.000000", "'ready'"):
        assert expected in result.output
    assert server.requests[0]["max_tokens"] == 8  # one short call


@pytest.mark.parametrize(
    ("model", "expected"),
    [("no-such-model-xyz", "provider/model"), ("openai/gpt-4o-mini", "OPENAI_API_KEY")],
)
def test_lm_check_bad_model_or_missing_key_is_one_clear_line(no_keys, model, expected):
    result = runner.invoke(app, ["lm", "check", model])
    assert result.exit_code == 1
    assert "error:" in result.output and expected in result.output
    assert "Traceback" not in result.output


def test_local_pull_verifies_the_model():
    result = runner.invoke(app, ["local", "pull"])
    assert result.exit_code == 0, result.output
    assert f"{EMBEDDED_MODEL.size:,} bytes" in result.output and "verified" in result.output


def test_lm_check_without_a_model_answers_through_the_embedded_model(no_keys):
    result = runner.invoke(app, ["lm", "check", "--max-tokens", "4"])
    assert result.exit_code == 0, result.output
    assert "embedded local model" in result.output and "openai/qwen2.5-coder-1.5b-instruct" in result.output
    assert "http://127.0.0.1:" in result.output


@pytest.mark.parametrize("first", ["programs.cli.eval", "optimizers.cli.train", "rlmkit.cli.view"])
def test_a_verb_module_imported_first_still_registers_every_verb(first):
    """A verb module imports rlmkit.cli.common, which imports rlmkit.cli: registering verbs at
    that import would load the verb's own half-initialised module (a circular import)."""
    code = (
        f"import {first}\n"
        "import typer.main\n"
        "from rlmkit.cli import app\n"
        "print(sorted(typer.main.get_command(app).commands))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for verb in ("eval", "demo", "optimize", "compile", "train", "train-loop", "lm", "local", "view"):
        assert f"'{verb}'" in done.stdout
