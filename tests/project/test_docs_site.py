"""The docs site: `mkdocs build --strict` succeeds, and the built site works in real chromium
(the index renders, search finds a word from the guide, code blocks are highlighted)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory) -> Path:
    """The site as `scripts/test.sh` builds it: strict, so any warning fails the build."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def site_url(site_dir):
    """The built site over HTTP on 127.0.0.1 (search loads its index with fetch: file:// cannot)."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site_dir)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def page(browser, site_url):
    """A tab on the site's index; fails the test on a console error or a request off the site."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    tab.on("request", lambda req: req.url.startswith(site_url) or errors.append(f"off-site: {req.url}"))
    tab.goto(site_url)
    yield tab
    context.close()
    assert errors == [], errors


def test_every_guide_page_is_built(site_dir):
    for page in (
        "index.html",
        "getting-started/index.html",
        "guide/rlm/index.html",
        "reference/api/index.html",
    ):
        assert (site_dir / page).is_file(), page
    api = (site_dir / "reference/api/index.html").read_text()
    for name in ("rlmkit.rlm.RLM", "rlmkit.budget.Budget", "rlmkit.rlm.RLM.forward"):  # from the docstrings
        assert f'id="{name}"' in api, name


def test_the_index_renders_with_its_title_and_a_code_block(page):
    expect(page.locator("h1").first).to_have_text("rlmkit¶")  # the title and its permalink
    code = page.locator(".highlight pre code").first
    expect(code).to_be_visible()
    expect(code).to_contain_text("rlmkit.RLM(")


def test_search_finds_submit(page):
    page.keyboard.press("s")  # the theme's search shortcut; typing key by key fires its listeners
    page.locator("input.md-search__input").press_sequentially("SUBMIT", delay=20)
    results = page.locator(".md-search-result__item")
    expect(results.first).to_be_visible(timeout=30_000)
    expect(page.locator(".md-search-result__list mark").first).to_contain_text("SUBMIT")
