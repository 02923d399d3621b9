"""The embedded model trained on its own runs: the self-training recipe's first pass, measured.

    nice -n 5 python benchmarks/training/first_pass.py      # run or resume every stage, then report
    nice -n 5 python benchmarks/training/first_pass.py --stages eval-base-needle  # one stage only
    python benchmarks/training/first_pass.py --report-only  # the results file and docs from the archive

It runs ``rlmkit self-train`` with the recipe below (work in ``.selftrain/work``, each finished
stage packed into ``benchmarks/results/self_train/``, which is committed), then the demo's own
held-out seeds (2000-2019) with and without the adapter through ``demo_accuracy.py``, and writes
``benchmarks/results/self_train.json``: the recipe, every stage's record, the per-example rows of
both arms and their paired comparison. Until every stage has finished it says ``"partial": true``
and which stages are missing or in progress; a later run resumes from the committed archive.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from _bootstrap import BENCH, RESULTS, ROOT

import provenance

WORK = ROOT / ".selftrain" / "work"
ARCHIVE = RESULTS / "self_train"
RESULTS = RESULTS / "self_train.json"
DEMO = BENCH / "quality" / "demo_accuracy.py"
DEMO_SEEDS = "2000-2019"
# The first pass, sized for about two hours of this machine's 2 cores: one suite the embedded
# model sometimes solves (needle at 20,000 characters), 6 training examples x 4 samples.
SUITES = ["needle:20000:6"]
# Measured on held-out seeds but never trained on: whether training on needle hurt the rest.
HELD_OUT = ["multi_needle:20000:10", "aggregation:20000:10"]
# How this measurement's runs departed from the recipe's own settings (rendered with the results).
CONDITIONS = [
    "Both needle arms were measured again after typed outputs became lenient (numbers are read as "
    "strings, a lone value as a one-item list). In the first measurement (this file at commit "
    "723acea) 33 of the base arm's 35 runs (runs done again included) and 19 of the adapter's 30 "
    "had an answer rejected for its type, such as `SUBMIT(answer=[9709219])` for a `list[str]` "
    "answer, often until their turns ran out. No run of the untrained suites or the demo had an "
    "output rejected, so the change leaves those runs as they were, and they are kept.",
    "Lenient outputs also accept what strictness used to turn back: a count the base model submits "
    "before it has read any output (`SUBMIT(answer=1)` for a `list[str]` answer) is now read as "
    "`['1']` and scored, where before it was rejected and the run went on. The demo's `answer: str` "
    "was never strict about that, and the adapter's gain there is about the same.",
    "That change was decided after reading seed 1000's runs, so the trained suite was also measured "
    "on 30 fresh examples (generator seed 1100, `--confirm-seed 1100`) that nobody had read, and the "
    "rule was fixed before they ran: the adapter ships only if both draws gain with their intervals "
    "above 0.",
    "The needle arms of both draws ran one run at a time (`rlmkit eval ... --workers 1` into the "
    "stage's folder, then the stage), each arm on its own 1-thread server, the two side by side: "
    "four long prompts at a time overflow a 1-thread server's shared KV cache, so each turn reads "
    "its whole prompt again. Greedy decoding; the settings a run sees are unchanged.",
]
# Fresh held-out examples of the trained suite (generator seed 1100), for the lenient typed
# outputs: that change was made after reading seed 1000's runs, so it is also measured where
# nobody has looked. The adapter ships only if every trained-suite row's interval is above 0.
CONFIRM = ["--confirm-seed", "1100"]
FLAGS = ["--samples", "4", "--temperature", "0.8", "--test-n", "30", "--max-steps", "24", *CONFIRM]


def recipe_command(out: Path = WORK, archive: Path = ARCHIVE, stages: str | None = None) -> list[str]:
    archived = ["--out", str(out), "--archive", str(archive)]
    held_out = [flag for suite in HELD_OUT for flag in ("--held-out", suite)]
    only = ["--stages", stages] if stages else []
    return [sys.executable, "-m", "rlmkit", "self-train", *SUITES, *held_out, *FLAGS, *archived, *only]


def demo_stage(arm: str, adapter: Path) -> Any:
    """A StageStore stage: the demo's held-out seeds on one arm, one seed at a time as the demo runs."""

    def run(folder: Path) -> dict[str, Any]:
        out = folder / "demo.json"
        command = [
            sys.executable, str(DEMO), "--seeds", DEMO_SEEDS, "--threads", "1",
            "--adapter", "none" if arm == "base" else str(adapter), "--out", str(out),
        ]  # fmt: skip
        subprocess.run(command, check=True)  # resumes seed by seed from --out
        data = json.loads(out.read_text())
        return {"arm": arm, "summary": data["summary"], "rows": data["rows"]}

    return run


def collect(work: Path = WORK, archive: Path = ARCHIVE) -> dict[str, Any]:
    """Everything finished so far, read from the archive (and the work folder's unfinished stages)."""
    from optimizers.selftrain import Recipe, StageStore
    from optimizers.selftrain.eval_rows import count_lines, read_rows
    from optimizers.selftrain.paired import paired_compare
    from optimizers.selftrain.pipeline import SelfTrain

    store = StageStore(work, archive)
    kept = store.recipe()
    if kept is None:
        return {
            "recipe": None,
            "partial": True,
            "missing_stages": ["every stage"],
            "in_progress": {},
            "stages": {},
            "comparison": [],
            "demo": None,
        }
    run = SelfTrain(Recipe(**kept), store, Path("model.gguf"))
    names = [name for name, _, _ in run.stages()] + ["demo-base", "demo-adapter"]
    stages = {name: store.record(name) for name in names}
    missing = [name for name, record in stages.items() if record is None]
    in_progress = {
        name: len(read_rows(store.folder(name))) for name in missing if read_rows(store.folder(name))
    }
    for name in in_progress:  # committed with the results, so the next run resumes these runs
        store.snapshot(name)
    # rows replaced by a later run: runs whose model could not be reached, done again (not scored)
    redone = {
        name: count_lines(store.folder(name) / "results.jsonl") - len(read_rows(store.folder(name)))
        for name in names
        if name.startswith("eval-") and (store.folder(name) / "results.jsonl").exists()
    }
    demo = None
    if stages["demo-base"] and stages["demo-adapter"]:
        scores = {
            arm: {r["id"]: r["score"] for r in stages[f"demo-{arm}"]["rows"]} for arm in ("base", "adapter")
        }
        demo = paired_compare(scores["base"], scores["adapter"]).model_dump()
    return {
        "recipe": kept,
        "partial": bool(missing),
        "missing_stages": missing,
        "in_progress": in_progress,  # runs finished so far in unfinished stages: not results
        "runs_redone": {name: count for name, count in redone.items() if count},
        "conditions": CONDITIONS,
        "stages": {name: record for name, record in stages.items() if record is not None},
        "comparison": run.comparison(),
        "demo": demo,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--report-only", action="store_true", help="only rewrite the results file and docs")
    parser.add_argument("--no-demo", action="store_true", help="skip the demo's seeds")
    parser.add_argument(
        "--stages",
        help="only the recipe's stages starting with these (comma-separated), e.g. to run two "
        "unfinished stages as two processes side by side; implies --no-demo",
    )
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()[0]
    if not args.report_only:
        from optimizers.selftrain import StageStore

        subprocess.run(recipe_command(stages=args.stages), check=True)
        if not (args.no_demo or args.stages):
            store = StageStore(WORK, ARCHIVE)
            adapter = store.output("adapter") / "adapter.gguf"
            for arm in ("base", "adapter"):
                store.run(f"demo-{arm}", demo_stage(arm, adapter))
    argv = ["--report-only"] if args.report_only else []
    data = {**provenance.record(__file__, argv, load_at_start), **collect()}
    RESULTS.write_text(json.dumps(data, indent=1, default=str) + "\n")
    import render_docs

    render_docs.render_pages()


if __name__ == "__main__":
    main()
