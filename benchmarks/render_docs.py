"""Every benchmark figure in the docs, rendered from the committed results: never typed.

A rendered block sits between two marker comments in a page under docs/:

    <!-- rendered: speed -->
    (generated: do not edit)
    <!-- /rendered: speed -->

    python benchmarks/render_docs.py           # rewrite every block from benchmarks/results/
    python benchmarks/render_docs.py --check   # exit 1 naming each block that differs

Each block opens with its stamp: date, commit, machine, load and the command that measured it
(provenance.py). tests/project/test_docs_figures.py runs the check, so a table in the docs is what its
results file says.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _bootstrap import RESULTS, ROOT

import pool_cost
import provenance
import report
import serve_report
import sessions_report

from programs.eval_results import bootstrap_ci

DOCS = ROOT / "docs"
MARKER = re.compile(
    r"(?P<open><!-- rendered: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(?P<close><!-- /rendered: (?P=name) -->)",
    re.DOTALL,
)
RLMKIT_PROGRAMS = ("default", "shipped")  # local_quality.py; the peers are local_quality_peers.py's
SUITE_ORDER = ("needle", "aggregation", "multi_needle", "pairs", "multihop", "codeqa")


# ------------------------------------------------------------------ speed and memory (run.py)
def speed() -> str:
    results = json.loads((RESULTS / "results.json").read_text())
    meta = results["meta"]
    return "\n".join(
        [
            f"{provenance.stamp(meta)} Versions: {meta['versions']}.",
            "",
            report.HOW,
            "",
            report.tables(results),
        ]
    )


# ------------------------------------------------------------------ answer quality (local_quality*.py)
def quality_rows() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each row of local_quality.jsonl with the run that wrote it (local_quality.meta.json)."""
    lines = (RESULTS / "local_quality.jsonl").read_text().splitlines()
    runs = json.loads((RESULTS / "local_quality.meta.json").read_text())["runs"]
    for number, line in enumerate(lines, 1):
        run = next((r for r in runs if r["lines"][0] <= number <= r["lines"][1]), None)
        if run is None:
            raise ValueError(f"local_quality.jsonl line {number} has no run in local_quality.meta.json")
        row = json.loads(line)
        yield {**row, "length": row.get("length") or run["length"]}, run


def _ended(row: dict[str, Any]) -> str:
    error = row.get("error") or ""
    if error == "deadline" or (error.startswith("BudgetExceeded") and "seconds" in error):
        return "deadline"
    return "error" if error else "answered"


def _quality_table(groups: dict[tuple, list[tuple[dict, dict]]]) -> list[str]:
    """One line per (length, suite, program); the runs' stamps as numbered notes under it."""
    runs: list[dict[str, Any]] = []
    lines = [
        "| suite | length | program | n | mean score (95% CI) | fully right | s/example | turns/example "
        "| hit the deadline | other errors | run |",
        "| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (length, suite, program), members in groups.items():
        rows = [row for row, _ in members]
        scores = [row["score"] for row in rows]
        low, high = bootstrap_ci(scores)
        notes = []
        for _, run in members:
            if run not in runs:
                runs.append(run)
            if str(runs.index(run) + 1) not in notes:
                notes.append(str(runs.index(run) + 1))
        ended = [_ended(row) for row in rows]
        lines.append(
            f"| {suite} | {length:,} | {program} | {len(rows)} | "
            f"{statistics.fmean(scores):.2f} ({low:.2f}-{high:.2f}) | "
            f"{sum(s == 1.0 for s in scores)} | {statistics.fmean(r['seconds'] for r in rows):.0f} | "
            f"{statistics.fmean(r['turns'] for r in rows):.1f} | {ended.count('deadline')} | "
            f"{ended.count('error')} | {', '.join(notes)} |"
        )
    lines.append("")
    lines += [f"{i}. {provenance.stamp(run)}" for i, run in enumerate(runs, 1)]
    return lines


def _grouped(keep: Callable[[dict[str, Any]], bool], program_order: tuple[str, ...]) -> dict[tuple, list]:
    groups: dict[tuple, list] = {}
    for row, run in quality_rows():
        if keep(row):
            groups.setdefault((row["length"], row["suite"], row["program"]), []).append((row, run))
    order = {name: i for i, name in enumerate(program_order)}
    return dict(
        sorted(groups.items(), key=lambda kv: (-kv[0][0], SUITE_ORDER.index(kv[0][1]), order[kv[0][2]]))
    )


def quality() -> str:
    """rlmkit on the embedded model: the plain RLM's default prompt against the shipped program."""
    return "\n".join(_quality_table(_grouped(lambda r: r["program"] in RLMKIT_PROGRAMS, RLMKIT_PROGRAMS)))


def quality_peers() -> str:
    """The peers beside rlmkit on the same examples: measured at other times, so not comparable."""
    programs = ("default", "shipped", "dspy.RLM", "rlms")
    peers = {row["length"] for row, _ in quality_rows() if row["program"] not in RLMKIT_PROGRAMS}
    suites = {row["suite"] for row, _ in quality_rows() if row["program"] not in RLMKIT_PROGRAMS}
    groups = _grouped(lambda r: r["length"] in peers and r["suite"] in suites, programs)
    return "\n".join(_quality_table(groups))


# ------------------------------------------------------------------ the demo (demo_accuracy.py)


def _with_adapter(result: dict) -> str:
    """Which LoRA adapter the embedded model was served with, when one was."""
    adapter = result.get("adapter")
    return f" with the LoRA adapter `{adapter}`" if adapter else ", the base model alone"


def demo() -> str:
    path = RESULTS / "demo_accuracy.json"
    if not path.exists():
        command = "python benchmarks/quality/demo_accuracy.py --seeds 2000-2019"
        return f"No result committed yet: `{command}` measures it."
    result = json.loads(path.read_text())
    load = " / ".join(str(x) for x in result.get("load_average") or []) or None
    rows = result["rows"]
    scores = [row["score"] for row in rows]
    low, high = bootstrap_ci(scores)
    task = result["task"]
    lines = [
        provenance.stamp({**result, "load": f"{load} (1, 5, 15 min)" if load else None}),
        "",
        f"`{task['suite']}`, {task['length']:,} characters, "
        f"held-out seeds {rows[0]['seed']}-{rows[-1]['seed']}, "
        f"{result['model']}{_with_adapter(result)}: **mean score {statistics.fmean(scores):.2f}** "
        f"(95% CI {low:.2f}-{high:.2f}), "
        f"{sum(s >= 0.999 for s in scores)} of {len(rows)} fully right, median "
        f"{statistics.median(row['seconds'] for row in rows):.0f} s per run, "
        f"{sum((row['error'] or '').startswith('BudgetExceeded') for row in rows)} cut at the "
        f"{task['max_calls']}-call budget; {result.get('workers', 1)} seed(s) at a time; model server: "
        f"{result.get('server', 'the shared one')}.",
    ]
    held = "right_without_hold" in result.get("summary", {})
    if held:  # the run without the hold ends at its first held answer (temperature 0)
        lines[-1] += (
            f" {result['summary']['held']} run(s) had an answer held until the model read its output "
            f"(`hold_unread_answers`); had each ended at its first held answer, "
            f"{result['summary']['right_without_hold']} of {len(rows)} would be fully right."
        )
    lines += [
        "",
        "| seed | needle depth | gold | answer | score | seconds | turns |"
        + (" first held answer |" if held else ""),
        "| ---: | ---: | --- | --- | ---: | ---: | ---: |" + (" --- |" if held else ""),
    ]
    for row in rows:
        depth = "-" if row.get("depth") is None else f"{row['depth']:.2f}"
        answer = "-" if row["answer"] is None else str(row["answer"]).replace("|", "/")[:60]
        lines.append(
            f"| {row['seed']} | {depth} | {str(row['gold']).replace('|', '/')[:60]} | {answer} | "
            f"{row['score']:.2f} | {row['seconds']:.0f} | {row['turns']} |"
            + (f" {str(row.get('held', '-')).replace('|', '/')[:60]} |" if held else "")
        )
    return "\n".join(lines)


# ------------------------------------------------------------------ the embedded model's tuning
def tuning() -> str:
    program = json.loads((ROOT / "rlmkit" / "local" / "tuned_program.json").read_text())
    record = program["provenance"]
    lines = [
        provenance.stamp({k: record.get(k) for k in ("date", "commit", "machine", "load", "command")}),
        "",
        "| trial | blocks_per_turn | instruction | demos | training mean score | tokens/example | state |",
        "| ---: | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for trial in record["trials"]:
        chosen = " (chosen)" if trial["number"] == record["chosen_trial"] else ""
        blocks = "all" if trial["blocks_per_turn"] is None else str(trial["blocks_per_turn"])
        lines.append(
            f"| {trial['number']}{chosen} | {blocks} | {trial['instruction']} | {trial['n_demos']} | "
            f"{trial['accuracy']:.2f} | {trial['tokens']:,.0f} | {trial['state'].lower()} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------ dspy.GEPA on the embedded model
def gepa() -> str:
    """gepa_embedded.py: the plain program and GEPA's on the same held-out examples."""
    path = RESULTS / "gepa_embedded.json"
    if not path.exists():
        return "No result committed yet: `python benchmarks/quality/gepa_embedded.py` measures it."
    result = json.loads(path.read_text())
    info = result["gepa"]
    lines = [
        provenance.stamp(result),
        "",
        f"`{result['suite']}`, {result['length']:,} characters; GEPA: {len(info['train_ids'])} training "
        f"examples, a budget of {info['max_metric_calls']} metric calls, {info['seconds'] / 60:.0f} min; "
        f"reflection model: {result['reflection_lm']}; the optimised program "
        + ("saved and loaded back unchanged." if info.get("round_trip") else "did NOT load back unchanged."),
    ]
    if result["partial"]:
        lines.append("**Partial**: the run stopped before both programs had answered every held-out example.")
    lines += [
        "",
        "| program | held-out n | mean score (95% CI) | fully right | hit the deadline | s/example |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for name, summary in result["programs"].items():
        rows = [row for row in result["rows"] if row["program"] == name]
        if not rows:
            lines.append(f"| {name} | 0 | - | - | - | - |")
            continue
        low, high = summary["ci95"]
        lines.append(
            f"| {name} | {summary['n']} | {summary['mean']:.2f} ({low:.2f}-{high:.2f}) | "
            f"{sum(row['score'] >= 0.999 for row in rows)} | "
            f"{sum(_ended(row) == 'deadline' for row in rows)} | {summary['seconds_per_example']:.0f} |"
        )
    for label, key in (("Instructions before", "instructions_before"), ("after", "instructions_after")):
        lines += ["", f"{label}:", "", "> " + info[key].strip().replace("\n", "\n> ")]
    return "\n".join(lines)


# ------------------------------------------------------------------ hostile code (security_table.py)
def security() -> str:
    """security.md as security_table.py wrote it, less its title (the page has its own)."""
    body = (RESULTS / "security.md").read_text().split("\n", 1)[1].strip()
    commit = re.search(r", commit ([^,;)]+)", body.split("\n\n", 1)[0])
    label = provenance.not_current({"commit": commit.group(1) if commit else None})
    return f"{label.strip()}\n\n{body}" if label else body


def soak() -> str:
    """soak.py's leak and overhead targets, judged in its own results file."""
    results = json.loads((RESULTS / "soak.json").read_text())
    meta = dict(results["meta"])
    meta.setdefault("load", f"{meta.get('load_avg_at_start', ['?'])[0]} at the start")
    t = results["targets"]
    verdict = {True: "met", False: "**missed**"}
    hostile = sum(sum(o.values()) for k, o in results["outcomes"].items() if k != "benign")
    lines = [
        provenance.stamp(meta),
        "",
        f"{results['runs']:,} runs, {hostile} of them with a hostile cell; "
        f"{len(results['failures'])} failures, {len(results['host_harm'])} harms to the host.",
        "",
        "| what | after the first hundred runs | at most, later | target | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, what in (
        ("children", "child processes"),
        ("fds", "open descriptors"),
        ("temp_dirs", "temp folders"),
    ):
        row = t[key]
        lines.append(
            f"| {what} | {row['after_warmup']} | {row['max_later']} | no growth | {verdict[row['ok']]} |"
        )
    rss = t["rss"]
    lines.append(
        f"| host RSS | {rss['after_warmup_mib']} MiB | {rss['max_later_mib']} MiB | +10% "
        f"| {verdict[rss['ok']]} (end: {rss['growth_final']:+.1%}) |"
    )
    o = t["overhead"]
    lines.append(
        f"| per-run overhead | p50 {o['p50_ms']} ms | p99 {o['p99_ms']} ms | p99 at most 3x p50 "
        f"| {verdict[o['ok']]} ({o['p99_over_p50']}x) |"
    )
    return "\n".join(lines)


def train_student() -> str:
    """The distillation recipe: a student before and after training on the embedded model's runs."""
    import train_student_report

    return train_student_report.block()


def reading_matrix() -> str:
    """The held-out matrix of arms (``reading_matrix.py``) on docs/guide/training.md."""
    import reading_matrix_report

    return reading_matrix_report.block()


def reading_yield() -> str:
    """What the next recipe's sampling has yielded so far (``reading_recipe_yield.py``)."""
    import reading_recipe_yield

    return reading_recipe_yield.block()


def round_yield(name: str) -> Callable[[], str]:
    """What a later round of the reading recipe (``round2``, ``round3``) has yielded so far."""

    def block() -> str:
        import reading_recipe_yield

        return reading_recipe_yield.block(name)

    return block


def self_train() -> str:
    """The embedded model before and after training on its own filtered runs, paired."""
    import first_pass_report

    return first_pass_report.block()


def sessions() -> str:
    return sessions_report.render(json.loads((RESULTS / "sessions.json").read_text()))


def serve() -> str:
    return serve_report.render(json.loads((RESULTS / "serve.json").read_text()))


def pool() -> str:
    results = json.loads((RESULTS / "pool_cost.json").read_text())
    return provenance.stamp(results["meta"]) + "\n\n" + pool_cost.render(results)


def speculative_decoding() -> str:
    """The embedded model with draftless n-gram speculative decoding off and on (``speculative.py``)."""
    import speculative

    return speculative.block()


# ------------------------------------------------------------------ DSPy's own dspy.RLM tests
def dspy_rlm_tests() -> str:
    """dspy_rlm_tests.py: DSPy's test file for dspy.RLM, run with its import pointing at rlmkit."""
    result = json.loads((RESULTS / "dspy_rlm_tests.json").read_text())
    s = result["summary"]
    not_run = sum(s["public_not_run"].values())
    lines = [
        provenance.stamp(result),
        "",
        f"`{result['dspy_test_file']}`, dspy {result['dspy_version']} installed: {s['collected']} tests "
        f"collected. **{s['public']} touch `RLM` and nothing private**; of those, {s['public_run']} ran and "
        f"**{s['public_passed_rlmkit']} passed on `rlmkit.RLM`** (dspy.RLM itself passed "
        f"{s['public_passed_dspy']} of the same {s['public_run']}), and {not_run} did not run. "
        f"Counted apart: {s['private']} tests that reach into dspy.RLM's private methods or attributes, "
        f"{s['not_touching_rlm']} that never touch `RLM`.",
    ]
    if s["public_failed_rlmkit"]:
        lines += ["", "| failed on rlmkit.RLM | why |", "| --- | --- |"]
        for test in s["public_failed_rlmkit"]:
            lines.append(f"| `{test}` | {s['public_failed_known'].get(test, '**not explained**')} |")
    lines += ["", "| not run | why |", "| --- | --- |"]
    for test in result["tests"]:
        if test["public"] and test["not_run"]:
            lines.append(f"| `{test['test'].replace('|', '/')}` | {test['not_run']} |")
    return "\n".join(lines)


RENDERERS: dict[str, Callable[[], str]] = {
    "speed": speed,
    "quality": quality,
    "quality-peers": quality_peers,
    "tuning": tuning,
    "demo": demo,
    "gepa": gepa,
    "security": security,
    "soak": soak,
    "train-student": train_student,
    "self-train": self_train,
    "reading-matrix": reading_matrix,
    "reading-yield": reading_yield,
    "round2-yield": round_yield("round2"),
    "round3-yield": round_yield("round3"),
    "sessions": sessions,
    "pool": pool,
    "dspy-rlm-tests": dspy_rlm_tests,
    "serve": serve,
    "speculative": speculative_decoding,
}


# ------------------------------------------------------------------ the blocks in the pages
def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]


def rendered(text: str) -> str:
    """``text`` with every block's body replaced by what its renderer gives now."""

    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in RENDERERS:
            raise KeyError(f"no renderer for block {name!r}; known: {sorted(RENDERERS)}")
        return f"{match['open']}{RENDERERS[name]().strip()}\n{match['close']}"

    return MARKER.sub(fill, text)


def blocks(text: str) -> list[str]:
    return [m["name"] for m in MARKER.finditer(text)]


def stale(paths: list[Path] | None = None) -> list[str]:
    """``page: block`` for every block whose body differs from what its renderer gives."""
    out = []
    for page in pages() if paths is None else paths:
        text = page.read_text()
        fresh = {m["name"]: m["body"] for m in MARKER.finditer(rendered(text))}
        for match in MARKER.finditer(text):
            if match["body"] != fresh[match["name"]]:
                out.append(f"{page.name}: {match['name']}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is stale")
    args = parser.parse_args(argv)
    if args.check:
        out = stale()
        for line in out:
            print(f"stale: {line} (run python benchmarks/render_docs.py)")
        return 1 if out else 0
    render_pages()
    return 0


def render_pages() -> list[Path]:
    """Rewrite every docs block from its results file; the pages that changed (a script that
    has just written its results calls this, rather than this script's command line)."""
    changed = []
    for page in pages():
        text = page.read_text()
        new = rendered(text)
        if new != text:
            page.write_text(new)
            print(f"rendered {', '.join(blocks(text))} in {page.relative_to(ROOT)}")
            changed.append(page)
    return changed


if __name__ == "__main__":
    sys.exit(main())
