"""The release path: the rounds registry, ``ship`` and ``hold_back`` over the gate's verdicts,
and the record beside the embedded model (today's record reproduced byte for byte)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from optimizers.backends.testing import write_tiny_gguf
from optimizers.selftrain import Recipe, StageStore, SuitePlan
from optimizers.selftrain.release import NotShippable, hold_back, ship, shipped_arm
from optimizers.selftrain.rounds import CHECKOUT, Registry, Round, read_registry
from rlmkit.errors import UserError

FIRST_SHA = "ab" * 32


def registry(**changes) -> Registry:
    fields = {
        "results": "results.json",
        "matrix": {"max_seconds": 240, "suites": [{"suite": "needle", "n": 20}]},
        "first_arms": [{"name": "base"}, {"name": "prompt", "moves": "read"}],
        "first_adapter": {"arm": "adapter", "sha256": FIRST_SHA, "trained_families": ["needle"]},
        "rounds": [{"name": "reading", "recipe": "r.toml", "archive": "archive", "arm": "reading",
                    "base": "base_again"}],
        "test": {"suites": [{"suite": "needle", "n": 2}]},
    }  # fmt: skip
    return Registry.model_validate(fields | changes)


def finished_round(root: Path) -> StageStore:
    """A round whose stages have all finished, its SFT and DPO adapters made."""
    recipe = Recipe(
        train=(SuitePlan(suite="needle", n=2, hint=True), SuitePlan(suite="prose", n=2)), dpo=True
    )
    store = StageStore(root / ".selftrain" / "reading", root / "archive")
    store.keep_recipe(recipe.model_dump(mode="json"))
    for plan in recipe.train:
        store.run(f"sample-{plan.label}", lambda f: {"generator_seed": 0, "examples": 2, "runs": 8,
                                                      "scored_above_0": 3})  # fmt: skip
    sft = {"rows": 5, "examples": 3, "per_family": {"needle": {"rows": 5, "examples": 3}},
           "runs_dropped": {"zero_score": 4}, "turns_dropped": {"turn:code_failed": 2}}  # fmt: skip
    store.run("dataset", lambda f: {"sft": sft, "dpo": {"rows": 2}})
    trained = {"rows": 5, "steps": 5, "precision": "bf16", "train_runtime_s": 9.0}
    for name, blocks in (("train", 0), ("adapter-sft", 1), ("train-dpo", 0), ("adapter", 2)):

        def made(folder, blocks=blocks):
            if blocks:
                write_tiny_gguf(folder / "adapter.gguf", "qwen2", blocks=blocks)
            return {"base": "base.gguf"} if blocks else trained

        store.run(name, made)
    return store


def results(arm: str, verdict: dict | None) -> dict:
    row = {"suite": "needle-20k", "n": 20, "versus_base": {arm: {"gain": 0.3, "ci95": [0.1, 0.5]}}}
    return {"date": "today", "commit": "abc", "added_tables": {arm: [row]}, "gate": {arm: verdict}}


def test_the_committed_registry_reads_and_names_every_round_and_the_test_seeds():
    rounds = read_registry()
    assert [where.name for where in rounds.rounds] == ["reading", "round2", "round3"]
    assert rounds.test.seed >= 5000 and rounds.matrix.seed < 5000
    assert rounds.round_of("round3_sft").arms["round3_sft"] == "adapter-sft"
    with pytest.raises(UserError, match="no round makes an adapter arm 'base'"):
        rounds.round_of("base")


def test_a_registry_naming_an_arm_twice_is_refused(tmp_path):
    twice = {"name": "again", "recipe": "r.toml", "archive": "a", "arm": "reading", "base": "base_x"}
    path = tmp_path / "rounds.toml"
    path.write_text('results = "x"\n')
    with pytest.raises(UserError, match="rounds.toml: matrix: Field required"):
        read_registry(path)
    with pytest.raises(ValueError, match="arms named twice in the registry: reading"):
        registry(rounds=[*registry().model_dump()["rounds"], twice])


def test_ship_installs_a_round_adapter_only_through_its_gate_with_what_it_was_taught(tmp_path):
    finished_round(tmp_path)
    rounds, into = registry(), tmp_path / "shipped_adapter.json"
    for verdict in (None, {"ships": False, "failures": ["needle-20k: below the base"]}):
        with pytest.raises(NotShippable, match="does not ship"):
            ship(rounds, "reading", results("reading", verdict), root=tmp_path, into=into)
    assert not into.exists()
    shipped = ship(rounds, "reading", results("reading", {"ships": True, "failures": []}), root=tmp_path,
                   into=into)  # fmt: skip
    record = json.loads(into.read_text())
    assert record["sha256"] == hashlib.sha256(shipped.read_bytes()).hexdigest() and "held_back" not in record
    assert record["rows"] == 5 and record["dpo_pairs"] == 2 and set(record["training"]) == {"sft", "dpo"}
    assert [(s["suite"], s["hinted"]) for s in record["trained_on"]] == [("needle", True), ("prose", False)]
    assert record["measured"] == [{"suite": "needle-20k", "n": 20, "gain": 0.3, "ci95": [0.1, 0.5]}]
    assert (
        record["results"] == "results.json (today, commit abc)" and shipped_arm(rounds, record) == "reading"
    )
    # the SFT adapter ships by the same function, its record without the DPO it never had
    ship(rounds, "reading_sft", results("reading_sft", {"ships": True, "failures": []}), root=tmp_path,
         into=into)  # fmt: skip
    record = json.loads(into.read_text())
    assert set(record["training"]) == {"sft"} and record["dpo_pairs"] == 0 and record["arm"] == "reading_sft"
    with pytest.raises(UserError, match="no round makes an adapter arm 'adapter'"):
        ship(rounds, "adapter", results("adapter", {"ships": True}), root=tmp_path, into=into)


def test_hold_back_marks_only_the_shipped_arms_record_and_only_for_failures(tmp_path):
    into = tmp_path / "shipped_adapter.json"
    into.write_text(json.dumps({"file": "shipped_adapter.gguf", "sha256": "cd" * 32}))
    rounds = registry()
    failing = results("adapter", {"ships": False, "failures": ["no real-text suite gains"]})
    assert not hold_back(rounds, "adapter", failing, into=into)  # another adapter ships: not its verdict
    into.write_text(json.dumps({"file": "shipped_adapter.gguf", "sha256": FIRST_SHA}))
    assert not hold_back(rounds, "adapter", results("adapter", {"ships": False, "failures": []}), into=into)
    assert hold_back(rounds, "adapter", failing, into=into)
    assert not hold_back(rounds, "adapter", failing, into=into)  # the same verdict again: no rewrite
    assert json.loads(into.read_text())["held_back"]["failures"] == ["no real-text suite gains"]


def test_the_arms_grow_with_each_rounds_made_adapters_and_their_base(tmp_path):
    rounds = registry()
    assert [arm.name for arm in rounds.matrix_plan(Path("s.gguf"), tmp_path).arms] == [
        "base",
        "prompt",
        "adapter",
    ]
    finished_round(tmp_path)
    names = [arm.name for arm in rounds.matrix_plan(Path("s.gguf"), tmp_path).arms]
    assert names == ["base", "prompt", "adapter", "reading_sft", "base_again", "reading"]
    assert rounds.candidates(tmp_path)["reading"] == ("needle", "prose")
    assert rounds.first_arm("base") and not rounds.first_arm("base_again")


def test_ship_on_the_registrys_round3_entry_reproduces_todays_record_byte_for_byte(tmp_path):
    rounds = read_registry()
    committed = json.loads((CHECKOUT / rounds.results).read_text())
    into = tmp_path / "shipped_adapter.json"
    shipped = ship(rounds, "round3", committed, work=tmp_path / "work", into=into)
    today = CHECKOUT / "rlmkit" / "local" / "shipped_adapter.json"
    assert into.read_bytes() == today.read_bytes()
    assert shipped.read_bytes() == today.with_suffix(".gguf").read_bytes()


def test_round_is_a_typed_record():
    with pytest.raises(ValueError):
        Round(name="Bad Name", recipe="r", archive="a", arm="x", base="y")
