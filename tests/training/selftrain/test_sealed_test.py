"""The sealed test: read once per frozen candidate (by sha256), every read in the ledger, and
never while the gate has changes not committed."""

from __future__ import annotations

import json
import subprocess

import pytest
from typer.testing import CliRunner

from optimizers.cli.release import EmbeddedArms, sealed_examples
from optimizers.selftrain import SuitePlan
from optimizers.selftrain import sealed_test as sealed
from optimizers.selftrain.interleaved import Outcome
from optimizers.selftrain.rounds import SealedTestPlan
from optimizers.selftrain.sealed_test import (
    Candidate,
    GateNotCommitted,
    SealedTestAlreadyRead,
    candidates_read,
    read_ledger,
    read_test,
)
from rlmkit.cli import app
from tests.training.selftrain.test_interleaved import scripted

PLAN = SealedTestPlan(seed=5000, iterations=4, max_tokens=200_000, max_seconds=60,
                      suites=(SuitePlan(suite="needle", length=2_000, n=3),))  # fmt: skip


@pytest.fixture
def checkout(tmp_path):
    """A checkout whose gate files are committed."""
    root = tmp_path / "checkout"
    (root / "optimizers" / "selftrain").mkdir(parents=True)
    for name in sealed.GATE_FILES:
        (root / name).write_text(f"# {name}\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "gate"], check=True)
    return root


def candidate(tmp_path, name="round9", content=b"GGUF adapter"):
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(content)
    return Candidate.of(name, path, "adapter")


def always(score):
    calls = []

    def run_one(arm, example):
        calls.append((arm, example.id))
        return Outcome(score=score if arm != "base" else 0.0, turns=2, tokens=10, seconds=0.5)

    return run_one, calls


def test_a_first_read_runs_base_and_candidate_interleaved_and_appends_one_entry(tmp_path, checkout):
    ledger, chosen = tmp_path / "ledger.jsonl", candidate(tmp_path)
    runner = EmbeddedArms(PLAN, {}, lm_for=lambda arm: scripted("reader" if arm == "round9" else "guesser"))
    entry = read_test(chosen, PLAN, examples=sealed_examples, run_one=runner, trained_families=["needle"],
                      ledger=ledger, root=checkout)  # fmt: skip
    [kept] = read_ledger(ledger)
    assert kept.model_dump(mode="json") == json.loads(entry.model_dump_json())
    assert entry.sha256 == chosen.sha256 and entry.candidate == "round9"
    assert entry.seed == 5000 and [s.label for s in entry.suites] == ["needle-2k"]
    assert entry.gate_sha256 == sealed.gate_definition(checkout) and len(entry.commit) >= 7
    [row] = entry.scores
    assert (
        row["means"]["round9"] == 1.0
        and row["scored"] == {"base": 3, "round9": 3}
        and row["cut"]["base"] == 0
    )
    assert set(entry.verdict) == {"ships", "measured", "failures", "missing"}
    assert not entry.verdict["ships"] and entry.verdict["missing"] == [
        "needle-2k"
    ]  # n=3 is below the gate's n
    assert candidates_read(ledger) == 1


def test_a_second_read_of_the_same_candidate_is_refused_before_any_run(tmp_path, checkout):
    ledger = tmp_path / "ledger.jsonl"
    run_one, calls = always(1.0)
    read_test(
        candidate(tmp_path), PLAN, examples=sealed_examples, run_one=run_one, ledger=ledger, root=checkout
    )
    ran = len(calls)
    renamed = candidate(tmp_path, name="same_bytes_new_name")  # the same file under another name
    with pytest.raises(SealedTestAlreadyRead, match="read the sealed test on .* as 'round9'"):
        read_test(renamed, PLAN, examples=sealed_examples, run_one=run_one, ledger=ledger, root=checkout)
    assert len(calls) == ran and len(read_ledger(ledger)) == 1


def test_a_read_is_refused_while_the_gate_has_uncommitted_changes(tmp_path, checkout):
    ledger = tmp_path / "ledger.jsonl"
    (checkout / "optimizers" / "selftrain" / "gate.py").write_text("# a looser rule\n")
    run_one, calls = always(1.0)
    with pytest.raises(GateNotCommitted, match="optimizers/selftrain/gate.py"):
        read_test(candidate(tmp_path), PLAN, examples=sealed_examples, run_one=run_one, ledger=ledger,
                  root=checkout)  # fmt: skip
    assert calls == [] and not ledger.exists()


def test_the_ledger_counts_every_candidate_that_touched_the_test(tmp_path, checkout):
    ledger = tmp_path / "ledger.jsonl"
    run_one, _ = always(0.5)
    for name, content in (("one", b"a"), ("two", b"b"), ("three", b"c")):
        chosen = candidate(tmp_path, name, content)
        read_test(chosen, PLAN, examples=sealed_examples, run_one=run_one, ledger=ledger, root=checkout)
    assert candidates_read(ledger) == 3
    assert [entry.candidate for entry in read_ledger(ledger)] == ["one", "two", "three"]


def test_the_committed_ledger_reads_and_the_cli_refuses_a_candidate_it_holds(tmp_path, monkeypatch, checkout):
    read_ledger()  # the committed ledger parses (it may be empty)
    adapter = tmp_path / "mine.gguf"
    adapter.write_bytes(b"GGUF mine")
    ledger = tmp_path / "ledger.jsonl"
    run_one, _ = always(1.0)
    chosen = Candidate.of("mine", adapter, "adapter")
    read_test(chosen, PLAN, examples=sealed_examples, run_one=run_one, ledger=ledger, root=checkout)
    monkeypatch.setattr(sealed, "LEDGER", ledger)
    result = CliRunner().invoke(app, ["self-train", "read-test", str(adapter)])
    assert result.exit_code == 2 and "read the sealed test" in result.output
    assert json.loads(ledger.read_text().splitlines()[0])["candidate"] == "mine"
