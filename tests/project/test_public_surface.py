"""What users build on, pinned: the names ``rlmkit`` exports, the verbs ``rlmkit`` offers, the version.

A name or verb added, renamed or dropped fails here first, so the change is made on purpose and
written in CHANGELOG.md, never slipped in. The lists are written out by hand for that reason.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rlmkit
from rlmkit.cli import app
from rlmkit.errors import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]

PUBLIC_NAMES = [
    "Budget",
    "Completion",
    "FunctionLM",
    "LM",
    "Model",
    "ModelTraits",
    "RLM",
    "Session",
    "Trajectory",
    "TrajectoryLog",
    "__version__",
    "configure",
    "errors",
    "events",
    "local_lm",
]

# In the order `rlmkit --help` lists them. lm, local, view, chat, serve and mcp are the runtime's own;
# the others come through the rlmkit.commands entry points of programs and optimizers.
VERBS = [
    "demo",
    "chat",
    "eval",
    "optimize",
    "compile",
    "train",
    "train-loop",
    "self-train",
    "serve",
    "mcp",
    "view",
    "lm",
    "local",
]


def listed_verbs(help_text: str) -> list[str]:
    """The verbs in a `rlmkit --help` text, in order."""
    section = help_text.split("Commands:", 1)[1]
    return [line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.split()]


def test_all_is_the_pinned_list_and_what_dir_shows():
    assert sorted(rlmkit.__all__) == sorted(PUBLIC_NAMES)
    assert len(set(rlmkit.__all__)) == len(rlmkit.__all__)
    assert sorted(dir(rlmkit)) == sorted(PUBLIC_NAMES)


def test_all_is_every_lazy_export_and_nothing_else():
    assert set(rlmkit.__all__) == set(rlmkit._EXPORTS) | {"__version__"}


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_each_public_name_imports(name):
    value = getattr(rlmkit, name)
    assert value is not None
    assert getattr(importlib.import_module("rlmkit"), name) is value
    exec(f"from rlmkit import {name}", {})  # the form users write


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'NotAThing'"):
        rlmkit.NotAThing  # noqa: B018


def test_the_cli_verbs_are_the_pinned_list():
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert listed_verbs(result.output) == VERBS


def test_the_version_is_the_installed_metadata_and_says_what_it_is():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    # PEP 440: a release (0.2.0) or a development one before it (0.2.0.dev0)
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", declared), declared
    assert rlmkit.__version__ == importlib.metadata.version(DISTRIBUTION)
    result = CliRunner().invoke(app, ["--version"])
    assert result.output.strip() == f"rlmkit {rlmkit.__version__} ({DISTRIBUTION})"


def test_the_changelog_keeps_an_unreleased_section_above_the_versions_before():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert headings[0] == "Unreleased"
    released = headings[1:]
    assert released and all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in released), released
    if ".dev" in declared:  # a development version is what Unreleased describes: it is not out yet
        assert declared.split(".dev")[0] not in released
    else:
        assert declared in released
    sections = re.findall(r"^### (\w+)", text, flags=re.M)
    assert sections and set(sections) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
