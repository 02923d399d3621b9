"""``rlmkit serve --replicas``'s checks before Ray starts: on a cluster the replicas need a
sessions directory every node sees, and the key rule is the one without replicas."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from rlmkit.cli.serve import serve


def invoke(*args: str):
    app = typer.Typer()
    app.command()(serve)
    return CliRunner().invoke(app, ["context, question -> answer", *args])


def test_replicas_on_a_cluster_need_a_shared_sessions_directory():
    result = invoke("--replicas", "2", "--ray", "auto")
    assert result.exit_code != 0 and "--sessions-dir" in result.output


def test_replicas_beyond_loopback_need_a_key():
    result = invoke("--replicas", "2", "--host", "0.0.0.0")
    assert result.exit_code != 0 and "--api-key" in result.output
