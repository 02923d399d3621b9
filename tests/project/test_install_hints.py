"""Every install hint is a command that works today.

dspy-rlmkit is not on the package index yet, so a hint installs from a checkout
(``pip install -e '.[extra]'``) or a wheel built from one, never ``pip install 'dspy-rlmkit[...]'``;
and every extra a hint names is one pyproject declares and pip can resolve.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rlmkit.errors import DISTRIBUTION, NOT_ON_INDEX, install_hint

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
# `pip install` and what follows it on the line, up to the end of an inline code span or a quote
PIP_INSTALL = re.compile(r"pip install\b([^`\n]*)")
# where a command's arguments end and prose (or the next command) begins
ARGS_END = re.compile(r"\s(?:in|or|and|then|to|for|outside)\s|[(;#]|&&")
CHECKOUT_EXTRAS = re.compile(r"-e\s+['\"]?\.\[([\w,-]+)\]")


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    suffixes = {".py", ".md", ".sh", ".toml", ".txt", ".jinja", ".html"}
    this = Path(__file__).resolve()
    return [
        ROOT / name
        for name in out.splitlines()
        if Path(name).suffix in suffixes and (ROOT / name).is_file() and ROOT / name != this
    ]


def hint_problems(line: str) -> list[str]:
    """What is wrong with the `pip install` commands on one line (an empty list: nothing)."""
    problems = []
    for match in PIP_INSTALL.finditer(line):
        args = ARGS_END.split(match.group(1))[0]
        if DISTRIBUTION in args:
            problems.append(f"installs {DISTRIBUTION} from the package index, where it is not yet")
        for extras in CHECKOUT_EXTRAS.findall(args):
            unknown = set(extras.split(",")) - EXTRAS
            if unknown:
                problems.append(f"names extras pyproject.toml does not declare: {sorted(unknown)}")
    return problems


def hint_lines() -> list[tuple[str, str]]:
    """(where, line) for every line of the repository and every message that holds an install hint."""
    found = [
        (f"{path.relative_to(ROOT)}:{number}", line)
        for path in _tracked_text_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if "pip install" in line
    ]
    for extras in [(extra,) for extra in sorted(EXTRAS)] + [("local", "train")]:
        found.append((f"install_hint{extras}", install_hint(*extras)))
        found.append((f"install_hint{extras}, reinstall", install_hint(*extras, reinstall=True)))
    return found


def test_the_checker_tells_working_hints_from_broken_ones():
    assert hint_problems("pip install 'dspy-rlmkit[local]'")
    assert hint_problems("run `pip install dspy-rlmkit` first")
    assert hint_problems("pip install -e '.[nonsense]'")
    assert not hint_problems("pip install -e '.[local,train]'")
    assert not hint_problems('python3 -m pip install -e ".[local]"')
    assert not hint_problems("pip install dist/dspy_rlmkit-0.1.0-py3-none-any.whl")
    assert not hint_problems("pip install rlms==0.1.3 dspy==3.4.1")  # other projects' packages
    assert not hint_problems(f"pip install -e '.[local]' in a checkout ({NOT_ON_INDEX})")  # prose after it


def test_no_install_hint_in_the_repository_or_a_message_points_at_the_index():
    offenders = [
        f"{where}: {line.strip()} -> {problems}"
        for where, line in hint_lines()
        if (problems := hint_problems(line))
    ]
    assert not offenders, "\n".join(offenders)


def test_the_hint_in_error_messages_is_the_checkout_command_and_says_why():
    assert install_hint("local") == f"pip install -e '.[local]' in a checkout of rlmkit ({NOT_ON_INDEX})"
    assert install_hint("local", "train", reinstall=True).startswith(
        "pip install --force-reinstall -e '.[local,train]'"
    )
    assert "not on the package index" in NOT_ON_INDEX


def suite_extras() -> set[str]:
    """The extras scripts/test.sh installs before the suite runs."""
    (extras,) = re.findall(r'-e "\.\[([\w,-]+)\]"', (ROOT / "scripts" / "test.sh").read_text())
    return set(extras.split(","))


def test_pip_resolves_every_extra_the_hints_name_from_the_checkout_alone():
    """The hints' own command, as a dry run with no index: pip builds the checkout's metadata and
    resolves each extra a hint names, among those the suite's install holds, against what is
    installed. (An extra outside that install is checked by the form test above alone.)"""
    named = {
        extra
        for _, line in hint_lines()
        for group in CHECKOUT_EXTRAS.findall(line)
        for extra in group.split(",")
    }
    assert "local" in named and named <= EXTRAS
    named = sorted(named & suite_extras())
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation",
         "--disable-pip-version-check", "-e", f".[{','.join(named)}]"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "does not provide the extra" not in done.stderr
    assert f"Would install {DISTRIBUTION}-" in done.stdout


@pytest.mark.parametrize("module", ["rlmkit.observe.otel", "rlmkit.observe.mlflow"])
def test_module_docs_name_the_checkout_install(module):
    import importlib.util

    source = Path(importlib.util.find_spec(module).origin).read_text()
    assert "pip install -e '.[observe]'" in source and "not on the package" in source
