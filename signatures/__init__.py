"""Reusable typed signatures (dspy.Signature classes) for long-context work."""

from signatures.long_context import (
    AggregationQA,
    AnswerFromTally,
    AnswerWithCitations,
    ClassifyText,
    CodeQA,
    CollectFacts,
    ConversationRecall,
    ExtractFacts,
    Fact,
    LongDocQA,
    MultiHopQA,
    NeedleQA,
    PairFinding,
    Record,
    TallyRecords,
    classifier,
)

__all__ = [
    "AggregationQA",
    "AnswerFromTally",
    "AnswerWithCitations",
    "ClassifyText",
    "CodeQA",
    "CollectFacts",
    "ConversationRecall",
    "ExtractFacts",
    "Fact",
    "LongDocQA",
    "MultiHopQA",
    "NeedleQA",
    "PairFinding",
    "Record",
    "TallyRecords",
    "classifier",
]
