"""A pytest plugin that refuses every outgoing connection but loopback and unix sockets.

Tests never reach a real model or any other outside service: every server a test needs is
started by the test on 127.0.0.1. This plugin makes that a rule the suite keeps rather than a
promise: a connection to any other address raises ``OutgoingConnectionRefused`` naming the test
that tried it, so a test that would quietly call a provider (a forgotten ``api_base``, a default
model) fails at once instead of spending money, leaking a key or hanging on a firewall.

pytest-socket's ``--allow-hosts`` does the same check, but its error does not say which test made
the call (a server thread or a fixture may be far from the test's own code) and it leaves
``connect_ex`` open; this plugin does both in a few lines.

The check sits on ``socket.socket.connect`` and ``connect_ex``, which ``socket.create_connection``,
http.client, httpx, the openai SDK and asyncio's default event loop (``sock_connect``) all go
through. It is installed for the whole session, so fixtures of every scope are held to it too.
Child processes a test starts are not: they run their own interpreter.
"""

from __future__ import annotations

import ipaddress
import socket

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_current_test = "(no test running: collection or session setup)"


class OutgoingConnectionRefused(RuntimeError):
    """A test tried to connect somewhere other than this machine.

    A RuntimeError, not an OSError: client libraries retry or translate OSErrors (a refused
    connection looks like a server that is down); this one must reach the test as it is.
    """


def is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False  # a host name other than localhost: resolving it would already reach out
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _check(sock: socket.socket, address: object) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # unix sockets, netlink, socketpair(): nothing leaves the machine
    host = address[0] if isinstance(address, tuple) and address else address
    if isinstance(host, str) and is_loopback(host):
        return
    port = address[1] if isinstance(address, tuple) and len(address) > 1 else "?"
    raise OutgoingConnectionRefused(
        f"{_current_test} tried to connect to {host}:{port}. Tests reach only 127.0.0.1, ::1 and "
        "unix sockets (tests/helpers/network_guard.py): start the server the test needs on 127.0.0.1, "
        "e.g. rlmkit.testing.ScriptedServer for a model."
    )


def _guarded_connect(self: socket.socket, address: object) -> None:
    _check(self, address)
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)


def pytest_sessionstart(session: pytest.Session) -> None:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


def pytest_sessionfinish(session: pytest.Session) -> None:
    socket.socket.connect = _real_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _real_connect_ex  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    # Setup, call and teardown all run inside this hook, so a refused connection from a fixture
    # or a server thread the test started is named after the test too.
    global _current_test
    _current_test = f"test {item.nodeid}"
    try:
        return (yield)
    finally:
        _current_test = "(between tests)"
