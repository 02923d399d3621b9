"""A task family is one module with its SUITE (generator, scorer, knobs, program) and one line in
FAMILIES; forgetting a part is a clear error, not a bare KeyError."""

from __future__ import annotations

import pytest

from programs.suite_programs import SPECS, program_for
from programs.tasks import FAMILIES, SUITES, ProgramRecipe, Suite, TaskError, _load_family, needle
from rlmkit.errors import ConfigError


def test_every_listed_family_brings_its_generator_scorer_and_program():
    assert list(SUITES) == list(FAMILIES)
    for name, suite in SUITES.items():
        assert callable(suite.generate) and callable(suite.score)
        assert isinstance(suite.program, ProgramRecipe)
        assert SPECS[name].instructions == suite.program.instructions


def test_a_listed_module_without_a_suite_is_named():
    with pytest.raises(TaskError, match=r"programs/tasks/base.py .* defines no SUITE"):
        _load_family("base")


def test_a_suite_without_a_scorer_is_refused_when_defined():
    with pytest.raises(TaskError, match="'half': score must be a function"):
        Suite("half", needle.generate, None, {})


def test_a_family_without_a_program_says_where_to_add_one(monkeypatch):
    monkeypatch.setitem(SUITES, "bare", Suite("bare", needle.generate, needle.score, {}))
    with pytest.raises(ConfigError, match=r"'bare' has no program.*programs/tasks/bare.py"):
        program_for("bare")
