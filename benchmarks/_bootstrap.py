"""The first import of every benchmark script: ``from _bootstrap import BENCH, RESULTS, ROOT`` (or
``import _bootstrap`` where the paths are not needed).

Run as ``python benchmarks/<family>/<script>.py``, a script sees only its own folder. This puts the
checkout first on ``sys.path`` (its rlmkit, not an installed copy), then ``benchmarks/`` (for
``peers``) and every family folder, whose modules import one another by their plain names:
each name is unique across the folders. Each family folder holds a link to this one file.
Standard library only: the peers' venv runs some of these scripts too. (The drivers in ``peers/``
keep their own one line: a framework's driver sees only what it needs, so its start-up is its own.)
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
FAMILIES = ("common", "speed", "sandbox", "quality", "training", "compat")

_FIRST = [str(path) for path in (ROOT, BENCH, *(BENCH / family for family in FAMILIES))]
sys.path[:] = _FIRST + [entry for entry in sys.path if entry not in _FIRST]
