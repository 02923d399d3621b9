"""The sealed test: read once per frozen candidate, every read logged.

Every choice (recipe, families, prompt, round, thresholds) is made on dev, the held-out matrix.
The test (generator seeds from 5000 up, the registry's ``test`` suites) is read by one command,
``rlmkit self-train read-test CANDIDATE``, once per candidate, which is known by the sha256 of
its file (a GGUF adapter, or a prompt program's JSON). Each read appends an entry to the ledger
(``sealed_test_ledger.jsonl`` beside this file, committed): the candidate, its hash, the date,
the commit, the suites, the scores, and the gate's verdict. A second read of the same candidate
is refused, so the ledger says how many candidates ever touched the test.

The ledger lives beside the code that refuses a second read, not among the benchmark results: a
benchmark driver rewrites its results file on each report, while the ledger only ever grows, and
the refusal is only as good as the file it reads. The gate must be committed before the read: the
entry records the hash of the gate's definition, and a read is refused while the gate's files
have changes not committed."""

from __future__ import annotations

import hashlib
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from optimizers.selftrain.gate import GateRule, verdict
from optimizers.selftrain.interleaved import Outcome, run_interleaved, suite_table
from optimizers.selftrain.recipe import SuitePlan
from optimizers.selftrain.rounds import CHECKOUT, SealedTestPlan
from rlmkit.errors import UserError

LEDGER = Path(__file__).with_name("sealed_test_ledger.jsonl")
# what "the gate" is: its rules, and the registry that names the test's suites and the arms
GATE_FILES = ("optimizers/selftrain/gate.py", "optimizers/selftrain/rounds.toml")
BASE_ARM = "base"


class SealedTestAlreadyRead(UserError):
    """This candidate (by its sha256) has read the sealed test before: its scores are in the ledger."""


class GateNotCommitted(UserError):
    """The gate's files have uncommitted changes: the rule must be fixed before the test is read."""


class Candidate(BaseModel):
    """A frozen candidate: an adapter file or a prompt program's file, known by its content."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["adapter", "prompt"]
    path: str
    sha256: str

    @classmethod
    def of(cls, name: str, path: Path, kind: Literal["adapter", "prompt"]) -> Candidate:
        if not Path(path).is_file():
            raise UserError(f"candidate {name!r}: no file at {path}")
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        return cls(name=name, kind=kind, path=str(path), sha256=digest)


class LedgerEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidate: str
    kind: Literal["adapter", "prompt"]
    sha256: str
    date: str
    commit: str
    gate_sha256: str
    seed: int
    suites: list[SuitePlan]
    scores: list[dict[str, Any]]  # per suite: n, scored and cut apart, means, paired gain
    verdict: dict[str, Any]  # the gate's: ships, failures, missing


def read_ledger(path: Path | None = None) -> list[LedgerEntry]:
    path = path or LEDGER
    if not path.exists():
        return []
    return [LedgerEntry.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def candidates_read(path: Path | None = None) -> int:
    """How many distinct candidates ever touched the sealed test."""
    return len({entry.sha256 for entry in read_ledger(path)})


def gate_definition(root: Path | None = None) -> str:
    """The sha256 of the gate's files, as they are in the checkout."""
    root = root or CHECKOUT
    digest = hashlib.sha256()
    for name in GATE_FILES:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return digest.hexdigest()


def check_can_read(candidate: Candidate, *, ledger: Path | None = None, root: Path | None = None) -> str:
    """Refuse before any model starts: a candidate that has read the test, or a gate not committed.
    Returns the gate's definition hash, for the entry."""
    ledger, root = ledger or LEDGER, root or CHECKOUT
    for entry in read_ledger(ledger):
        if entry.sha256 == candidate.sha256:
            raise SealedTestAlreadyRead(
                f"{candidate.name} (sha256 {candidate.sha256[:12]}) read the sealed test on {entry.date} at "
                f"commit {entry.commit}, as {entry.candidate!r}: its scores are in {ledger}; a test read "
                "twice is a validation set: choose on dev (the matrix) and bring a new frozen candidate."
            )
    changed = _git(root, "status", "--porcelain", "--", *GATE_FILES)
    if changed.strip():
        raise GateNotCommitted(
            "the gate must be committed before the test is read; these have changes: "
            + ", ".join(line[3:] for line in changed.splitlines())
        )
    return gate_definition(root)


def read_test(
    candidate: Candidate,
    plan: SealedTestPlan,
    *,
    examples: Callable[[SuitePlan, int], Sequence[Any]],
    run_one: Callable[[str, Any], Outcome],
    trained_families: Sequence[str] = (),
    real_text: Sequence[str] = (),
    rule: GateRule = GateRule(),
    ledger: Path | None = None,
    root: Path | None = None,
    work: Path | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> LedgerEntry:
    """Read the sealed test once for ``candidate``: every suite of ``plan`` on the base and the
    candidate, interleaved example by example (``run_one(arm, example)`` runs one), judged by the
    gate; the entry is appended to ``ledger`` and returned. ``examples(plan, seed)`` builds a
    suite's examples. ``work``: where the runs are kept as they finish (a stopped read resumes
    there; the ledger gets its entry once, when every suite is read)."""
    ledger, root = ledger or LEDGER, root or CHECKOUT
    gate_sha = check_can_read(candidate, ledger=ledger, root=root)
    commit = _git(root, "rev-parse", "--short", "HEAD").strip()
    arms = (BASE_ARM, candidate.name)
    table = []
    for suite in plan.suites:
        log(f"{suite.label}: {' and '.join(arms)}, interleaved, {suite.n} examples")
        rows_file = work / f"{candidate.sha256[:16]}-{suite.label}.jsonl" if work else None
        rows = run_interleaved(arms, examples(suite, plan.seed), run_one, rows_file=rows_file)
        table.append(suite_table(suite.label, suite.suite, arms, rows))
    judged = verdict(
        table, [suite.label for suite in plan.suites], candidate=candidate.name, prompt_arms=[],
        trained_families=trained_families, real_text=real_text, rule=rule,
    )  # fmt: skip
    entry = LedgerEntry(
        candidate=candidate.name, kind=candidate.kind, sha256=candidate.sha256,
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit=commit, gate_sha256=gate_sha,
        seed=plan.seed, suites=list(plan.suites), scores=table,
        verdict=judged.model_dump(include={"ships", "measured", "failures", "missing"}),
    )  # fmt: skip
    # still unread, and the gate still the one committed when the read began
    if check_can_read(candidate, ledger=ledger, root=root) != gate_sha:
        raise GateNotCommitted("the gate changed while the test was read: read it again on the new gate")
    with ledger.open("a") as handle:
        handle.write(entry.model_dump_json() + "\n")
    return entry


def _git(root: Path, *args: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise UserError(
            f"the sealed test is read from a git checkout (git {' '.join(args)}: {exc})"
        ) from None
