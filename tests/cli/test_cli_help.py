"""What `rlmkit --help` and each verb's help show a newcomer, at 80 columns.

Every option name whole, no `<bool>` on flags, no line past the terminal, demo listed first,
--version, and --lm optional wherever it appears, with the embedded model as its default.
"""

from __future__ import annotations

import importlib.metadata

import click
import pytest
import typer
from typer.testing import CliRunner

from rlmkit.cli import app
from rlmkit.cli.common import EMBEDDED_FLAGS

runner = CliRunner()


def commands() -> dict[str, click.Command]:
    """Every leaf command by its path ('eval', 'local pull', ...)."""
    found: dict[str, click.Command] = {}

    def walk(command: click.Command, path: str) -> None:
        if hasattr(command, "commands"):  # a group (typer's TyperGroup is no click.Group)
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}".strip())
        else:
            found[path] = command

    walk(typer.main.get_command(app), "")
    return found


def help_at_80(path: str) -> str:
    result = runner.invoke(app, [*path.split(), "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", sorted(commands()))
def test_each_help_fits_80_columns_with_every_option_name_whole(path):
    text = help_at_80(path)
    assert "<bool>" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    for param in commands()[path].params:
        for name in [*param.opts, *param.secondary_opts]:
            if name.startswith("-"):
                assert name in text, f"{path}: {name} is cut or missing"


def test_the_command_list_starts_with_demo_and_says_each_verb_in_one_line():
    text = help_at_80("")
    listed = [line.split()[0] for line in text.split("Commands:")[1].splitlines() if line.strip()]
    assert listed[0] == "demo"
    assert set(listed) >= {
        "demo",
        "eval",
        "optimize",
        "compile",
        "train",
        "train-loop",
        "view",
        "lm",
        "local",
    }
    assert "..." not in text.split("Commands:")[1]  # no one-line summary is cut


def test_version_prints_the_installed_distributions_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"rlmkit {importlib.metadata.version('dspy-rlmkit')} (dspy-rlmkit)"


def test_every_lm_option_is_optional_and_defaults_to_the_embedded_model():
    with_lm = {path: c for path, c in commands().items() if any(p.name == "lm" for p in c.params)}
    assert {"demo", "eval", "optimize", "train-loop"} <= set(with_lm)
    for path, command in with_lm.items():
        (lm,) = [p for p in command.params if p.name == "lm"]
        assert not lm.required and lm.default in EMBEDDED_FLAGS, path


@pytest.mark.parametrize(
    ("verb", "module", "args"),
    [
        ("eval", "programs.cli.eval", ["needle", "--n", "1"]),
        ("optimize", "optimizers.cli.optimize", ["needle"]),
    ],
)
def test_a_verb_run_without_lm_asks_for_the_embedded_model(monkeypatch, tmp_path, verb, module, args):
    import importlib

    from rlmkit.errors import ConfigError

    asked = []

    def refuse(flag, *rest, **options):
        asked.append(flag)
        raise ConfigError("stop here: the test only needs to know which model was asked for")

    monkeypatch.setattr(importlib.import_module(module), "lm_from_flag", refuse)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [verb, *args])
    assert result.exit_code == 2 and "stop here" in result.output
    assert asked and asked[0] in EMBEDDED_FLAGS


def test_train_marks_backend_required_and_its_list_names_the_extra(monkeypatch):
    from optimizers.backends import base

    assert "[required, except with --list]" in " ".join(help_at_80("train").split())
    missing = [base.Dependency("trl", "train"), base.Dependency("peft", "train")]
    monkeypatch.setattr(base.Backend, "missing_deps", lambda self: missing)
    result = runner.invoke(app, ["train", "--list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "needs trl, peft: the train extra, pip install -e '.[train]' in a checkout" in result.output
