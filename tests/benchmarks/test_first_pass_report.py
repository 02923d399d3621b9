"""The first pass's rule, as its report renders it: every held-out draw of a trained suite must gain
with its paired interval above 0, and no other suite may lose more than 0.05. (What ships now is
decided by optimizers/selftrain/release.py over the matrix.)"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "training"))

import first_pass_report  # noqa: E402


def row(suite: str, trained: bool, gain: float, low: float) -> dict:
    return {"suite": suite, "trained_on": trained, "gain": gain, "ci95": (low, gain + 0.1)}


def results(*rows: dict, partial: bool = False) -> dict:
    return {"partial": partial, "comparison": list(rows), "recipe": {}, "stages": {}}


WINS = row("needle-20k", True, 0.4, 0.2)
FRESH_WINS = row("needle-20k-s1100", True, 0.3, 0.1)
UNHARMED = row("aggregation-20k", False, -0.05, -0.2)


def test_every_trained_draw_must_win_and_no_other_suite_may_lose_more_than_005():
    assert first_pass_report.ships(results(WINS, FRESH_WINS, UNHARMED))
    assert not first_pass_report.ships(results(WINS, row("needle-20k-s1100", True, 0.2, -0.02), UNHARMED))
    assert not first_pass_report.ships(results(WINS, FRESH_WINS, row("multi_needle-20k", False, -0.06, -0.3)))
    assert not first_pass_report.ships(results(WINS, FRESH_WINS, partial=True))
    assert not first_pass_report.ships(results(UNHARMED))  # nothing trained was measured


def test_the_report_says_whether_its_adapter_is_served_held_back_or_replaced(tmp_path, monkeypatch):
    import json

    from rlmkit.local import adapter as adapters

    monkeypatch.setattr(adapters, "SHIPPED_ADAPTER", tmp_path / "shipped_adapter.json")
    data = {**results(WINS, FRESH_WINS, UNHARMED), "stages": {"adapter": {"sha256": "aa"}}}
    record = {"file": "shipped_adapter.gguf", "sha256": "aa"}
    adapters.SHIPPED_ADAPTER.write_text(json.dumps(record))
    assert first_pass_report.verdict(data).startswith("**Shipped:**")
    adapters.SHIPPED_ADAPTER.write_text(json.dumps({**record, "held_back": {"failures": ["x"]}}))
    assert first_pass_report.verdict(data).startswith("**Shipped, then held back:**")
    adapters.SHIPPED_ADAPTER.write_text(json.dumps({**record, "sha256": "bb", "recipe": "later.toml"}))
    replaced = first_pass_report.verdict(data)
    assert replaced.startswith("**Shipped, then replaced:**") and "`later.toml`" in replaced
