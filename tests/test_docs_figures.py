"""Every figure in the docs comes from a committed results file: the rendered blocks match what
benchmarks/render_docs.py renders now, and no measurement is typed outside them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks")]

import render_docs  # noqa: E402

# A timing, a size, a throughput or a ratio to a peer: what a benchmark measures. "a 50 MB print"
# names a hostile case, not a measurement.
MEASUREMENT = re.compile(
    r"\b\d+(?:\.\d+)?\s?(?:ms|µs|tok/s|kB|MB)\b(?! print)|\bx\d+\.\d{2}\b|\b\d+\.\d+\s?s\b"
)


def test_every_rendered_block_matches_its_results_file():
    assert render_docs.stale() == [], "run: python benchmarks/render_docs.py"


def test_every_renderer_has_a_block_in_the_docs():
    used = {name for page in render_docs.pages() for name in render_docs.blocks(page.read_text())}
    assert used == set(render_docs.RENDERERS)


def test_a_typed_change_inside_a_block_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(render_docs.rendered("# t\n<!-- rendered: speed -->\n<!-- /rendered: speed -->\n"))
    assert render_docs.stale([page]) == []
    text = page.read_text()
    figure = re.search(r"\d+\.\d ms", text).group(0)
    page.write_text(text.replace(figure, "0.1 ms", 1))
    assert render_docs.stale([page]) == ["page.md: speed"]


def test_a_block_with_no_renderer_is_an_error(tmp_path):
    with pytest.raises(KeyError, match="no renderer"):
        render_docs.rendered("<!-- rendered: typo -->\n<!-- /rendered: typo -->")


def test_no_measurement_is_typed_outside_the_rendered_blocks():
    typed = []
    for page in render_docs.pages():
        outside = render_docs.MARKER.sub("", page.read_text())
        typed += [f"{page.name}: {m.group(0)}" for m in MEASUREMENT.finditer(outside)]
    assert typed == []


def test_every_block_is_stamped_with_date_commit_machine_load_and_command():
    stamp = re.compile(r"\*Measured .+; commit .+; .+; load .+; `(nice -n \d+ )?python benchmarks/\w+\.py")
    for name in ("speed", "quality", "quality-peers", "tuning"):
        assert stamp.search(render_docs.RENDERERS[name]()), name


def test_every_quality_row_has_the_run_that_wrote_it():
    rows = list(render_docs.quality_rows())
    assert rows and all(run["command"] and run["date"] for _, run in rows)
