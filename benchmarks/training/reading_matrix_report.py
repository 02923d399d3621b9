"""The held-out matrix as the ``reading-matrix`` block of ``docs/guide/training.md``, rendered from
``benchmarks/results/reading_matrix.json`` by ``benchmarks/render_docs.py``."""

from __future__ import annotations

import json
from typing import Any

from _bootstrap import RESULTS

from provenance import stamp

from optimizers.selftrain.matrix import RIGHT_SCORE

RESULTS = RESULTS / "reading_matrix.json"
ARM_WORDS = {
    "base": "the embedded model with today's prompt",
    "prompt": "the same model told the reading moves, its answers held until their output is read "
    "(`--moves read --hold-unread-answers`: no weight changes)",
    "adapter": "the first shipped LoRA adapter (trained on needle alone) with today's prompt",
    "reading_sft": "the reading recipe's SFT adapter (before DPO) with today's prompt",
    "reading": "the reading recipe's final adapter (DPO on from its SFT one) with today's prompt",
    "base_again": "the base with today's prompt once more, run beside the reading adapters on their "
    "machine: the base they are compared with and judged against",
    "round2_sft": "the reading recipe's second round's SFT adapter (sampled through `reading`, "
    "trained from the base) with today's prompt",
    "round2": "the second round's final adapter (DPO on from its SFT one) with today's prompt",
    "base_round2": "the base with today's prompt run beside the second round's adapters on their "
    "machine: the base they are compared with and judged against",
    "round3_sft": "the third round's SFT adapter (code: source and codeqa sampled through `reading`, "
    "with the earlier rounds' prose, needle and source runs; trained from the base) with today's prompt",
    "round3": "the third round's final adapter (DPO on from its SFT one) with today's prompt",
    "base_round3": "the base with today's prompt run beside the third round's adapters on their "
    "machine: the base they are compared with and judged against",
}

RIGHT_RUNS = (
    f" In brackets: how many runs were right (scored {RIGHT_SCORE} or more); below that a suite gives "
    "partial credit, so a mean can move while the right answers do not."
)


def side_by_side(arms: list[str], later: list[str]) -> str:
    together = [arm for arm in arms if arm not in later]
    text = f"the {len(together)} arms {', '.join(together)} side by side"
    return text + (f"; {', '.join(later)} added later, after them" if later else "")


def block() -> str:
    if not RESULTS.exists():
        return "Not measured yet: run `python benchmarks/training/reading_matrix.py`."
    return section(json.loads(RESULTS.read_text()))


def section(data: dict[str, Any]) -> str:
    matrix, table, gate = data["matrix"], data["table"], data["gate"]
    arms = [arm["name"] for arm in matrix["arms"]]
    lines = [stamp(data), ""]
    lines.append(
        f"Held-out examples of generator seed {matrix['seed']} (real-text suites read documents no training "
        f"seed reads), greedy, the `{matrix['program']}` program, at most {matrix['iterations']} root turns, "
        f"each run under a {matrix['max_seconds']:.0f}-second wall-time budget (a run past it scores 0); "
        f"{side_by_side(arms, data.get('arms_added_later', []))}, each on its own "
        f"{matrix['threads']}-thread llama.cpp server, on the same examples. Arms: "
        + "; ".join(f"**{name}**, {ARM_WORDS.get(name, name)}" for name in arms)
        + ". Gains are paired with the base, with a bootstrap 95% interval."
        + (RIGHT_RUNS if any("right" in row for row in table) else "")
    )
    lines.append("")
    if data["partial"]:
        done = {row["suite"] for row in table}
        waiting = [
            plan for plan in matrix["suites"] if f"{plan['suite']}-{plan['length'] // 1000}k" not in done
        ]
        lines.append(
            "**Partial:** not every suite has finished. Rows marked *(partial)* compare the examples "
            "every arm has finished so far; "
            + (
                "not measured yet: "
                + ", ".join(f"{p['suite']} ({p['length']:,} characters, n={p['n']})" for p in waiting)
                if waiting
                else "every suite has started"
            )
            + ". The next run resumes from the committed snapshots."
        )
        lines.append("")
    later = data.get("arms_added_later", [])
    lines += [*_table([arm for arm in arms if arm not in later], table), ""]
    if conditions := data.get("conditions"):  # kept in the results file, summarised in one line
        lines += [
            f"*How these runs were made (per-stage commits, load history, cache replays): {len(conditions)} "
            "notes under `conditions` in `benchmarks/results/reading_matrix.json`.*",
            "",
        ]
    first_base = data.get("added_tables_first_base", {})
    beside = data.get("added_beside", {})
    for name, rows in data.get("added_tables", {}).items():
        base = beside.get(name, "base_again")
        lines += [
            f"The `{name}` arm, measured after the others, beside `{base}` (the base run again on "
            "its machine) and the prompt arm, on the examples all three have run; the gate judges it "
            "here:",
            "",
            *(_table(_arms(rows), rows) if rows else [f"No suite has both it and `{base}` yet."]),
            "",
        ]
        if rows := first_base.get(name):
            lines += [
                "Against the first base arm instead (earlier runs):",
                "",
                *_table(_arms(rows), rows),
                "",
            ]
    for base, rows in data.get("bases_compared", {}).items():
        if rows:
            lines += [
                f"The base against itself: the first `base` arm and `{base}`, the same model and prompt "
                "run at different times (greedy paths follow the CPU and the load):",
                "",
                *_table(_arms(rows), rows),
                "",
            ]
    rule = gate["rule"]
    lines.append(
        "**The gate** (`optimizers/selftrain/gate.py`, fixed before this measurement): an adapter ships "
        f"only if no suite falls more than {rule['max_drop']} below the base, every suite of a family it was "
        "trained on gains with its interval above 0, at least one real-text suite gains with its interval "
        "above 0, and its mean over the matrix is above the prompt-only arm's; real-text suites count at "
        f"n >= {rule['min_n']['real_text']}, synthetic ones at n >= {rule['min_n']['synthetic']}."
    )
    for name, families in gate["trained_families"].items():
        lines += ["", *_verdict_lines(name, families, gate, data.get("serves"))]
    return "\n".join(lines)


def _arms(rows: list[dict[str, Any]]) -> list[str]:
    """A table's arms, the base first, as its rows name them."""
    return list(rows[0]["means"])


def _table(arms: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """Each suite's means, and each arm but the first (the base) paired with it."""
    others = arms[1:]
    head = ["suite", "n", *arms, *(f"{name} - base [95% CI]" for name in others)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        label = row["suite"] + ("" if row["finished"] else " *(partial)*")
        cells = [label, str(row["n"]), *(_mean(row, name) for name in arms)]
        for name in others:
            c = row["versus_base"][name]
            cells.append(f"{c['gain']:+.2f} [{c['ci95'][0]:+.2f}, {c['ci95'][1]:+.2f}]")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _mean(row: dict[str, Any], name: str) -> str:
    """An arm's mean, with its right runs where the row counts them (older rows do not)."""
    right = row.get("right", {}).get(name)
    return f"{row['means'][name]:.2f}" + ("" if right is None else f" ({right})")


def _verdict_lines(name: str, families: list[str], gate: dict[str, Any], serves: str | None) -> list[str]:
    """The gate's verdict on adapter arm ``name``; ``serves`` is the arm whose adapter the embedded
    model serves by default, when one does."""
    verdict = gate[name]
    who = "the first shipped adapter" if name == "adapter" else f"the `{name}` adapter"
    head = f"**Verdict on {who}** (trained on {', '.join(families)}): "
    if verdict["failures"]:
        lines = [head + "it fails the gate on what is measured so far:"]
        lines += [f"- {failure}" for failure in verdict["failures"]]
        return lines + (["", _what_serves(gate, serves)] if name == "adapter" else [])
    if verdict["ships"] and serves == name:
        return [
            head + "it passes the gate, and ships: the embedded model serves it by default "
            "(`RLMKIT_LOCAL_ADAPTER=none` or `local_lm(adapter=None)` serves the base)."
        ]
    if verdict["ships"]:
        return [head + "it passes the gate."]
    return [head + "not decided: the matrix is not whole yet."]


def _what_serves(gate: dict[str, Any], serves: str | None) -> str:
    """What the embedded model serves once the first adapter is held back: a later adapter that
    passed the gate, or else the base, with the reading prompt only if that passes the same gate
    (less its rules about training), else today's."""
    if serves is not None:
        return f"It no longer ships: the `{serves}` adapter, which passes the gate, ships in its place."
    prompt = gate.get("prompt")
    if prompt is None:
        return "So the embedded model serves the base model by default, with today's prompt."
    if prompt["ships"]:
        told = "the reading prompt (it passes the same gate)"
    elif prompt["failures"]:
        told = (
            "today's prompt: the reading prompt fails the same gate (" + "; ".join(prompt["failures"]) + ")"
        )
    else:
        told = "today's prompt until the matrix is whole: the reading prompt has not failed the same gate yet"
    return (
        f"So the embedded model serves the base model by default, with {told}. The adapter stays in "
        "the package, served by name (`--adapter shipped`, `RLMKIT_LOCAL_ADAPTER=shipped`)."
    )
