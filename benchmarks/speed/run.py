"""Side-by-side performance of rlmkit, dspy.RLM (3.4.1) and rlms (0.1.3): one command.

    pip install -e '.[bench]'           # once, in a checkout: psutil, which samples each process's memory
    python benchmarks/speed/run.py            # all but the embedded model (< 10 min on 2 cores)
    python benchmarks/speed/run.py --quick    # small sizes, fewer repeats (~2 min)
    python benchmarks/speed/run.py --local    # also the embedded model's tokens/s (its server must run)

The peers live in their own venv (benchmarks/.peers, made on first use: a few minutes of pip).
Each framework runs in its own driver process (peers/), against one scripted OpenAI-compatible
server on 127.0.0.1 in this process (harness.py) that plays the root in each framework's own
convention (common/scripted_run.py). Writes benchmarks/results/results.json and README_TABLE.md.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from _bootstrap import BENCH, RESULTS

import client_cost
import dspy_lm_overhead
import measure_fanout
import measure_turns
import provenance
import report
from harness import DEFAULT_FRAMEWORKS, FRAMEWORKS, Driver, RecordingServer
from peers import peer_env
from verdicts import verdicts

DEPTH2_HOW = {
    "rlmkit": "`rlm_query_batched` of 16 prompts; each child is an RLM with its own sandbox worker.",
    "dspy.RLM": (
        "no `rlm_query`: the root code builds `dspy.RLM(...)` sub-agents through its sandboxed dspy facade "
        "and runs 16 of them in a ThreadPoolExecutor."
    ),
    "rlms": "`rlm_query_batched` with `max_depth=2`, `max_concurrent_subcalls=16` (children in threads, "
    "in-process `local` REPLs).",
}


def plan(args: argparse.Namespace) -> dict[str, Any]:
    if args.quick:
        return {
            "sizes": [10**5, 10**6],
            "repeats": 1,
            "counts": [1, 4, 16, 32],
            "clients": (50, 2),
            "cold_samples": 2,
        }
    return {
        "sizes": [10**5, 10**6, 10**7, 10**8],
        "repeats": 3,
        "counts": [1, 2, 4, 8, 16, 32, 64, 128, 256],
        "clients": (100, 3),
        "cold_samples": 5,
    }


def start_driver(name: str, server: RecordingServer, results: dict[str, Any], logs: Path) -> Driver:
    """A framework's driver, after its first run (1e3 chars): the warm-up, kept as the first-run
    figures (lazy imports and first connections happen there)."""
    driver = Driver(name, logs / f"{name}.log")
    results["imports"][name] = driver.import_s
    first = measure_turns.first_run(driver, server)
    results["first_run"][name] = {k: first.get(k) for k in ("startup_median_s", "wall_median_s", "error")}
    return driver


def bench_fanout(
    name: str,
    driver: Driver,
    cfg: dict[str, Any],
    server: RecordingServer,
    results: dict[str, Any],
    logs: Path,
) -> None:
    if driver.proc.poll() is not None:  # killed after a timeout: a fresh one for the rest
        driver.close()
        driver = Driver(name, logs / f"{name}-2.log")
    try:
        results["subcalls"][name] = measure_fanout.subcall_scaling(driver, server, cfg["counts"], 0.2)
        results["depth2"][name] = measure_fanout.depth2(driver, server, 16, 0.2)
    finally:
        driver.close()


def cold_starts(names: list[str], server: RecordingServer, logs: Path, samples: int) -> dict[str, list]:
    """Import + first run (1e3 chars) in ``samples`` fresh driver processes per framework, the
    frameworks in rotation (as the turns: a slow minute falls on all alike). One sample per
    framework lets the machine's noise decide a verdict that hinges on ~0.1 s."""
    totals: dict[str, list[float]] = {name: [] for name in names}
    for i in range(samples):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            driver = Driver(name, logs / f"{name}-cold{i}.log")
            try:
                first = measure_turns.first_run(driver, server)
                if first.get("wall_median_s") is not None:
                    totals[name].append(driver.import_s + first["wall_median_s"])
            finally:
                driver.close()
    return totals


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and fewer repeats")
    parser.add_argument(
        "--local",
        action="store_true",
        help="also measure the embedded model (uses its running server, never starts one)",
    )
    parser.add_argument("--local-timeout", type=float, default=600, help="seconds allowed for --local")
    parser.add_argument("--frameworks", default=",".join(DEFAULT_FRAMEWORKS), help="comma-separated subset")
    parser.add_argument("--sizes", help="comma-separated context sizes in characters (overrides the plan)")
    parser.add_argument("--repeats", type=int, help="runs per size (overrides the plan)")
    parser.add_argument("--skip-fanout", action="store_true", help="skip sub-call scaling and depth 2")
    parser.add_argument("--skip-clients", action="store_true", help="skip the LM client cost")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results.json and the table go")
    parser.add_argument("--note", default="", help="a remark for the table header (e.g. machine load)")
    args = parser.parse_args(argv)
    cfg = plan(args)
    if args.sizes:
        cfg["sizes"] = [int(float(s)) for s in args.sizes.split(",")]
    if args.repeats:
        cfg["repeats"] = args.repeats
    names = [n.strip() for n in args.frameworks.split(",") if n.strip()]
    unknown = set(names) - set(FRAMEWORKS)
    if unknown:
        parser.error(f"unknown frameworks {sorted(unknown)}; choose from {list(FRAMEWORKS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    # driver logs stay out of the committed results (benchmarks/out/ is gitignored)
    logs = BENCH / "out" / "logs" if args.out == RESULTS else args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    load_at_start = os.getloadavg()[0]

    started = time.monotonic()
    import rlmkit

    # Every framework starts from cached bytecode, as `pip install` leaves a package (the peers'
    # venv was made by pip). A source checkout under PYTHONDONTWRITEBYTECODE=1 would otherwise
    # recompile rlmkit in every fresh driver, ~80 ms of each cold start that no install pays.
    compileall.compile_dir(Path(rlmkit.__file__).parent, quiet=1)

    versions = {"rlmkit": rlmkit.__version__, "python": platform.python_version()}
    if any(n in peer_env.PEERS_BY_FRAMEWORK for n in names):
        error = peer_env.ensure(logs / "peers-venv.log")
        if error:
            print(f"peers skipped: {error}", file=sys.stderr)
            names = [n for n in names if n not in peer_env.PEERS_BY_FRAMEWORK]
        else:
            versions.update(peer_env.versions())
    results: dict[str, Any] = {
        "frameworks": names,
        "imports": {},
        "first_run": {},
        "turns": {},
        "subcalls": {},
        "depth2": {},
        "cold": {},
        "depth2_how": {n: DEPTH2_HOW[n] for n in names},
        "plan": cfg,
    }
    with RecordingServer() as server:
        drivers: dict[str, Driver] = {}
        try:
            for name in names:
                print(f"[{time.monotonic() - started:6.1f}s] {name} starts", file=sys.stderr, flush=True)
                try:
                    drivers[name] = start_driver(name, server, results, logs)
                except TimeoutError as exc:
                    results["turns"][name] = {"start": {"error": str(exc)}}
            print(f"[{time.monotonic() - started:6.1f}s] turns, in rotation", file=sys.stderr, flush=True)
            timeouts, repeats_for = {10**7: 240, 10**8: 300}, {10**8: 2}
            results["turns"].update(
                measure_turns.interleaved(
                    drivers, server, cfg["sizes"], cfg["repeats"], timeouts, repeats_for
                )
            )
            for name in list(drivers):
                driver = drivers.pop(name)
                if args.skip_fanout:
                    driver.close()
                    continue
                print(f"[{time.monotonic() - started:6.1f}s] {name} fan-out", file=sys.stderr, flush=True)
                bench_fanout(name, driver, cfg, server, results, logs)
        finally:
            for driver in drivers.values():
                driver.close()
        # after every framework's warm runs, so each sample starts as cold as the next
        print(f"[{time.monotonic() - started:6.1f}s] cold starts, in rotation", file=sys.stderr, flush=True)
        results["cold"] = cold_starts(names, server, logs, cfg["cold_samples"])
        if not args.skip_clients:
            print(f"[{time.monotonic() - started:6.1f}s] LM clients", file=sys.stderr, flush=True)
            results["clients"] = client_cost.client_cost(server, *cfg["clients"])
            # rlmkit alone: a dspy.LM and a model string on the same kind of scripted server
            results["lm_kinds"] = {
                "turns": 8,
                "runs": cfg["repeats"] * 5,
                "ms": dspy_lm_overhead.per_turn_by_kind(8, cfg["repeats"] * 5, ("model string", "dspy.LM")),
            }
    results["meta"] = {
        **provenance.record(__file__, sys.argv[1:] if argv is None else argv, load_at_start),
        "note": args.note,
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "total_s": time.monotonic() - started,
    }
    save(results, args.out)
    if args.local:  # last, and saved before: it can take minutes
        print(f"[{time.monotonic() - started:6.1f}s] embedded model", file=sys.stderr, flush=True)
        results["embedded"] = client_cost.embedded_model(
            rounds=2, max_tokens=128, timeout_s=args.local_timeout
        )
        save(results, args.out)
    print(f"[{results['meta']['total_s']:6.1f}s] wrote {args.out / 'README_TABLE.md'}", file=sys.stderr)
    return results


def save(results: dict[str, Any], out: Path) -> None:
    results["verdicts"] = verdicts(results)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "README_TABLE.md").write_text(report.render(results) + "\n")


if __name__ == "__main__":
    main()
