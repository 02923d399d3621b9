"""rlmkit is a typed package: it ships the PEP 561 marker, and the checker the test command runs
(``mypy``, configured in pyproject.toml) is strict on rlmkit itself.

Cheap checks of the configuration only; ``scripts/test.sh`` runs mypy itself."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
MYPY = PYPROJECT["tool"]["mypy"]
# Flags that would let rlmkit's own code go unchecked or untyped if an override turned them off.
STRICT_FLAGS = ("disallow_untyped_defs", "disallow_incomplete_defs", "disallow_any_generics", "strict")


def overrides_for(module: str) -> list[dict[str, object]]:
    return [
        override
        for override in MYPY.get("overrides", [])
        if any(fnmatch.fnmatchcase(module, pattern) for pattern in _patterns(override["module"]))
    ]


def _patterns(module: str | list[str]) -> list[str]:
    return [module] if isinstance(module, str) else module


def test_the_package_ships_the_py_typed_marker():
    assert (ROOT / "rlmkit" / "py.typed").is_file()
    package_data = PYPROJECT["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data.get("rlmkit", []) + package_data.get("*", [])


def test_mypy_is_strict_on_rlmkit_and_reads_only_rlmkit():
    assert MYPY["strict"] is True
    assert MYPY["files"] == ["rlmkit"]
    assert MYPY["python_version"] == PYPROJECT["project"]["requires-python"].removeprefix(">=")


@pytest.mark.parametrize("module", ["rlmkit", "rlmkit.run.spec", "rlmkit.events", "rlmkit.trajectory"])
def test_no_override_skips_missing_imports_or_loosens_the_typed_seams(module):
    """``ignore_missing_imports`` is for third-party packages without types; the seams users build
    on (the run's spec, the events, the trajectory) are reported on, never silenced."""
    for override in overrides_for(module):
        assert "ignore_missing_imports" not in override, override
        assert "ignore_errors" not in override, override
        assert not any(override.get(flag) is False for flag in STRICT_FLAGS), override


def test_missing_imports_are_ignored_only_for_third_party_packages():
    for override in MYPY.get("overrides", []):
        if override.get("ignore_missing_imports"):
            assert not any(p.split(".")[0] == "rlmkit" for p in _patterns(override["module"])), override


def test_the_override_matcher_sees_a_silenced_module():
    """The matcher above can fail: the server, checked later, is listed under ignore_errors."""
    assert any(override.get("ignore_errors") for override in overrides_for("rlmkit.serve.asgi"))
