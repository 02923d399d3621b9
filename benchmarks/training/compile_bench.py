"""Compile 10,000 synthetic RLM trajectories into SFT / RL / DPO datasets; print seconds per step.

    python benchmarks/training/compile_bench.py [--runs 10000] [--protocol submit]

Runs are realistic in shape (3-5 root turns, sub-calls, three protocols, templated FINAL
mistakes, 4 rollouts per task) and go through the same path as ``rlmkit compile``: JSONL
files -> read -> filter -> repair/re-render -> rows -> validated JSONL + manifest.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import _bootstrap  # noqa: F401 - the checkout and the benchmark folders on sys.path

from optimizers.compile import compile_dpo, compile_rl, compile_sft, load_runs
from rlmkit.testing.synthetic_runs import make_run

PROTOCOLS = ("submit", "final", "answer")
MISTAKES = (None, "final_var_quoted", "final_trailing_text", "both_final_forms")


def synthetic_runs(n: int):
    for i in range(n):
        protocol = PROTOCOLS[i % 3]
        yield make_run(
            protocol,
            task=f"ex{i // 4}",
            score=(1.0, 0.0, 0.5, 1.0)[i % 4],
            variant=i,
            n_turns=3 + i % 3,
            answer=i % 97,
            mistake=MISTAKES[i % 4] if protocol == "final" else None,
            cost=0.001 * (i % 7),
        )


def write_logs(runs, folder: Path, per_file: int = 500) -> None:
    """JSONL in TrajectoryLog's event format, many runs per file (as a sweep's logs would be)."""
    folder.mkdir(parents=True)
    runs = list(runs)
    for first in range(0, len(runs), per_file):
        with open(folder / f"runs-{first // per_file:04d}.jsonl", "w", encoding="utf-8") as handle:
            for run in runs[first : first + per_file]:
                lines = [{"event": "start", "meta": run.meta.model_dump(mode="json")}]
                lines += [{"event": "turn", "turn": turn.model_dump(mode="json")} for turn in run.turns]
                lines.append({"event": "end", "trajectory": run.model_dump(mode="json", exclude={"turns"})})
                handle.writelines(json.dumps(line) + "\n" for line in lines)


def timed(label: str, fn):
    """Run ``fn``; print wall seconds and this process's CPU seconds (they differ on a busy machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    print(f"{label:<48} {time.perf_counter() - wall:7.2f} s wall {time.process_time() - cpu:7.2f} s cpu")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--protocol", default="submit", help="target protocol for re-rendering")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = timed(f"make {args.runs:,} synthetic runs", lambda: list(synthetic_runs(args.runs)))
        timed("write them as JSONL logs", lambda: write_logs(runs, root / "logs"))
        total, total_cpu = time.perf_counter(), time.process_time()
        runset = timed("read JSONL logs", lambda: load_runs(root / "logs"))
        sft = timed(
            f"compile SFT per turn (-> {args.protocol})", lambda: compile_sft(runset, protocol=args.protocol)
        )
        timed("  write + validate SFT", lambda: sft.write(root / "sft"))
        conv = timed(
            "compile SFT conversations (own protocol)", lambda: compile_sft(runset, mode="conversation")
        )
        rl = timed(
            f"compile RL prompts + groups (-> {args.protocol})",
            lambda: compile_rl(runset, protocol=args.protocol),
        )
        timed("  write + validate RL", lambda: rl.write(root / "rl"))
        dpo = timed(
            f"compile DPO pairs per turn (-> {args.protocol})",
            lambda: compile_dpo(runset, protocol=args.protocol),
        )
        timed("  write + validate DPO", lambda: dpo.write(root / "dpo"))
        print(
            f"{'total: JSONL -> four datasets':<48} {time.perf_counter() - total:7.2f} s wall "
            f"{time.process_time() - total_cpu:7.2f} s cpu"
        )
        print()
        for name, result in (("sft", sft), ("sft conversations", conv), ("rl", rl), ("dpo", dpo)):
            extra = f" + {len(result.extra_rows):,} group rows" if result.extra_rows else ""
            print(f"{name:<18} {len(result.rows):>7,} rows{extra}; {result.report.tokens:,} tokens (chars/4)")
        print(f"sft repairs: {dict(sft.report.fixes)}")


if __name__ == "__main__":
    main()
