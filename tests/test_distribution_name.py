"""The distribution is `dspy-rlmkit`: `rlmkit` on the package index is an unrelated project.

No install hint, error message or generated package may point a user at bare `rlmkit`.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from rlmkit.errors import DISTRIBUTION, install_hint

ROOT = Path(__file__).resolve().parents[1]

# `pip install ... rlmkit` / `'rlmkit[extra]'` / a dependency string "rlmkit" or "rlmkit>=..." —
# each one would fetch the foreign package.
FOREIGN = [
    re.compile(r"pip install(\s+-[-\w=]+)*\s+['\"]?rlmkit(\[|['\"\s]|$)"),
    re.compile(r"(?<![\w./-])rlmkit\[[a-z,]+\]"),
    re.compile(r"""["']rlmkit\s*(>=|==|~=|<|\[)"""),
    re.compile(r"""dependencies\s*=.*["']rlmkit["']"""),
]


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    suffixes = {".py", ".md", ".sh", ".toml", ".txt", ".jinja", ".html", ".js", ".cfg", ".json"}
    return [ROOT / name for name in out.splitlines() if Path(name).suffix in suffixes]


def test_the_project_is_published_under_its_own_name():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "dspy-rlmkit"
    assert project["scripts"]["rlmkit"].startswith("rlmkit.")  # the command keeps its name


def test_install_hints_name_the_distribution_and_the_checkout_form():
    hint = install_hint("local")
    assert "pip install 'dspy-rlmkit[local]'" in hint and "pip install -e '.[local]'" in hint
    assert "--force-reinstall 'dspy-rlmkit[local,train]'" in install_hint("local", "train", reinstall=True)


def test_no_file_tells_the_user_to_install_bare_rlmkit():
    this = Path(__file__).resolve()
    offenders = []
    for path in _tracked_text_files():
        if path == this or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if any(pattern.search(line) for pattern in FOREIGN):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_patterns_catch_what_they_are_for():
    bad = [
        "pip install 'rlmkit[local]'",
        'dependencies = ["rlmkit", "x"]',
        "pip install rlmkit",
        "needs trl (rlmkit[train])",
    ]
    good = [
        "pip install 'dspy-rlmkit[local]'",
        "pip install -e '.[local]'",
        "python -m rlmkit demo",
        "import rlmkit",
        'dependencies = ["dspy-rlmkit"]',
        "rlmkit.RLM(...)",
    ]
    assert all(any(p.search(line) for p in FOREIGN) for line in bad)
    assert not any(p.search(line) for p in FOREIGN for line in good)
