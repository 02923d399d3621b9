"""The peers' own virtualenv (benchmarks/.peers, gitignored): dspy and rlms are never rlmkit deps.

A plain venv (no system site-packages), so the peers get their own pinned dependencies and the
system python is never touched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PEERS = {"rlms": "0.1.3", "dspy": "3.4.1"}
PEERS_BY_FRAMEWORK = {"dspy.RLM": "dspy", "rlms": "rlms"}
VENV = Path(__file__).resolve().parents[1] / ".peers"
PYTHON = VENV / "bin" / "python"
_CHECK = (
    f"import importlib.metadata as m, sys; sys.exit(any(m.version(p) != v for p, v in {PEERS!r}.items()))"
)


def ready() -> bool:
    return (
        PYTHON.exists()
        and subprocess.run([str(PYTHON), "-c", _CHECK], capture_output=True, check=False).returncode == 0
    )


def ensure(log: Path) -> str | None:
    """Create/repair the venv if needed; returns an error message, or None when it is usable."""
    if ready():
        return None
    with open(log, "w") as out:
        steps = [
            [sys.executable, "-m", "venv", str(VENV)],
            [
                str(PYTHON),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *(f"{p}=={v}" for p, v in PEERS.items()),
            ],
        ]
        for cmd in steps:
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode != 0:
                return f"could not set up the peers' venv ({' '.join(cmd[:4])} ...); see {log}"
    return None if ready() else f"the peers' venv has the wrong versions; see {log}"


def versions() -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json; "
        f"print(json.dumps({{p: m.version(p) for p in {list(PEERS)!r}}}))"
    )
    done = subprocess.run([str(PYTHON), "-c", code], capture_output=True, text=True, check=False)
    return __import__("json").loads(done.stdout) if done.returncode == 0 else {}
