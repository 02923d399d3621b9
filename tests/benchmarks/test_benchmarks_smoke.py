"""Smoke test of the benchmark harness: one per-turn measurement, small context, rlmkit alone.

It runs the real thing (driver subprocess, scripted server, RSS sampler, table), so a broken
harness shows up here rather than in a 10-minute benchmark run."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "speed"
sys.path.insert(0, str(BENCH))

import run


def test_one_turns_measurement_for_rlmkit(tmp_path):
    results = run.main(
        [
            "--frameworks",
            "rlmkit",
            "--sizes",
            "20000",
            "--repeats",
            "1",
            "--skip-fanout",
            "--skip-clients",
            "--out",
            str(tmp_path),
        ]
    )
    entry = results["turns"]["rlmkit"]["20000"]
    assert entry["answers_ok"], entry
    assert entry["root_calls"] == [5] and entry["sub_calls"] == [
        9
    ]  # the scripted 5-turn run, 1 + 8 sub-calls
    run_ = entry["runs"][0]
    assert len(run_["turn_overheads_s"]) == 5
    assert all(0 <= t < run_["wall_s"] for t in run_["turn_overheads_s"])
    assert 0 < entry["startup_median_s"] < run_["wall_s"]
    assert entry["rss_peak"] >= entry["rss_base"] > 0
    assert entry["log_bytes"] > 0
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["turns"]["rlmkit"]["20000"]["answers_ok"]
    table = (tmp_path / "README_TABLE.md").read_text()
    assert "| 2e4 chars |" in table and "rlmkit" in table


def test_turns_run_the_frameworks_in_rotation_and_skip_a_killed_driver():
    import measure_turns

    order = []

    class FakeServer:
        url = "http://127.0.0.1:9"

        def configure(self, *args):
            pass

        def take_hits(self):
            return []

    class FakeDriver:
        convention = "rlmkit"

        def __init__(self, name, dies_at=None):
            self.name, self.dies_at = name, dies_at

        def run(self, job, timeout):
            order.append((job["size"], self.name))
            if job["size"] == self.dies_at:
                raise TimeoutError("killed")
            run = {"start": 0.0, "end": 1.0, "answer": "8 ok", "log_bytes": 5}
            return {"runs": [run], "rss_base": 10, "rss_peak": 10 + job["size"]}

    drivers = {"a": FakeDriver("a"), "b": FakeDriver("b", dies_at=1), "c": FakeDriver("c")}
    out = measure_turns.interleaved(drivers, FakeServer(), [1, 2], 3, {})
    first_size = [name for size, name in order if size == 1]
    assert first_size == ["a", "b", "c", "c", "a", "c", "a"]  # b's driver died in round 1: skipped since
    assert [name for size, name in order if size == 2] == ["a", "c", "c", "a", "c", "a"]
    assert out["b"] == {"1": {"error": "killed"}}
    assert out["a"]["2"]["rss_peak"] == 12 and out["a"]["2"]["turn_overhead_median_s"] is None


def test_the_server_is_busy_from_a_requests_first_line_to_its_replys_last_byte():
    """The per-turn figures subtract the server's busy time: its window must hold all of the
    server's work on a request, the writing of its reply included (here 32 MB, which the server
    cannot finish writing before the client has begun to read it)."""
    import http.client

    from harness import RecordingServer

    body = json.dumps({"messages": [{"role": "user", "content": "x"}]})
    with RecordingServer() as server:
        server.configure(lambda kind, body: "y" * (32 << 20))
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        before = time.monotonic()
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        head_read = time.monotonic()
        reply = json.loads(response.read())
        after = time.monotonic()
        conn.close()
        (hit,) = server.take_hits()
    assert len(reply["choices"][0]["message"]["content"]) == 32 << 20
    assert before < hit.start < head_read < hit.end < after


def test_taking_the_log_waits_for_a_reply_the_client_has_read_but_the_server_not_logged():
    """A client can read its reply before the server thread that wrote it logs the hit (under
    load, long before): a run's last root call must still be in its log."""
    import http.client
    import threading

    from harness import RecordingServer

    taking = threading.Event()

    class LateLogging(RecordingServer):
        def served(self, body, arrived, done):
            taking.wait()  # the log is being taken before this hit is logged
            super().served(body, arrived, done)

        def take_hits(self, timeout=10.0):
            taking.set()
            return super().take_hits(timeout)

    body = json.dumps({"messages": [{"role": "user", "content": "x"}]})
    with LateLogging() as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        conn.getresponse().read()
        conn.close()
        hits = server.take_hits()
    assert len(hits) == 1
