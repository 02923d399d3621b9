"""What the sandbox's pool of pre-started workers costs, and what it saves: one command.

    nice -n 0 python benchmarks/sandbox/pool_cost.py  # measure; writes benchmarks/results/pool_cost.json
    python benchmarks/render_docs.py                  # then: the table in docs/guide/sandboxes.md

For each way a worker is started (forked by the fork server, the default; exec'd, the fallback):
the private memory (USS), proportional share (PSS) and RSS of an idle pooled worker; the CPU a
start costs (the worker's own and the fork server's); the CPU an idle worker uses over a quiet
window; and how long ``sandbox.start`` takes with a 1e5-character input from a pooled worker
against a fresh one. The fork server's own memory is listed apart: it stands once per host.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time

from _bootstrap import RESULTS, ROOT

RESULTS = RESULTS / "pool_cost.json"


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
    with pool._lock:
        waiting = [w for _, w in pool._pools[launcher.pool_key(limits)]._idle]
    for worker in waiting:  # in the pool as soon as it is forked; started once it says "ready"
        assert select.select([worker.channel.rfd], [], [], 60)[0], "a pooled worker never said ready"
    fill_s = time.monotonic() - t0
    idle = [psutil.Process(w.pid) for w in waiting]
    # CPU times are sampled at the 10 ms clock tick: summed over every worker, then shared out
    start_cpu = [sum(p.cpu_times()[:2]) for p in idle]
    server_cpu = sum(server.cpu_times()[:2]) - server_cpu_before if mode == "forked" else 0.0
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
        "start_cpu_s": (sum(start_cpu) + server_cpu) / workers,
        "idle_window_s": idle_window_s,
        "idle_cpu_s": sum(idle_cpu) / workers,
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
    """The docs' table (render_docs.py puts it under its provenance stamp)."""
    rows = {r["mode"]: r for r in results["modes"]}
    workers = results["modes"][0]["workers"]
    lines = [
        f"| per pooled worker ({workers} measured; medians unless said) | forked (default) "
        "| exec'd (fallback) |",
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
    row("CPU to start one (its own + the fork server's; mean)", "start_cpu_s", ms)
    window = next(iter(rows.values()))["idle_window_s"]
    row(f"CPU while idle, over {window:.0f} s (mean)", "idle_cpu_s", ms)
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=16, help="pooled workers measured per mode")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of the idle window")
    parser.add_argument("--starts", type=int, default=15, help="sandbox starts timed per case")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, workers, window, starts = args.child
        print(json.dumps(child(mode, int(workers), float(window), int(starts))))
        return
    import provenance

    load = os.getloadavg()[0]
    modes = [measure(m, args.workers, args.idle, args.starts) for m in ("forked", "exec")]
    meta = provenance.record(__file__, sys.argv[1:], load)
    RESULTS.write_text(json.dumps({"meta": meta, "modes": modes}, indent=1) + "\n")
    print(render({"modes": modes}), file=sys.stderr)


if __name__ == "__main__":
    main()
