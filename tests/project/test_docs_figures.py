"""Every figure in the docs comes from a committed results file: the rendered blocks match what
benchmarks/render_docs.py renders now, and no measurement is typed outside them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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


STAMP = re.compile(
    r"(?P<label>\*\*Not current: [^*]+\*\* )?"
    r"\*Measured [^;]+; commit (?P<commit>[^;]+); [^;]+; load [^;]+; "
    r"`(nice -n \d+ )?python benchmarks/(\w+/)?\w+\.py"
)
CLEAN_COMMIT = re.compile(r"[0-9a-f]{7,40}")


@pytest.mark.parametrize("name", sorted(render_docs.RENDERERS))
def test_every_block_is_stamped_and_a_run_off_a_clean_commit_says_it_is_not_current(name):
    rendered = render_docs.RENDERERS[name]()
    if name == "security":  # security.md's own header names its commit
        commit = re.search(r", commit ([^,;)]+)", rendered)
        clean = commit is not None and CLEAN_COMMIT.fullmatch(commit.group(1))
        assert clean or rendered.startswith("**Not current: "), rendered[:300]
        return
    stamps = list(STAMP.finditer(rendered))
    assert stamps, f"{name}: no stamp (date, commit, machine, load, command)"
    for stamp in stamps:
        clean = CLEAN_COMMIT.fullmatch(stamp["commit"])
        assert clean or stamp["label"], f"{name}: commit {stamp['commit']!r} is not labelled not current"
        assert not (clean and stamp["label"]), f"{name}: a clean commit labelled not current"


def test_a_dirty_or_missing_commit_is_labelled_not_current():
    import provenance

    base = {"date": "d", "machine": "m", "load": "1.0", "command": "python benchmarks/x.py"}
    assert not provenance.stamp({**base, "commit": "abc1234"}).startswith("**Not current")
    assert "uncommitted changes on top of abc1234" in provenance.stamp({**base, "commit": "abc1234+changes"})
    assert provenance.stamp(base).startswith("**Not current: no commit recorded")


def test_every_quality_row_has_the_run_that_wrote_it():
    rows = list(render_docs.quality_rows())
    assert rows and all(run["command"] and run["date"] for _, run in rows)
