"""Typed signatures for long-context work: the root jobs an RLM does, the typed sub-calls
it makes from the REPL, and the small steps a larger program composes around an RLM.

Field descriptions are the model's only spec of a field: they say what a value looks like.
"""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import BaseModel, Field


# ------------------------------------------------------------------ typed values
class Record(BaseModel):
    """One ``Date || User || Instance`` line, with the label it was given or inferred."""

    date: str = Field(description="the date as written, e.g. 'Mar 14, 2023'")
    user: int
    label: str


class Fact(BaseModel):
    """A statement found in the context, with the document it came from."""

    statement: str = Field(description="one self-contained sentence")
    doc: int = Field(description="the number of the document that states it")


# ------------------------------------------------------------------ root jobs (RLM signatures)
class LongDocQA(dspy.Signature):
    """Answer the question from the long context. Read the context with code; do not guess."""

    context: str = dspy.InputField(desc="a long text, far too big to read at once")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="the answer only, no explanation")


class NeedleQA(dspy.Signature):
    """Find every value the question asks for, hidden somewhere in the long context."""

    context: str = dspy.InputField(desc="a long text with a few key sentences hidden in filler")
    question: str = dspy.InputField()
    answer: list[str] = dspy.OutputField(desc="every value found, exactly as written in the context")


class ConversationRecall(dspy.Signature):
    """Answer a question about an earlier part of a long user/assistant conversation."""

    context: str = dspy.InputField(desc="a long transcript of 'User:' and 'Assistant:' turns")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="exactly what the question asks for, with any requested prefix")


class AggregationQA(dspy.Signature):
    """Answer a counting or comparison question over many records. Label each record by the
    label set the context gives (classify the text when no label is written), then aggregate
    with code."""

    context: str = dspy.InputField(desc="a header naming the labels, then one record per line")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a number, one of the offered phrases, or 'Month YYYY', as asked")


class PairFinding(dspy.Signature):
    """List every pair of user IDs that satisfies the question's condition over the records."""

    context: str = dspy.InputField(desc="a header naming the labels, then one record per line")
    question: str = dspy.InputField()
    answer: list[tuple[int, int]] = dspy.OutputField(desc="each pair once, smaller ID first")


class MultiHopQA(dspy.Signature):
    """Answer a question that chains several facts, each stated in a different document.
    Beware of entities whose names look alike."""

    context: str = dspy.InputField(desc="numbered documents, each starting '[Doc N] Title'")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="the entity's name only")
    citations: list[int] = dspy.OutputField(desc="the numbers of the documents used, in hop order")


class CodeQA(dspy.Signature):
    """Answer a multiple-choice question about a Python package. Parse the code (e.g. with
    ast) rather than trusting comments or similar names."""

    context: str = dspy.InputField(desc="the package, file after file, each after '# ===== file: path ====='")
    question: str = dspy.InputField(desc="the question and options A) to D)")
    answer: Literal["A", "B", "C", "D"] = dspy.OutputField()


# ------------------------------------------------------------------ typed sub-calls (REPL functions)
class ClassifyText(dspy.Signature):
    """Classify a short text into exactly one of the given labels."""

    text: str = dspy.InputField()
    labels: list[str] = dspy.InputField(desc="the allowed labels")
    label: str = dspy.OutputField(desc="one of the allowed labels, spelled exactly")


def classifier(labels: tuple[str, ...] | list[str], name: str = "ClassifyInstance") -> type[dspy.Signature]:
    """A classification signature whose output type is the closed set ``labels`` (validated)."""
    label_type = Literal[tuple(labels)]  # type: ignore[valid-type]
    fields = {
        "text": (str, dspy.InputField()),
        "label": (label_type, dspy.OutputField(desc=f"one of: {', '.join(labels)}")),
    }
    sig = dspy.Signature(fields, f"Classify the text into exactly one label: {', '.join(labels)}.")
    sig.__name__ = name
    return sig


class ExtractFacts(dspy.Signature):
    """Pull the facts that bear on the question out of one chunk of documents."""

    chunk: str = dspy.InputField(desc="a slice of the corpus, documents marked '[Doc N] Title'")
    question: str = dspy.InputField()
    facts: list[Fact] = dspy.OutputField(desc="relevant facts only; empty if the chunk has none")


# ------------------------------------------------------------------ steps composed around an RLM
class CollectFacts(dspy.Signature):
    """Collect, from the whole corpus, every fact needed to answer the question, each with
    the document that states it. Do not answer the question itself."""

    context: str = dspy.InputField(desc="numbered documents, each starting '[Doc N] Title'")
    question: str = dspy.InputField()
    facts: list[Fact] = dspy.OutputField(desc="the facts on the path to the answer, in order")


class AnswerWithCitations(dspy.Signature):
    """Answer the question from the given facts only, citing the documents used."""

    question: str = dspy.InputField()
    facts: list[Fact] = dspy.InputField()
    answer: str = dspy.OutputField(desc="the entity's name only")
    citations: list[int] = dspy.OutputField(desc="document numbers of the facts used")


class TallyRecords(dspy.Signature):
    """Label every record and return the per-label counts overall, per user and per month."""

    context: str = dspy.InputField(desc="a header naming the labels, then one record per line")
    counts: dict[str, int] = dspy.OutputField(desc="label -> number of records")
    by_user: dict[str, dict[str, int]] = dspy.OutputField(desc="user id -> label -> count")
    by_month: dict[str, dict[str, int]] = dspy.OutputField(desc="'Month YYYY' -> label -> count")


class AnswerFromTally(dspy.Signature):
    """Answer the question from the per-label tallies of the records."""

    question: str = dspy.InputField()
    counts: dict[str, int] = dspy.InputField()
    by_user: dict[str, dict[str, int]] = dspy.InputField()
    by_month: dict[str, dict[str, int]] = dspy.InputField()
    answer: str = dspy.OutputField(desc="a number, one of the offered phrases, or 'Month YYYY', as asked")
