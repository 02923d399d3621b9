"""benchmarks/compat/dspy_rlm_tests.py's counting: every test that touches RLM and nothing private is
counted whatever the installed dspy.RLM does with it; skipped ones are listed with their reason;
a failure is named, and explained only where the script says why."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "compat"))

import dspy_rlm_tests  # noqa: E402

SOURCE = """
from dspy.predict.rlm import RLM, _strip_code_fences

class TestA:
    def test_public(self):
        RLM("a -> b")

    def test_private_attribute(self):
        assert RLM("a -> b")._interpreter_factory is None

    def test_private_helper(self):
        RLM("a -> b"); _strip_code_fences("x")

    def test_no_rlm(self):
        assert 1

    def test_needs_deno(self):
        RLM("a -> b")
"""


def test_public_private_and_not_rlm_are_told_apart():
    kinds = dspy_rlm_tests.classify(SOURCE)
    assert kinds["TestA::test_public"] == {"private": False, "uses_rlm": True}
    assert kinds["TestA::test_private_attribute"]["private"]
    assert kinds["TestA::test_private_helper"]["private"]
    assert kinds["TestA::test_no_rlm"] == {"private": False, "uses_rlm": False}


def test_a_public_test_the_installed_dspy_fails_still_counts_and_skips_are_listed():
    def test(name, dspy, rlmkit, not_run=None, **kind):
        kind = {"private": False, "uses_rlm": True, **kind}
        public = kind["uses_rlm"] and not kind["private"]
        return {"test": name, "dspy": dspy, "rlmkit": rlmkit, "public": public, **kind, "not_run": not_run}

    known = next(iter(dspy_rlm_tests.KNOWN_FAILURES))
    tests = [
        test("A::passes_both", "passed", "passed"),
        test("A::dspy_fails", "failed", "passed"),  # counted: not only what dspy 3.4.1 passes
        test("A::regression", "passed", "failed"),
        test(known, "failed", "failed"),
        test("A::deno", "skipped", "skipped", not_run="needs Deno"),
        test("A::private", "passed", "failed", private=True),
        test("A::no_rlm", "passed", "passed", uses_rlm=False),
    ]
    summary = dspy_rlm_tests.summarize(tests)
    assert (summary["public"], summary["public_run"], summary["public_passed_rlmkit"]) == (5, 4, 2)
    assert summary["public_failed_rlmkit"] == ["A::regression", known]
    assert list(summary["public_failed_known"]) == [known]  # a regression is not explained away
    assert summary["public_not_run"] == {"needs Deno": 1}
    assert summary["public_passed_dspy"] == 2
    assert (summary["private"], summary["not_touching_rlm"]) == (1, 1)
    assert summary["public"] + summary["private"] + summary["not_touching_rlm"] == summary["collected"]
