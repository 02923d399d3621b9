"""The self-training results as the ``self-train`` block of ``docs/guide/training.md``, rendered
from ``benchmarks/results/self_train.json`` by ``benchmarks/render_docs.py``."""

from __future__ import annotations

import json
from typing import Any

from _bootstrap import RESULTS

from provenance import stamp

from optimizers.selftrain.paired import COLUMNS, report_cells

RESULTS = RESULTS / "self_train.json"


def block() -> str:
    if not RESULTS.exists():
        return "Not measured yet: run `python benchmarks/training/first_pass.py`."
    return section(json.loads(RESULTS.read_text()))


def section(data: dict[str, Any]) -> str:
    lines = [stamp(data), ""]
    recipe, stages = data.get("recipe") or {}, data["stages"]
    if data["partial"]:
        lines += [
            "**Partial run:** not finished yet: "
            + ", ".join(f"`{name}`" for name in data["missing_stages"])
            + ". Only finished stages are reported; nothing is extrapolated, and the next run resumes "
            "from the committed stages.",
            "",
        ]
        lines += [
            f"- `{name}` in progress: {count} run(s) finished." for name, count in data["in_progress"].items()
        ]
        if data["in_progress"]:
            lines.append("")
    for name, record in stages.items():
        if name.startswith("sample-"):
            lines.append(
                f"- **{name}** (training examples of generator seed {record['generator_seed']}, "
                f"temperature {recipe.get('temperature')}): {record['runs']} runs of {record['examples']} "
                f"examples, {record['scored_above_0']} scored above 0 ({record['success_rate']:.0%}), "
                f"{record['examples_with_a_success']} example(s) with a success; "
                f"{record['run_seconds'] / 60:.0f} min of run time in all, {recipe.get('workers')} at a time."
            )
    if dataset := stages.get("dataset"):
        counts = dataset["sft"]["counts"]
        dpo = dataset["dpo"]["counts"] or {"pairs": 0}
        lines.append(
            f"- **dataset** (`rlmkit compile sft` defaults: score > 0, at least 2 turns, one sample per root "
            f"turn, templated mistakes repaired): {_counts(counts)}; DPO pairs: {_counts(dpo)}."
        )
    if train := stages.get("train"):
        losses = train["losses"]
        lines.append(
            f"- **train** (`rlmkit train --backend trl-sft`, LoRA rank {recipe.get('lora_rank')} on "
            f"every linear layer, lr {recipe.get('lr')}, {train['precision']}): {train['steps']} steps "
            f"on {train['rows']} rows, loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
            f"{train['wall_s'] / 60:.0f} min."
        )
    if adapter := stages.get("adapter"):
        lines.append(
            f"- **adapter**: `{adapter['file']}`, {adapter['bytes'] / 2**20:.1f} MiB, sha256 "
            f"`{adapter['sha256'][:16]}…`, applied by llama.cpp to the same Q4_K_M base."
        )
    lines += [
        "",
        f"Held-out examples of generator seed {recipe.get('test_seed', 1000)} (a row ending -sSEED: "
        "of that seed), greedy, at most "
        f"{recipe.get('eval_iterations')} root turns, both arms on the same examples with the same "
        "settings; gain = adapter - base, with a paired bootstrap 95% interval; turns, tokens (prompt and "
        "completion, sub-calls included) and seconds are per example, base / adapter. Seconds are wall "
        f"time of one run among up to {recipe.get('workers')} at a time (unless said below) on its "
        "arm's own 1-thread llama.cpp server, under whatever else the 2 cores ran then (an arm that "
        "finished first left the other more CPU), so they compare the arms only roughly.",
        *[line for condition in data.get("conditions", []) for line in ("", condition)],
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(report_cells(row)) + " |" for row in data["comparison"]]
    if redone := data.get("runs_redone"):
        lines += [
            "",
            "Runs whose model could not be reached measured nothing and were run again; only their "
            "new runs count: "
            + ", ".join(f"`{name}` {count}" for name, count in redone.items())
            + ". (An earlier pass's client gave up after 600 s while four runs shared one "
            "server thread under other load; the embedded model's timeout is now an hour.)",
        ]
    if not data["comparison"]:
        lines.append("| — | — | — | not measured yet | | | | | |")
    if demo := data.get("demo"):
        low, high = demo["ci95"]
        lines += [
            "",
            f"The demo's own held-out seeds (2000-2019): base {demo['base_mean']:.2f}, adapter "
            f"{demo['other_mean']:.2f}, gain {demo['gain']:+.2f} [{low:+.2f}, {high:+.2f}].",
        ]
    lines += ["", verdict(data)]
    return "\n".join(lines)


def ships(data: dict[str, Any]) -> bool:
    """The rule: the measurement is finished, every trained-suite row (each held-out draw) gains
    with its paired interval above 0, and no other suite loses more than 0.05."""
    rows = data["comparison"]
    trained = [r for r in rows if r["trained_on"]]
    wins = bool(trained) and all(r["gain"] > 0 and r["ci95"][0] > 0 for r in trained)
    safe = all(r["gain"] >= -0.05 for r in rows if not r["trained_on"])
    return not data["partial"] and wins and safe


def verdict(data: dict[str, Any]) -> str:
    """Whether the adapter ships (``ships``), in a sentence."""
    rows = data["comparison"]
    if data["partial"] or not rows:
        return (
            "**Shipped:** nothing. The measurement is not complete, so the embedded model is served "
            "without an adapter."
        )
    if ships(data):
        from rlmkit.local.adapter import held_back, shipped_record

        recipe, train = data.get("recipe") or {}, data["stages"].get("train", {})
        suites = ", ".join(f"{s['suite']} at {s['length']:,} characters" for s in recipe.get("train", []))
        trained = (
            f"It was trained on {train.get('rows')} rows compiled from the model's own successful runs "
            f"on training seeds (below 1000) of {suites}."
        )
        shipped = shipped_record() or {}
        if shipped.get("sha256") not in (None, data["stages"].get("adapter", {}).get("sha256")):
            return (
                "**Shipped, then replaced:** the adapter wins on its trained suites and costs no other "
                "suite here more than 0.05, so it shipped; the held-out matrix below, judged by a gate "
                "written before it ran, did not let it through, and an adapter it did let through "
                f"(trained by `{shipped.get('recipe')}`) ships in its place. {trained}"
            )
        if held_back():
            return (
                "**Shipped, then held back:** the adapter wins on its trained suites and costs no other "
                "suite here more than 0.05, so it shipped; the held-out matrix below, judged by a gate "
                "written before it ran, holds it back, and the embedded model serves the base by default "
                f'(`local_lm(adapter="shipped")` or `RLMKIT_LOCAL_ADAPTER=shipped` serves it). {trained}'
            )
        return (
            "**Shipped:** the adapter wins on its trained suites and costs no other suite more than "
            f"0.05, so the embedded model is served with it by default (`RLMKIT_LOCAL_ADAPTER=none` or "
            f"`local_lm(adapter=None)` turns it off). {trained}"
        )
    return "**Shipped:** nothing. The adapter did not win (see the intervals above)."


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name.removesuffix('.jsonl')} {n}" for name, n in counts.items())
