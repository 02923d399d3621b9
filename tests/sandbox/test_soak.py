"""A short soak (``benchmarks/sandbox/soak.py``): a few hundred RLM runs in this process, hostile cells
mixed in, a batch of concurrent runs; nothing may leak once the first hundred are done."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "sandbox"))

import soak  # noqa: E402


def test_a_short_soak_leaks_nothing():
    result = soak.soak(300, seed=1, every=100)
    assert result["runs"] == 300
    assert result["failures"] == [] and result["host_harm"] == []
    hostile = {name: counts for name, counts in result["outcomes"].items() if name != "benign"}
    assert sum(sum(counts.values()) for counts in hostile.values()) >= 10, result["outcomes"]
    targets = result["targets"]
    for key in ("children", "fds", "temp_dirs", "rss"):
        assert targets[key]["ok"], (key, targets[key], result["checkpoints"])
    # per-run overhead on a shared CI machine is reported, not judged (benchmarks/results/soak.json)
    print(targets["overhead"])
