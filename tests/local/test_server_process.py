"""The embedded model's server process (rlmkit/local/server_process.py): its flags reach
llama.cpp's parameters, and a setting it does not know stops it before any model loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import xllamacpp

from rlmkit.errors import LocalModelError
from rlmkit.local.server import SPECULATIVE, LocalServerConfig
from rlmkit.local.server_process import NGRAM_GUESS, NGRAM_KEY, _parse, speculate

KINDS = xllamacpp.common_speculative_type


def test_speculative_is_off_unless_asked():
    assert LocalServerConfig().speculative == "none"
    assert _parse(["--model", "m.gguf", "--log", "l"]).speculative == "none"
    params = xllamacpp.CommonParams()
    speculate(params, "none")
    assert params.speculative.types == [KINDS.COMMON_SPECULATIVE_TYPE_NONE]


@pytest.mark.parametrize(
    ("kind", "member", "settings"),
    [
        ("ngram-simple", KINDS.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE, "ngram_simple"),
        ("ngram-map-k", KINDS.COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K, "ngram_map_k"),
    ],
)
def test_each_kind_reaches_llama_cpp_params(kind, member, settings):
    config = LocalServerConfig(speculative=kind)
    args = _parse(["--model", "m.gguf", "--log", "l", *config.server_args()])
    assert args.speculative == kind
    params = xllamacpp.CommonParams()
    speculate(params, args.speculative)
    assert params.speculative.types == [member]
    ngram = getattr(params.speculative, settings)
    assert (ngram.size_n, ngram.size_m) == (NGRAM_KEY, NGRAM_GUESS)


def test_every_offered_kind_is_one_llama_cpp_knows():
    for kind in SPECULATIVE:
        speculate(xllamacpp.CommonParams(), kind)


def test_an_unknown_kind_is_refused_before_the_server_starts(tmp_path):
    with pytest.raises(LocalModelError, match="unknown speculative decoding 'eagle'"):
        LocalServerConfig(speculative="eagle")
    with pytest.raises(ValueError, match="unknown speculative decoding"):
        speculate(xllamacpp.CommonParams(), "ngram-cache")
    log = tmp_path / "server.log"
    proc = subprocess.run(
        [sys.executable, "-m", "rlmkit.local.server_process", "--model", "m.gguf", "--log", str(log),
         "--speculative", "eagle"],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert proc.returncode == 2 and "--speculative: invalid choice: 'eagle'" in proc.stderr
    assert proc.stdout == "" and not log.exists()  # no ready line, no llama.cpp log: nothing started
