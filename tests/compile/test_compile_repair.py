"""Protocol repair: templated mistakes fixed, conversions between protocols, what is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizers.compile.repair import PROTOCOLS, Unrepairable, repair_reply
from rlmkit.protocols import find_code_blocks, get_protocol
from rlmkit.testing.synthetic_runs import final_reply

FIELDS = {"answer": "int"}


def repair(reply, source, target, final=True, outputs=None, fields=FIELDS):
    return repair_reply(reply, source=source, target=target, fields=fields, final=final, outputs=outputs)


def ending_of(reply: str, protocol: str) -> str:
    """What the reply ends with, read the way rlmkit's own protocol reads it (value source text)."""
    code = "\n".join(find_code_blocks(reply))
    if protocol == "final":
        parsed = get_protocol("final").parse(reply)
        return parsed.final_var or parsed.final
    if protocol == "submit":
        assert code.count("SUBMIT(") == 1, reply
        return code.split("SUBMIT(answer=", 1)[1].rsplit(")", 1)[0]
    assert 'answer["ready"] = True' in code, reply
    return code.split('answer["content"] = ', 1)[1].split("\n", 1)[0]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_clean_reply_in_its_own_protocol_is_returned_byte_for_byte(protocol):
    reply = final_reply(protocol, 42)
    result = repair(reply, protocol, protocol)
    assert result.reply == reply and result.fixes == []


@pytest.mark.parametrize(
    "mistake, fix",
    [
        ("final_var_quoted", "final_var_quoted"),
        ("final_trailing_text", "final_trailing_text"),
        ("both_final_forms", "both_final_forms"),
        ("final_in_code", "final_in_code"),
    ],
)
def test_templated_final_mistakes_are_fixed(mistake, fix):
    result = repair(final_reply("final", 42, mistake), "final", "final", outputs={"answer": 42})
    assert fix in result.fixes
    parsed = get_protocol("final").parse(result.reply)
    # exactly one clean ending remains, and nothing trails it
    assert result.reply.count("FINAL") == 1
    assert result.reply.rstrip().endswith(")")
    assert (parsed.final_var or parsed.final) in ("total", "42")


def test_both_forms_keep_final_var_unless_the_literal_is_the_recorded_answer():
    reply = "```repl\nres = 41\n```\nFINAL(42)\nFINAL_VAR(res)"
    assert repair(reply, "final", "final", outputs={"answer": 42}).reply.endswith("FINAL(42)")
    assert repair(reply, "final", "final", outputs={"answer": 41}).reply.endswith("FINAL_VAR(res)")


@pytest.mark.parametrize("mistake", ["submit_positional", "submit_outside_code"])
def test_submit_mistakes_become_one_keyword_submit_in_code(mistake):
    result = repair(final_reply("submit", 7, mistake), "submit", "submit")
    assert mistake in result.fixes
    assert "SUBMIT(answer=total)" in "\n".join(find_code_blocks(result.reply))
    assert result.reply.count("SUBMIT(") == 1


@pytest.mark.parametrize("source", PROTOCOLS)
@pytest.mark.parametrize("target", PROTOCOLS)
def test_every_protocol_converts_to_every_other(source, target):
    result = repair(final_reply(source, 42), source, target)
    assert ending_of(result.reply, target) == "total"
    assert ("converted:" in " ".join(result.fixes)) == (source != target)
    others = {"submit": "SUBMIT(", "final": "FINAL", "answer": 'answer["ready"]'}
    for protocol, marker in others.items():
        if protocol != target:
            assert marker not in result.reply  # no trace of another protocol's ending


def test_expression_endings_become_a_variable_for_final_var():
    result = repair("```repl\nxs = [1, 2]\nSUBMIT(answer=sum(xs) + 1)\n```", "submit", "final")
    assert "final_answer = sum(xs) + 1" in find_code_blocks(result.reply)[0]
    assert result.reply.endswith("FINAL_VAR(final_answer)")


def test_literals_keep_their_type_across_protocols():
    assert repair("Done.\nFINAL(42)", "final", "submit").reply.endswith("SUBMIT(answer=42)\n```")
    text = repair("Done.\nFINAL(Paris)", "final", "submit", fields={"answer": "str"}).reply
    assert "SUBMIT(answer='Paris')" in text
    assert repair("```repl\nSUBMIT(answer=3)\n```", "submit", "final").reply == "FINAL(3)"


def test_submit_in_place_keeps_code_order():
    reply = "```repl\nx = 1\nSUBMIT(answer=x)\nprint('never runs')\n```"
    code = find_code_blocks(repair(reply, "submit", "answer").reply)[0].splitlines()
    assert code == ["x = 1", 'answer["content"] = x', 'answer["ready"] = True', "print('never runs')"]


@pytest.mark.parametrize(
    "reply, source, target, reason",
    [
        ("FINAL(about 3 (rough", "final", "submit", "final_unclosed"),
        ("```repl\nFINAL_VAR('not a name!')\n```", "final", "final", "final_bad_final_var"),
        ("```repl\nif ok:\n    SUBMIT(answer=1)\n```", "submit", "final", "ending_inside_nested_block"),
        ('```repl\nanswer["ready"] = True\n```', "answer", "submit", "answer_content_set_in_earlier_turn"),
        ("```repl\nprint(1)\n```", "submit", "final", "no_ending_found"),
        ('```repl\nanswer["content"] = 3\n```', "answer", "final", "no_ending_found"),
        ('```repl\nanswer["content"] = 3\n```', "answer", "answer", "no_ending_found"),
        ("```repl\nSUBMIT(answer=1, extra=2)\n```", "submit", "final", "submit_fields_differ_from_signature"),
        ("```repl\nSUBMIT(answer=(\n```", "submit", "final", "submit_code_does_not_parse"),
        ("Done.\nSUBMIT(answer=(", "submit", "submit", "submit_unclosed"),
        ("Done.\nSUBMIT(answer=))", "submit", "submit", "submit_unparsable"),
    ],
)
def test_what_cannot_be_repaired_says_why(reply, source, target, reason):
    with pytest.raises(Unrepairable) as info:
        repair(reply, source, target)
    assert info.value.reason == reason


def test_a_broken_block_in_the_last_turn_is_not_how_the_run_ended():
    reply = "```repl\nprint(answer[0\n```\n```repl\nSUBMIT(answer=n)\n```"  # first block never parsed
    assert repair(reply, "submit", "submit").reply == reply


def test_multi_field_answers_only_fit_submit():
    fields = {"answer": "int", "why": "str"}
    reply = "```repl\nSUBMIT(answer=n, why=w)\n```"
    with pytest.raises(Unrepairable, match="carries_one_answer"):
        repair(reply, "submit", "final", fields=fields)
    assert repair(reply, "submit", "submit", fields=fields).reply == reply


def test_non_final_turns_keep_their_tries_or_are_refused_when_converting():
    failed_try = "```repl\nSUBMIT(answer='x')\n```"  # a failed SUBMIT the model recovered from
    assert repair(failed_try, "submit", "submit", final=False).reply == failed_try
    with pytest.raises(Unrepairable, match="ending_in_non_final_turn"):
        repair(failed_try, "submit", "final", final=False)
    plain = "```repl\nprint(len(context))\n```"
    assert repair(plain, "submit", "final", final=False).reply == plain


@settings(max_examples=60, deadline=None)
@given(
    name=st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True),
    source=st.sampled_from(PROTOCOLS),
    target=st.sampled_from(PROTOCOLS),
    prose=st.text(alphabet=st.characters(categories=["L", "Zs"]), max_size=40),
)
def test_any_variable_survives_any_conversion(name, source, target, prose):
    if name in ("answer", "final_answer"):
        return
    reply = final_reply(source, 1).replace("total", name).replace("The total is ready.", prose)
    reply = reply.replace("Counting done.", prose)
    result = repair(reply, source, target)
    assert ending_of(result.reply, target) == name
    # converting back gives the same ending again
    assert ending_of(repair(result.reply, target, source).reply, source) == name
