"""The network guard every test runs under: outgoing connections refused, loopback kept.

The guard is shown failing in a pytest session of its own (a subprocess, in a folder outside the
checkout, with only the guard plugin loaded): its test connects to a private address that routes
nowhere, and must fail at once with an error naming it, while loopback TCP, asyncio on loopback
and unix sockets still work.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import network_guard

ROOT = Path(__file__).resolve().parents[2]

SESSION = textwrap.dedent(
    """
    import asyncio
    import socket
    import tempfile
    import os

    def test_reaches_out():
        # 10.255.255.1 routes nowhere: without the guard this would wait for its timeout
        socket.create_connection(("10.255.255.1", 80), timeout=5)

    def test_reaches_out_with_connect_ex():
        with socket.socket() as sock:
            sock.settimeout(5)
            sock.connect_ex(("10.255.255.1", 443))

    def test_loopback_tcp_and_asyncio_still_work():
        with socket.create_server(("127.0.0.1", 0)) as server:
            port = server.getsockname()[1]
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
            with socket.create_connection(("localhost", port), timeout=5):
                pass

            async def open_close():
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                await writer.wait_closed()

            asyncio.run(open_close())

    def test_unix_socket_still_works():
        path = os.path.join(tempfile.mkdtemp(), "s")
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(path)
            server.listen()
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(path)
    """
)


def test_the_suite_runs_under_the_guard(request):
    assert request.config.pluginmanager.has_plugin("tests.helpers.network_guard")
    assert socket.socket.connect is network_guard._guarded_connect
    with pytest.raises(network_guard.OutgoingConnectionRefused, match="test_the_suite_runs_under_the_guard"):
        socket.create_connection(("10.255.255.1", 80), timeout=5)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("::ffff:127.0.0.1", True),
        ("10.255.255.1", False),
        ("93.184.215.14", False),
        ("example.com", False),
        ("api.openai.com", False),
        ("fe80::1%eth0", False),
    ],
)
def test_what_counts_as_loopback(host, loopback):
    assert network_guard.is_loopback(host) is loopback


def test_a_session_that_reaches_out_fails_naming_the_test(tmp_path):
    (tmp_path / "test_outside.py").write_text(SESSION)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.helpers.network_guard"]
        + ["--rootdir", str(tmp_path), "-o", "addopts=", "test_outside.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "2 failed, 2 passed" in out, out
    for name in ("test_reaches_out", "test_reaches_out_with_connect_ex"):
        assert (
            f"OutgoingConnectionRefused: test test_outside.py::{name} tried to connect to 10.255.255.1" in out
        )
