"""Each protocol's ending grammar: what it writes it reads back, and it reads only its own markers."""

from __future__ import annotations

import keyword

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmkit.protocols import PROTOCOLS, get_protocol
from rlmkit.protocols.endings import EndingError, Value, field_values

FIELDS = {"answer": "int"}


def reply_with(written, prose: str = "Done.") -> str:
    """A reply that ends the way ``written`` says: its code lines in a block, then its prose line."""
    code = "total = sum(counts)\n" + "\n".join(written.code)
    return f"{prose}\n```repl\n{code.strip()}\n```\n{written.prose}".strip()


def read_back(protocol, reply: str, fields: dict[str, str]) -> dict[str, str]:
    """The values the reply's one ending gives, by output field (value source text)."""
    endings = protocol.endings(reply)
    assert all(ending.problem is None for ending in endings), endings
    chosen = [ending for ending in endings if ending.ends_run]
    assert len(chosen) == 1, endings
    values = field_values(protocol.ending_values(chosen[0], endings), fields, [])
    return {name: value.source for name, value in values.items()}


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(PROTOCOLS)),
    value=st.one_of(
        st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
            lambda v: v not in ("answer", "total") and not keyword.iskeyword(v)
        ),
        st.integers(min_value=-(10**6), max_value=10**6).map(str),
    ),
    prose=st.text(alphabet=st.characters(categories=["L", "Zs"]), max_size=30),
)
def test_what_a_protocol_writes_it_reads_back_with_the_same_value(name, value, prose):
    protocol = get_protocol(name)
    written = protocol.write_ending({"answer": Value(value)}, FIELDS)
    assert read_back(protocol, reply_with(written, prose), FIELDS) == {"answer": value}


def test_submit_writes_and_reads_several_fields():
    protocol, fields = get_protocol("submit"), {"answer": "int", "why": "str"}
    written = protocol.write_ending({"answer": Value("n"), "why": Value("because", is_text=True)}, fields)
    assert read_back(protocol, reply_with(written), fields) == {"answer": "n", "why": "'because'"}


@pytest.mark.parametrize("name", ["final", "answer"])
def test_one_answer_protocols_refuse_two_values(name):
    with pytest.raises(EndingError, match=f"{name}_protocol_carries_one_answer"):
        get_protocol(name).write_ending({"a": Value("x"), "b": Value("y")}, {"a": "str", "b": "str"})


def test_each_protocol_reads_only_its_own_markers():
    reply = '```repl\nSUBMIT(answer=a)\nanswer["content"] = b\nanswer["ready"] = True\n```\nFINAL_VAR(c)'
    found = {name: get_protocol(name).endings(reply) for name in PROTOCOLS}
    assert {name: {e.protocol for e in endings} for name, endings in found.items()} == {
        name: {name} for name in PROTOCOLS
    }
    assert [e.form for e in found["answer"]] == ["content", "ready"]
    assert found["final"][0].block is None and found["submit"][0].block == 0


def test_a_prose_ending_is_a_move_only_where_the_protocol_reads_prose():
    prose_only = "The answer is below.\nFINAL(42)"
    assert get_protocol("final").made_a_move(get_protocol("final").parse(prose_only))
    for name in ("submit", "answer"):
        assert not get_protocol(name).made_a_move(get_protocol(name).parse(prose_only))
    assert get_protocol("submit").made_a_move(get_protocol("submit").parse("```repl\nx = 1\n```"))
