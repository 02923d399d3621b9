"""Typed signatures: fields, types, and the validation an RLM applies to their outputs."""

from __future__ import annotations

import dspy
import pytest

import rlmkit
import signatures
from rlmkit.run.typed_subcalls import TypedSubcall
from rlmkit.signature import OutputValidator

ROOT_JOBS = {
    signatures.LongDocQA: ["answer"],
    signatures.NeedleQA: ["answer"],
    signatures.ConversationRecall: ["answer"],
    signatures.AggregationQA: ["answer"],
    signatures.PairFinding: ["answer"],
    signatures.MultiHopQA: ["answer", "citations"],
    signatures.CodeQA: ["answer"],
    signatures.CollectFacts: ["facts"],
    signatures.TallyRecords: ["counts", "by_user", "by_month"],
}


def unused_lm():
    """An LM that is never called: a local api_base needs no key, and construction sends nothing."""
    return rlmkit.LM("openai/unused", api_base="http://127.0.0.1:9/v1", cache=False)


@pytest.mark.parametrize("sig,outputs", ROOT_JOBS.items(), ids=lambda x: getattr(x, "__name__", ""))
def test_root_jobs_drive_an_rlm(sig, outputs):
    assert issubclass(sig, dspy.Signature)
    assert next(iter(sig.input_fields)) == "context" and list(sig.output_fields) == outputs
    assert sig.instructions.strip()
    rlm = rlmkit.RLM(sig, lm=unused_lm())  # builds without any model call
    assert rlm.named_predictors()[0][1].signature.instructions == sig.instructions


def test_typed_outputs_are_validated():
    pairs = OutputValidator(signatures.PairFinding).validate({"answer": "[[12, 34], [5, 6]]"})
    assert pairs == {"answer": [(12, 34), (5, 6)]}
    with pytest.raises(ValueError, match="answer"):
        OutputValidator(signatures.CodeQA).validate({"answer": "E"})
    hop = OutputValidator(signatures.MultiHopQA).validate({"answer": "Oslo", "citations": ["3", 7]})
    assert hop["citations"] == [3, 7]
    facts = OutputValidator(signatures.CollectFacts).validate(
        {"facts": [{"statement": "A is B.", "doc": "4"}]}
    )
    assert facts["facts"][0] == signatures.Fact(statement="A is B.", doc=4)
    with pytest.raises(ValueError, match="facts"):
        OutputValidator(signatures.CollectFacts).validate({"facts": [{"statement": "no doc"}]})


def test_numbers_and_lone_values_are_read_as_the_strings_and_lists_a_field_wants():
    # what small models write once they have found the value: each was rejected before
    validator = OutputValidator(dspy.Signature("context, question -> answer: list[str]"))
    for written in (9709219, "9709219", [9709219], "[9709219]"):
        assert validator.validate({"answer": written}) == {"answer": ["9709219"]}, written
    assert validator.validate({"answer": "Oslo"}) == {"answer": ["Oslo"]}
    nested = OutputValidator(dspy.Signature("context -> counts: dict[str, list[str]]"))
    assert nested.validate({"counts": {"a": [1, 2.5]}}) == {"counts": {"a": ["1", "2.5"]}}
    # a value that still cannot be read is reported as written, not as the one-item retry
    with pytest.raises(ValueError, match=r"answer must be list\[str\], got None"):
        validator.validate({"answer": None})
    with pytest.raises(ValueError, match="facts"):  # a pydantic model keeps its own strictness
        OutputValidator(signatures.CollectFacts).validate({"facts": {"statement": "no doc"}})


def test_classifier_closes_the_label_set_and_works_as_a_sub_call():
    sig = signatures.classifier(("person", "location"))
    assert sig.__name__ == "ClassifyInstance" and "person, location" in sig.instructions
    call = TypedSubcall("classify", sig)
    assert call.parse('{"label": "location"}') == "location"
    assert call.parse("person") == "person"  # a bare value is fine for one field
    with pytest.raises(ValueError, match="label"):
        call.parse('{"label": "animal"}')
    assert "classify(text: str)" in call.doc()


def test_records_and_facts_are_pydantic_models():
    record = signatures.Record(date="Mar 14, 2023", user="48213", label="entity")
    assert record.user == 48213
    assert set(signatures.__all__) >= {"Record", "Fact", "classifier", "ExtractFacts", "ClassifyText"}
