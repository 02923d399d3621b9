"""The distillation results as a docs section, rendered from ``benchmarks/results/train_student.json``.

    python benchmarks/train_student.py --cache CACHE --report-only   # rewrites the JSON and this section

The section lives between two markers in ``docs/guide/training.md``; everything else in that
page is left as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "train_student.json"
DOCS = ROOT / "docs" / "guide" / "training.md"
START, END = "<!-- train_student:start -->", "<!-- train_student:end -->"
ARMS = (
    ("before", "student, untrained"),
    ("after", "student, trained"),
    ("reference", "embedded 1.5B (teacher)"),
)


def section(data: dict[str, Any]) -> str:
    stages = data["stages"]
    recipe = data["recipe"]
    lines = [
        START,
        "## Distilling the embedded model into a small student",
        "",
        f"Rendered from `benchmarks/results/train_student.json` (command `{data['command']}`, "
        f"{data['date']}, commit {data['commit']}, {data['machine']}, load average "
        f"{data.get('load_average', ['?'])[0]} when written).",
        "",
    ]
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
            lines += ["", f"Chosen job #{test['job']} on the test seeds: gain {test['reward']:+.3f}."]
    if speed := stages.get("speed"):
        lines += [
            "",
            f"Serving the student ({speed['max_tokens']} tokens, greedy): llama.cpp "
            f"{speed['llama_cpp']['tok_s']} tokens/s, in-process transformers "
            f"{speed['transformers']['tok_s']} tokens/s.",
        ]
    lines.append(END)
    return "\n".join(lines) + "\n"


def render_docs(data: dict[str, Any], docs: Path = DOCS) -> Path:
    text = docs.read_text() if docs.exists() else ""
    new = section(data)
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + new + rest.split(END, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + new
    docs.write_text(text)
    return docs
