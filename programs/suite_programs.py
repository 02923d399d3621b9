"""One ready RLM per task suite: the right typed signature, typed sub-calls and a short
strategy in the instructions (small models need the strategy spelled out).

    rlm = program_for("aggregation", lm="openai/gpt-4o-mini", sub_lm="openai/gpt-4o-mini")
    pred = rlm(**example.inputs)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dspy

import rlmkit
from programs.tasks import get_suite
from programs.tasks.records import LABELS
from signatures import (
    AggregationQA,
    CodeQA,
    ConversationRecall,
    MultiHopQA,
    NeedleQA,
    PairFinding,
    classifier,
)

ClassifyInstance = classifier(LABELS)


@dataclass(frozen=True)
class ProgramSpec:
    signature: type[dspy.Signature]
    instructions: str
    subcalls: dict[str, Any] = field(default_factory=dict)


_RECORDS = ("`context` holds one record per line after a header: 'Date: ... || User: ... || Instance: ...'. "
            "If lines end with '|| Label: x', read labels with code (split on ' || '). Otherwise label the "
            "instances with classify.batched([{'text': t} for t in texts]) (each call costs time: classify each "
            "distinct text once and reuse the result). Then compute the answer with Python, not by reading.")

SPECS: dict[str, ProgramSpec] = {
    "needle": ProgramSpec(NeedleQA, "Search `context` with code (re.findall on the key from the question); "
                                    "print only the matching sentences, then SUBMIT the values as a list."),
    "multi_needle": ProgramSpec(ConversationRecall, "Split `context` on blank lines into turns; find the user "
                                "requests that match the question exactly (same form and topic), in order, and "
                                "take the assistant reply that follows. Submit exactly what the question asks."),
    "aggregation": ProgramSpec(AggregationQA, _RECORDS, {"classify": ClassifyInstance}),
    "pairs": ProgramSpec(PairFinding, _RECORDS + " Build per-user label counts, then test every pair of users "
                         "with itertools.combinations.", {"classify": ClassifyInstance}),
    "multihop": ProgramSpec(MultiHopQA, "Documents start with '[Doc N] Title'. Resolve the question from the "
                            "innermost entity outwards: find the sentence stating each hop with re, check the "
                            "entity name matches exactly (look-alike names are traps), and note each document "
                            "number for citations."),
    "codeqa": ProgramSpec(CodeQA, "Split `context` into files on the '# ===== file: ' lines, parse them with "
                          "the ast module, and answer from the parse (comments mention functions that are not "
                          "called). Submit the option letter."),
}


def program_for(suite: str, *, lm: Any = None, sub_lm: Any = None, **rlm_kwargs: Any) -> rlmkit.RLM:
    """The RLM for ``suite``; ``rlm_kwargs`` go to ``rlmkit.RLM`` (max_depth, budget, log_dir ...)."""
    get_suite(suite)  # unknown suite -> UnknownSuiteError before anything is built
    spec = SPECS[suite]
    instructions = f"{spec.signature.instructions.strip()}\n{spec.instructions}"
    return rlmkit.RLM(spec.signature, lm=lm, sub_lm=sub_lm, subcalls=dict(spec.subcalls),
                      instructions=instructions, **rlm_kwargs)
