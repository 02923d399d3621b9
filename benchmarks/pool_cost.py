"""What the sandbox's pool of pre-started workers costs, and what it saves: one command.

    nice -n 0 python benchmarks/pool_cost.py            # measure, write results/pool_cost.json, render
    python benchmarks/pool_cost.py --render             # only re-render docs/guide/sandboxes.md

For each way a worker is started (forked by the fork server, the default; exec'd, the fallback):
the private memory (USS), proportional share (PSS) and RSS of an idle pooled worker; the CPU a
start costs (the worker's own and the fork server's); the CPU an idle worker uses over a quiet
window; and how long ``sandbox.start`` takes with a 1e5-character input from a pooled worker
against a fresh one. The fork server's own memory is listed apart: it stands once per host.
The figures go into docs/guide/sandboxes.md between its ``pool-cost`` markers.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "pool_cost.json"
DOC = ROOT / "docs" / "guide" / "sandboxes.md"
START, END = "<!-- pool-cost:start -->", "<!-- pool-cost:end -->"


def measure(mode: str, workers: int, idle_window_s: float, starts: int) -> dict:
    """In a fresh process (the fork server and pool start from nothing): one mode's figures."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(workers), str(idle_window_s), str(starts)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "RLMKIT_SANDBOX_FORK_SERVER": "1" if mode == "forked" else "0",
        },
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(mode: str, workers: int, idle_window_s: float, starts: int) -> dict:
    import psutil

    from rlmkit.sandbox import SandboxLimits, pool, process
    from rlmkit.sandbox.process import ProcessLauncher, ProcessSandbox

    limits = SandboxLimits()
    launcher = ProcessLauncher()
    pool.configure(size=workers)
    server_cpu_before = 0.0
    if mode == "forked":  # the fork server up and counted before the pool fills
        pool.configure(size=0)
        with ProcessSandbox(limits) as sb:
            sb.start({}, {})
        server = psutil.Process(process._fork_server.proc.pid)
        server_cpu_before = sum(server.cpu_times()[:2])
        pool.configure(size=workers)
    t0 = time.monotonic()
    launcher.prewarm(limits)
    assert pool.wait_idle(workers, 60, launcher.pool_key(limits))
    fill_s = time.monotonic() - t0
    idle = [psutil.Process(pid) for pid in pool.idle_pids()]
    start_cpu = [sum(p.cpu_times()[:2]) for p in idle]
    server_cpu = (sum(server.cpu_times()[:2]) - server_cpu_before) / workers if mode == "forked" else 0.0
    time.sleep(idle_window_s)  # the quiet window whose CPU is the idle cost
    idle_cpu = [sum(p.cpu_times()[:2]) - c for p, c in zip(idle, start_cpu, strict=True)]
    memory = [p.memory_full_info() for p in idle]
    result = {
        "mode": mode,
        "workers": workers,
        "fill_s": fill_s,
        "uss_bytes": statistics.median(m.uss for m in memory),
        "pss_bytes": statistics.median(m.pss for m in memory),
        "rss_bytes": statistics.median(m.rss for m in memory),
        "start_cpu_s": statistics.median(start_cpu) + server_cpu,
        "idle_window_s": idle_window_s,
        "idle_cpu_s": max(idle_cpu),
    }
    if mode == "forked":
        info = server.memory_full_info()
        result["fork_server"] = {"uss_bytes": info.uss, "pss_bytes": info.pss, "rss_bytes": info.rss}
    context = "x" * 100_000
    for label, size in (("pooled", workers), ("fresh", 0)):
        pool.configure(size=size)
        times = []
        for _ in range(starts):
            if size:
                assert pool.wait_idle(1, 30, launcher.pool_key(limits))
            with ProcessSandbox(limits) as sb:
                t = time.perf_counter()
                sb.start({"context": context}, {})
                times.append(time.perf_counter() - t)
        result[f"start_{label}_median_s"] = statistics.median(times)
    return result


def render(results: dict) -> str:
    meta = results["meta"]
    rows = {r["mode"]: r for r in results["modes"]}
    lines = [
        f"Measured {meta['date']} on {meta['machine']} (load average {meta['load']}), commit "
        f"{meta['commit']}, with `{meta['command']}`; from `benchmarks/results/pool_cost.json`.",
        "",
        "| per pooled worker | forked (default) | exec'd (fallback) |",
        "|---|---:|---:|",
    ]

    def row(label: str, key: str, fmt) -> None:
        cells = [fmt(rows[m][key]) if m in rows else "-" for m in ("forked", "exec")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    def mb(b: float) -> str:
        return f"{b / 2**20:.1f} MiB"

    def ms(s: float) -> str:
        return f"{s * 1000:.1f} ms"

    row("private memory while idle (USS)", "uss_bytes", mb)
    row("proportional memory (PSS)", "pss_bytes", mb)
    row("resident memory (RSS, shared pages included)", "rss_bytes", mb)
    row("CPU to start one (its own + the fork server's)", "start_cpu_s", ms)
    window = next(iter(rows.values()))["idle_window_s"]
    row(f"CPU while idle, over {window:.0f} s", "idle_cpu_s", ms)
    row("`sandbox.start` (1e5-char input), from the pool", "start_pooled_median_s", ms)
    row("`sandbox.start` (1e5-char input), pool off", "start_fresh_median_s", ms)
    server = rows.get("forked", {}).get("fork_server")
    if server:
        lines += [
            "",
            f"The fork server itself, once per host process: {mb(server['uss_bytes'])} private "
            f"(USS), {mb(server['pss_bytes'])} PSS, {mb(server['rss_bytes'])} RSS.",
        ]
    return "\n".join(lines)


def write_doc(table: str) -> None:
    text = DOC.read_text()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    if not rest:
        raise SystemExit(f"{DOC} has no {START} marker")
    DOC.write_text(f"{head}{START}\n{table}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--render", action="store_true", help="only render the committed results")
    parser.add_argument("--workers", type=int, default=4, help="pooled workers measured per mode")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of the idle window")
    parser.add_argument("--starts", type=int, default=15, help="sandbox starts timed per case")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, workers, window, starts = args.child
        print(json.dumps(child(mode, int(workers), float(window), int(starts))))
        return
    if not args.render:
        load = os.getloadavg()[0]
        modes = [measure(m, args.workers, args.idle, args.starts) for m in ("forked", "exec")]
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False
        ).stdout.strip()
        meta = {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}",
            "load": f"{load:.1f} -> {os.getloadavg()[0]:.1f}",
            "commit": commit,
            "command": "python benchmarks/pool_cost.py " + " ".join(sys.argv[1:]),
        }
        RESULTS.write_text(json.dumps({"meta": meta, "modes": modes}, indent=1) + "\n")
    write_doc(render(json.loads(RESULTS.read_text())))
    print(f"wrote {DOC}", file=sys.stderr)


if __name__ == "__main__":
    main()
