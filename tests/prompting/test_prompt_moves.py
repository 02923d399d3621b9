"""The two lists of moves the system prompt can show, and the check on their name."""

from __future__ import annotations

import pytest

from rlmkit.errors import ConfigError
from rlmkit.prompting import Display, system_prompt
from rlmkit.protocols import get_protocol
from rlmkit.signature import make_signature


def prompt(moves: str) -> str:
    return system_prompt(
        protocol=get_protocol("submit"),
        signature=make_signature("context, question -> answer: str"),
        instructions="",
        function_docs=[],
        demos=[],
        display=Display(moves=moves),
    )


def test_the_reading_moves_never_lead_a_count_into_submit():
    count, read = prompt("count"), prompt("read")
    assert "result = len(kept)" in count and "SUBMIT(answer=result)" in count
    assert "result" not in read.split("Moves to pick from")[1]
    assert 'SUBMIT(answer="the answer, copied from the output")' in read


def test_unknown_moves_are_a_config_error_naming_the_choices():
    with pytest.raises(ConfigError, match=r"unknown moves 'chatty'; choose one of \['count', 'read'\]"):
        Display(moves="chatty")
