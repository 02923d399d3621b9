"""Load: ``rlmkit eval`` with 32 examples at once, each fanning out
batched sub-calls, against a model server that injects every kind of fault.

Two rounds of 32 run back to back through the real command (``rlmkit eval needle --workers
32``), each with a process sandbox per example. Checked: no deadlock (each round ends within
a deadline), every example has a row, no sandbox worker process or file descriptor is left
behind (counted in ``/proc/self/fd`` and with psutil), and the host's memory after the second
round stays within a bound of the first.
"""

from __future__ import annotations

import gc
import os
import threading
import time

import psutil
import pytest

from rlmkit.sandbox.process import standing_pids
from rlmkit.testing import Faults, ScriptedServer, is_root_request
from rlmkit.testing.server import FAULT_KINDS

N = 32
CHUNKS = 8
LENGTH = 4_000
ROUND_DEADLINE_S = 240  # a round takes ~10-40 s on 2 loaded cores; past this it is a deadlock
RSS_GROWTH_LIMIT = 64 * 1024**2  # the second round may not grow the host by more than this
# A round may leave pooled keep-alive connections: at most the LM's concurrency limit (16), and
# both ends count here because the server runs in this process.
FD_SLACK = 2 * 16 + 8
FAN_OUT = (
    "```repl\nstep = len(context) // " + str(CHUNKS) + " + 1\n"
    "parts = [context[i:i + step] for i in range(0, len(context), step)]\n"
    "found = llm_query_batched([f'List the numbers in: {p}' for p in parts])\n"
    "print(len(found), 'answers')\n```"
)
ANSWER = "```repl\nimport re\nSUBMIT(answer=re.findall(r'[0-9]{7}', context)[:3])\n```"


def _responder(body: dict) -> str:
    if not is_root_request(body):
        return "1234567"
    # the turn is counted from our own replies, so a faulty reply just costs one more turn
    ours = sum(1 for m in body["messages"] if m["role"] == "assistant" and m["content"] in (FAN_OUT, ANSWER))
    return FAN_OUT if ours == 0 else ANSWER


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}


def _settled_children(before: set[int], timeout: float = 5.0) -> set[int]:
    """Children beyond ``before``, given closed workers a moment to be reaped; the sandbox's standing
    processes (its fork server, its pool's idle workers) are not left over."""
    deadline = time.monotonic() + timeout
    while (extra := _children() - before - standing_pids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return extra


def _eval_round(server: ScriptedServer, out, seed: int) -> None:
    from rlmkit.cli import app

    app(
        [
            "eval",
            "needle",
            "--n",
            str(N),
            "--length",
            str(LENGTH),
            "--seed",
            str(seed),
            "--lm",
            "openai/scripted",
            "--api-base",
            server.url,
            "--workers",
            str(N),
            "--max-iterations",
            "4",
            "--out",
            str(out),
        ],
        standalone_mode=False,
    )


def _run_with_deadline(fn, *args) -> None:
    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="load-round")
    thread.start()
    thread.join(ROUND_DEADLINE_S)
    assert not thread.is_alive(), f"the round did not finish in {ROUND_DEADLINE_S}s: deadlock"
    if "error" in box:
        raise box["error"]


@pytest.fixture
def fault_server(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("RLMKIT_CACHE_DIR", str(tmp_path / "lm-cache"))
    faults = Faults(rate=0.1, kinds=FAULT_KINDS, seed=7, timeout_s=0.5, retry_after=0.01)
    with ScriptedServer(_responder, latency=0.02, faults=faults) as server:
        yield server


def test_32_concurrent_examples_with_fan_out_and_faults(fault_server, tmp_path, capsys):
    import json

    children_before, fds_before = _children(), _fds()
    measures = []
    for round_no in (1, 2):
        t0 = time.monotonic()
        out = tmp_path / f"round{round_no}"
        _run_with_deadline(_eval_round, fault_server, out, round_no)
        gc.collect()
        leftover = _settled_children(children_before)
        measures.append(
            {
                "round": round_no,
                "s": time.monotonic() - t0,
                "fds": _fds(),
                "rss": psutil.Process().memory_info().rss,
                "leftover": leftover,
                "rows": [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()],
            }
        )
    first, second = measures
    report = {
        k: {m["round"]: (m[k] if k != "rows" else len(m[k])) for m in measures} for k in ("s", "fds", "rss")
    }

    for m in measures:
        assert len(m["rows"]) == N and len({r["id"] for r in m["rows"]}) == N, "an example has no row"
        assert not m["leftover"], f"round {m['round']}: sandbox workers left running: {m['leftover']}"
        ok = [r for r in m["rows"] if r["status"] == "ok"]
        assert len(ok) >= N * 3 // 4, f"round {m['round']}: only {len(ok)} of {N} examples finished"
        assert all(r["subcalls"] >= CHUNKS for r in ok), "an example did not fan out"
    assert sum(fault_server.faults.injected.values()) > 20, "the faults did not happen"
    # Pools (HTTP keep-alive connections, the LM cache) fill during the first round; the second
    # round may not add descriptors beyond what one connection pool holds.
    assert second["fds"] - first["fds"] <= FD_SLACK, (
        f"file descriptors leaked: {report['fds']} (before: {fds_before})"
    )
    assert second["rss"] - first["rss"] < RSS_GROWTH_LIMIT, f"memory grew: {report['rss']}"
    with capsys.disabled():
        print(
            f"\nload: {N} examples x {CHUNKS} sub-calls per round; seconds {report['s']}; fds before "
            f"{fds_before} after {report['fds']}; RSS MiB "
            f"{ {k: round(v / 2**20) for k, v in report['rss'].items()} }; "
            f"faults {fault_server.faults.injected}; "
            f"failed {[sum(r['status'] != 'ok' for r in m['rows']) for m in measures]}"
        )
