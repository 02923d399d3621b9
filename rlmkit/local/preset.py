"""The program shipped for the embedded model: instructions, demos and knobs an optimizer chose
on training seeds, with where they came from.

``scripts/tune_embedded.py`` writes ``tuned_program.json`` (its command, seeds, date and
scores are in its ``provenance``). ``local_lm()`` hands it to its LM as ``preset``; an RLM with
no instructions or demos of its own runs it (``rlmkit.RLM(..., use_preset=False)`` does not).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from rlmkit.models.contract import Preset

SHIPPED_PROGRAM = Path(__file__).with_name("tuned_program.json")
PRESET_KEYS = {"instructions", "demos", "knobs", "provenance"}


@cache
def shipped_program() -> Preset | None:
    """The shipped program, or None when this build has none."""
    if not SHIPPED_PROGRAM.exists():
        return None
    program = json.loads(SHIPPED_PROGRAM.read_text())
    unknown = set(program) - PRESET_KEYS
    if unknown:
        raise ValueError(f"{SHIPPED_PROGRAM}: unknown keys {sorted(unknown)}")
    shipped: Preset = program  # JSON, its keys checked above
    return shipped
