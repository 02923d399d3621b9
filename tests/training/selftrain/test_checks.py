"""optimizers.selftrain.checks: the memory a training stage may count on."""

from __future__ import annotations

from optimizers.selftrain import checks
from optimizers.selftrain.checks import available_memory


def test_memory_the_page_cache_gives_back_counts_as_available(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        "MemTotal:       24000000 kB\nMemFree:         5800000 kB\nMemAvailable:   19900000 kB\n"
    )
    assert available_memory(meminfo) == 19_900_000 * 1024  # not MemFree: the cache is reclaimable


def test_without_a_meminfo_the_free_pages_are_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(checks.os, "sysconf", {"SC_AVPHYS_PAGES": 10, "SC_PAGE_SIZE": 4096}.__getitem__)
    assert available_memory(tmp_path / "none") == 40_960
