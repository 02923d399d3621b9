"""The orchestrator's tools: a request-logging scripted server, framework drivers run as
subprocesses, and a peak-RSS sampler over a driver's whole process tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import psutil  # each framework's RSS, its worker processes included
except ImportError:  # say which install brings it, not a bare ModuleNotFoundError
    raise SystemExit(
        "the benchmarks need psutil: pip install -e '.[bench]' in a checkout "
        "(dspy-rlmkit is not on the package index yet)"
    ) from None

from _bootstrap import BENCH

from scripted_run import classify

from rlmkit.testing.server import ScriptedServer

PEERS_PYTHON = BENCH / ".peers" / "bin" / "python"


@dataclass
class Hit:
    kind: str  # root / child / sub
    start: float  # monotonic: the request line arrived (headers and body not yet parsed)
    end: float  # the reply's last byte written


class RecordingServer(ScriptedServer):
    """A ScriptedServer that logs every request's busy interval and adds latency by request kind."""

    def __init__(self) -> None:
        super().__init__(lambda body: self.script(classify(body), body))
        # socketserver listens with a backlog of 5: a burst of more new connections than that (a
        # fan-out opening its pool) overflows it and the kernel drops SYNs, which clients retry
        # only after 1 s. Linux lets a listening socket raise its backlog with another listen().
        self._httpd.socket.listen(1024)
        self.hits: list[Hit] = []
        # requests handled whose hit is not logged yet: the client may read a reply before the
        # server thread that wrote it logs the hit, so taking the log waits for them
        self._unlogged = 0
        self._logged = threading.Condition(self._lock)
        self.script: Callable[[str, dict], str] = lambda kind, body: "ok"
        self.latency_for: dict[str, float] = {}

    def configure(
        self, script: Callable[[str, dict], str], latency_for: dict[str, float] | None = None
    ) -> None:
        self.script, self.latency_for = script, dict(latency_for or {})
        self.hits = []

    def handle(self, body: dict):
        with self._lock:
            self._unlogged += 1
        return super().handle(body)

    def reply(self, body: dict):
        delay = self.latency_for.get(classify(body), 0.0)
        if delay:
            time.sleep(delay)
        return super().reply(body)

    def served(self, body: dict, arrived: float, done: float) -> None:
        # The server is busy from a request's first line to its reply's last byte: parsing the
        # headers and the JSON and writing the reply are its work, as much as the responder.
        with self._lock:
            self.hits.append(Hit(classify(body), arrived, done))
            self._unlogged -= 1
            self._logged.notify_all()

    def take_hits(self, timeout: float = 10.0) -> list[Hit]:
        """Every hit so far, once each request already handled has logged its own. A reply that
        was never written (a killed client) logs none: after ``timeout`` the wait gives up on it."""
        with self._lock:
            if not self._logged.wait_for(lambda: self._unlogged <= 0, timeout):
                self._unlogged = 0
            hits, self.hits = sorted(self.hits, key=lambda h: h.start), []
        return hits


class RssSampler:
    """Polls the memory of a process and all its descendants; ``reset`` starts a new peak."""

    def __init__(self, pid: int, every_s: float = 0.02):
        self.proc = psutil.Process(pid)
        self.every_s = every_s
        self.peak = 0
        self._stop = threading.Event()
        # polls only while its driver runs a job: several drivers stay alive side by side, and an
        # idle one's sampler would only add CPU noise to the others' timings
        self.active = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True, name="rss-sampler")
        self._thread.start()

    def now(self) -> int:
        """The driver's RSS plus each descendant's USS (its private pages). RSS alone would count
        a just-forked child (pages still shared with its parent) as a full copy; a child that has
        not exec'd yet (same command line as its parent: vfork shares the parent's memory, so even
        its USS is the parent's) is skipped."""
        try:
            total = self.proc.memory_info().rss
            children = self.proc.children(recursive=True)
        except psutil.Error:
            return 0
        for proc in children:
            try:
                if proc.cmdline() == psutil.Process(proc.ppid()).cmdline():
                    continue
                total += proc.memory_full_info().uss
            except psutil.Error:
                pass  # a worker that just exited
        return total

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            if self.active.is_set():
                self.peak = max(self.peak, self.now())

    def reset(self) -> int:
        """Start a new peak; returns the current RSS (the baseline)."""
        self.peak = current = self.now()
        return current

    def stop(self) -> None:
        self._stop.set()


class Driver:
    """One framework's driver process: imports the framework once, then runs jobs."""

    def __init__(self, name: str, log_path: Path):
        command, python, self.convention = FRAMEWORKS[name]
        self.name = name
        self._stderr = open(log_path, "w")  # noqa: SIM115 - lives as long as the driver
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = ""  # peers must not see rlmkit or the system site-packages
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [str(python), str(BENCH / "peers" / command[0]), *command[1:]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
            cwd=BENCH,
        )
        self.sampler = RssSampler(self.proc.pid)
        hello = self._read(timeout=300)
        self.process_start_s = time.monotonic() - started
        self.import_s = hello.get("import_s")

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        box: dict[str, Any] = {}

        def read() -> None:
            for line in self.proc.stdout:
                if line.startswith("@@RESULT "):
                    box["result"] = json.loads(line[len("@@RESULT ") :])
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(max(0.0, deadline - time.monotonic()))
        if "result" not in box:
            self.close()
            raise TimeoutError(
                f"{self.name}: no result within {timeout:.0f} s (driver log: {self._stderr.name})"
            )
        return box["result"]

    def run(self, job: dict[str, Any], timeout: float = 180) -> dict[str, Any]:
        """Send one job; returns its result plus ``rss_base``/``rss_peak`` (bytes, whole tree)."""
        base = self.sampler.reset()
        self.sampler.active.set()
        try:
            self.proc.stdin.write(json.dumps({"kind": "run", **job}) + "\n")
            self.proc.stdin.flush()
            result = self._read(timeout)
            self.sampler.peak = max(self.sampler.peak, self.sampler.now())
        finally:
            self.sampler.active.clear()
        return {**result, "rss_base": base, "rss_peak": self.sampler.peak}

    def close(self) -> None:
        self.sampler.stop()
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"kind": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


FRAMEWORKS = {  # name -> (driver command line, which python, whose conventions the scripted root uses)
    "rlmkit": (["rlmkit_driver.py"], sys.executable, "rlmkit"),
    "dspy.RLM": (["dspy_driver.py"], PEERS_PYTHON, "dspy.RLM"),
    "rlms": (["rlms_driver.py"], PEERS_PYTHON, "rlms"),
}
DEFAULT_FRAMEWORKS = ["rlmkit", "dspy.RLM", "rlms"]


def busy_union(hits: list[Hit], lo: float, hi: float) -> float:
    """Seconds within [lo, hi] during which the server was handling at least one request."""
    spans = sorted((max(h.start, lo), min(h.end, hi)) for h in hits if h.end > lo and h.start < hi)
    total, cur_lo, cur_hi = 0.0, None, None
    for a, b in spans:
        if cur_hi is None or a > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = a, b
        else:
            cur_hi = max(cur_hi, b)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total
