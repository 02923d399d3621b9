"""RLMs inside larger DSPy programs.

``FactsThenAnswer``: an RLM combs a huge corpus for the typed facts a question needs, then
a ``dspy.ChainOfThought`` writes the answer with citations from those facts alone.
``TallyThenAnswer``: an RLM labels and tallies every record (typed dicts), then a
``dspy.ChainOfThought`` answers the question from the tallies.

Both return ``answer`` (plus what they gathered) and the RLM's ``trajectory``, so
``programs.evaluate`` scores and logs them like a bare RLM; ``named_predictors()`` exposes
the RLM's root and the answer step, so optimizers tune both.
"""

from __future__ import annotations

from typing import Any

import dspy

import rlmkit
from programs.suite_programs import NO_PER_CALL_CAP, ClassifyInstance
from signatures import AnswerFromTally, AnswerWithCitations, CollectFacts, TallyRecords


def to_dspy_lm(lm: Any) -> dspy.BaseLM | None:
    """A dspy LM for the plain DSPy steps: a dspy.LM as is, a model string, or an rlmkit.LM's twin."""
    if lm is None or isinstance(lm, dspy.BaseLM):
        return lm
    if isinstance(lm, str):
        return dspy.LM(lm, cache=False)
    if isinstance(lm, rlmkit.LM):
        key = getattr(lm, "_api_key", None)  # the rlmkit LM keeps it private; never logged
        return dspy.LM(lm.model, api_base=lm.api_base, api_key=key, cache=False, **lm.params)
    raise rlmkit.errors.UserError(
        f"lm must be an rlmkit.LM, a dspy.LM or a model string, got {type(lm).__name__}"
    )


class _RLMThenStep(dspy.Module):
    """Shared plumbing: an RLM stage, then a ChainOfThought stage run under ``answer_lm``."""

    def __init__(self, rlm: rlmkit.RLM, step: type[dspy.Signature], answer_lm: Any):
        super().__init__()
        self.gather = rlm
        self.answer_step = dspy.ChainOfThought(step)
        self.answer_lm = to_dspy_lm(answer_lm)

    def _answer(self, **fields: Any) -> dspy.Prediction:
        if self.answer_lm is None:
            return self.answer_step(**fields)
        with dspy.context(lm=self.answer_lm):
            return self.answer_step(**fields)


class FactsThenAnswer(_RLMThenStep):
    def __init__(self, *, lm: Any = None, sub_lm: Any = None, answer_lm: Any = None, **rlm_kwargs: Any):
        rlm_kwargs.setdefault("max_llm_calls", NO_PER_CALL_CAP)  # as the suites' own programs
        rlm = rlmkit.RLM(CollectFacts, lm=lm, sub_lm=sub_lm, **rlm_kwargs)
        super().__init__(rlm, AnswerWithCitations, answer_lm if answer_lm is not None else lm)

    def forward(self, context: str, question: str) -> dspy.Prediction:
        gathered = self.gather(context=context, question=question)
        out = self._answer(question=question, facts=gathered.facts)
        return dspy.Prediction(
            answer=out.answer,
            citations=out.citations,
            facts=gathered.facts,
            reasoning=out.get("reasoning"),
            trajectory=gathered.trajectory,
        )


class TallyThenAnswer(_RLMThenStep):
    def __init__(self, *, lm: Any = None, sub_lm: Any = None, answer_lm: Any = None, **rlm_kwargs: Any):
        rlm_kwargs.setdefault("max_llm_calls", NO_PER_CALL_CAP)  # one classify per record
        rlm = rlmkit.RLM(
            TallyRecords, lm=lm, sub_lm=sub_lm, subcalls={"classify": ClassifyInstance}, **rlm_kwargs
        )
        super().__init__(rlm, AnswerFromTally, answer_lm if answer_lm is not None else lm)

    def forward(self, context: str, question: str) -> dspy.Prediction:
        tally = self.gather(context=context)
        out = self._answer(
            question=question, counts=tally.counts, by_user=tally.by_user, by_month=tally.by_month
        )
        return dspy.Prediction(
            answer=out.answer,
            counts=tally.counts,
            reasoning=out.get("reasoning"),
            trajectory=tally.trajectory,
        )
