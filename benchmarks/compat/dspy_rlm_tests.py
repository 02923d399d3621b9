"""DSPy's own tests for ``dspy.RLM``, run unchanged against ``rlmkit.RLM``.

The test file is read from a DSPy checkout at run time (never committed here), copied with the
helpers it imports into a temporary directory, and run twice with pytest:

1. as published, against ``dspy.RLM`` itself: the reference (what passes there is what DSPy's
   own release promises);
2. with its one import of ``RLM`` rewritten to ``from rlmkit import RLM``.

A test counts as *public* when it touches ``RLM`` and reaches into nothing private (no
``obj._name`` attribute, no ``_helper`` import of DSPy's), whatever the installed dspy.RLM does
with it: every public test is counted, passed or not. Public tests that pytest skips on both runs
(the ones DSPy marks as needing Deno or a real model) are listed as not run, each with the
reason. The counts land in ``benchmarks/results/dspy_rlm_tests.json``, each test with its two
outcomes.

    python3 benchmarks/compat/dspy_rlm_tests.py --dspy-repo /path/to/dspy [--rev HEAD]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from _bootstrap import RESULTS, ROOT

import provenance

RESULTS = RESULTS / "dspy_rlm_tests.json"
TEST_FILE = "tests/predict/test_rlm.py"
# What the test file imports from DSPy's test tree (its conftest pulls in test_utils).
SUPPORT = ["tests/__init__.py", "tests/conftest.py", "tests/mock_interpreter.py", "tests/test_utils",
           "tests/predict/snapshots"]  # fmt: skip
RLM_IMPORT = re.compile(r"^from dspy\.predict\.rlm import (.+)$", re.MULTILINE)


def extract(repo: Path, rev: str, into: Path) -> None:
    """The test file and its helpers at ``rev``, written under ``into`` (git archive: no checkout)."""
    paths = [TEST_FILE, *SUPPORT]
    tree = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", rev, *paths],
                          check=True, capture_output=True, text=True).stdout.split()  # fmt: skip
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev, *tree], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    (into / "tests" / "predict" / "__init__.py").touch()


def swap_rlm(source: str) -> str:
    """``from dspy.predict.rlm import RLM[, helpers]`` -> rlmkit's RLM, DSPy's helpers kept."""

    def replace(match: re.Match) -> str:
        names = [n.strip() for n in match.group(1).split(",")]
        kept = [n for n in names if n != "RLM"]
        lines = [f"from dspy.predict.rlm import {', '.join(kept)}"] if kept else []
        return "\n".join([*lines, "from rlmkit import RLM"])

    swapped, count = RLM_IMPORT.subn(replace, source)
    if count != 1:
        raise SystemExit(f"expected one 'from dspy.predict.rlm import' line in {TEST_FILE}, found {count}")
    return swapped.replace("dspy.RLM(", "RLM(")


def classify(source: str) -> dict[str, dict[str, bool]]:
    """Per test function: does it touch RLM, does it reach into anything private?"""
    private_imports = {n for n in re.findall(r"\b(_[a-z]\w*)\b", RLM_IMPORT.search(source).group(1))}
    found = {}
    for cls in ast.parse(source).body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in cls.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith("test"):
                nodes = list(ast.walk(fn))
                private = any(
                    isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
                    for n in nodes
                ) or any(isinstance(n, ast.Name) and n.id in private_imports for n in nodes)
                uses_rlm = any(isinstance(n, ast.Name) and n.id == "RLM" for n in nodes)
                found[f"{cls.name}::{fn.name}"] = {"private": private, "uses_rlm": uses_rlm}
    return found


def run_pytest(workdir: Path, name: str) -> dict[str, tuple[str, str]]:
    """``{test id: (outcome, pytest's skip reason or "")}`` of one run of the test file."""
    xml = workdir / f"{name}.xml"
    env = {**os.environ, "PYTHONPATH": f"{workdir}{os.pathsep}{ROOT}"}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                    TEST_FILE, f"--junitxml={xml}", "--timeout=120"],
                   cwd=workdir, env=env, capture_output=True, text=True)  # fmt: skip
    outcomes = {}
    for case in ET.parse(xml).iter("testcase"):
        cls = case.get("classname").rsplit(".", 1)[-1]
        status, reason = "passed", ""
        for child in case:
            status = {"failure": "failed", "error": "failed", "skipped": "skipped"}.get(child.tag, status)
            if child.tag == "skipped":
                reason = child.get("message") or ""
        outcomes[f"{cls}::{case.get('name')}"] = (status, reason)
    return outcomes


# Why a skipped test did not run, by pytest's skip message (DSPy's conftest skips marked tests
# unless their flag is given; its integration class is skipped outright).
NOT_RUN = {
    "need --deno option to run": "needs Deno (DSPy's PythonInterpreter runs Pyodide in it)",
    "Requires actual LM and Deno - run manually": "calls openai/gpt-4o-mini (an API key) and needs Deno",
}
# Public tests rlmkit fails, and why (a test missing here that fails is a regression).
KNOWN_FAILURES = {
    "TestRLMInterpreterLifecycle::test_python_interpreter_lm_request_bytes": (
        "compares the request's bytes with a snapshot of DSPy's own action prompt, and its LM uses "
        "the typed_lm contract that the installed dspy refuses before any request (dspy.RLM fails it too)"
    ),
}


def summarize(tests: list[dict]) -> dict:
    public = [t for t in tests if t["public"]]
    ran = [t for t in public if not t["not_run"]]
    failed = [t["test"] for t in ran if t["rlmkit"] != "passed"]
    not_run: dict[str, int] = {}
    for t in public:
        if t["not_run"]:
            not_run[t["not_run"]] = not_run.get(t["not_run"], 0) + 1
    return {
        "collected": len(tests),
        "public": len(public),
        "public_run": len(ran),
        "public_passed_rlmkit": len(ran) - len(failed),
        "public_failed_rlmkit": failed,
        "public_failed_known": {t: KNOWN_FAILURES[t] for t in failed if t in KNOWN_FAILURES},
        "public_not_run": not_run,
        "public_passed_dspy": sum(t["dspy"] == "passed" for t in ran),
        "private": sum(t["uses_rlm"] and t["private"] for t in tests),  # the three groups do not overlap
        "not_touching_rlm": sum(not t["uses_rlm"] for t in tests),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dspy-repo", type=Path, required=True, help="a git checkout (or bare repo) of DSPy")
    parser.add_argument("--rev", default="HEAD", help="the revision whose test file is run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    import dspy

    load = os.getloadavg()[0]
    argv = ["--dspy-repo", "<dspy checkout>", "--rev", args.rev]
    rev = subprocess.run(["git", "-C", str(args.dspy_repo), "rev-parse", args.rev],
                         check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="dspy-rlm-tests-") as tmp:
        workdir = Path(tmp)
        extract(args.dspy_repo, rev, workdir)
        test_path = workdir / TEST_FILE
        source = test_path.read_text()
        kinds = classify(source)
        reference = run_pytest(workdir, "dspy")
        test_path.write_text(swap_rlm(source))
        ours = run_pytest(workdir, "rlmkit")

    tests = []
    for test_id, (dspy_status, reason) in sorted(reference.items()):
        kind = kinds.get(test_id.split("[")[0], {"private": False, "uses_rlm": True})
        rlmkit_status, _ = ours.get(test_id, ("missing", ""))
        skipped = dspy_status == rlmkit_status == "skipped"
        tests.append({"test": test_id, "dspy": dspy_status, "rlmkit": rlmkit_status,
                      "public": kind["uses_rlm"] and not kind["private"], **kind,
                      "not_run": NOT_RUN.get(reason, reason) if skipped else None})  # fmt: skip
    summary = summarize(tests)
    record = {
        **provenance.record(__file__, argv, load),
        "dspy_version": dspy.__version__,
        "dspy_test_file": f"stanfordnlp/dspy {rev[:12]} {TEST_FILE}",
        "summary": summary,
        "tests": tests,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
