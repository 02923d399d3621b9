"""Where training jobs run: local processes (default) or a Ray cluster.

Both run the same entry point, ``run_job(job_json, backend)``, which calls the backend
adapter and returns a ``TrainResult`` as JSON. A job that crashes, or runs past its time
limit, comes back as a failed outcome with a reason; the loop goes on. Scheduling across
machines is Ray's job, never ours.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optimizers.backends.base import TrainJob, TrainResult, get_backend


@dataclass
class Outcome:
    result: TrainResult | None
    reason: str | None = None  # why there is no result
    wall_s: float = 0.0


def run_job(job_json: str, backend: str) -> str:
    """Train one job in this process; the shared entry point of every executor."""
    job = TrainJob.model_validate_json(job_json)
    result = get_backend(backend).run(job)
    return result.model_dump_json()


class LocalExecutor:
    """One subprocess per job, one job at a time (one GPU, or the CPU for tiny models)."""

    name = "local"

    def __init__(self, timeout_s: float = 3600.0):
        self.timeout_s = timeout_s

    def run(self, job: TrainJob, backend: str) -> Outcome:
        Path(job.output_dir).mkdir(parents=True, exist_ok=True)
        job_file = Path(job.output_dir) / "job.json"
        job_file.write_text(job.model_dump_json())
        start = time.monotonic()
        code = (
            "import sys; from optimizers.trainloop.executors import run_job; "
            "print('RESULT ' + run_job(open(sys.argv[1]).read(), sys.argv[2]))"
        )
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code, str(job_file), backend],
                capture_output=True,
                check=False,
                text=True,
                timeout=self.timeout_s,
            )
        except subprocess.TimeoutExpired:
            return Outcome(None, f"timed out after {self.timeout_s:.0f} s", time.monotonic() - start)
        wall = time.monotonic() - start
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return Outcome(None, f"job process exited {proc.returncode}: {' | '.join(tail)}", wall)
        return Outcome(TrainResult.model_validate_json(lines[-1][len("RESULT ") :]), None, wall)


class RayExecutor:
    """Jobs as Ray tasks (``address``: a cluster, or None for a local instance)."""

    name = "ray"

    def __init__(self, address: str | None = None, *, timeout_s: float = 3600.0, num_gpus: float = 0):
        import ray  # the `cluster` extra

        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        self.ray = ray
        self.timeout_s = timeout_s
        self._task = ray.remote(num_gpus=num_gpus, max_retries=0)(run_job)

    def run(self, job: TrainJob, backend: str) -> Outcome:
        start = time.monotonic()
        ref = self._task.remote(job.model_dump_json(), backend)
        try:
            payload: Any = self.ray.get(ref, timeout=self.timeout_s)
        except self.ray.exceptions.GetTimeoutError:
            self.ray.cancel(ref, force=True)
            return Outcome(None, f"timed out after {self.timeout_s:.0f} s", time.monotonic() - start)
        except Exception as exc:  # noqa: BLE001 - a task that raised or whose worker died
            cause = getattr(exc, "cause", None) or exc
            return Outcome(
                None,
                f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1][:300]}",
                time.monotonic() - start,
            )
        return Outcome(TrainResult.model_validate(json.loads(payload)), None, time.monotonic() - start)

    def shutdown(self) -> None:
        self.ray.shutdown()
