"""The distillation results as the ``train-student`` block of ``docs/guide/training.md``,
rendered from ``benchmarks/results/train_student.json`` by ``benchmarks/render_docs.py``.

    python benchmarks/training/train_student.py --cache CACHE --report-only  # the JSON from the cache
    python benchmarks/render_docs.py                     # then every docs block from its JSON
"""

from __future__ import annotations

import json
from typing import Any

from _bootstrap import RESULTS

RESULTS = RESULTS / "train_student.json"
ARMS = (
    ("before", "student, untrained"),
    ("after", "student, trained"),
    ("reference", "embedded 1.5B (teacher)"),
)


def block() -> str:
    """The docs block: the results file rendered, or how to produce it."""
    if not RESULTS.exists():
        return "Not measured yet: run `python benchmarks/training/train_student.py --cache CACHE`."
    return section(json.loads(RESULTS.read_text()))


def section(data: dict[str, Any]) -> str:
    stages = data["stages"]
    recipe = data["recipe"]
    from provenance import stamp

    lines = [stamp(data), ""]
    if data["partial"]:
        lines += [
            f"**Partial run:** these stages have not finished yet: {', '.join(data['missing_stages'])}. "
            "Rows below come only from finished stages; nothing is extrapolated.",
            "",
        ]
        for name, progress in data.get("in_progress", {}).items():
            lines += [
                f"- `{name}` in progress: {progress['finished_runs']} of {progress['of']} runs finished."
            ]
        if data.get("in_progress"):
            lines.append("")
    if student := stages.get("student"):
        lines += [
            f"Student: `{student['name']}` ({student['architecture']}, {student['size']:,} bytes, "
            f"sha256 `{student['sha256'][:16]}…`), assembled from {len(student['packages'])} package(s).",
            "",
        ]
    if teacher := stages.get("teacher"):
        t = teacher["summary"]
        lines += [
            f"Teacher runs: `{teacher['command']}` — {t['n']} runs, mean score {t['mean']:.2f} "
            f"[{t['ci95'][0]:.2f}, {t['ci95'][1]:.2f}], {teacher['wall_s'] / 60:.0f} min.",
            "",
        ]
    if dataset := stages.get("dataset"):
        rows = ", ".join(f"{k} {v}" for k, v in dataset["rows"].items())
        lines += [f"Dataset: `{dataset['command']}` — rows: {rows}.", ""]
    if train := stages.get("train"):
        lines += [
            f"Training: `{train['command']}` — {train['steps']} steps, loss {train['first_loss']:.3f} → "
            f"{train['last_loss']:.3f}, {train['wall_s'] / 60:.0f} min.",
            "",
        ]
    lines += [
        f"Held-out evaluation: suite `{recipe['suite']}`, {recipe['length']:,} characters, seeds from "
        f"{recipe['test_seed']}, greedy, at most {recipe['eval_iterations']} root turns of "
        f"{recipe['eval_max_tokens']} tokens, the embedded model's shipped program as the prompt.",
        "",
        "| model | n | mean score (95% CI) | s/example |",
        "|---|---|---|---|",
    ]
    for key, label in ARMS:
        arm = stages.get(key)
        if arm is None:
            lines.append(f"| {label} | — | not run yet | — |")
            continue
        low, high = arm["ci95"]
        score = f"{arm['mean']:.3f} [{low:.3f}, {high:.3f}]"
        lines.append(f"| {label} | {arm['n']} | {score} | {arm['wall_s_per_example']:.0f} |")
    if loop := stages.get("loop"):
        lines += [
            "",
            f"Outer loop: `{loop['command']}`",
            "",
            "| job | state | proposal | reward (validation) |",
        ]
        lines.append("|---|---|---|---|")
        for job in loop["jobs"]:
            proposal = job.get("proposal") or {}
            shown = ", ".join(
                f"{k}={proposal[k]}" for k in ("lr", "steps", "lora_rank", "min_score") if k in proposal
            )
            reward = "—" if job.get("reward") is None else f"{job['reward']:+.3f}"
            lines.append(f"| {job['index']} | {job['state']} | {shown} | {reward} |")
        if test := loop.get("test"):
            post = ", ".join(f"{family} {score:.3f}" for family, score in test["post"].items())
            lines += ["", f"Chosen job #{test['job']} on the test seeds: {post}, gain {test['reward']:+.3f}."]
        if worst := loop.get("worst_on_test"):
            low, high = worst["ci95"]
            lines.append(
                f"Worst job #{loop['worst_job']} on the same test seeds: {worst['mean']:.3f} "
                f"[{low:.3f}, {high:.3f}] (n={worst['n']})."
            )
    if speed := stages.get("speed"):

        def served(row: dict[str, Any]) -> str:
            load = f", load average {row['load']:.1f}" if "load" in row else ""
            return f"{row['tok_s']} tokens/s after {row['load_s']:.0f} s of loading{load}"

        lines += [
            "",
            f"Serving the student ({speed['max_tokens']} tokens, greedy): llama.cpp on the GGUF "
            f"{served(speed['llama_cpp'])}; in-process transformers on it dequantised "
            f"{served(speed['transformers'])}.",
        ]
    return "\n".join(lines) + "\n"
