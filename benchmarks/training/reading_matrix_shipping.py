"""Which adapter the embedded model serves, as the held-out matrix decides it: the first shipped
adapter is held back once the gate fails it, and a round's adapter that passes ships in its place
(``reading_matrix.py --report-only --ship ARM``)."""

from __future__ import annotations

import json
from typing import Any

RESULTS = "benchmarks/results/reading_matrix.json"
# The ``adapter`` arm measured the adapter shipped before the rounds, by this hash. Once a round's
# adapter ships in its place, that arm's finished stages stand, its unfinished ones are not run (the
# file they would read is another adapter now) and its verdict holds nothing back.
FIRST_ADAPTER_SHA256 = "8e7df815ad60ed190546824215a30a6b912d481082119a7cfe4e78ab8e19ab62"


def measured_in(data: dict[str, Any]) -> str:
    """Where a shipped record's verdict was measured: the results file, its date and commit."""
    return f"{RESULTS} ({data['date']}, commit {data['commit']})"


def first_adapter_ships() -> bool:
    """Whether the adapter shipped beside the embedded model is still the ``adapter`` arm's."""
    from rlmkit.local.adapter import shipped_record

    return (shipped_record() or {}).get("sha256") == FIRST_ADAPTER_SHA256


def serving_arm() -> str | None:
    """The arm whose adapter the embedded model serves by default, if one does."""
    from rlmkit.local.adapter import held_back, shipped_record

    if held_back() is not None:
        return None
    return (shipped_record() or {}).get("arm") or ("adapter" if first_adapter_ships() else None)


def left_to_run(only):
    """``only``, less the ``adapter`` arm's stages once its adapter no longer ships."""
    if first_adapter_ships():
        return only
    print("the adapter the `adapter` arm measured no longer ships: its unfinished stages are left")
    return lambda name: only(name) and not name.startswith("eval-adapter-")


def hold_back_shipped(data: dict[str, Any]) -> bool:
    """Apply the gate's verdict to the shipped adapter's record: once it fails on finished suites
    the record names why, and ``local_lm()`` serves the base model by default (``rlmkit/local/
    adapter.py``). Whether it passes is only known on the whole matrix, and the adapter measured
    here already serves; so this only ever holds back. True when the record changed."""
    from rlmkit.local.adapter import SHIPPED_ADAPTER, held_back, shipped_record

    failures = data["gate"]["adapter"]["failures"]
    record = shipped_record()
    if not first_adapter_ships() or not failures or (held_back() or {}).get("failures") == failures:
        return False
    record["held_back"] = {
        "by": "optimizers/selftrain/gate.py",
        "results": measured_in(data),
        "failures": failures,
    }
    SHIPPED_ADAPTER.write_text(json.dumps(record, indent=1) + "\n")
    return True
