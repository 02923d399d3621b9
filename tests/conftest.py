"""Shared fixtures: scripted OpenAI-compatible servers on 127.0.0.1 and LMs pointed at them.

Every test runs under ``tests.helpers.network_guard``: a connection to anything but 127.0.0.1,
::1 or a unix socket fails with an error naming the test.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest  # noqa: E402

from rlmkit.testing import ScriptedServer  # noqa: E402

pytest_plugins = ["tests.helpers.network_guard"]


@pytest.fixture
def serve():
    """``serve(responder, **kw) -> (server, lm)``; servers stop after the test."""
    import rlmkit

    servers = []

    def start(responder, *, lm_kwargs=None, **kwargs):
        server = ScriptedServer(responder, **kwargs).start()
        servers.append(server)
        lm = rlmkit.LM(
            "openai/scripted", api_base=server.url, api_key="test-key", cache=False, **(lm_kwargs or {})
        )
        return server, lm

    yield start
    for server in servers:
        server.stop()


# Debian's chromium, driven by playwright (never `playwright install`): the viewer's and the docs
# site's browser tests. Headless, no network of its own, no first-run chores.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
