"""The two lists of moves the system prompt can show, and the check on their name."""

from __future__ import annotations

import re

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


@pytest.mark.parametrize("moves", ["count", "read"])
def test_no_default_move_leads_a_count_into_submit(moves):
    shown = prompt(moves).split("Moves to pick from")[1]
    finish = 'found = "the answer, copied from the output"; SUBMIT(answer=found)'
    assert finish in shown
    # no move stores a count in a variable, so the finishing move cannot be handed one
    assert not re.search(r"\b\w+\s*=\s*len\(", shown)
    assert "result" not in shown and "SUBMIT(answer=result)" not in shown
    if moves == "count":  # counting is still a move: it prints the count for a question that asks one
        assert "print(len(kept), kept[:2])" in shown and "a count only when it asks how many" in shown


def test_unknown_moves_are_a_config_error_naming_the_choices():
    with pytest.raises(ConfigError, match=r"unknown moves 'chatty'; choose one of \['count', 'read'\]"):
        Display(moves="chatty")
