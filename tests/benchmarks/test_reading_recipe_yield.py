"""The reading recipe's yield report: finished training stages are stated as they ran."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "training"))

import reading_recipe_yield  # noqa: E402


def test_a_finished_training_stage_is_reported_with_its_speed_and_its_loss_at_both_ends():
    losses = [1.0] * 10 + [0.5] * 20 + [0.1] * 10
    record = {"rows": 40, "steps": 40, "precision": "bf16", "losses": losses, "train_runtime_s": 1200.0}
    stage = reading_recipe_yield.trained("train", record)
    assert stage["s_per_step"] == 30.0 and stage["loss_window"] == 10
    assert (stage["loss_first"], stage["loss_last"]) == (1.0, 0.1)
    short = reading_recipe_yield.trained("train-dpo", {**record, "losses": [0.7, 0.6, 0.3], "steps": 3})
    assert short["loss_window"] == 1 and (short["loss_first"], short["loss_last"]) == (0.7, 0.3)
    lines = reading_recipe_yield.training_lines({"training": [stage, short], "lora_rank": 8, "lr": 1e-4})
    assert "a LoRA of rank 8 at learning rate 0.0001" in lines[1]
    assert "`train` (SFT): 40 steps on 40 training rows, one a step" in lines[3] and "20 minutes" in lines[3]
    assert "mean loss 1.000 over the first 10 steps and 0.100 over the last 10" in lines[3]
    assert lines[4].startswith("- `train-dpo` (DPO on from the SFT adapter): 3 steps")
    # a stage resumed from a checkpoint timed only the steps after it
    resumed = reading_recipe_yield.trained("train", {**record, "resumed_at_step": 10})
    assert resumed["s_per_step"] == 40.0
    line = reading_recipe_yield.training_lines({"training": [resumed]})[3]
    assert "20 minutes of training for steps 11-40 after a stop at step 10 (40.0 s a step)" in line
    assert reading_recipe_yield.training_lines({"training": []}) == []


def test_a_dpo_stage_is_reported_with_how_far_and_how_often_the_chosen_reply_leads():
    logged = [
        {"loss": 0.69, "rewards/margins": 0.0, "rewards/accuracies": 0.0, "step": 1},
        {"loss": 0.60, "rewards/margins": 0.2, "rewards/accuracies": 1.0, "step": 2},
        {"loss": 0.40, "rewards/margins": 0.9, "rewards/accuracies": 1.0, "step": 3},
        {"loss": 0.30, "rewards/margins": 1.1, "rewards/accuracies": 1.0, "step": 4},
        {"train_runtime": 40.0, "step": 4},  # the summary TRL logs last has no margin
    ]
    record = {
        "rows": 4,
        "steps": 4,
        "precision": "bf16",
        "losses": [0.69, 0.6, 0.4, 0.3],
        "train_runtime_s": 40.0,
    }
    stage = reading_recipe_yield.trained("train-dpo", record, logged)
    assert (stage["margin_first"], stage["margin_last"]) == (0.1, 1.0)
    assert (stage["leads_first"], stage["leads_last"]) == (0.5, 1.0)
    line = reading_recipe_yield.training_lines({"training": [stage]})[3]
    assert "4 training pairs, one a step" in line
    assert "reward margin (chosen minus rejected) +0.100, the chosen reply ahead in 50% of pairs" in line
    assert "+1.000, ahead in 100%, over the last 2" in line
    resumed = reading_recipe_yield.trained("train-dpo", {**record, "init_adapter": "adapter-sft"}, logged)
    assert "read back from its GGUF" in reading_recipe_yield.training_lines({"training": [resumed]})[3]
    assert "margin_first" not in reading_recipe_yield.trained("train", record, [])


def test_a_later_round_says_what_it_sampled_through_and_which_earlier_runs_it_compiles():
    counts = {"rows": 3, "examples": 2, "per_family": {}, "runs_read": 9}
    data = {
        "date": "2026-12-05", "commit": "abc1234", "machine": "x86_64", "command": "python y.py",
        "recipe": "r2.toml", "sample_seed": 100,
        "sample_adapter": "results/round1", "runs_from": ["results/round1"],
        "samples": 4, "temperature": 0.8, "hinted": [], "min_score": 0.9, "max_seconds": 300,
        "suites": [{"suite": "source-50k", "planned_runs": 32, "started": False, "closed_early": False}],
        "total": {"sft": counts, "dpo": counts},
    }  # fmt: skip
    text = reading_recipe_yield.section(data)
    assert "generator seed 100" in text and "sampled through the adapter of `results/round1`" in text
    assert "In all, with the runs of `results/round1` compiled beside these: **3 SFT rows" in text
    assert "| source-50k | 0 of 32 | | | | | not sampled yet |" in text
    first = reading_recipe_yield.section({**data, "sample_adapter": None, "runs_from": [], "sample_seed": 0})
    assert "generator seed 0;" in first and "through the adapter" not in first and "In all: **3" in first


def test_a_rounds_continued_runs_have_rows_of_their_own_and_their_pairs_are_counted():
    counts = {"rows": 3, "examples": 2, "per_family": {}, "runs_read": 9}
    sampled = {"started": True, "finished": True, "closed_early": False, "examples": 2, "runs": 8,
               "scored_above_0": 1, "sft": counts}  # fmt: skip
    data = {
        "date": "2026-12-05", "commit": "abc1234", "machine": "x86_64", "command": "python y.py",
        "recipe": "r3.toml", "sample_seed": 200, "samples": 4, "branch_samples": 2, "temperature": 0.8,
        "hinted": [], "min_score": 0.9, "max_seconds": 300,
        "suites": [
            {"suite": "source-50k", "planned_runs": 8, **sampled},
            {"suite": "source-50k continued", "planned_runs": None, **sampled, "runs": 14},
            {"suite": "codeqa-10k continued", "planned_runs": None, "started": False, "closed_early": False},
        ],
        "total": {"sft": counts, "dpo": {**counts, "continued_pairs": 2}},
    }  # fmt: skip
    text = reading_recipe_yield.section(data)
    assert "| source-50k | 8 of 8 | 2 |" in text and "| source-50k continued | 14 | 2 |" in text
    assert "| codeqa-10k continued | 0 | | | | | not sampled yet |" in text
    assert "continued from their last turn, 2 times each" in text
    assert "3 DPO pair(s) from 2 example(s) (2 of them a continued run against its continuations" in text
    plain = reading_recipe_yield.section({**data, "branch_samples": 0, "suites": data["suites"][:1],
                                          "total": {"sft": counts, "dpo": counts}})  # fmt: skip
    assert "continued" not in plain
