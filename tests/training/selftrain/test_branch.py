"""A recipe's `branch_samples`: each sampling stage's failed runs continued from their last turn
by real `rlmkit eval --branch-from` subprocesses against a scripted model, and the dataset
compiled from both: SFT rows from the continuations that ended right, DPO pairs at that turn."""

from __future__ import annotations

import json

import pytest

from optimizers.selftrain import Recipe, StageStore, SuitePlan
from optimizers.selftrain.pipeline import SelfTrain
from rlmkit.testing.server import ScriptedServer
from tests.training.selftrain.test_pipeline import LOOK, SUBMIT, ScriptedRunner

WRONG = '```repl\nSUBMIT(answer=["0"])\n```'


@pytest.fixture
def served():
    """Looks at turn 0; at turn 1 answers wrong until ``phase`` says "right"."""
    phase = {"now": "wrong"}

    def responder(body: dict) -> str:
        if not any(m["role"] == "assistant" for m in body["messages"]):
            return LOOK
        return WRONG if phase["now"] == "wrong" else SUBMIT

    with ScriptedServer(responder) as server:
        server.phase = phase
        yield server


def test_failed_runs_are_continued_and_compiled_into_rows_and_pairs_at_their_last_turn(tmp_path, served):
    recipe = Recipe(
        train=(SuitePlan(suite="needle", length=2_000, n=2),),
        samples=2,
        branch_samples=2,
        workers=2,
        max_iterations=4,
        min_score=0.5,
        per_turn=True,
    )
    runner = ScriptedRunner(served.url)
    store = StageStore(tmp_path / "work", tmp_path / "archive")
    run = SelfTrain(recipe, store, tmp_path / "base.gguf", log=lambda _: None, runner=runner)
    names = [name for name, _, _ in run.stages()]
    assert names[:3] == ["sample-needle-2k", "branch-needle-2k", "dataset"]

    run.run(only=lambda name: name == "sample-needle-2k")
    assert store.record("sample-needle-2k")["scored_above_0"] == 0  # every run wrong: nothing to train on
    served.phase["now"] = "right"
    run.run(only=lambda name: name == "branch-needle-2k")
    branch = store.record("branch-needle-2k")
    command = runner.commands[-1]
    assert command[command.index("--branch-from") + 1] == str(store.output("sample-needle-2k"))
    assert command[command.index("--branch-below") + 1] == "0.5"
    assert command[command.index("--lm-cache") + 1] == str(store.lm_cache("sample-needle-2k"))
    assert (branch["runs"], branch["scored_above_0"], branch["from"]) == (8, 8, "sample-needle-2k")

    dataset = run.run(only=lambda name: name == "dataset")["dataset"]
    assert dataset["sft"]["rows"] == 4 and dataset["sft"]["examples"] == 2  # 2 turns x 2 examples, once each
    pairs = [
        json.loads(line)
        for split in ("train", "val")
        if (store.output("dataset") / "dpo" / f"{split}.jsonl").exists()
        for line in (store.output("dataset") / "dpo" / f"{split}.jsonl").read_text().splitlines()
    ]
    at_last_turn = [pair for pair in pairs if ":branch:" in pair["id"]]
    # an example's two runs are alike word for word here (a scripted model): their pairs are one
    assert len(at_last_turn) == 2 and all(pair["turn"] == 1 for pair in at_last_turn)
    assert all(pair["rejected"][0]["content"] == WRONG for pair in at_last_turn)
    assert all(pair["chosen"][0]["content"] == SUBMIT for pair in at_last_turn)
