"""What a self-trained adapter ships with: where its rows came from, what the filters removed,
how it was trained. ``rlmkit/local/shipped_adapter.json`` carries this beside the gate's verdict,
so whoever serves the embedded model can read what it was taught."""

from __future__ import annotations

from typing import Any

from optimizers.selftrain.recipe import Recipe
from optimizers.selftrain.stages import StageStore
from rlmkit.errors import UserError


def trained_record(store: StageStore, recipe: Recipe, stage: str = "adapter") -> dict[str, Any]:
    """The record of the adapter ``recipe`` trained in ``store``, as adapter stage ``stage`` made
    it (``adapter``, or ``adapter-sft``: the SFT adapter before DPO), every stage up to it
    finished: sampled suites, rows and examples per family, filters, training."""
    dpo = recipe.dpo and stage == "adapter"
    needed = [f"sample-{plan.label}" for plan in recipe.train] + ["dataset", "train", stage]
    needed += ["train-dpo"] if dpo else []
    if missing := [name for name in needed if store.record(name) is None]:
        raise UserError(f"the adapter's stages have not all finished: {', '.join(missing)}")
    dataset, adapter = store.record("dataset"), store.record(stage)
    sft = dataset["sft"]
    sampled = []
    for plan in recipe.train:
        sample = store.record(f"sample-{plan.label}")
        sampled.append(
            {
                "suite": plan.suite,
                "length": plan.length,
                "generator_seed": sample["generator_seed"],
                "hinted": recipe.hinted(plan),
                "examples_sampled": sample["examples"],
                "runs": sample["runs"],
                "runs_scored_above_0": sample["scored_above_0"],
            }
        )
    training = {"sft": _trained(store.record("train"))}
    if dpo:
        training["dpo"] = _trained(store.record("train-dpo")) | {"beta": recipe.dpo_beta}
    return {
        "base": adapter["base"],
        "trained_on": sampled,
        # an earlier round's runs compiled beside these, and the adapter these were sampled through
        "runs_from": list(recipe.runs_from),
        "sampled_through": recipe.sample_adapter,
        "rows": sft["rows"],
        "examples": sft["examples"],
        "per_family": sft.get("per_family", {}),
        "filters": {
            "per_turn": recipe.per_turn,
            "runs_dropped": sft.get("runs_dropped", {}),
            "turns_dropped": sft.get("turns_dropped", {}),
        },
        "dpo_pairs": dataset.get("dpo", {}).get("rows", 0) if dpo else 0,
        "training": training,
    }


def _trained(record: dict[str, Any]) -> dict[str, Any]:
    return {key: record.get(key) for key in ("rows", "steps", "precision", "train_runtime_s")}
