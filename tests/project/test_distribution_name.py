"""The distribution is `dspy-rlmkit`: `rlmkit` on the package index is an unrelated project.

No install hint, error message or generated package may point a user at bare `rlmkit`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from rlmkit.errors import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]

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


def test_a_wheel_built_from_the_checkout_is_dspy_rlmkit_with_the_rlmkit_command(tmp_path):
    """What `pip install dist/*.whl` installs: built from the tracked files alone (as a fresh clone
    holds them), named dspy-rlmkit, with the `rlmkit` command and every package inside."""
    tree = tmp_path / "clone"
    for name in subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines():
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-q", "-w", str(tmp_path / "dist"), str(tree)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.startswith("dspy_rlmkit-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(info).decode()
        entry_points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert f"Name: {DISTRIBUTION}\n" in metadata and DISTRIBUTION == "dspy-rlmkit"
    assert "rlmkit = rlmkit.cli:main" in entry_points  # the command keeps its name
    assert "demo = programs.cli.demo:register" in entry_points  # the verbs of the other packages
    for package in ("rlmkit", "programs", "optimizers", "signatures"):
        assert f"{package}/__init__.py" in names
    assert "rlmkit/local/tuned_program.json" in names  # package data travels too
    if (tree / "rlmkit/local/shipped_adapter.json").exists():  # and the adapter its record names
        assert "rlmkit/local/shipped_adapter.gguf" in names
    assert "Provides-Extra: local" in metadata


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
        "pip install dist/dspy_rlmkit-0.1.0-py3-none-any.whl",
        "pip install -e '.[local]'",
        "python -m rlmkit demo",
        "import rlmkit",
        'dependencies = ["dspy-rlmkit"]',
        "rlmkit.RLM(...)",
    ]
    assert all(any(p.search(line) for p in FOREIGN) for line in bad)
    assert not any(p.search(line) for p in FOREIGN for line in good)
