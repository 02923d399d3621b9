"""Which adapter the embedded model serves by default, decided by the gate over the matrix.

``ship`` installs a round's adapter beside the embedded model with its record
(``rlmkit/local/shipped_adapter.json``: what it was taught, the gate's verdict, where it was
measured); ``hold_back`` marks the shipped record with the rules its adapter fails, so
``local_lm()`` serves the base by default. Both read the matrix's results file, whose ``gate``
``judge`` writes. ``rlmkit self-train ship ARM`` and ``rlmkit self-train hold-back ARM`` run them."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from optimizers.selftrain.gate import GateRule, verdict
from optimizers.selftrain.rounds import CHECKOUT, Registry
from optimizers.selftrain.shipping import trained_record
from rlmkit.errors import UserError

GATE_BY = "optimizers/selftrain/gate.py"


class NotShippable(UserError):
    """The gate's verdict does not let this adapter ship (or the matrix is not whole for it)."""


def measured_in(registry: Registry, results: dict[str, Any]) -> str:
    """Where a shipped record's verdict was measured: the results file, its date and commit."""
    return f"{registry.results} ({results['date']}, commit {results['commit']})"


def read_results(registry: Registry, root: Path = CHECKOUT) -> dict[str, Any]:
    path = root / registry.results
    if not path.is_file():
        raise UserError(f"no matrix results at {path}: measure the matrix first")
    return json.loads(path.read_text())


def judge(
    registry: Registry,
    table: list[dict[str, Any]],
    tables: dict[str, list[dict[str, Any]]],
    *,
    real_text: Iterable[str],
    candidates: dict[str, tuple[str, ...]],
    rule: GateRule = GateRule(),
) -> dict[str, Any]:
    """The results file's ``gate``: each candidate judged on its own table (a round's arms beside
    their round's base, else ``table``), and the prompt arm by the same gate less the rules about
    training (a prompt replaces today's default by it)."""
    labels = [plan.label for plan in registry.matrix.suites]
    prompt = registry.first_arms[1].name
    real_text = tuple(real_text)
    verdicts = {
        name: verdict(tables.get(name, table), labels, candidate=name, prompt_arms=[prompt],
                      trained_families=families, real_text=real_text).model_dump()
        for name, families in candidates.items()
    }  # fmt: skip
    verdicts[prompt] = verdict(
        table, labels, candidate=prompt, prompt_arms=[], trained_families=(), real_text=real_text
    ).model_dump()
    return {
        "rule": rule.model_dump(),
        "trained_families": {name: list(families) for name, families in candidates.items()},
        **verdicts,
    }


def ship(
    registry: Registry,
    arm: str,
    results: dict[str, Any],
    *,
    root: Path = CHECKOUT,
    work: Path | None = None,
    into: Path | None = None,
) -> Path:
    """Serve round arm ``arm``'s adapter by default: refused (``NotShippable``) unless the gate, on
    the whole matrix, lets it through. Its record says what it was taught and what the gate
    measured. ``into``: the record's path (default: the embedded model's)."""
    where = registry.round_of(arm)
    judged = results["gate"].get(arm)
    if judged is None or not judged["ships"]:
        why = "; ".join((judged or {}).get("failures") or []) or "the matrix is not whole for it"
        raise NotShippable(f"the {arm!r} adapter does not ship: {why}")
    store, stage = where.store(root, work), where.arms[arm]
    measured = [
        {"suite": row["suite"], "n": row["n"], **row["versus_base"][arm]}
        for row in results["added_tables"][arm]  # the table the gate judged it on
    ]
    record = trained_record(store, where.recipe_record(root), stage) | {
        "arm": arm,
        "recipe": where.recipe,
        "gate": {"by": GATE_BY, **judged},
        "measured": measured,
        "results": measured_in(registry, results),
    }
    return install_record(store.output(stage) / "adapter.gguf", record, into=into)


def hold_back(registry: Registry, arm: str, results: dict[str, Any], *, into: Path | None = None) -> bool:
    """Apply the gate's failures for ``arm`` to the shipped record when ``arm``'s adapter is the
    one shipped: the record names why, and ``local_lm()`` serves the base model by default. A
    pass changes nothing (whether it passes is only known on the whole matrix, and it already
    serves). True when the record changed."""
    path = _record_path(into)
    record = json.loads(path.read_text()) if path.exists() else None
    failures = (results["gate"].get(arm) or {}).get("failures") or []
    if record is None or shipped_arm(registry, record) != arm or not failures:
        return False
    if (record.get("held_back") or {}).get("failures") == failures:
        return False
    record["held_back"] = {"by": GATE_BY, "results": measured_in(registry, results), "failures": failures}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return True


def shipped_arm(registry: Registry, record: dict[str, Any] | None) -> str | None:
    """The arm whose adapter a shipped record holds: a round's names itself, the first adapter is
    known by its hash."""
    if record is None:
        return None
    if record.get("sha256") == registry.first_adapter.sha256:
        return registry.first_adapter.arm
    return record.get("arm")


def serving_arm(registry: Registry, record: dict[str, Any] | None) -> str | None:
    """The arm the embedded model serves by default, if one does (a held-back record serves none)."""
    return None if (record or {}).get("held_back") else shipped_arm(registry, record)


def install_record(gguf: Path, record: dict[str, Any], *, into: Path | None = None) -> Path:
    """Ship ``gguf`` beside the record at ``into`` (default: the embedded model's), its file name,
    size and sha256 added first; whatever shipped before is replaced, its record with it."""
    from rlmkit.local import adapter as adapters

    path = _record_path(into)
    target = path.with_suffix(".gguf")
    shutil.copyfile(gguf, target)
    data = target.read_bytes()
    record = {
        "file": target.name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        **{key: value for key, value in record.items() if key not in ("file", "sha256", "bytes")},
    }
    path.write_text(json.dumps(record, indent=1) + "\n")
    adapters.shipped_adapter.cache_clear()
    return target


def _record_path(into: Path | None) -> Path:
    from rlmkit.local import adapter as adapters

    return Path(into) if into is not None else adapters.SHIPPED_ADAPTER
