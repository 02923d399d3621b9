"""Soak: thousands of RLM runs back to back in one process, hostile cells mixed in; writes
benchmarks/results/soak.json.

    python benchmarks/sandbox/soak.py [--runs 2000] [--seed 0] [--every 100] [--out PATH]

A service that answers RLM calls all day must not leak. Each run is the real ``rlmkit.RLM``
with the default (process) sandbox against the scripted model server on 127.0.0.1: on its
first turn the model sends one cell, on its second it SUBMITs ``len(context)``. Most cells are
benign (``print(len(context))``); a share (``--hostile``) is drawn from the hostile cases
(fork bomb, memory hogs, infinite loops, 50 MB of output, crashes, forged frames on the
worker's pipe), each checked for containment on the run's trajectory. Now and then
(``--concurrent``) a batch of runs goes out at once from a thread pool, as a service's
handlers would send them.

After every ``--every`` runs, and at the end, with the worker reaper drained: the host's child
processes, open file descriptors, temporary folders (the run's temp dir is private to this
script), threads, RSS, and the per-run overhead (wall time minus the model server's time, over
the window's sequential benign runs) p50 and p99. Targets, judged after the first window
(warm-up): no growth in processes, descriptors or folders; RSS within +10% of the first
window's; p99 overhead at most 3x p50.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _bootstrap import RESULTS
from _bootstrap import ROOT as REPO

import psutil

RESULTS = RESULTS / "soak.json"
CELL_TIMEOUT = 1.0
HOSTILE = [  # hostile cases run as they are, plus one hog that really fills its memory limit
    "fork_bomb",
    "allocate_64_gib",
    "infinite_loop",
    "infinite_loop_ignoring_interrupts",
    "print_50_mb",
    "os_exit",
    "ctypes_poke_memory",
    "forge_huge_frame",
    "forge_pickle_that_runs_code_on_the_host",
]
MEMORY_HOG = "blocks = []\nwhile True:\n    blocks.append(b'x' * (1 << 24))"
BENIGN = "print(len(context))"
SUBMIT = "```repl\nSUBMIT(answer=len(context))\n```"
DSPY_SERVICE = {"disable_history": True, "max_trace_size": 0}
TARGET_RSS_GROWTH = 0.10
TARGET_P99_OVER_P50 = 3.0


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Soak:
    """The server, the RLM and the bookkeeping of one soak."""

    def __init__(self, seed: int, hostile_share: float, concurrent_share: float, batch: int):
        import rlmkit
        from rlmkit.prompting import Display
        from rlmkit.sandbox import SandboxLimits
        from rlmkit.testing import ScriptedServer, is_root_request
        from rlmkit.testing.hostile_cases import HOSTILE_CASES, HostileEnv

        self.rng = random.Random(seed)
        self.hostile_share, self.concurrent_share, self.batch = hostile_share, concurrent_share, batch
        self.env = HostileEnv().__enter__()
        cases = {c.name: c for c in HOSTILE_CASES}
        self.cells = {name: (cases[name].code(self.env), cases[name].check) for name in HOSTILE}
        self.cells["memory_hog"] = (MEMORY_HOG, _memory_error)
        self.served_s = 0.0  # the model server's time, summed (only read around sequential runs)
        self._served_lock = threading.Lock()
        soak = self

        class Server(ScriptedServer):
            def served(self, body: dict, arrived: float, done: float) -> None:
                with soak._served_lock:
                    soak.served_s += done - arrived

        def root(body: dict) -> str:
            if not is_root_request(body):
                return "sub-answer"
            if any(m["role"] == "assistant" for m in body["messages"]):
                return SUBMIT
            name = body["messages"][1]["content"].split("cell=", 1)[1].split(";", 1)[0]
            return f"```repl\n{self._code(name)}\n```"

        self.server = Server(root).start()
        lm = rlmkit.LM("openai/scripted", api_base=self.server.url, api_key="soak", cache=False)
        limits = SandboxLimits(memory_bytes=512 * 1024**2, max_disk_bytes=32 * 1024**2, interrupt_grace=0.5)
        self.rlm = rlmkit.RLM(
            "context -> answer: int",
            lm=lm,
            cell_timeout=CELL_TIMEOUT,
            max_iterations=3,
            limits=limits,
            display=Display(trajectory_chars=1_100_000),  # the sandbox's own cut, whole, for the checks
        )
        self.pool = ThreadPoolExecutor(max_workers=batch, thread_name_prefix="soak")
        self.outcomes: dict[str, dict[str, int]] = {}
        self.failures: list[str] = []

    def _code(self, name: str) -> str:
        return BENIGN if name == "benign" else self.cells[name][0]

    def close(self) -> None:
        self.pool.shutdown()
        self.server.stop()
        self.env.__exit__(None, None, None)

    # ------------------------------------------------------------------ one run
    def draw(self) -> str:
        return self.rng.choice([*self.cells]) if self.rng.random() < self.hostile_share else "benign"

    def run(self, name: str, number: int) -> float:
        """One run with ``name``'s cell; returns its wall time. Its outcome is counted."""
        from rlmkit.errors import RLMKitError
        from rlmkit.sandbox.base import CellResult

        context = f"cell={name}; run {number}; " + "x" * self.rng.randrange(100, 5000)
        t0 = time.perf_counter()
        try:
            pred = self.rlm(context=context)
            trajectory, ended = pred.trajectory, None
            if pred.answer != len(context):
                self.failures.append(f"run {number} ({name}): answer {pred.answer} != {len(context)}")
        except RLMKitError as exc:  # a typed end is allowed: counted, its trajectory must be there
            trajectory, ended = exc.trajectory, type(exc).__name__
            if trajectory is None:
                self.failures.append(f"run {number} ({name}): {ended} without a trajectory")
        except Exception as exc:  # noqa: BLE001 - anything untyped is a failure of the soak
            trajectory, ended = None, "untyped"
            self.failures.append(f"run {number} ({name}): {type(exc).__name__}: {exc}"[:300])
        wall = time.perf_counter() - t0
        self.server.requests.clear()  # the scripted server keeps every request: the harness's memory
        outcome = ended or "answered"
        if name != "benign" and trajectory is not None and trajectory.turns:
            block = trajectory.turns[0].blocks[0]
            cell = CellResult(stdout=block.stdout, error=block.error, timed_out=block.timed_out,
                              restarted=block.restarted)  # fmt: skip
            try:
                self.cells[name][1](cell, self.env)
            except AssertionError as exc:
                self.failures.append(f"run {number} ({name}) not contained: {exc}"[:300])
        counts = self.outcomes.setdefault(name, {})
        counts[outcome] = counts.get(outcome, 0) + 1
        return wall

    def sequential(self, number: int) -> tuple[str, float]:
        """One run alone; (its cell, its overhead: wall time less the model server's time)."""
        name = self.draw()
        before = self.served_s
        wall = self.run(name, number)
        return name, wall - (self.served_s - before)

    def concurrent(self, first: int) -> None:
        list(self.pool.map(lambda i: self.run(self.draw(), first + i), range(self.batch)))


def _memory_error(result, env) -> str:
    """Stopped by the worker's address-space limit, or (on a machine too loaded to fault in
    512 MiB within the cell timeout) by the timeout: either way the worker goes on."""
    if result.timed_out:
        return "timed out before the limit"
    assert not result.restarted and (result.error or "").strip().endswith("MemoryError"), result.error
    return "MemoryError at the address-space limit"


SETTLE_S = 480  # under the test's own limit (600 s), far over a drain on an idle machine (< 1 s)


def settle() -> None:
    """Wait for the state a sample must see: every worker stopped so far reaped and its folder
    removed (the process sandbox hands that to one FIFO thread, so a no-op queued behind them
    marks the point), and the pool of pre-started workers full again."""
    from rlmkit.sandbox import pool, process

    # The bound only names a hang: on a loaded machine the reaper's queue can take minutes to drain
    # (each stopped worker is waited for and its folder removed), and a sample taken before the
    # state is reached would count that backlog as a leak.
    process._thread("reap").submit(lambda: None).result(timeout=SETTLE_S)
    if not pool.wait_refilled(SETTLE_S):  # no worker start half done, in this run's pool or another's
        raise TimeoutError(f"the sandbox pool was still starting workers after {SETTLE_S} s")
    if not pool.wait_idle(pool.settings().size, SETTLE_S):
        raise TimeoutError(f"the sandbox pool was not full again after {SETTLE_S} s")


def snapshot(scratch: str) -> dict:
    settle()
    me = psutil.Process()
    children = me.children(recursive=True)
    return {
        "children": len(children),
        "zombies": sum(1 for c in children if c.status() == psutil.STATUS_ZOMBIE),
        "fds": me.num_fds(),
        "temp_dirs": len(os.listdir(scratch)),
        "threads": me.num_threads(),
        "rss_mib": round(me.memory_info().rss / 2**20, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),  # the machine's, others' work included
    }


def soak(runs: int, seed: int = 0, every: int = 100, hostile_share: float = 0.12,
         concurrent_share: float = 0.03, batch: int = 4, progress: bool = False) -> dict:  # fmt: skip
    """Run the soak; returns the checkpoints, outcomes and the targets' verdicts."""
    import dspy

    scratch = tempfile.mkdtemp(prefix="rlmkit-soak-")
    saved_tempdir = tempfile.tempdir
    tempfile.tempdir = scratch  # the workers' folders land here, and nothing else's
    # DSPy keeps the last 10,000 model calls (inspect_history) and predictions (the optimizers'
    # trace), as a service would switch off: they grow until full, by design, and would hide a leak
    dspy_saved = {key: dspy.settings.get(key) for key in DSPY_SERVICE}
    dspy.configure(**DSPY_SERVICE)
    bench = Soak(seed, hostile_share, concurrent_share, batch)
    checkpoints: list[dict] = []
    window: list[float] = []
    after_warmup: list[float] = []
    done, t_start = 0, time.monotonic()
    try:
        while done < runs:
            # the first batch goes out at once, so the warm-up window holds every path (the
            # thread pool, a connection per concurrent request) before the first checkpoint
            if (done == 0 or bench.rng.random() < concurrent_share) and runs - done >= batch:
                bench.concurrent(done)
                done += batch
            else:
                name, overhead = bench.sequential(done)
                done += 1
                if name == "benign":
                    window.append(overhead)
                    if checkpoints:
                        after_warmup.append(overhead)
            if done // every > len(checkpoints) or done >= runs:
                point = {"runs": done, "elapsed_s": round(time.monotonic() - t_start, 1), **snapshot(scratch)}
                point["overhead_ms_p50"] = _ms(_percentile(window, 0.5))
                point["overhead_ms_p99"] = _ms(_percentile(window, 0.99))
                checkpoints.append(point)
                window = []
                if progress:
                    print(json.dumps(point), flush=True)
    finally:
        harm = bench.env.harm()
        bench.close()
        tempfile.tempdir = saved_tempdir
        dspy.configure(**dspy_saved)
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "runs": done,
        "seed": seed,
        "every": every,
        "hostile_share": hostile_share,
        "concurrent_share": concurrent_share,
        "batch": batch,
        "cell_timeout_s": CELL_TIMEOUT,
        "dspy_settings": DSPY_SERVICE,
        "checkpoints": checkpoints,
        "outcomes": bench.outcomes,
        "failures": bench.failures,
        "host_harm": harm,
        "targets": judge(checkpoints, after_warmup),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def judge(checkpoints: list[dict], after_warmup: list[float]) -> dict:
    """The targets, against the first checkpoint (the state after warm-up)."""
    base, later = checkpoints[0], checkpoints[1:] or checkpoints[:1]
    verdict: dict = {}
    for key in ("children", "fds", "temp_dirs"):
        growth = max(p[key] for p in later) - base[key]
        verdict[key] = {"after_warmup": base[key], "max_later": max(p[key] for p in later), "ok": growth <= 0}
    rss_final, rss_max = checkpoints[-1]["rss_mib"], max(p["rss_mib"] for p in later)
    verdict["rss"] = {
        "after_warmup_mib": base["rss_mib"],
        "final_mib": rss_final,
        "max_later_mib": rss_max,
        "growth_final": round(rss_final / base["rss_mib"] - 1, 4),
        "ok": rss_max <= base["rss_mib"] * (1 + TARGET_RSS_GROWTH),
    }
    p50, p99 = _percentile(after_warmup, 0.5), _percentile(after_warmup, 0.99)
    verdict["overhead"] = {
        "runs": len(after_warmup),
        "p50_ms": _ms(p50),
        "p99_ms": _ms(p99),
        "p99_over_p50": None if not p50 else round(p99 / p50, 2),
        "ok": bool(p50) and p99 <= TARGET_P99_OVER_P50 * p50,
    }
    return verdict


def stamp(command: str) -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    gib = psutil.virtual_memory().total / 2**30
    return {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit.stdout.strip() or "unknown",
        "machine": f"{os.uname().machine}, {os.cpu_count()} cores, {gib:.0f} GiB, Linux {os.uname().release}",
        "as": "root" if os.geteuid() == 0 else "a user",
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    meta = stamp(" ".join(["python benchmarks/sandbox/soak.py", *(sys.argv[1:] if argv is None else argv)]))
    t0 = time.monotonic()
    result = soak(args.runs, seed=args.seed, every=args.every, progress=True)
    result = {"meta": {**meta, "total_s": round(time.monotonic() - t0, 1)}, **result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["targets"], indent=1))
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    main()
