"""``rlmkit mcp --http`` checked by ``mcpcheck`` (``jbt-mcpcheck``, a conformance tool for MCP's
2026-07-28 revision over Streamable HTTP): no handshake, no sessions, ``server/discover``, the
protocol headers and version errors, tool schemas, errors for invalid calls, cache hints and the
``Origin`` check. It runs every check; each must pass, with no warning either, with and without
a key (a keyed server is checked with the key, as a deployed one would be)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.helpers.mcp_programs import http_server

CHECKS = {"handshake", "session", "discover", "protocol", "schemas", "errors", "cache", "origin"}
KEY = "sk-conformance-key"


def mcpcheck(url: str, token: str | None = None) -> dict[str, Any]:
    """The tool's JSON report on ``url`` (its exit code as ``summary.exit_code``)."""
    env = {k: v for k, v in os.environ.items() if k != "MCPCHECK_TOKEN"}
    if token is not None:
        env["MCPCHECK_TOKEN"] = token  # the environment, never the command line
    done = subprocess.run(
        [sys.executable, "-m", "mcpcheck", url, "--json", "--no-color"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["summary"]["exit_code"] == done.returncode
    return report


@pytest.mark.parametrize("key", [None, KEY], ids=["loopback", "with-a-key"])
def test_every_conformance_check_passes(key: str | None) -> None:
    flags = ("--api-key", key) if key else ()
    with http_server("tests.helpers.serve_programs:qa", *flags) as url:
        report = mcpcheck(url, token=key)
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    findings = {
        check["name"]: [f["message"] for f in check["failures"] + check["warnings"]]
        for check in report["checks"]
    }
    summary = report["summary"]
    print(f"mcpcheck ({'key' if key else 'no key'}): {summary}")  # pytest -s shows what was measured
    assert set(statuses) == CHECKS and summary["skipped"] == []
    assert statuses == dict.fromkeys(CHECKS, "pass"), findings
    assert summary["passed"] == summary["total"] == len(CHECKS) and summary["exit_code"] == 0
    assert report["server_info"]["name"] == "rlmkit-ask_rlm" and report["protocol_version"] == "2026-07-28"
    assert report["request"]["auth"] == ("bearer" if key else "none")
    assert key is None or KEY not in json.dumps(report)  # the tool scrubs it; the server never echoes it
