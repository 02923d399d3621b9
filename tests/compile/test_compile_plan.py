"""``rlmkit compile``'s flags as one typed plan, checked when it is made."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizers.cli.compile_plan import Kind, plan
from rlmkit.errors import UserError


def test_a_compile_plan_is_typed_frozen_and_refuses_bad_flags_before_any_run_is_read():
    made = plan(kind="sft", runs=[Path("runs")], out=Path("out"), status=["ok"])
    assert made.kind is Kind.sft and made.runs == (Path("runs"),) and made.status == ("ok",)
    with pytest.raises(ValueError):
        made.seed = 3  # frozen
    with pytest.raises(UserError, match="--val-fraction"):
        plan(kind="rl", runs=[Path("r")], out=Path("o"), val_fraction=1.5)
    with pytest.raises(UserError, match="exclude each other"):
        plan(kind="sft", runs=[Path("r")], out=Path("o"), group_signatures=True, mixed_signatures=True)
    with pytest.raises(UserError, match="--mode"):
        plan(kind="dpo", runs=[Path("r")], out=Path("o"), mode="sample")
